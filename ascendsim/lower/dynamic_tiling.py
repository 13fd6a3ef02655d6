"""Block splits of CANN's prebuilt dynamic-shape TBE vector kernels.

A framework's eager ops on the A2 / A3 run the binary op package's prebuilt dynamic-shape
kernels (`Lowering.kernel_build` "binary"; torch_npu's default there). Their block count is
not the static schedule's a jit build compiles for its shapes: the op's run-time tiling
function sets it. Three of those functions, as TBE's op_tiling sources give them (an
Apache-2.0 public copy: dengguojie/vue-element-admin ops/built-in/op_tiling/, elewise_v3.cc at
62c5a7f, broadcast_v3.cc at 0231fcc, reduce_tiling_v3.cc at 0231fcc and 745162e):

- ELEWISE (`elewise_blocks`; `Elewise::CalcMultiCore`, `DoBlockTiling`): one core below two
  32-byte blocks of output per core; else each core takes ceil(n / cores) elements rounded
  up to 128 (the schedule's `_ub_factor_align`), so a 98304-element fp16 Relu on 40 cores
  runs 39 blocks. Broadcast ops whose operands all have the output's shape take it too
  (`Broadcast::BroadcastTiling` hands equal shapes to the ELEWISE tiling).
- a broadcast along the trailing axes, [R, 1] -> [R, D] (`broadcast_rows_blocks`; pattern
  COMMON_BROADCAST, `Broadcast::DoBlockTiling`): one core below two 32-byte blocks of output
  per core; rows split as ceil(R / ceil(R / cores)). Outputs of at most 64 blocks per core
  take the align mode (`CalcAlignCore`), rows fewer than the cores split the inner axis, and
  a core's share under one 32-byte block folds back to one core: those are not modelled
  here and keep the generic split.
- a reduction over the trailing axes to R values (`reduce_rows_blocks`; `Reduce::
  GetBlockTilingInfo`, `CalcBlockDim`): rows split as ceil(R / cores), raised to one 32-byte
  block of output per core (16 fp16 values), so a [256, 384] fp16 ReduceSum runs 16 blocks.
  The atomic two-stage path (`ChooseAtomic`: a float32 sum to fewer than cores x 4 values,
  which splits the reduced axis instead) is not modelled here: a reduction to so few values
  keeps the generic split whatever its dtype, since which reductions count as a sum there is
  not read through.
- a NORM-pattern kernel (softmax_v2, log_softmax_v2: `classify(..., OpPatternMode.NORM)`)
  reducing an axis that is not innermost (`norm_blocks`; `norm_split` adds the inner A
  elements a block's slice holds; norm.cc `Norm::GetBlockTilingInfo`,
  `GetWorkspaceBlockTilingInfo`, `JudgeCurDimSplitBlock`, `GetBlockDim` at 0231fcc): the block
  split is on the A (not reduced) axes only, outermost first. An A axis whose product with
  the A axes before it reaches the cores is split as the first core count it can fill
  allows: ceil(A / (cores / before)) per block, shrinking the blocks while the last one holds
  under one 32-byte block of the elements after it; the kernel runs the product of the axes
  before it times ceil(A / factor) blocks, so [102, 1024, 101] fp32 over axis 1 runs 34
  blocks of 3 slices, [127, 257, 1023] over axis 1 runs 43. An A axis still short of the
  cores is kept whole and the next one split; the innermost A axis, reached short of the
  cores, takes a factor of 1. A factor on the innermost axis is then rounded up to whole
  32-byte blocks where the rounded factor fits the axis and the last block still holds one
  (`NeedRefineBlockTiling`), so [8192, 8192] fp16 over axis 0 runs 47 blocks of 176 columns
  (not 48 of 171) and [512, 2049] fp16 43 blocks of 48 (not 48 of 43). Modelled for one
  reduced axis with at most one A axis on either side (size-1 axes dropped, neighbours
  merged); the `max_block_factor` bound of the workspace path (a block's inner A axes must
  fit the UB) and the continuous-data-move case are not modelled.
- a 2- or 4-byte Transpose of [N, R, C] -> [N, C, R] (`transpose_blocks`; size-1 axes dropped
  and axes that stay adjacent merged first, `merged_transpose`; a 2-D swap [R, C] -> [C, R] is
  N = 1): the TIK kernel impl/dynamic/transpose.py, whose run-time tiling (op_tiling/
  transpose.cc at f78c5c4, scenario 7, `MakeNCRDecision`) takes the first valid of its split
  models `Model001_b16` .. `Model008_b16` in that order (`Model001` .. `Model008` for 4-byte
  data, `fp16Times` 2: the same conditions at these sides): N >= cores gives each core
  ceil(N / cores) whole [R, C] planes (001); else R >= 64 x cores splits R over every core
  (002), C >= 64 x cores splits C (003), else each plane gets cores // N cores, which split its
  longer axis (006: the column factor when C > R, else the row factor); a split axis goes in
  shares of ceil(length / parts) rounded up to a 32-byte block of elements (`Split`, 16 or
  8). Modelled for R > 128 (up to 128 rows go to scenario 10) and R, C >= 64 (below, the f2t /
  t2f models 004, 005, 007, 008 may apply, F2T_THRESHOLD_B16 = 64, F2T_THRESHOLD_B32 = 32). A
  2-D swap whose sides are both whole blocks takes scenario 11 instead (`IsScenario11`) and
  keeps the generic split; an unaligned one is scenario 7 with N = 1. `Split` gives the
  first cores that rounded share and evens the overshoot out over the rest in block steps;
  the model puts the data on ceil(length / share) cores at that share (the busiest core's,
  which sets the time). The tiling launches every core in every scenario (`block_dim` =
  core_num: `ADD_TILING_DATA_TO_RUN_INFO` in each `Serialize*`): the model adds the others
  as blocks with no work (`with_idle_blocks`), also where it leaves the data on the generic
  split's cores (the scenarios whose split is not modelled: `tik_transpose_split`).

`dynamic_blocks` picks the rule of a lone vector op (or says none applies).

Kernel kinds. Most of these binaries are TBE DSL kernels, which take their run-time tiling
variables as kernel arguments (unify_auto_schedule.py `parse_ddr_args`): the chip's generic
`binary_block_start_us`. The A2 / A3 Transpose is a TIK kernel (impl/dynamic/transpose.py, the
only op file of the A2 ops-info entry; public copy leideng/CANN-8.1.RC1 at 4332a01): every
block first moves its tiling from GM to UB in three dependent DMAs (`_decode_tiling_head`:
a head, the shared part, the core's own slice), then sets 47-122 scalars from UB one by one
(`_do_tiling_s7` and its siblings) before its first data move, and the kernel launches every
core. `binary_kind` names such a kernel "tik" (chip `tik_tiling_start_us`).

Launch type. TBE's dynamic reduce binary (ReduceSum, ReduceMean, ReduceMax, ReduceMin,
ReduceProd) compiles its normal, atomic and group-reduce tiling cases into one kernel
(reduce_tilingcase.py `_calc_dynamic_case`), and the group case, whose cores sync through FFTS,
sets `enforce_mix_mode` on the v220 (reduce_group_schedule.py `_add_build_args`; both
leideng/CANN-8.1.RC1 at 4332a01, tbe/dsl/unify_schedule/vector/reduce/): the whole binary runs as
a MIX_AIV task on the A2 / A3 (`mix_binary`), whichever case its tiling picks, on vector cores
only (Mix Block Dim 0 in msprof). The launch type costs no time of its own: nothing is added.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from ..ir.registry import Category, get_op
from ..ir.tensor import Value, itemsize
from .program import CoreGroup, Instr, Segment, Stage
from .seq_types import A2_A3_CHIPS
from .tiling import cdiv, elewise_limit
from .transpose_paths import ROW_UNIT, merged_transpose
from .vector_rows import norm_axis, norm_perm

#: ELEWISE: multi-core from this many 32-byte blocks of output per core (DOUBLE_BUFFER_SIZE)
BLOCKS_PER_CORE = 2
#: ELEWISE: a core's share is a multiple of this many elements (ELEWISE_REPEAT_NUMS)
ELEWISE_ALIGN_ELEMS = 128
#: COMMON_BROADCAST: outputs up to this many 32-byte blocks per core take the align mode
#: (BLOCK_NUM x MAX_REPEAT_TIMES)
BROADCAST_ALIGN_BLOCKS = 8 * 8
#: the atomic reduce path may take a reduction to fewer than cores x this many values
ATOMIC_OUT_PER_CORE = 4
#: atomic reduce path (reduce_tiling_v3.cc `ChooseAtomic`): at least this many elements in
#: all (SMALL_SHAPE_THRESHOLD)
ATOMIC_MIN_ELEMS = 1024
#: op types whose TBE kernel is a float32 sum the reduce tiling may take atomic (the compile
#: enables atomic for a sum: reduce_atomic_schedule.py `_is_supported_atomic_add`, float32 on
#: the 910B in `_soc_support_atomic`); ReduceSumSquare stands for LpNormReduceV2 (p = 2)
ATOMIC_SUM_OPS = frozenset({"ReduceSum", "ReduceSumSquare"})
#: op types tiled by the dynamic reduce tiling
REDUCE_OPS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
#: op types of TBE's NORM pattern whose block split `norm_blocks` gives (reduced axis `axis`)
NORM_OPS = frozenset({"Softmax", "LogSoftmax"})
#: op types whose one data input is broadcast to the output shape (the other gives the shape)
EXPAND_OPS = frozenset({"Expand", "BroadcastTo"})
#: op types whose TBE compute broadcasts one-element tensor inputs to the data's shape
#: (tbe.broadcast) while its classify (OpPatternMode.ELEWISE) sees only the full-shape inputs:
#: the broadcast nodes make the graph a BROADCAST-pattern kernel (pattern_parser.py,
#: BroadcastPatternParser.match), and the classify's all-fuse mode takes the broadcast
#: schedule's original one-dim tiling case, which has no double-buffered twin
#: (broadcast_tilingcase.py `_calc_original_tiling_case`, `_default_db_func`; elewise_classifier
#: .py AllFuseMode; leideng/CANN-8.1.RC1 at 4332a01). ApplyAdamW: impl/dynamic/apply_adam_w.py
#: broadcasts beta1, beta2, lr, weight_decay, epsilon and two results of the scalar tensors.
#: The value: the schedule's live full-tile buffers (`_calc_storage_bound`'s
#: coexisting_quantity), which size its tile, the UB over that many buffers of the compute
#: dtype (bf16 computes in fp32: support_bfp16). ApplyAdamW: 8, walked from var_out, m_out and
#: v_out with the absorbable broadcasts folded (`match_scalar_scene`), for fp16, fp32 and the
#: bf16 build alike (docs/corpus.md, "ApplyAdamW tiled by its schedule's eight coexisting
#: buffers")
SCALAR_TENSOR_BROADCAST_OPS = {"ApplyAdamW": 8}
#: op types whose prebuilt dynamic-shape kernel on the A2 / A3 is a TIK kernel that reads its
#: run-time tiling into UB (module note, "Kernel kinds")
TIK_KERNELS = frozenset({"Transpose"})
#: Transpose: bytes of the block its tiling splits an axis in (`Split`: elePerBlock elements)
TRANSPOSE_BLOCK_BYTES = 32
#: Transpose: the side both transposed axes reach for the split models read here (below it
#: the f2t / t2f models, F2T_THRESHOLD_B16 = 64, may take the shape)
TRANSPOSE_MIN_SIDE = 64
#: Transpose: element sizes whose scenario 7 split is modelled (`fp16Times` 1 and 2)
TRANSPOSE_SPLIT_ITEMS = (2, 4)
#: Transpose: rows (the input's second-to-last axis) up to this go to scenario 10
TRANSPOSE_S10_ROWS = 128
#: Transpose: bytes of a scenario 7 tile row (`CalcVnchwconvFullColSize` 256 columns of
#: 2-byte data on the A2's UB, halved for 4-byte data: the `Model00x` maxCol)
TRANSPOSE_MAX_COL_BYTES = 512


def binary_kind(op_types: Sequence[str], chip_name: str) -> str:
    """The kind of the prebuilt dynamic-shape kernel that runs the ops `op_types` (one kernel)
    on chip `chip_name` (module note, "Kernel kinds"): "tik" for a lone op of TIK_KERNELS on an
    A2 / A3, else "generic"."""
    if len(op_types) == 1 and op_types[0] in TIK_KERNELS and chip_name in A2_A3_CHIPS:
        return "tik"
    return "generic"


def mix_binary(op_types: Sequence[str], chip_name: str) -> bool:
    """Whether the prebuilt dynamic-shape kernel of the ops `op_types` (one kernel) on chip
    `chip_name` is built in mix mode (module note, "Launch type"): a lone reduce on an A2 / A3."""
    return len(op_types) == 1 and op_types[0] in REDUCE_OPS and chip_name in A2_A3_CHIPS


def block_elems(item: float) -> int:
    """Elements of `item` bytes in one 32-byte block."""
    return max(1, int(32 // max(item, 1e-9)))


def elewise_blocks(elems: int, out_item: float, cores: int) -> int:
    """Blocks of a dynamic ELEWISE kernel of `elems` output elements of `out_item` bytes."""
    if elems < block_elems(out_item) * cores * BLOCKS_PER_CORE:
        return 1
    factor = cdiv(cdiv(elems, cores), ELEWISE_ALIGN_ELEMS) * ELEWISE_ALIGN_ELEMS
    return cdiv(elems, factor)


def broadcast_rows_blocks(rows: int, row_elems: int, out_item: float, cores: int) -> int | None:
    """Blocks of a dynamic broadcast of `rows` values each along `row_elems` trailing
    elements (COMMON_BROADCAST), or None where its tiling takes a path not modelled here."""
    per_block = block_elems(out_item)
    elems = rows * row_elems
    if elems < per_block * cores * BLOCKS_PER_CORE:
        return 1
    if elems <= per_block * BROADCAST_ALIGN_BLOCKS * cores or rows < cores:
        return None
    return cdiv(rows, cdiv(rows, cores))


def reduce_rows_blocks(rows: int, out_item: float, cores: int) -> int:
    """Blocks of a dynamic reduction over the trailing axes to `rows` values of
    `out_item` bytes (its normal, non-atomic path)."""
    factor = max(cdiv(rows, cores), block_elems(out_item))
    return cdiv(rows, factor)


def atomic_reduce_blocks(rows: int, red: int, item: float, cores: int,
                         ub_elems: int) -> int | None:
    """Blocks of TBE's reduce tiling taking its atomic path for a float32 sum over trailing
    axes of `red` elements to `rows` values, or None where it takes the normal path
    (reduce_tiling_v3.cc at 0231fcc): `ChooseAtomic` wants fewer values than cores x half a
    32-byte block, more than half the cores' count of reduced elements and more than
    ATOMIC_MIN_ELEMS in all; `GetAtomicBlockTilingInfo` splits the reduced axis
    ceil(red / cores) a block (one a block below the core count) and `GetAtomicBlockDim`
    runs ceil(red / factor) blocks; `FineTuning` (tune_0_0) cuts a factor that is not whole
    32-byte blocks down to whole ones when the reduced axis is whole blocks and the UB holds
    the factor (the UB factor is then the block factor), so 4096 fp32 on 48 cores run 52
    blocks of 80 (not 48 of 86). A UB factor under the block factor is not modelled."""
    per_block = block_elems(item)
    if not (rows < cores * per_block // 2 and red > cores // 2
            and rows * red > ATOMIC_MIN_ELEMS):
        return None
    factor = cdiv(red, cores) if red >= cores else 1
    if red % per_block == 0 and factor % per_block and per_block < factor <= ub_elems:
        factor = factor // per_block * per_block
    return cdiv(red, factor)


def atomic_sum_split(parts: list, ins: Sequence[Value], outs: Sequence[Value], cores: int,
                     chip) -> DynamicSplit | None:
    """The atomic reduce split (`atomic_reduce_blocks`) of a lone float32 sum of
    ATOMIC_SUM_OPS over its trailing axes on an A2 / A3 `chip`, or None. A jit build takes it
    too: its const-shape reduce kernel's blocks are the same tiling's, run at compile time (the
    `_block_dims` a const reduce reads in `DoConstRunTimeBranch`); the Ascend-mstt 910B1
    step's ReduceSumD to a scalar run 48 blocks for 4608-12288 fp32 and 52 for 4096."""
    if (len(parts) != 1 or parts[0].op_type not in ATOMIC_SUM_OPS or len(outs) != 1
            or not ins or ins[0].dtype != "float32" or chip.name not in A2_A3_CHIPS):
        return None
    shape = tuple(int(d) for d in ins[0].shape)
    rows = over_trailing_axes(shape, tuple(outs[0].shape))
    if rows is None:
        return None
    red = math.prod(shape) // rows
    blocks = atomic_reduce_blocks(rows, red, 4, cores, chip.ub_bytes // 4)
    if blocks is None:
        return None
    return DynamicSplit(blocks, f"reduce tiling, atomic path: {blocks} block(s) over the "
                                f"{red} reduced elements", "reduce")


def static_reduce(parts: list, ins: Sequence[Value], outs: Sequence[Value],
                  dynamic: DynamicSplit | None, axes: Any = None) -> bool:
    """Whether a lone reduction of REDUCE_OPS over its trailing axes (`axes`: the axes
    input's data, else the node's `axes` attribute; none: all axes), `keepdims` off and no
    atomic split (`dynamic` None), runs TBE's static CceOp reduce schedule, which a jit build
    compiles for its shapes (the D ops: the Ascend-mstt 910B1 step's ReduceSumD). The static
    dispatch (static_schedule/cce_schedule.py `global_core_schedule`, public copy
    dengguojie/vue-element-admin auto_schedule/python/tbe/dsl/ at 0b8bb51) tries
    ReduceMultiSchedule only for an output of rank above 1, and a keepdims-off reduce over
    trailing axes (reduce_sum_d.py: `shape_refine`, `simplify_axis_shape`) leaves [rows];
    `CceOp.core_schedule_reduce` (te_schedule/elewise_schedule.py) then double-buffers its
    reads only when the graph has no reduce (`not self._have_reduce and
    self._need_double_buffer`): the kernel's tiles are single-buffered."""
    if len(parts) != 1 or dynamic is not None or len(outs) != 1 or len(ins) != 1:
        return False
    nd = parts[0]
    if nd.op_type not in REDUCE_OPS or get_op(nd.op_type, nd.name).category != Category.REDUCE:
        return False
    rank = len(ins[0].shape)
    raw = nd.attrs.get("axes") if axes is None else axes
    flat = sorted({int(a) % rank for a in ([] if raw is None else list(np.ravel(raw)))})
    if nd.attrs.get("keepdims", 1) or not rank or (not flat and nd.attrs.get(
            "noop_with_empty_axes")):
        return False
    return not flat or flat == list(range(rank - len(flat), rank))


def static_buffers(low: Any, parts: list, ext_in: list[str], ext_vals: list[Value],
                   out_vals: list[Value], spec: Any, dynamic: DynamicSplit | None) -> Any:
    """`spec` (a `VecSpec`) single-buffered for a jit build's static reduce (`static_reduce`,
    its axes from the node's second input when that is a constant), else as it is; as it is
    too where the kernel's path sizes its own UB (`ub_elem_bytes`) or the build is a binary
    one (`lower.vector.binary_buffers`)."""
    if spec.ub_elem_bytes or low.kernel_build == "binary":
        return spec
    axes = next((low.const_value(i) for i in ext_in[1:2] if low.is_const(i)), None)
    one = static_reduce(parts, ext_vals[:1], out_vals, dynamic, axes)
    return replace(spec, buffers=1) if one else spec


def lead_axes(shape: Sequence[int], rows: int) -> int | None:
    """The fewest leading axes of `shape` whose product is `rows`, with at least one trailing
    element left over (`shape` reduces or broadcasts over the rest), else None."""
    lead = 1
    for k, d in enumerate(shape):
        if lead == rows and math.prod(shape[k:]) > 1:
            return k
        lead *= int(d)
    return None


def over_trailing_axes(full: Sequence[int], part: Sequence[int]) -> int | None:
    """R when `part` is `full` with its trailing axes reduced or broadcast away (kept as 1 or
    dropped): `full` = [R..., D...], `part` = [R...] or [R..., 1...]; else None."""
    rows = math.prod(part)
    k = lead_axes(full, rows)
    if k is None:
        return None
    lead = tuple(full[:k])
    return rows if tuple(part) in (lead, lead + (1,) * (len(full) - k)) else None


def trailing_broadcast_rows(ins: Sequence[Value], out: Value) -> int | None:
    """R of a broadcast along the trailing axes ([R, 1] -> [R, D]): exactly one operand
    smaller than the output, every other of the output's size, the small one covering the
    output's leading axes (`over_trailing_axes`); None for any other operand set."""
    small = [v for v in ins if v.numel < out.numel]
    if len(small) != 1 or any(v.numel != out.numel for v in ins if v is not small[0]):
        return None
    return over_trailing_axes(tuple(out.shape), tuple(small[0].shape))


def _tail_ok(length: int, factor: int, after: int, per_block: int) -> bool:
    """Whether the last block of an axis of `length` split by `factor` holds at least one
    32-byte block (`per_block` elements) of the `after` elements that follow it."""
    tail = factor if length % factor == 0 else length % factor
    return tail * after >= per_block


def _norm_factor(length: int, before: int, after: int, per_block: int,
                 cores: int) -> int | None:
    """The block factor of an A axis of `length` after `before` elements of A axes and before
    `after` elements of all later axes (norm.cc `JudgeCurDimSplitBlock`), or None where no
    factor passes. Short of the cores (`before * length < cores`): the smallest factor whose
    last block holds a 32-byte block of what follows; else for each core count from `cores`
    up, blocks = count // before, shrunk until the last block does."""
    if before * length < cores:
        factor = cdiv(per_block, after)
        if factor >= length:
            return length
        return next((f for f in range(factor, length + 1)
                     if _tail_ok(length, f, after, per_block)), None)
    for count in range(cores, before * length + 1, cores):
        if before > count:
            continue
        for dim in range(count // before, 0, -1):
            if _tail_ok(length, cdiv(length, dim), after, per_block):
                return cdiv(length, dim)
    return None


def _refined(length: int, factor: int, per_block: int) -> int:
    """A block factor on the innermost axis rounded up to whole 32-byte blocks
    (`per_block` elements) where the rounded factor fits the axis and its last block still
    holds one (norm.cc `NeedRefineBlockTiling`), else `factor`. The workspace schedule's
    further bound (the rounded factor within its UB count) is not checked: no factor here
    comes near it."""
    up = cdiv(factor, per_block) * per_block
    if up > length:
        return factor
    return up if (length % up or up) >= per_block else factor


def norm_blocks(shape: Sequence[int], axis: int, item: float, cores: int) -> int | None:
    """Blocks of a TBE NORM-pattern kernel over `shape` reducing axis `axis`, not innermost,
    of `item`-byte elements (module note), or None where the shape takes a path not modelled
    here (the reduced axis innermost once size-1 axes are dropped)."""
    split = norm_split(shape, axis, item, cores)
    return None if split is None else split[0]


def norm_split(shape: Sequence[int], axis: int, item: float, cores: int
               ) -> tuple[int, int] | None:
    """`norm_blocks` and the elements of the inner A axes (those after the reduced one) one
    block holds per slice: all of them where the split is on the outer A axes, else the
    block factor of the inner one (None as for `norm_blocks`)."""
    reduced = int(shape[axis])
    lead = math.prod(int(d) for d in shape[:axis])
    inner = math.prod(int(d) for d in shape[axis + 1:])
    if inner == 1 or reduced == 1:
        return None
    per_block = block_elems(item)
    after = lead * reduced * inner
    if after < per_block:
        return 1, inner
    before = 1
    for length, is_last in ((lead, False), (inner, True)):
        if is_last:
            after //= reduced
        if length == 1:
            continue
        after //= length
        if after <= per_block or before * length >= cores:
            factor = _norm_factor(length, before, after, per_block, cores)
            if factor is not None:
                if is_last:
                    factor = _refined(length, factor, per_block)
                return before * cdiv(length, factor), factor if is_last else inner
        if is_last:
            factor = _refined(length, 1, per_block)
            return before * cdiv(length, factor), factor
        before *= length
    return None


def norm_slices(x: Value, attrs: dict, cores: int) -> int:
    """A slices (of the axes before the reduced one, `attrs["axis"]`) one block of a
    NORM-pattern kernel over input `x` works on when it reduces a strided axis: the block
    factor of the outer A axes, 1 where the split reaches the inner ones (`norm_split`). Its
    workspace schedule writes the workspace of all of them before it reads any back: the
    workspace tensor is a stage of its own bound to the block (`_is_workspace_compute_at_res`
    holds only for a last-axis reduction), the max computed at the block's inner A loop
    (norm_schedule.py `NormWorkspaceSchedule._calc_compute_at`, dengguojie/vue-element-admin
    at 013c7e4)."""
    dims = tuple(int(d) for d in x.shape or ())
    axis = norm_axis(attrs.get("axis", -1), len(dims)) if dims else 0
    split = norm_split(dims, axis, itemsize(x.dtype), cores) if dims else None
    return 1 if split is None else max(1, cdiv(math.prod(dims[:axis]), max(split[0], 1)))


def _split_share(length: int, parts: int, block_elems: int) -> int:
    """Elements of `length` per core when split `parts` ways in 32-byte blocks of
    `block_elems` elements (the tiling's `Split`: ceil(length / parts) rounded up to a block)."""
    return cdiv(cdiv(length, parts), block_elems) * block_elems


def _ncr(shape: Sequence[int], perm: Sequence[int], block_elems: int
         ) -> tuple[int, int, int] | None:
    """[N, R, C] of a Transpose the scenario 7 tiling splits (module note), or None: an
    [N, R, C] -> [N, C, R] permutation, or a 2-D swap (N = 1) with a side not a whole number
    of blocks (both whole: scenario 11)."""
    merged, order = merged_transpose(shape, perm)
    if order == (0, 2, 1):
        return merged[0], merged[1], merged[2]
    if order == (1, 0) and any(side % block_elems for side in merged):
        return 1, merged[0], merged[1]
    return None


def transpose_blocks(shape: Sequence[int], perm: Sequence[int], cores: int,
                     item: int = 2) -> int | None:
    """Cores at the busiest share of a 2- or 4-byte (`item`) TIK Transpose that the scenario 7
    tiling splits as [N, R, C] -> [N, C, R] (module note), or None where the shape takes a
    path not modelled here."""
    block_elems = TRANSPOSE_BLOCK_BYTES // item
    ncr = _ncr(shape, perm, block_elems)
    if ncr is None:
        return None
    n, r, c = ncr
    if min(r, c) < TRANSPOSE_MIN_SIDE or r <= TRANSPOSE_S10_ROWS:
        return None
    if n >= cores:                                  # Model001: whole planes
        return cdiv(n, cdiv(n, cores))
    if r >= TRANSPOSE_MIN_SIDE * cores:             # Model002: rows over every core
        return cdiv(r, _split_share(r, cores, block_elems))
    if c >= TRANSPOSE_MIN_SIDE * cores:             # Model003: columns over every core
        return cdiv(c, _split_share(c, cores, block_elems))
    longer = max(r, c)                              # Model006: cores // N per plane
    return n * cdiv(longer, _split_share(longer, cores // n, block_elems))


def off_block_bursts(shape: Sequence[int], perm: Sequence[int], cores: int, item: int
                     ) -> tuple[float, float]:
    """(elements per input burst, per output burst) of the busiest core of a 2- or 4-byte
    (`item`) TIK Transpose the scenario 7 tiling splits as [N, R, C] -> [N, C, R]
    (`transpose_blocks`), each 0 where that side's rows are whole 32-byte blocks (C elements
    in, R out) or the split is not modelled. The kernel moves a tile in one `data_move_pad`
    burst per tile row and out one per tile column (impl/dynamic/transpose.py
    `_copy_in_pad_loop_*_s7`, `_copy_out_pad_loop_*_s7`): a row of the core's share of C in
    tiles of at most TRANSPOSE_MAX_COL_BYTES, a column of its share of R in tiles of at most
    ROW_UNIT rows; the share is a `Split` share on the side the model cuts (Model002 and 006
    on R, 003 and 006 on C), else the whole side. Rows off the blocks make every such burst
    start or end inside a block."""
    block_elems = TRANSPOSE_BLOCK_BYTES // item
    ncr = _ncr(shape, perm, block_elems) if item in TRANSPOSE_SPLIT_ITEMS else None
    if ncr is None:
        return 0.0, 0.0
    n, r, c = ncr
    if min(r, c) < TRANSPOSE_MIN_SIDE or r <= TRANSPOSE_S10_ROWS:
        return 0.0, 0.0
    rows, cols = r, c
    if n < cores and r >= TRANSPOSE_MIN_SIDE * cores:                # Model002
        rows = _split_share(r, cores, block_elems)
    elif n < cores and c >= TRANSPOSE_MIN_SIDE * cores:              # Model003
        cols = _split_share(c, cores, block_elems)
    elif n < cores:                                                  # Model006, the longer
        if r >= c:
            rows = _split_share(r, cores // n, block_elems)
        else:
            cols = _split_share(c, cores // n, block_elems)
    rows, cols = min(rows, r), min(cols, c)
    most_cols = TRANSPOSE_MAX_COL_BYTES // item
    return (cols / cdiv(cols, most_cols) if c % block_elems else 0.0,
            rows / cdiv(rows, ROW_UNIT) if r % block_elems else 0.0)


def tik_transpose_split(shape: tuple[int, ...], perm: tuple[int, ...], cores: int,
                        item: int) -> DynamicSplit:
    """The TIK Transpose's split (module note): every core launched (`Serialize*` sets
    `block_dim` to the core count whatever the scenario), the data on the busiest share's
    cores where the scenario 7 split is modelled (`transpose_blocks`), else on the generic
    split's cores (`DynamicSplit.blocks` 0)."""
    blocks = (transpose_blocks(shape, perm, cores, item)
              if item in TRANSPOSE_SPLIT_ITEMS else None)
    if blocks is None:
        return DynamicSplit(0, f"dynamic Transpose tiling (TIK): all {cores} cores "
                               f"launched", "transpose", cores)
    return DynamicSplit(blocks, f"dynamic Transpose tiling (TIK, scenario 7): {blocks} of "
                                f"{cores} cores take a share of {list(shape)}, all {cores} "
                                f"launched", "transpose", cores)


class DynamicSplit(NamedTuple):
    """A prebuilt dynamic-shape kernel's run-time split: its block count, the note saying
    which tiling gave it, and the tiling's pattern ("elewise", "broadcast", "transpose",
    "norm", "reduce"; an "elewise" kernel also sizes its UB tiles by TBE's ELEWISE rule,
    `lower.tiling.elewise_tiles`), and the blocks it launches where that is more than
    `blocks` (0: the blocks with a share; the TIK Transpose launches every core, and a core
    without a share runs only its start and the tiling prologue). `blocks` 0: the kernel's
    split is not modelled, the generic split places the data and only `launched` is the
    kernel's."""

    blocks: int
    note: str
    pattern: str
    launched: int = 0


#: the program of a launched block with no share: one scalar instruction of no cycles (its
#: start, the tiling prologue included, is the engine's kernel start)
IDLE_BLOCK = Segment((Stage("S", (Instr("S", "scalar", 0),)),), 1)


def with_idle_blocks(work: tuple[list[CoreGroup], list[str]], dynamic: DynamicSplit | None
                     ) -> tuple[list[CoreGroup], list[str]]:
    """A vector task's core groups and notes (`work`) and, where a prebuilt kernel's tiling
    launches more blocks than have a share (`DynamicSplit.launched`, at most the cores its
    split was given), one group of the others with no work: each pays its block's start (and
    counts in every block's start) but moves nothing. A task on other blocks than the split's
    (a node's own block_dim) is left as it is."""
    groups, notes = work
    busy = sum(len(g.cores) for g in groups)
    if (dynamic is None or (dynamic.blocks and busy != dynamic.blocks)
            or dynamic.launched <= busy):
        return work
    launched = dynamic.launched
    return ([*groups, CoreGroup(tuple(range(busy, launched)), (IDLE_BLOCK,))],
            [*notes, f"{launched - busy} launched block(s) with no share"])


def dynamic_blocks(parts: list, ins: Sequence[Value], outs: Sequence[Value],
                   cores: int) -> DynamicSplit | None:
    """The split of a lone vector op's prebuilt dynamic-shape kernel (module note), or None
    where no rule here applies; `ins`: its inputs' values, constants of one element (a
    scalar operand) left out."""
    if len(parts) != 1 or len(outs) != 1 or not ins:
        return None
    op = parts[0].op_type
    if op in REDUCE_OPS or op in EXPAND_OPS:
        ins = ins[:1]       # the others give axes or a shape
    out = outs[0]
    item = itemsize(out.dtype)
    category = get_op(op, parts[0].name).category
    # one-element operands are scalars to the ELEWISE tiling (elewise_v3.cc `GetCheckInputs`
    # leaves inputs whose fused shape is 1 out of its shape check)
    if (category <= Category.BROADCAST and op not in EXPAND_OPS
            and all(tuple(v.shape) == tuple(out.shape) for v in ins if v.numel > 1)):
        blocks = elewise_blocks(out.numel, item, cores)
        return DynamicSplit(blocks, f"dynamic ELEWISE tiling: {blocks} block(s) for "
                                    f"{out.numel} elements", "elewise")
    if category <= Category.BROADCAST or op in EXPAND_OPS:
        rows = trailing_broadcast_rows(ins, out)
        blocks = (broadcast_rows_blocks(rows, out.numel // rows, item, cores)
                  if rows else None)
        if blocks is None:
            return None
        return DynamicSplit(blocks, f"dynamic broadcast tiling (trailing axes): {blocks} "
                                    f"block(s) for {rows} rows", "broadcast")
    # a Transpose node with its own block_dim runs on those blocks (lower/vector.py pinned)
    if op == "Transpose" and not parts[0].attrs.get("block_dim"):
        return tik_transpose_split(tuple(int(d) for d in ins[0].shape),
                                   norm_perm(parts[0].attrs.get("perm"), len(ins[0].shape)),
                                   cores, item)
    if op in NORM_OPS and ins[0].shape:
        shape = tuple(int(d) for d in ins[0].shape)
        axis = norm_axis(parts[0].attrs.get("axis", -1), len(shape))
        blocks = norm_blocks(shape, axis, item, cores)
        if blocks is None:
            return None
        return DynamicSplit(blocks, f"dynamic NORM tiling (reduced axis {axis} not "
                                    f"innermost, block split on the A axes): {blocks} "
                                    f"block(s) for {list(shape)}", "norm")
    if op in REDUCE_OPS and category == Category.REDUCE:
        rows = over_trailing_axes(tuple(ins[0].shape), tuple(out.shape))
        if rows is None or out.numel < cores * ATOMIC_OUT_PER_CORE:
            return None
        blocks = reduce_rows_blocks(rows, item, cores)
        return DynamicSplit(blocks, f"dynamic reduce tiling: {blocks} block(s) for {rows} "
                                    f"rows", "reduce")
    return None


def broadcast_buffers(parts: list, ins: Sequence[Value], outs: Sequence[Value],
                      elem_bytes: float, ub_bytes: int) -> tuple[int, int] | None:
    """(UB slots, most elements a tile holds) of a lone op's prebuilt TBE broadcast-pattern
    kernel, or None for any other kernel: an element-wise op one of whose operands (of more
    than one element) does not have the output's shape, or an Expand / BroadcastTo. The
    dynamic broadcast schedule compiles double-buffered tiling cases only for a (COMMON,
    BROADCAST) pattern, a broadcast along the trailing axes ([R, 1] -> [R, D]), whose UB
    split falls on its last axis, and for the pure element-wise pattern (the ELEWISE path
    here); every other case is single-buffered
    (broadcast_tilingcase.py `_calc_special_tiling_case`, `_calc_original_tiling_case`,
    `_default_db_func`, `_special_last_broadcast_db_func`; public copy
    dengguojie/vue-element-admin auto_schedule/python/tbe/dsl/unify_schedule/vector/
    broadcast/ at 310875a). The UB split falls on the last axis when one row of D elements
    is over the single-buffered limit (the UB over `elem_bytes`, the bytes every live buffer
    holds per element, at most the widest dtype's SPLIT_FACTORS, as for ELEWISE): then 2. A
    tile holds at most SPLIT_FACTORS elements either way (broadcast_v3.cc, as elewise_v3.cc).
    An op of SCALAR_TENSOR_BROADCAST_OPS is such a kernel whatever its operands' shapes:
    single-buffered, its tile the UB over its live buffers of the compute dtype."""
    if len(parts) == 1 and parts[0].op_type in SCALAR_TENSOR_BROADCAST_OPS:
        width = max(4 if v.dtype == "bfloat16" else itemsize(v.dtype) for v in (*ins, *outs))
        live = SCALAR_TENSOR_BROADCAST_OPS[parts[0].op_type]
        return 1, elewise_limit(ub_bytes, live * width, width)
    if len(parts) != 1 or len(outs) != 1 or not ins:
        return None
    op = parts[0].op_type
    out = outs[0]
    if op in EXPAND_OPS:
        ins = ins[:1]
    elif not get_op(op, parts[0].name).category <= Category.BROADCAST:
        return None
    shaped = [v for v in ins if v.numel > 1]
    if all(tuple(v.shape) == tuple(out.shape) for v in shaped):
        return None
    rows = trailing_broadcast_rows(shaped, out)
    widest = max(itemsize(v.dtype) for v in (*ins, out))
    split_on_last = rows and out.numel // rows > elewise_limit(ub_bytes, elem_bytes, widest)
    return (2 if split_on_last else 1), elewise_limit(ub_bytes, 0.0, widest)
