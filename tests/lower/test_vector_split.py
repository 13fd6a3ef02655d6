"""How many cores a vector op is split over: on the 910 generation, whose built-in vector
kernels are TBE DSL schedules, one core per 1 KB of the tensor split (TBE VectorSchedule
ENABLE_MULTI_CORE_THRESHOLD, rounded up, up to the core count); on the A2 (no
`vector_split_bytes`), one core per 16 KB of GM traffic. The msprof rows hpm-bert-0021 and
hpm-bert256-0020 show block_dim 10 and 20 for fp32 ReduceSums of 2560 and 5120 elements."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower.dynamic_tiling import (
    atomic_reduce_blocks,
    broadcast_rows_blocks,
    elewise_blocks,
    merged_transpose,
    norm_blocks,
    norm_split,
    reduce_rows_blocks,
    transpose_blocks,
)
from ascendsim.lower.tiling import VecSpec, split_cores

GEN1 = "ascend910b_gen1"      # 30 AI Cores, TBE vector kernels


def _reduce_sum(n, dtype="float32"):
    g = asim.Graph("rs")
    x = g.input("x", (n,), dtype)
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
    """The 910B2 gives no vector_split_bytes: a 2560-element fp16 ReduceSum (5 KB read) stays
    on one core (an fp32 one takes the reduce tiling's atomic split, below)."""
    chip = get_chip("ascend910b")
    assert chip.vector_split_bytes is None
    assert _task(_reduce_sum(2560, "float16"), chip).block_dim == 1


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


# -- prebuilt dynamic-shape kernels (kernel_build "binary", the A2's eager ops): the blocks of
# TBE's run-time tilings (lower/dynamic_tiling.py: elewise_v3.cc, broadcast_v3.cc,
# reduce_tiling_v3.cc)

@pytest.mark.parametrize("n, item, cores, blocks", [
    (98304, 2, 40, 39),      # fp16 Relu [1, 12, 256, 32]: 2458 -> 2560 per core
    (98304 * 64, 2, 40, 40),
    (1279, 2, 40, 1),        # below 16 x 40 x 2 fp16 elements: one core
    (1280, 2, 40, 10),       # at the threshold: 32 -> 128 per core
    (2559, 1, 40, 1),        # a bool output: 32 elements per block, threshold 2560
    (4096, 4, 48, 32),       # fp32 on 48 cores: 86 -> 128 per core
])
def test_elewise_blocks_follow_the_dynamic_tiling(n, item, cores, blocks):
    assert elewise_blocks(n, item, cores) == blocks


@pytest.mark.parametrize("rows, length, blocks", [
    (3072, 256, 40),         # RealDiv [1, 12, 256, 256] / [1, 12, 256, 1]: 77 rows per core
    (256, 384, 37),          # BroadcastTo [256, 1] -> [256, 384]: 7 rows per core
    (64, 16, 1),             # 1024 fp16 elements, below 2 blocks per core: one core
    (2048, 16, None),        # 32768 elements: the align mode, not modelled
    (16, 8192, None),        # fewer rows than cores: the inner axis splits, not modelled
])
def test_broadcast_rows_blocks(rows, length, blocks):
    assert broadcast_rows_blocks(rows, length, 2, 40) == blocks


@pytest.mark.parametrize("rows, item, blocks", [
    (256, 2, 16),            # 7 rows per core raised to one 32-byte block of fp16 output
    (512, 2, 32), (1024, 2, 40), (16384, 2, 40),
    (256, 4, 32),            # float32 output: 8 values per block
])
def test_reduce_rows_blocks(rows, item, blocks):
    assert reduce_rows_blocks(rows, item, 40) == blocks


@pytest.mark.parametrize("shape, perm, merged", [
    ((1, 256, 384), (0, 2, 1), ((256, 384), (1, 0))),          # the size-1 axis dropped
    ((4, 4, 257, 16), (0, 1, 3, 2), ((16, 257, 16), (0, 2, 1))),   # leading axes merged
    ((2, 3, 4, 5), (0, 2, 3, 1), ((2, 3, 20), (0, 2, 1))),      # trailing pair merged
    ((8, 4, 16384), (1, 0, 2), ((8, 4, 16384), (1, 0, 2))),     # nothing to merge
])
def test_a_transpose_is_decided_on_its_merged_axes(shape, perm, merged):
    assert merged_transpose(shape, perm) == merged


@pytest.mark.parametrize("shape, perm, blocks", [
    # N >= cores (Model001_b16): whole [256, 384] planes, ceil(64 / 40) = 2 per core
    ((64, 256, 384), (0, 2, 1), 32),
    ((40, 256, 384), (0, 2, 1), 40),
    # N < cores (Model006_b16): 40 // N cores per plane split its longer axis (384 columns)
    # in 16-element shares
    ((32, 256, 384), (0, 2, 1), 32),    # one core per plane
    ((16, 256, 384), (0, 2, 1), 32),    # 2 per plane: 192 columns each
    ((8, 256, 384), (0, 2, 1), 40),     # 5 per plane: 80 columns, 5 shares
    ((2, 384, 256), (0, 2, 1), 24),     # 20 per plane split its 384 rows: 32 each, 12 shares
    # R >= 64 x 40 (Model002_b16): rows over every core, 4096 / 40 -> 112, 37 shares
    ((2, 4096, 512), (0, 2, 1), 37),
    # C >= 64 x 40 (Model003_b16): columns over every core
    ((2, 512, 4096), (0, 2, 1), 37),
    ((1, 256, 384), (0, 2, 1), None),   # a 2-D swap of whole blocks: scenario 11
    # a 2-D swap with a side not a whole block: scenario 7 with N = 1 (Model006_b16 splits
    # the longer axis, rows on a tie: 1023 / 40 -> 32, 32 shares; Model003_b16 the 8193
    # columns: 208 each, 40 shares)
    ((1023, 1023), (1, 0), 32),
    ((255, 8193), (1, 0), 40),
    ((8, 128, 384), (0, 2, 1), None),   # up to 128 rows: scenario 10
    ((8, 256, 48), (0, 2, 1), None),    # a side under 64: the f2t / t2f models may apply
    ((8, 256, 384), (1, 0, 2), None),   # the last axis stays: not this kernel's vnchwconv path
])
def test_transpose_blocks_follow_the_tik_tiling(shape, perm, blocks):
    assert transpose_blocks(shape, perm, 40) == blocks


@pytest.mark.parametrize("shape, perm, blocks", [
    # 4-byte data (Model001 .. Model008, fp16Times 2): shares in blocks of 8 elements
    ((1009, 1021), (1, 0), 32),          # Model006: the 1021 columns, 26 -> 32 each
    ((64, 256, 384), (0, 2, 1), 32),     # Model001: two planes per core
    ((2048, 2048), (1, 0), None),        # both sides whole blocks: scenario 11
])
def test_four_byte_transpose_blocks_split_in_blocks_of_eight(shape, perm, blocks):
    assert transpose_blocks(shape, perm, 40, item=4) == blocks


def test_the_tik_transpose_launches_every_core():
    """The run-time tiling sets block_dim to the core count (transpose.cc `Serialize*`):
    the cores without a share pay their block's start but move nothing."""
    g = _op("Transpose", [(64, 256, 384)], attrs={"perm": [0, 2, 1]})
    res = asim.simulate(g, get_chip("ascend910b4"), fusion=False, detail="block",
                        kernel_build="binary")
    task = res.trace.task("rs")
    moving = {i.core for i in res.trace.intervals
              if i.task_id == task.task_id and i.pipe == "MTE2"}
    assert (task.block_dim, len(moving)) == (40, 32)


@pytest.mark.parametrize("shape, perm", [
    ((2, 83, 8, 64), (0, 2, 1, 3)),   # the last axis stays (scenario 9): split not modelled
    ((256, 384), (1, 0)),             # both sides whole blocks (scenario 11)
])
def test_every_tik_transpose_launches_every_core(shape, perm):
    """Whatever the scenario, the run-time tiling sets block_dim to the core count
    (transpose.cc `ADD_TILING_DATA_TO_RUN_INFO` in every `Serialize*`); where its split is not
    modelled the data keeps the generic split's cores and the others start and idle; a jit
    build keeps the generic split alone."""
    g = _op("Transpose", [shape], attrs={"perm": list(perm)})
    res = asim.simulate(g, get_chip("ascend910b4"), fusion=False, detail="block",
                        kernel_build="binary")
    task = res.trace.task("rs")
    moving = {i.core for i in res.trace.intervals
              if i.task_id == task.task_id and i.pipe == "MTE2"}
    assert task.block_dim == 40 and 0 < len(moving) < 40
    assert _blocks(g, "jit") == len(moving)


def test_a_transpose_with_its_own_block_dim_keeps_it():
    """A node's own block_dim (a profile's Block Dim) is what ran: no blocks are added."""
    g = _op("Transpose", [(2, 83, 8, 64)], attrs={"perm": [0, 2, 1, 3], "block_dim": 8})
    assert _blocks(g, "binary") == 8


@pytest.mark.parametrize("shape, axis, item, blocks", [
    # A0 >= cores: ceil(102 / 48) = 3 slices a block, 34 blocks (not 48)
    ((2, 3, 17, 1024, 101), 3, 4, 34),
    ((367, 373, 379), 1, 4, 46),          # 8 slices a block
    ((127, 257, 1023), 1, 2, 43),         # 3 slices a block
    # no A axis before: the inner one split, 171 a block rounded up to 176 (11 blocks)
    ((8192, 8192), 0, 2, 47),
    ((512, 2049), 0, 2, 43),              # 43 a block rounded up to 48: 43 blocks, not 48
    ((4, 255, 2049), 1, 2, 48),           # A0 short of the cores: 12 blocks per slice
    ((2, 4, 3), 1, 4, 2),                 # 3 fp32 after the split axis: one A0 slice a block
    ((8, 3), 0, 4, 1),                    # 24 elements, one 32-byte block of output a block
    ((16, 64), 1, 2, None),               # the reduced axis innermost: rows bound to cores
])
def test_norm_blocks_split_the_a_axes_only(shape, axis, item, blocks):
    """TBE's NORM tiling (norm.cc GetBlockTilingInfo) splits a softmax over an axis that is
    not innermost on the A axes alone, so a core count that does not divide the outer axis
    leaves cores idle."""
    assert norm_blocks(shape, axis, item, 48) == blocks


@pytest.mark.parametrize("shape, axis, item, split", [
    ((8192, 8192), 0, 2, (47, 176)),      # 171 -> 176 fp16 columns, tail 96 >= 16
    ((512, 2049), 0, 2, (43, 48)),        # 43 -> 48, tail 33 >= 16
    ((4, 255, 2049), 1, 2, (48, 176)),    # 171 -> 176, tail 113: 12 blocks per slice still
    ((2, 3, 17, 1024, 101), 3, 4, (34, 101)),   # split on the outer A axis: not refined
])
def test_norm_split_rounds_an_inner_factor_up_to_whole_blocks(shape, axis, item, split):
    """norm.cc NeedRefineBlockTiling: a block factor on the innermost A axis is rounded up to
    whole 32-byte blocks where it fits the axis and the last block keeps one."""
    assert norm_split(shape, axis, item, 48) == split


def _op(op, shapes, dtype="float16", attrs=None, consts=()):
    g = asim.Graph(op)
    ins = [g.input(f"x{k}", s, dtype) for k, s in enumerate(shapes)]
    ins += [g.const(c, name=f"c{k}") for k, c in enumerate(consts)]
    g.output(*g.add_node(op, ins, attrs or {}, name="rs"))
    return g


def _blocks(g, build, chip="ascend910b4"):
    res = asim.simulate(g, get_chip(chip), fusion=False, detail="block", kernel_build=build)
    return res.trace.task("rs").block_dim


@pytest.mark.parametrize("graph, binary, jit", [
    # same-shape operands: the ELEWISE tiling (39 blocks) against the A2's one core per
    # 16 KB of GM traffic (393 KB: 24; 590 KB: 36)
    (_op("Relu", [(1, 12, 256, 32)]), 39, 24),
    (_op("Add", [(1, 256, 384), (1, 256, 384)]), 39, 36),
    # a one-element tensor operand is a scalar to the ELEWISE tiling (elewise_v3.cc
    # GetCheckInputs): 8192 fp32 elements in blocks of 256, 32 blocks, against 4 (64 KB of
    # GM traffic)
    (_op("Sub", [(1,), (2, 1024, 4)], "float32"), 32, 4),
    # a per-row divisor: rows over the cores
    (_op("Div", [(1, 12, 256, 256), (1, 12, 256, 1)]), 40, 40),
    # a [1, 256, 1] -> [1, 256, 384] broadcast: 7 rows per core, 37 blocks, against 12
    (_op("Expand", [(1, 256, 1)], consts=(np.array([1, 256, 384], np.int64),)), 37, 12),
    # a last-axis fp16 ReduceSum of 256 rows: one 32-byte block of output per core
    (_op("ReduceSum", [(1, 256, 384)], attrs={"keepdims": 0},
         consts=(np.array([-1], np.int64),)), 16, 12),
    # a softmax over axis 1 of [102, 64, 101]: three A0 slices a block, 34 blocks
    (_op("Softmax", [(102, 64, 101)], "float32", attrs={"axis": 1}), 34, 40),
])
def test_a_binary_kernel_takes_its_run_time_tiling(graph, binary, jit):
    assert (_blocks(graph, "binary"), _blocks(graph, "jit")) == (binary, jit)


@pytest.mark.parametrize("graph", [
    # a broadcast over a leading axis (a [1, 1024] bias over 64 rows): no trailing-axes one
    _op("Add", [(64, 1024), (1, 1024)]),
    # a reduction to fewer than 4 values per core, where the atomic path may split the
    # reduced axis instead (not modelled)
    _op("ReduceSum", [(1 << 20,)], "float32", attrs={"keepdims": 0}),
    _op("ReduceSum", [(64, 4096)], attrs={"keepdims": 0},
        consts=(np.array([-1], np.int64),)),
    # an 8-byte Transpose (its split models not read through)
    _op("Transpose", [(64, 256, 384)], "int64", attrs={"perm": [0, 2, 1]}),
])
def test_the_dynamic_split_leaves_other_kernels_alone(graph):
    """Kernels whose run-time tiling path is not modelled keep the A2's traffic rule in a
    binary build, as in a jit one."""
    assert _blocks(graph, "binary") == _blocks(graph, "jit")


def test_more_dynamic_blocks_cost_their_dispatch():
    """With its code cached (a loop of the same call), the 39-block binary Relu pays
    block_dispatch_us for 15 more blocks than the 24-block jit one, and the binary's prologue
    (binary_block_start_us) at each block's start, and moves fewer bytes per block: on this
    393 KB kernel it takes longer, by less than those 15 dispatches and the prologue."""
    chip = get_chip("ascend910b4")
    g = _op("Relu", [(1, 12, 256, 32)])

    def duration(build):
        res = asim.simulate(g, chip, fusion=False, detail="block", kernel_build=build,
                            icache="warm")
        return res.trace.task("rs").duration

    extra = chip.cycles((15 * chip.block_dispatch_us + chip.binary_block_start_us) * 1e-6)
    assert duration("jit") < duration("binary") < duration("jit") + extra


@pytest.mark.parametrize("rows, red, blocks", [
    (1, 12288, 48),     # ceil(12288 / 48) = 256 a block
    (1, 4608, 48),      # 96 a block
    (1, 6144, 48),
    (1, 4096, 52),      # 86 a block, not whole 32-byte blocks: FineTuning cuts it to 80
    (1, 4100, 48),      # the reduced axis not whole blocks: 86 a block stays
    (32, 40, 40),       # fewer reduced elements than cores: one a block
    (1, 1040, 65),      # 22 a block cut to 16: more blocks than cores
    (1, 1000, None),    # not over ATOMIC_MIN_ELEMS in all: the normal path
    (192, 4096, None),  # 192 values: not under 48 cores x 4
])
def test_the_atomic_reduce_path_splits_the_reduced_axis(rows, red, blocks):
    """reduce_tiling_v3.cc `ChooseAtomic`, `GetAtomicBlockTilingInfo`, `FineTuning`: the
    Ascend-mstt 910B1 step's fp32 sums to a scalar run 48 blocks (52 for 4096 elements)."""
    assert atomic_reduce_blocks(rows, red, 4, 48, 48 * 1024) == blocks


def test_a_jit_float32_sum_to_a_scalar_takes_the_atomic_split_on_the_a2_only():
    """A jit build's const-shape reduce kernel has the reduce tiling's blocks (computed at
    compile time): 4608 fp32 summed on 48 blocks of the 910B1, not the generic split's one
    core per 16 KB of traffic; the 910's static TBE schedule keeps one core per 1 KB."""
    g = _reduce_sum(4608)
    assert _task(g, get_chip("ascend910b1")).block_dim == 48
    assert _task(g, get_chip(GEN1)).block_dim == 18
    assert _task(_reduce_sum(4608, "float16"), get_chip("ascend910b1")).block_dim < 48
