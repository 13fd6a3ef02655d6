"""The kernel start's growth with the number of blocks (`block_start_us`, engine note "Kernel
start"): every block of a kernel of B blocks starts with kernel_start_us + (B - 1) x
block_start_us. Its size on the first-generation 910 is calibrated on the ResNet-50 weight
casts of kernel_start.toml; on the A2 / A3 the growth is outside the blocks
(`block_dispatch_us`). These tests check how the engine applies them."""

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip
from ascendsim.sim.engine import KERNEL_START_KIND
from ascendsim.validation.corpus import load_corpus
from ascendsim.validation.validate import validate_rows

GEN1 = "ascend910b_gen1"


def _relu(n: int, chip):
    g = asim.Graph("t")
    g.output(g.relu(g.input("x", (n,), "float16"), name="r"))
    res = simulate(g, chip, fusion=False)
    return res, res.trace.task("r")


def test_every_block_pays_the_start_of_the_whole_kernel():
    """A Relu over 1M fp16 elements runs on every core of the 910 gen1; each block's
    kernel_start interval is kernel_start_us + (blocks - 1) x block_start_us, and the kernel
    is longer than without the figure by exactly that (blocks - 1) x block_start_us."""
    chip = get_chip(GEN1)
    assert chip.block_start_us and chip.block_start_us > 0
    res, task = _relu(1 << 20, chip)
    blocks = task.block_dim
    assert blocks == chip.ai_cores
    start = chip.cycles(chip.kernel_start_us * 1e-6)
    extra = (blocks - 1) * chip.cycles(chip.block_start_us * 1e-6)
    starts = [iv for iv in res.trace.intervals_of(task.task_id) if iv.kind == KERNEL_START_KIND]
    assert len(starts) == blocks
    assert {iv.duration for iv in starts} == {start + extra}
    _, without = _relu(1 << 20, chip.replace(block_start_us=None))
    assert task.duration - without.duration == extra


def test_a_one_block_kernel_pays_only_the_start():
    chip = get_chip(GEN1)
    _, task = _relu(16, chip)
    _, without = _relu(16, chip.replace(block_start_us=None))
    assert task.block_dim == 1 and task.duration == without.duration


def test_chips_without_the_figure_are_unchanged():
    """The 310 and 310P have no figure (absent, not guessed): a kernel's start is
    kernel_start_us on every core. The 32-core 910 takes the first-generation part's figure
    with its kernel_start_us (same silicon)."""
    for name in ("ascend310", "ascend310p"):
        assert get_chip(name).block_start_us is None
    assert get_chip("ascend910").block_start_us == get_chip(GEN1).block_start_us


@pytest.mark.parametrize("name", ["ascend910b", "ascend910b1", "ascend910b3", "ascend910b4",
                                  "ascend910c"])
def test_a2_chips_grow_outside_the_blocks(name):
    """On the A2 / A3 the growth with the block count is measured outside the blocks (msprof
    Task Duration minus the mean block time of warm tiny kernels: block_dispatch_us), so the
    blocks' own start does not grow (block_start_us 0, tag M)."""
    chip = get_chip(name)
    assert chip.block_start_us == 0.0 and chip.source("block_start_us").startswith("M:")
    assert chip.block_dispatch_us and chip.source("block_dispatch_us").startswith("M:")


def test_a_48_block_a2_vector_kernel_waits_47_block_dispatches():
    """A Relu over 1M fp16 elements on the 910B2 runs on its 48 vector cores: its blocks start
    after the dispatch head, task_dispatch_us + 47 x block_dispatch_us (0.50 + 1.08 = 1.58
    us), outside the blocks (no pipe), and each block's own start is kernel_start_us (with
    cached code: icache="warm")."""
    chip = get_chip("ascend910b")
    g = asim.Graph("t")
    g.output(g.relu(g.input("x", (1 << 20,), "float16"), name="r"))
    res = simulate(g, chip, fusion=False, icache="warm")
    task = res.trace.task("r")
    assert task.block_dim == chip.aiv_cores == 48
    starts = [iv for iv in res.trace.intervals_of(task.task_id) if iv.kind == KERNEL_START_KIND]
    assert len(starts) == 48 and {iv.duration for iv in starts} == {
        chip.cycles(chip.kernel_start_us * 1e-6)}
    head = starts[0].start - task.start
    assert head == (chip.cycles(chip.task_dispatch_us * 1e-6)
                    + 47 * chip.cycles(chip.block_dispatch_us * 1e-6))
    assert chip.seconds(head) * 1e6 == pytest.approx(0.50 + 47 * 0.023, abs=0.02)
    assert min(iv.start for iv in res.trace.intervals_of(task.task_id)) == starts[0].start


def test_a_negative_figure_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="block_start_us"):
        get_chip(GEN1).replace(block_start_us=-0.1)


def test_its_calibration_rows_are_reproduced():
    """The two weight casts it was fitted to simulate within the fit's residual (15 %)."""
    rows = [r for r in load_corpus() if "block_start_us" in r.calibrates]
    assert len(rows) == 2
    rep = validate_rows(rows)
    for r in rep.rows:
        assert r.status == "ok" and abs(r.error) < 0.15, (r.id, r.ratio)
