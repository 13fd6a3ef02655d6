"""How many cores a vector op is split over: on the 910 generation, whose built-in vector
kernels are TBE DSL schedules, one core per 1 KB of the tensor split (TBE VectorSchedule
ENABLE_MULTI_CORE_THRESHOLD, rounded up, up to the core count); on the A2 (no
`vector_split_bytes`), one core per 16 KB of GM traffic. The msprof rows hpm-bert-0021 and
hpm-bert256-0020 show block_dim 10 and 20 for fp32 ReduceSums of 2560 and 5120 elements."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower.tiling import VecSpec, split_cores

GEN1 = "ascend910b_gen1"      # 30 AI Cores, TBE vector kernels


def _reduce_sum(n):
    g = asim.Graph("rs")
    x = g.input("x", (n,), "float32")
    g.output(*g.add_node("ReduceSum", [x], {"keepdims": 0}, name="rs"))
    return g


def _task(g, chip):
    return asim.simulate(g, chip, fusion=False, detail="block").trace.task("rs")


@pytest.mark.parametrize("n, cores", [(1, 1), (256, 1), (257, 2), (2560, 10), (5120, 20),
                                      (7680, 30), (1 << 20, 30)])
def test_tbe_split_is_one_core_per_kilobyte(n, cores):
    assert _task(_reduce_sum(n), get_chip(GEN1)).block_dim == cores


def test_the_split_counts_the_widest_operand_not_the_traffic():
    chip = get_chip(GEN1)
    # a Cast fp32 -> fp16 of 512 elements: 2 KB of input, 1 KB of output -> 2 cores
    spec = VecSpec(512, ((4.0, 0.0),), 2.0, 1.0, ())
    assert split_cores(chip, spec, 30) == 2
    # without the TBE figure: 3 KB of traffic is below one 16 KB share -> the rule gives 0
    assert split_cores(chip.replace(vector_split_bytes=None), spec, 30) == 0


def test_the_a2_keeps_the_traffic_rule():
    """The 910B2 gives no vector_split_bytes: a 2560-element ReduceSum (10 KB read) stays on
    one core."""
    chip = get_chip("ascend910b")
    assert chip.vector_split_bytes is None
    assert _task(_reduce_sum(2560), chip).block_dim == 1


def test_more_blocks_cost_their_start():
    """The 10-block ReduceSum pays `block_start_us` for 9 further blocks (0.066 us each on the
    first-generation 910) and reads 1 KB per core instead of 10 KB on one: on this tiny
    input the starts outweigh the shorter reads, so the task is longer than on one core, by
    less than the 9 extra starts."""
    chip = get_chip(GEN1)
    ten = _task(_reduce_sum(2560), chip)
    one = _task(_reduce_sum(2560), chip.replace(vector_split_bytes=16384))
    assert one.block_dim == 1 and ten.block_dim == 10
    extra = chip.cycles(9 * chip.block_start_us * 1e-6)
    assert one.duration < ten.duration < one.duration + extra


def _slice(n, keep, dtype="int32"):
    g = asim.Graph("sl")
    x = g.input("x", (1, n), dtype)
    starts = g.const(np.array([0, 0], dtype=np.int64), name="s")
    ends = g.const(np.array([1, keep], dtype=np.int64), name="e")
    g.output(*g.add_node("Slice", [x, starts, ends], {}, name="rs"))
    return g


@pytest.mark.parametrize("n, cores", [(128, 16), (8, 1), (64, 8), (240, 30), (30 * 64, 30)])
def test_a_slice_that_keeps_every_element_splits_as_copy_only(n, cores):
    """TBE strided_slice_d runs copy_only when nothing is cut: n // 30 int32 elements per core
    rounded up to a 32-byte block (8), so 128 elements take 16 cores (hpm-bert-0022 measured
    block_dim 16)."""
    assert _task(_slice(n, n), get_chip(GEN1)).block_dim == cores


def test_a_slice_that_cuts_keeps_the_vector_split():
    # 128 of 256 int32 elements: a real slice, TBE's 1 KB rule on 1 KB of input -> 1 core
    assert _task(_slice(256, 128), get_chip(GEN1)).block_dim == 1
    # the A2 has no TBE kernels: an identity slice is not split as copy_only
    assert _task(_slice(128, 128), get_chip("ascend910b")).block_dim == 1
