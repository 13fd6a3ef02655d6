"""The tiling data read at each block's start (`tiling_line_cycles`, engine note "Kernel
start"; lines by kernel kind in ascendsim.sim.kernelstart): a tiny kernel's time holds each
fixed cost of its start, kernel_start_us + (blocks - 1) x block_start_us + lines x
tiling_line_cycles (with its code cached), and the figure is absent (0) on every built-in
chip."""

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import chips, get_chip
from ascendsim.sim.engine import KERNEL_START_KIND
from ascendsim.sim.kernelstart import CUBE_TILING_BYTES, DCACHE_LINE_BYTES

LINE = 200          # cycles of one line in these tests (no chip gives the figure)


def _run(graph: asim.Graph, chip, name: str):
    # (code cached: no cold-instruction-cache term in the starts these tests add up)
    res = simulate(graph, chip, fusion=False, icache="warm")
    return res, res.trace.task(name)


def _relu(n: int) -> asim.Graph:
    g = asim.Graph("t")
    g.output(g.relu(g.input("x", (n,), "float16"), name="r"))
    return g


def _matmul(n: int) -> asim.Graph:
    g = asim.Graph("t")
    g.output(g.matmul(g.input("a", (n, n), "float16"), g.input("b", (n, n), "float16"),
                      name="mm"))
    return g


def _starts(res, task):
    return [iv for iv in res.trace.intervals_of(task.task_id) if iv.kind == KERNEL_START_KIND]


def test_no_built_in_chip_gives_the_figure():
    """The read is folded into kernel_start_us everywhere: the 910B's 64 x 64 Addmv rows
    (MatMul + Add in 3 us, gemm-910b-0004/0009/0014) leave no room for it on top."""
    for name in chips():
        assert get_chip(name).tiling_line_cycles is None, name


@pytest.mark.parametrize("name", ["ascend910b", "ascend910"])
def test_a_tiny_vector_kernel_pays_one_line(name):
    """A Relu on 16 elements: one block, one line of tiling data; its start interval is
    kernel_start_us + one line, and the kernel is longer by exactly that line."""
    chip = get_chip(name).replace(tiling_line_cycles=LINE)
    res, task = _run(_relu(16), chip, "r")
    _, without = _run(_relu(16), get_chip(name), "r")
    assert task.block_dim == 1
    assert {iv.duration for iv in _starts(res, task)} == {
        chip.cycles(chip.kernel_start_us * 1e-6) + LINE}
    assert task.duration - without.duration == LINE


def test_a_cube_kernel_reads_its_tcubetiling_on_every_block():
    """A 910B MatMul (cube phase) reads the Matmul API's TCubeTiling, 200 bytes = 4 lines, on
    every block; with block_start_us set too, each block's start is the sum of all three."""
    lines = -(-CUBE_TILING_BYTES // DCACHE_LINE_BYTES)
    assert lines == 4
    base = get_chip("ascend910b")
    chip = base.replace(tiling_line_cycles=LINE, block_start_us=0.05)
    res, task = _run(_matmul(256), chip, "mm")
    blocks = task.block_dim
    assert blocks > 1
    start = (chip.cycles(chip.kernel_start_us * 1e-6)
             + (blocks - 1) * chip.cycles(chip.block_start_us * 1e-6) + lines * LINE)
    starts = _starts(res, task)
    assert len(starts) == blocks and {iv.duration for iv in starts} == {start}
    _, without = _run(_matmul(256), base.replace(block_start_us=0.05), "mm")
    assert task.duration - without.duration == lines * LINE


def test_a_negative_figure_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="tiling_line_cycles"):
        get_chip("ascend910b").replace(tiling_line_cycles=-1)


def test_a_mix_kernel_reads_per_side():
    """A 910B MatMul + Relu fused into a MIX_AIC kernel: its AIC blocks read the TCubeTiling
    (4 lines), its AIV blocks one line (without block_start_us, so that each side's start
    differs from kernel_start_us by its tiling read alone)."""
    chip = get_chip("ascend910b").replace(tiling_line_cycles=LINE, block_start_us=None)
    g = asim.Graph("t")
    a, b = g.input("a", (256, 256), "float16"), g.input("b", (256, 256), "float16")
    g.output(g.relu(g.matmul(a, b, name="mm"), name="r"))
    res = simulate(g, chip, icache="warm")
    (task,) = res.trace.tasks
    assert task.task_type == "MIX_AIC"
    start = chip.cycles(chip.kernel_start_us * 1e-6)
    assert {iv.duration for iv in _starts(res, task)} == {start + 4 * LINE, start + LINE}
