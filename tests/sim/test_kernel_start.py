"""The fixed start of every block on the AI Core (`kernel_start_us`, engine note "Kernel start").

Its size is calibrated on scalar kernels of a first-generation 910 profile (corpus file
kernel_start.toml); these tests check how the engine applies it, not the figure itself."""

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.sim.engine import KERNEL_START_KIND

CHIPS = ("ascend910", "ascend910b", "ascend910b_gen1")


def _relu(n: int, chip, detail: str = "block"):
    g = asim.Graph("t")
    g.output(g.relu(g.input("x", (n,), "float16"), name="r"))
    res = simulate(g, chip, fusion=False, detail=detail)
    return res, res.trace.task("r")


@pytest.mark.parametrize("name", CHIPS)
def test_a_16_element_kernel_costs_the_start_plus_little(name):
    """A Relu on 16 elements with its code cached takes at least its fixed costs (the dispatch
    outside its one block, where the chip gives it, and the kernel start) and at most those +
    0.5 us: besides them, one 32-byte read and write (two DMA latencies, 0.1-0.2 us each on
    these chips) and one vector instruction."""
    chip = get_chip(name)
    fixed = chip.cycles(((chip.task_dispatch_us or 0.0) + chip.kernel_start_us) * 1e-6)
    g = asim.Graph("t")
    g.output(g.relu(g.input("x", (16,), "float16"), name="r"))
    task = simulate(g, chip, fusion=False, icache="warm").trace.task("r")
    assert chip.cycles(chip.kernel_start_us * 1e-6) > 0
    assert fixed <= task.duration <= fixed + chip.cycles(0.5e-6)


@pytest.mark.parametrize("detail", ["block", "tile"])
def test_the_start_is_one_scalar_interval_per_core_before_any_other_pipe(detail):
    """Every core of the block shows one S interval of kind kernel_start, from the task's
    start for kernel_start_us plus block_start_us per block beyond the first; no other pipe
    of that core issues before it ends."""
    chip = get_chip("ascend910")
    res, task = _relu(1 << 20, chip, detail)
    start = chip.cycles(chip.kernel_start_us * 1e-6) + (task.block_dim - 1) * chip.cycles(
        (chip.block_start_us or 0.0) * 1e-6)
    ivs = res.trace.intervals_of(task.task_id)
    starts = [iv for iv in ivs if iv.kind == KERNEL_START_KIND]
    assert sorted(iv.core for iv in starts) == sorted({iv.core for iv in ivs})
    assert len(starts) == task.block_dim > 1
    for iv in starts:
        assert iv.pipe == "S" and iv.start == task.start and iv.duration == start
        others = [o for o in ivs if o.core == iv.core and o.kind != KERNEL_START_KIND]
        assert min(o.start for o in others) >= iv.end
    assert task.pipe_cycles["S"] >= start      # counted as scalar busy time


def test_the_start_adds_exactly_its_cycles_to_a_kernel():
    """The same kernel with kernel_start_us = 0 is shorter by exactly the start's cycles (it
    delays the block, and nothing else of the kernel changes)."""
    chip = get_chip("ascend910b")
    _, with_start = _relu(1 << 16, chip)
    _, without = _relu(1 << 16, chip.replace(kernel_start_us=0.0))
    assert with_start.duration - without.duration == chip.cycles(chip.kernel_start_us * 1e-6)


def test_the_start_overlaps_other_streams():
    """Two independent tiny ops on two streams start their blocks at the same time: the start
    occupies only the cores of its own block, so the pair takes far less than two starts."""
    chip = get_chip("ascend910")
    g = asim.Graph("t")
    g.output(g.relu(g.input("x", (16,), "float16"), name="a"))
    g.output(g.relu(g.input("y", (16,), "float16"), name="b"))
    res = simulate(g, chip, fusion=False, streams=2)
    a, b = res.trace.task("a"), res.trace.task("b")
    assert a.start == b.start
    assert max(a.end, b.end) - a.start < 1.5 * chip.cycles(chip.kernel_start_us * 1e-6)
