"""Vector ops as instruction sequences: what an op issues on the V pipe, and what each costs.

Note on the model
-----------------
Sequences. `SEQUENCES` holds, per op type, the vector instructions the op's kernel issues,
in order (Softmax on float16: vcmax, vbrcb, vsub, vconv f16->f32, vexp, vcadd, vbrcb, vdiv,
vconv f32->f16, as CANN's TBE softmax_v2 writes it).
An op absent from the table has the sequence its registry cost fields describe: `vec_instrs`
instructions of its `vec_class` and its `vec_extra` ones (`derived_steps`); so every op has
exactly one sequence, and `explain()` shows it in the task's notes. A fused UB op
concatenates its members' sequences.

Kernel paths. Where CANN picks a different kernel by chip, format, dtype and shape, `PATHS`
holds the alternatives, each with the condition CANN's op implementation checks; the first
that applies replaces the op's row of SEQUENCES (`sequence_for`), and `explain()` names it.
LayerNorm on fp16 FRACTAL_NZ data on an Ascend910-class chip sums its rows on the cube
(TBE layer_norm.py `_check_vector_to_cube`, layer_norm_cube.py): four full-shape vector passes
instead of fifteen and two reduce trees, one 16-row group at a time, single-buffered; on ND
data with gamma and beta of x's dtype it is the TIK kernel of layer_norm_tik.py (whole rows per
core, statistics on the per-row values, four row passes).
RotaryMul on an A2 chip is CANN's rotate-half RoPE kernel, a head loop (`HEAD_LOOPS`,
`rope_loop`): whole lines (tokens) per core and one load, sequence and store per head.

Steps are of five shapes:
- ELEM: one instruction over every element of the op (vsub, vexp, vmul ...), in the op's
  compute dtype;
- REDUCE: a reduction along the op's reduced axis (vcadd, vcmax), costed as a reduce tree
  per row (below); a reduction over a strided (not innermost) axis is a fold of
  (L - 1) / L element-wise binary passes instead (vadd/vmax of row slices), no reduce step,
  in a TBE NORM kernel one call per reduced row, each waiting out the last (`_fold_part`);
  a `halving` reduction is a kernel's own halving Adds (ops-nn ReduceSumHalfInterval), the
  tree's cycles in `halving_levels` dependent instructions;
- ROW: once per reduced row, on the per-row statistics (mean = sum * 1/L, vsqrt, vln);
- LOOP: one instruction per reduced row over that row's elements, where a kernel's own for
  loop issues a separate call for each row (RmsNormGrad's dgamma Adds on short rows): each
  pays its repeats and waits out the one before, so a tile of r rows counts r steps.
- COLUMNS: one instruction per 256-byte column block of the reduced row, each over every row
  of the tile (one repeat a row), where a kernel's own for loop walks the row's blocks
  (ops-nn reduce_common.h ReduceSumMultiN's Adds, RmsNorm MERGE_N's mulRepeat Muls): each
  waits out the one before, so a row of k blocks counts k steps whatever the rows
  (cycles and steps: lower/vector_cycles.py).

Compute dtype. An op marked `fp32` computes in float32: 2-byte float inputs are cast up by
a vconv before step `cast_at` (the steps before it run in the input dtype) and the result cast
back after the last step (CANN's fp16 LayerNorm and softmax cast to fp32 where the chip's vexp
takes fp32: TBE layer_norm.py, softmax_v2.py). A vconv's repeats count 256 bytes of the
wider dtype (`vconv_part`): one repeat converts 64 elements when one side is fp32 (S: Ascend C
Cast.md, cannmirror/asc-devkit docs/api/context/Cast.md at 0a2e47c: float->half converts 64
source / destination elements per iteration, and the strides follow the wider type; pto-isa's
TCVT issues 256 / max(source, destination bytes) elements a repeat), at the unary rate of one
repeat a cycle (M: pto-isa's A2/A3 cost model, include/pto/costmodel/a2a3/cce_costmodel/
cce_costmodel_core.hpp `EstimateVconvCycles`, calibrated on a 910B3: 0.90 cycles a repeat + 27
for 1-128 repeats of an fp32 -> fp16 TCVT; msKPP's own cost formula, ceil(source bytes /
calPerf) at ~262 B/cycle, gives 65 for that direction). 64 elements a cycle each way, where
128 would read or write 512 bytes of UB a cycle, twice any other unary instruction's; the
widening direction is the less certain (msKPP's formula on a 2-byte source: 131; pto-isa's
fp16 / bf16 -> fp32 profiles: 32).

Repeats and masks. One vector instruction works on repeats of `REPEAT_BYTES` contiguous bytes
(128 fp16 or 64 fp32 elements); an instruction over m elements of s bytes issues
ceil(m*s / 256) repeats (a tail shorter than a repeat costs a full repeat with a mask) and costs
max(`chip.vector_min_cycles`, repeats x 256 / rate(class, dtype)) cycles (msKPP 910B1: vadd fp32
takes 3.1, 4.1, 6.0 cycles for 1, 2, 3 repeats; vexp fp16 4 cycles per repeat).
The rows of a row-wise op (softmax, norms, reductions) start on `ub_align_bytes` (32 B) UB
blocks, so a row of L elements occupies ceil(L*s / 32) * 32 bytes and every step pays for the
padding.

Reduce tree (per row of L elements, k = ceil(L*s / 256) repeats): the cheaper of (a) k - 1
element-wise binary folds (vadd/vmax of repeat halves) and one whole-reduce repeat, and
(b) a whole-reduce of every repeat (one partial per repeat) then a final whole-reduce pass over
the k partials (ceil(k*s / 256) repeats). Both are the strategies CANN's reduce sample picks
between by length (asc-devkit examples 04_reduce: BinaryReduceSumImpl "Add the halves, finally
one WholeReduceSum"; two WholeReduceSum for longer rows). The whole-reduce rate is the chip's
`reduce` class (vcadd) or `reduce_max` (vcmax/vcmin: 7 cycles per fp32 repeat, against 3 for
vcadd). Row steps work on one value per row, ceil(rows*s / 256) repeats. An index reduction
(an argmax: `Step.index`) cannot fold, since an element-wise max keeps no positions: it takes
(b), its first pass writing one (value, index) pair per repeat, its final pass reading the k
pairs (ceil(2k*s / 256) repeats) as CANN's TIK ArgMaxV2 does (arg_common.py, below).
An A2 TBE NORM kernel's row in UB takes (b) level by level (`lower.vector.norm_entire_reduce`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..ir.registry import VecClass
from ..ir.tensor import Value, itemsize
from .activation_paths import GELU_PATHS, SIGMOID_PATHS
from .glu_tiling import SWIGLU_GRAD_PATHS, SWIGLU_PATHS, swiglu_ub
from .layer_norm_paths import (
    LAYER_NORM_CUBE,
    LAYER_NORM_CUBE_CHIPS,
    LAYER_NORM_CUBE_ROWS,
    LAYER_NORM_TIK,
    LAYER_NORM_TIK_BUDGET,
    LAYER_NORM_TIK_CHIPS,
    LAYER_NORM_TIK_MIN_ROW,
    LAYER_NORM_TIK_NARROW,
    LAYER_NORM_TIK_NARROW_BUDGET,
    LAYER_NORM_TIK_NOTE,
    LAYER_NORM_TIK_ROW_ALIGN,
    LAYER_NORM_V3,
    LAYER_NORM_V3_NORM,
    LAYER_NORM_V3_NOTE,
    LAYER_NORM_V4_CHIPS,
    LAYER_NORM_V4_NOTE,
    LAYER_NORM_V4_SINGLE_READ,
    layer_norm_cube,
    layer_norm_tik,
    layer_norm_tik_narrow,
    layer_norm_v3,
    layer_norm_v4_single_read,
)
from .quant_paths import DYNAMIC_QUANT_PATHS
from .rms_norm_paths import (
    MERGE_N_NOTE,
    RMS_NORM_A2_CHIPS,
    RMS_NORM_GRAD_NOTE,
    RMS_NORM_GRAD_SMALL_D_BUDGET,
    RMS_NORM_GRAD_SMALL_D_UB_BYTES,
    RMS_NORM_MERGE_N,
    RMS_NORM_MERGE_N_BUDGET,
    RMS_NORM_MERGE_N_PERF,
    RMS_NORM_NORMAL,
    rms_grad_mode,
    rms_mode,
    rms_norm_grad_row,
    rms_norm_grad_small_d,
    rms_norm_mode,
)
from .seq_types import A2_A3_CHIPS, ELEM, LOOP, REDUCE, ROW, NormSchedule, OpSequence, Step
from .seq_types import COLUMNS as _COLUMNS
from .seq_types import NARROW_FLOATS as _NARROW_FLOATS
from .seq_types import conversion as _conv
from .seq_types import elem as _e
from .seq_types import per_row as _w
from .seq_types import reduction as _r
from .transpose_paths import TRANSPOSE_PATHS
from .vector_cycles import (
    REPEAT_BYTES,
    SeqPart,
    instr_cycles,
    part_cycles,
    part_steps,
    reduce_row_cycles,
    repeat_cycles,
)
from .vector_rows import ROW_RULES

#: registry vector class -> chip vector instruction class (MOVE: vcopy/vnchwconv, unary rate)
VEC_CLASS = {VecClass.UNARY: "unary", VecClass.BINARY: "binary", VecClass.TERNARY: "ternary",
             VecClass.EXP: "exp", VecClass.SQRT: "sqrt", VecClass.DIV: "div",
             VecClass.REDUCE: "reduce", VecClass.MOVE: "unary"}


#: instance norm: statistics per (sample, channel) row, rstd on the row values, then scale
_INSTANCE_NORM = (_r("vcadd"), _w("vmuls"), _e("vsub", "binary"), _e("vmul", "binary"),
                  _r("vcadd"), _w("vmuls"), _w("vadds"), _w("vsqrt", "sqrt"), _w("vdiv", "div"),
                  _e("vmul", "binary"), _e("vmul", "binary"), _e("vadd", "binary"))
#: CANN's LayerNorm kernel as its TBE DSL writes it (ops/built-in/tbe/impl/layer_norm.py,
#: layer_norm_compute / layer_norm_compute_nz, impl_mode high_performance): x * 1/n, sum;
#: broadcast the mean, x - mean, square, * 1/n, sum; broadcast the mean again, x - mean;
#: broadcast the variance, + eps, ln, * -0.5, exp (the rsqrt, on the full broadcast shape);
#: multiply, * gamma, + beta. The DSL materialises each broadcast (a full-size copy, vbrcb at
#: the unary rate) and computes every element-wise step on the full shape. fp16 inputs are
#: cast to fp32 where the chip's vexp takes fp32 (every chip file here has an exp_fp32 rate).
_LAYER_NORM = (_e("vmuls", "unary"), _r("vcadd"), _e("vbrcb", "unary"), _e("vsub", "binary"),
               _e("vmul", "binary"), _e("vmuls", "unary"), _r("vcadd"), _e("vbrcb", "unary"),
               _e("vsub", "binary"), _e("vbrcb", "unary"), _e("vadds", "unary"),
               _e("vln", "exp"), _e("vmuls", "unary"), _e("vexp", "exp"),
               _e("vmul", "binary"), _e("vmul", "binary"), _e("vadd", "binary"))

#: CANN's BatchNorm training gradients as their TBE DSL writes them (ops/built-in/tbe/impl/
#: bn_training_update_grad.py, bn_training_reduce_grad.py): where the chip's vdiv takes fp32
#: (every Ascend910-class chip) both full-shape inputs, grads and x, are cast to fp32 and every
#: full-shape step runs in fp32. Their schedules (te_schedule/bn_update_grad_shedule.py,
#: bn_grad_reduce_schedule.py) read the per-channel statistics ([1, C1, 1, 1, C0]) in place
#: with the broadcasting forms of vmul/vadd/vsub (`vector_mul_with_broadcast`, ...), so no
#: broadcast pass; the arithmetic on the statistics alone is per channel (ROW steps, one row per
#: channel). The first step is x's cast (grads' is the sequence's own, `cast_at`).
#: UpdateGrad: -mean per channel, x - mean; + eps, sqrt, 1/sqrt per channel; * rsqrt, * grads;
#: tuple_sum of (grads * x_norm, grads) over N, H, W (two folds of a strided reduction: C0
#: stays innermost).
_BN_UPDATE_GRAD = (_conv("vconv f16->f32 (x)"), _w("vmuls"), _e("vadd", "binary"),
                   _w("vadds"), _w("vsqrt", "sqrt"), _w("vdiv", "div"), _e("vmul", "binary"),
                   _e("vmul", "binary"), _r("vcadd"), _r("vcadd"))
#: ReduceGrad: per channel + eps, sqrt, three scalings, two divisions, a product and a sum
#: (multiplier, addend); multiplier * x, + grads, + addend; per channel scale / sqrt; * it
#: (cast back to the output's fp16 after the last step)
_BN_REDUCE_GRAD = (_conv("vconv f16->f32 (x)"), _w("vadds"), _w("vsqrt", "sqrt"),
                   _w("vmuls", "unary"), _w("vmuls", "unary"), _w("vmuls", "unary"),
                   _w("vdiv", "div"), _w("vdiv", "div"), _w("vmul", "binary"),
                   _w("vadd", "binary"), _e("vmul", "binary"), _e("vadd", "binary"),
                   _e("vadd", "binary"), _w("vdiv", "div"), _e("vmul", "binary"))

#: CANN's BatchNorm training update as its TBE DSL writes it (ops/built-in/tbe/impl/
#: bn_training_update.py, bn_training_update_compute): per channel the batch mean and variance
#: (two vmuls, vmul, vsub), the multiplier scale / sqrt(var + eps) (vadds, vsqrt, vdiv) and the
#: addend offset - multiplier * mean (vmul, vsub); a 2-byte x is cast to fp32, y = multiplier
#: * x + addend over the full shape (the statistics read by the broadcasting forms, as in the
#: gradients above) and cast back; then per channel the running mean and variance (five
#: vmuls, two vadds).
_BN_UPDATE = (_w("vmuls"), _w("vmuls"), _w("vmul", "binary"), _w("vsub", "binary"),
              _w("vadds"), _w("vsqrt", "sqrt"), _w("vdiv", "div"), _w("vmul", "binary"),
              _w("vsub", "binary"), _e("vmul", "binary"), _e("vadd", "binary"), _w("vmuls"),
              _w("vmuls"), _w("vmuls"), _w("vadd", "binary"), _w("vmuls"), _w("vmuls"),
              _w("vadd", "binary"))

#: how a TBE NORM-pattern kernel (softmax_v2: classify([x, axes], OpPatternMode.NORM)) places
#: its rows: tbe/dsl unify_schedule norm_tilingcase.py `_add_tiling_case` puts the block split
#: on A (not reduced) axes only ("block split on A axis": a reduced row is never shared by
#: cores); a row too long for the UB takes the workspace schedule (`NormSchedule`). Softmax
#: keeps x (until x - max), x - max and exp alive: three row tensors, with 512 + 4096 bytes of
#: scratch for the fp32 reduce_max and reduce_sum of one axis (norm_tilingcase
#: `_reduce_max_space`, `_reduce_sum_space`); its workspace tensor is exp (read by reduce_sum
#: and by the divide: `find_workspace_tensor`, `_judge_workspace_or_cache_clone`), so x is read
#: by the max stage and the exp stage, exp read by the sum stage and the divide stage.
#: LogSoftmax's workspace tensor is x - max (read by exp and the final subtract), the same
#: traffic. A row that is not whole 32-byte blocks and does not pack whole into one sits on
#: blocks of its own in UB and moves as one GM burst each way (`vector_rows.row_on_blocks`).
_NORM_ROWS: dict[str, Any] = {"whole_rows": True, "row_bursts": "norm", "norm": NormSchedule(
    live=3, temp_bytes=512 + 4096, input_reads=2, ws_reads=2)}

#: op type -> its vector instruction sequence (module note); ops absent: `derived_steps`
SEQUENCES: dict[str, OpSequence] = {
    # CANN's TBE softmax_v2 along the last axis (softmax_v2_compute): row max and x - max in
    # the input dtype (the max broadcast materialised), cast to fp32 where the chip's vexp
    # takes fp32, exp, row sum, broadcast, divide, cast back. A NORM-pattern kernel
    # (classify(..., OpPatternMode.NORM)): its rows are bound to cores and a row too long for
    # the UB takes the workspace schedule (_NORM_ROWS)
    "Softmax": OpSequence((_r("vcmax", "reduce_max"), _e("vbrcb", "unary"),
                           _e("vsub", "binary"), _e("vexp", "exp"), _r("vcadd"),
                           _e("vbrcb", "unary"), _e("vdiv", "div")), fp32=True, rows="axis",
                          cast_at=3, **_NORM_ROWS),
    "LogSoftmax": OpSequence((_r("vcmax", "reduce_max"), _e("vsub", "binary"),
                              _e("vexp", "exp"), _r("vcadd"), _w("vln", "exp"),
                              _e("vsub", "binary")), fp32=True, rows="axis", **_NORM_ROWS),
    "LayerNormalization": OpSequence(_LAYER_NORM, fp32=True, rows="from_axis"),
    "InstanceNormalization": OpSequence(_INSTANCE_NORM, fp32=True, rows="spatial"),
    # square, row sum, rstd = 1/sqrt(mean + eps), x * rstd, * gamma
    "RmsNorm": OpSequence((_e("vmul", "binary"), _r("vcadd"), _w("vmuls"), _w("vadds"),
                           _w("vsqrt", "sqrt"), _w("vdiv", "div"), _e("vmul", "binary"),
                           _e("vmul", "binary")), fp32=True, rows="gamma"),
    # CANN's SwiGlu on 2-byte dtypes (ops-nn activation/swi_glu/op_kernel/swi_glu_bf16.hpp
    # `SwigluVectorBF16`, which swi_glu.cpp also runs for fp16): Cast a, Muls -1, Exp,
    # Adds 1, Div(a, .), Cast b, Mul b, Cast out, each over the output's N elements (half the
    # task's input elements); the fp32 kernel (swi_glu_impl.hpp) divides a tile of ones and
    # multiplies by a, one Mul more (its path: SWIGLU_PATHS)
    "SwiGlu": OpSequence((_e("vmuls", "unary", 0.5), _e("vexp", "exp", 0.5),
                          _e("vadds", "unary", 0.5), _e("vdiv", "div", 0.5),
                          _e("vmul", "binary", 0.5)), fp32=True, ub_bytes=swiglu_ub,
                         row_bursts="halves"),
    "ReduceSum": OpSequence((_r("vcadd"),), rows="axes"),
    # TBE reduce_mean_compute (impl/dynamic/reduce_mean.py): fp16 cast to fp32 where the
    # chip's sum takes fp32, every element scaled by 1/N (vmuls) before the sum, cast back
    "ReduceMean": OpSequence((_e("vmuls", "unary"), _r("vcadd")), fp32=True, rows="axes"),
    "ReduceMax": OpSequence((_r("vcmax", "reduce_max"),), rows="axes"),
    "ReduceMin": OpSequence((_r("vcmin", "reduce_max"),), rows="axes"),
    # no whole-reduce multiply: a vmul fold and a final vmul pass, all at the binary rate
    "ReduceProd": OpSequence((_r("vmul", "binary"),), rows="axes"),
    "ReduceSumSquare": OpSequence((_e("vmul", "binary"), _r("vcadd")), rows="axes"),
    "ReduceL1": OpSequence((_e("vabs", "unary"), _r("vcadd")), rows="axes"),
    "ReduceL2": OpSequence((_e("vmul", "binary"), _r("vcadd"), _w("vsqrt", "sqrt")),
                           rows="axes"),
    "ReduceLogSum": OpSequence((_r("vcadd"), _w("vln", "exp")), rows="axes"),
    "ReduceLogSumExp": OpSequence((_r("vcmax", "reduce_max"), _e("vsub", "binary"),
                                   _e("vexp", "exp"), _r("vcadd"), _w("vln", "exp"),
                                   _w("vadd", "binary")), rows="axes"),
    # CANN's TIK ArgMaxV2 / ArgMinV2 (arg_common.py): vcmax / vcmin with each repeat's index
    "ArgMax": OpSequence((_r("vcmax", "reduce_max", index=True),), rows="axis"),
    "ArgMin": OpSequence((_r("vcmin", "reduce_max", index=True),), rows="axis"),
    # element-wise ops whose sequence is one named instruction
    "Add": OpSequence((_e("vadd", "binary"),)),
    "Sub": OpSequence((_e("vsub", "binary"),)),
    "Mul": OpSequence((_e("vmul", "binary"),)),
    "Div": OpSequence((_e("vdiv", "div"),)),
    "Relu": OpSequence((_e("vrelu", "unary"),)),
    "Exp": OpSequence((_e("vexp", "exp"),)),
    "Sqrt": OpSequence((_e("vsqrt", "sqrt"),)),
    "Cast": OpSequence((_e("vconv", "unary"),), conversion=True),
    # fp32 inputs: the same steps without the casts (the fp16 path is in PATHS)
    "BNTrainingUpdateGrad": OpSequence(_BN_UPDATE_GRAD[1:], rows="channels"),
    "BNTrainingReduceGrad": OpSequence(_BN_REDUCE_GRAD[1:], rows="channels"),
    "BNTrainingUpdate": OpSequence(_BN_UPDATE, fp32=True, rows="channels", cast_at=9),
}


def _sum_in_fp32(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's TBE ReduceSum casts its input to fp32 before the sum (reduce_sum_compute,
    impl/dynamic/reduce_sum.py: a float16 input on any SoC but the Ascend310, whose sum takes
    float32 there)."""
    return bool(ins) and ins[0].dtype == "float16" and chip_name.lower() != "ascend310"


def _narrow_pair(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether both full-shape inputs (grads, x) are 2-byte floats, which a BatchNorm
    gradient kernel casts up to fp32 one by one."""
    return len(ins) > 1 and all(v.dtype in _NARROW_FLOATS for v in ins[:2])


#: CANN's rotate-half RoPE kernel on A2 (ops-transformer posembedding/rotary_position_embedding:
#: op_host/rope_rotate_half_tiling.h, RopeRotateHalfTilingClass capable on SocVersion ASCEND910B
#: for the half mode (arch35 parts take rope_regbase_tiling_base.cpp and op_kernel/arch35);
#: op_host/rope_rotate_half_tiling.cpp, op_kernel/rotary_position_embedding.cpp, which runs
#: rotate_half_bf16.h `RotateHalfBf16<half|bfloat16_t, float>` for 2-byte dtypes and
#: rotate_half.h `RotateHalf<float>` for fp32). Per head of a UB step (Compute): Cast x to fp32,
#: XNewCopy's two UB->UB DataCopys of the halves (a vector-unit copy: asc-devkit c_api
#: vector_compute asc_copy, msKPP UB->UB ~261 B/cycle, the unary rate), Mul x*cos,
#: Mul x_new*sin, Add, Cast back; the casts come from `fp32`.
_ROPE_HEAD = (_e("vcopy (UB->UB half swap)", "unary", 2.0), _e("vmul", "binary"),
              _e("vmul", "binary"), _e("vadd", "binary"))
#: rope_rotate_half_tiling.cpp: D above D_LENGTH_LIMIT is refused; UB split into
#: DOUBLE_BUFFER * UB_NUM (fp32) or DOUBLE_BUFFER * UB_NUM_BF16 (2-byte) parts after a 2 KB
#: reserve; BNSD shapes with B*N > BNSD_ALIGNED_BLOCK_S_SCALE * S are refused (CheckBnsdBlockSkip)
ROPE_D_LIMIT = 896
ROPE_UB_PARTS = {4: 2 * 4, 2: 2 * 12}
ROPE_UB_RESERVE = 2048
ROPE_BNSD_SCALE = 8


@dataclass(frozen=True)
class HeadLoop:
    """A head-loop kernel's geometry in elements of its main input: `lines` lines of
    `line_elems` each are bound whole to cores; per UB step of at most `step_lines` lines the
    kernel loops over the line's heads of `head_elems` each."""

    lines: int
    line_elems: int
    head_elems: int
    step_lines: int


def rope_loop(ins: Sequence[Value], ub_bytes: int) -> HeadLoop | None:
    """CANN's rotate-half RoPE tiling (rope_rotate_half_tiling.cpp `ChooseTilingMode`, on the
    three leading axes of x and cos, a 3-D TND input read as [1, T, N]): lines (totalSLines,
    split over min(lines, AIV cores) cores, former cores one line more: `GetCoreDataTiling`)
    and heads per line (bcFirstDim x bcSecondDim, the kernel's bnSize loop); None where the
    tiling refuses the shape, or takes the R_B1SD mode over several batches (a cos/sin load
    per batch and step: not modelled)."""
    if len(ins) < 3:
        return None
    x, r = ins[0], ins[1]
    xs, rs = [int(d) for d in x.shape], [int(d) for d in r.shape]
    if len(xs) not in (3, 4) or len(rs) != len(xs) or rs[-1] != xs[-1]:
        return None
    d, item = xs[-1], itemsize(x.dtype)
    if d > ROPE_D_LIMIT or d % 2 or item not in ROPE_UB_PARTS:
        return None
    (x1, x2, x3), (r1, r2, r3) = ((1, *xs[:2]), (1, *rs[:2])) if len(xs) == 3 else (
        tuple(xs[:3]), tuple(rs[:3]))
    per_block = 32 // item
    half = d // 2
    aligned = half % per_block == 0
    d_pad = d if aligned else 2 * -(-half // per_block) * per_block
    if (r1, r2, r3) == (x1, x2, x3):                    # NO_BROADCAST
        lines, heads = x1 * x2 * x3, 1
    elif (r1, r2, r3) == (1, 1, 1):                     # BND: every row of x is a line
        if 1 not in (x1, x2, x3):
            return None
        lines, heads = x1 * x2 * x3, 1
    elif x1 != r1 and x2 != r2:                         # BNSD
        if aligned and x1 * x2 > ROPE_BNSD_SCALE * x3:
            return None
        lines, heads = x3, x1 * x2
    elif x1 != r1 and x3 != r3:                         # BSND
        lines, heads = x2, x1 * x3
    elif x2 != r2 and x3 != r3:                         # SBND
        lines, heads = x1, x2 * x3
    elif x1 != r1 and 1 in (r2, r3):                    # x B1SD / BS1D
        lines, heads = x2 * x3, x1
    elif x2 != r2 and r3 == 1:                          # x SB1D
        lines, heads = x1, x2
    elif x3 != r3:                                      # r BS1D / SB1D
        lines, heads = x1 * x2, x3
    elif x1 == r1 == 1 and x3 == r3:                    # r B1SD of one batch
        lines, heads = x3, x2
    else:                                               # r B1SD over batches, or refused
        return None
    step = (ub_bytes - ROPE_UB_RESERVE) // ROPE_UB_PARTS[item] // (item * d_pad)
    if step < 1:
        return None
    return HeadLoop(lines, heads * d, d, step)


def rope_step_parts(dtype: str, heads: int) -> tuple[SeqPart, ...]:
    """The V work of one UB step of the RoPE kernel on its tables, per element of x (the
    tables hold 1/heads of x's elements): a 2-byte cos and sin each cast to fp32
    (SingleStepProcess), then SinCompute's Muls by -1 of the first half of every sin line."""
    item = itemsize(dtype)
    casts = tuple(vconv_part(dtype, "float32", 1.0 / heads, f" ({name})")
                  for name in ("cos", "sin")) if item == 2 else ()
    return casts + (SeqPart("vmuls (-sin, first half)", "unary", "float32", 4, ELEM,
                            0.5 / heads),)


#: how a head-loop kernel is found: (its geometry from (inputs, UB bytes), its V work once
#: per UB step from (the input dtype, heads per line))
HEAD_LOOPS: dict[str, tuple[Callable[..., HeadLoop | None],
                            Callable[..., tuple[SeqPart, ...]]]] = {
    "rope": (rope_loop, rope_step_parts)}


def _rope_a2(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN runs this RotaryMul as its rotate-half RoPE kernel: an A2 chip, ND data
    whose shapes the kernel's tiling takes (`rope_loop`, with a UB that fits one line)."""
    return (chip_name in RMS_NORM_A2_CHIPS and fmt == "ND"
            and rope_loop(ins, 1 << 30) is not None)


def arg_segment(dtype: str) -> int:
    """Elements per UB tile of CANN's TIK ArgMaxV2 / ArgMinV2 on a long row (arg_common.py
    `_init_data_block`: MAX_SEGMENT_LEN 2048 * 4, three times that for fp16; bf16 is computed
    as fp32)."""
    return 3 * 8192 if dtype == "float16" else 8192


def _arg_long_row_a2(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether an ArgMax / ArgMin runs the long-row mode of CANN's TIK kernel on an A2 / A3
    chip: its reduced axis innermost and longer than one tile (`arg_segment`)."""
    if chip_name not in A2_A3_CHIPS or not ins or fmt != "ND":
        return False
    length, inner = ROW_RULES["axis"](ins, attrs, lambda name: None)
    return inner == 1 and length > arg_segment(ins[0].dtype)


def _arg_row_a2(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether an ArgMax / ArgMin reduces its innermost axis on an A2 / A3 chip in a row of at
    most one tile (`arg_segment`): CANN's TIK kernel's other last-axis modes."""
    if chip_name not in A2_A3_CHIPS or not ins or fmt != "ND":
        return False
    length, inner = ROW_RULES["axis"](ins, attrs, lambda name: None)
    return inner == 1 and length <= arg_segment(ins[0].dtype)


def _arg_row(op_type: str, instr: str) -> OpSequence:
    return OpSequence(
        SEQUENCES[op_type].steps, rows="axis", buffers=1, whole_rows=True, tile=arg_segment,
        note=f"CANN's TIK {op_type}V2 / {op_type}WithValue on rows of at most one tile "
             "(arg_common.py `_do_compute`: TILING_MODE_LAST_LESS_SEGMENT_LEN moves in and "
             "reduces one row at a time, `do_compute_for_last_axis_copy_one_time`; the "
             "shorter-row modes move several rows at once): no loop of these modes has "
             f"`thread_num`, so the tiles are single-buffered; {instr} with each repeat's "
             f"index, a second {instr} over the pairs")


def _arg_long_row(op_type: str, instr: str) -> OpSequence:
    return OpSequence(
        SEQUENCES[op_type].steps, rows="axis", buffers=1, whole_rows=True, tile=arg_segment,
        note=f"CANN's TIK {op_type}V2 on a long row (arg_common.py, "
             "TILING_MODE_LAST_OVER_SEGMENT_LEN): rows bound whole to cores, each row in "
             f"tiles of {arg_segment('float32')} elements ({arg_segment('float16')} fp16) "
             f"loaded one at a time (single-buffered), {instr} with each repeat's index, a "
             f"second {instr} over the pairs; the per-tile merge with the running result "
             "(two small instructions and V->S->V round trips) is not costed: no public "
             "cycle figure")


#: op type -> (when a kernel path applies (inputs, attrs, the main input's format, chip name),
#: its sequence); the first that applies replaces the op's row of SEQUENCES
PATHS: dict[str, tuple[tuple[Callable[..., bool], OpSequence], ...]] = {
    "BNTrainingUpdateGrad": ((_narrow_pair, OpSequence(
        _BN_UPDATE_GRAD, fp32=True, rows="channels", cast_at=1,
        note="TBE bn_training_update_grad: grads and x cast to fp32")),),
    "BNTrainingReduceGrad": ((_narrow_pair, OpSequence(
        _BN_REDUCE_GRAD, fp32=True, rows="channels", cast_at=1,
        note="TBE bn_training_reduce_grad: grads and x cast to fp32, the result back")),),
    "RmsNorm": ((rms_mode("NORMAL"), OpSequence(
        RMS_NORM_NORMAL, fp32=True, rows="gamma", buffers=1, row_tile=1, whole_rows=True,
        recast=True, round_trip=True,
        note="CANN's Ascend C RmsNorm, NORMAL mode (ops-nn rms_norm.h): one row per loop "
             "step, single-buffered queues (BUFFER_NUM = 1), gamma cast to fp32 again for "
             "every row, rstd on the scalar unit: the next row's load waits for the scalar "
             "work after each row's V_S wait where it outlasts the row's remaining vector "
             "steps (its sqrt and divide not costed: no public cycle figure)")),
                (rms_mode("SPLIT_D"), OpSequence(
        SEQUENCES["RmsNorm"].steps, fp32=True, rows="gamma", buffers=1, whole_rows=True,
        row_reads=2,
        note="CANN's Ascend C RmsNorm, SPLIT_D mode (ops-nn rms_norm_split_d.h): a row "
             "longer than the UB factor on one core, read from GM twice in UB-sized chunks "
             "(ComputeFormerPrecision sums x*x, ComputeLatter reads x again for y), "
             "single-buffered queues (rms_norm_base.h BUFFER_NUM = 1)")),
                (rms_mode("MERGE_N"), OpSequence(
        RMS_NORM_MERGE_N, fp32=True, rows="gamma", buffers=1, narrow_slots=2,
        whole_rows=True, row_bursts="rows",
        row_budget=RMS_NORM_MERGE_N_BUDGET, note=MERGE_N_NOTE)),
                (rms_mode("MERGE_N_PERF"), OpSequence(
        RMS_NORM_MERGE_N_PERF, fp32=True, rows="gamma", buffers=1, narrow_slots=2,
        whole_rows=True, row_bursts="rows",
        row_budget=RMS_NORM_MERGE_N_BUDGET,
        note=MERGE_N_NOTE + "; its isPerformance form: the rows' rstd spread by Brcb, one "
             "32-byte block per row")),
                (rms_mode("MIXED"), OpSequence(
        SEQUENCES["RmsNorm"].steps, fp32=True, rows="gamma", whole_rows=True,
        note="CANN's Ascend C RmsNorm on A2 (ops-nn rms_norm_tiling.cpp), mixed dtypes: "
             "whole rows per core, min(rows, AIV cores) cores")),),
    "RmsNormGrad": tuple(
        (rms_grad_mode("ROW", fp16), OpSequence(
            rms_norm_grad_row(fp16), fp32=True, rows="last_gamma", cast_at=1, buffers=1,
            row_tile=1, whole_rows=True, atomic_row=4,
            note=RMS_NORM_GRAD_NOTE + "; rows of more than 640 elements one a loop step, the "
                 "next row's load issued after this one's sum is read back (one slot in "
                 "effect)"))
        for fp16 in (True, False)) + tuple(
        (rms_grad_mode("SMALL_D", fp16), OpSequence(
            rms_norm_grad_small_d(fp16), fp32=True, rows="last_gamma", whole_rows=True,
            row_budget=RMS_NORM_GRAD_SMALL_D_BUDGET, atomic_row=4,
            ub_bytes=lambda dtype, buffers=2: RMS_NORM_GRAD_SMALL_D_UB_BYTES,
            note=RMS_NORM_GRAD_NOTE + "; rows of at most 640 elements, ubFactor = (195584 - "
                 "colAlign x 10) / (colAlign x 24 + 268) a loop step, double-buffered"))
        for fp16 in (True, False)),
    "LayerNormalization": ((layer_norm_cube, OpSequence(
        LAYER_NORM_CUBE, fp32=True, rows="from_axis", stat_width=16, buffers=1,
        row_tile=16,
        note="CANN's cube path (layer_norm_cube): the row sums run on the cube as "
             "x . ones and x . x^T, 2 x L/16 mmads per 16 rows, not simulated on the M "
             "pipe; one 16-row group per tile, single-buffered (its schedule never "
             "enables double buffering)")),
                           (layer_norm_tik_narrow, OpSequence(
        LAYER_NORM_TIK_NARROW, fp32=True, rows="from_axis", cast_at=1, whole_rows=True,
        buffers=1, row_budget=LAYER_NORM_TIK_NARROW_BUDGET, row_reads=2,
        row_align_elems=LAYER_NORM_TIK_ROW_ALIGN, note=LAYER_NORM_TIK_NOTE)),
                           (layer_norm_tik, OpSequence(
        LAYER_NORM_TIK, fp32=True, rows="from_axis", cast_at=1, whole_rows=True,
        buffers=1, row_budget=LAYER_NORM_TIK_BUDGET, row_reads=2,
        row_align_elems=LAYER_NORM_TIK_ROW_ALIGN, note=LAYER_NORM_TIK_NOTE)),
                           (layer_norm_v4_single_read, OpSequence(
        LAYER_NORM_V4_SINGLE_READ, fp32=True, rows="from_axis", buffers=1, whole_rows=True,
        note=LAYER_NORM_V4_NOTE)),
                           (layer_norm_v3, OpSequence(
        LAYER_NORM_V3, fp32=True, rows="from_axis", whole_rows=True, norm=LAYER_NORM_V3_NORM,
        note=LAYER_NORM_V3_NOTE)),),
    "DynamicQuant": DYNAMIC_QUANT_PATHS,
    "RotaryMul": ((_rope_a2, OpSequence(
        _ROPE_HEAD, fp32=True, head_loop="rope",
        note="CANN's rotate-half RoPE kernel (ops-transformer rotary_position_embedding): "
             "lines (tokens) bound whole to cores; per UB step cos and sin loaded and cast "
             "once, then per head one strided load, the sequence and one store, "
             "double-buffered")),),
    "ReduceSum": ((_sum_in_fp32, OpSequence(
        SEQUENCES["ReduceSum"].steps, fp32=True, rows="axes",
        note="TBE reduce_sum_compute (impl/dynamic/reduce_sum.py): float16 cast to fp32 "
             "before the sum, the result cast back")),),
    "Transpose": TRANSPOSE_PATHS,
    "Sigmoid": SIGMOID_PATHS,
    "Gelu": GELU_PATHS,
    "SwiGlu": SWIGLU_PATHS,
    "SwiGluGrad": SWIGLU_GRAD_PATHS,
    "ArgMax": ((_arg_long_row_a2, _arg_long_row("ArgMax", "vcmax")),
               (_arg_row_a2, _arg_row("ArgMax", "vcmax"))),
    "ArgMin": ((_arg_long_row_a2, _arg_long_row("ArgMin", "vcmin")),
               (_arg_row_a2, _arg_row("ArgMin", "vcmin"))),
}


def _fp16_in(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether the op's first input is float16."""
    return bool(ins) and ins[0].dtype == "float16"


#: op type -> (when a path applies, its sequence) for the prebuilt binaries an aclnn call
#: runs (`Lowering.kernel_build` "binary"), looked up before PATHS. aclnn picks a binary by
#: impl mode: with none set by the caller (torch_npu sets none), high_precision wherever the
#: op's binary list holds one (repo-mirror-test/opbase at 313b014,
#: src/nnopbase/composite_op/aclnn_engine/op_kernel.h `OpKernel::GetCurrentImplMode`).
#: RealDiv's list on the A2 holds float16 high_precision binaries (opp/built-in/op_impl/
#: ai_core/tbe/kernel/config/ascend910b/real_div.json, leideng/CANN-8.1.RC1 at 4332a01), whose
#: compute casts both float16 inputs to fp32, broadcasts and divides in fp32 and casts the
#: quotient back (impl/dynamic/real_div.py `real_div_compute`, impl_mode not
#: high_performance); torch's floating Div runs it (aclnnDiv_RealDivAiCore_RealDiv). The
#: small divisor's own cast is not costed (one short vconv a tile).
BINARY_PATHS: dict[str, tuple[tuple[Callable[..., bool], OpSequence], ...]] = {
    "Div": ((_fp16_in, OpSequence(
        SEQUENCES["Div"].steps, fp32=True,
        note="the aclnn binary's high_precision RealDiv (real_div.py real_div_compute): "
             "float16 inputs cast to fp32, divided in fp32, the quotient cast back")),),
}


def sequence_for(op_type: str, ins: Sequence[Value], attrs: dict, fmt: str = "ND",
                 chip_name: str = "", build: str = "") -> OpSequence | None:
    """The op's sequence: for a prebuilt binary (`build` "binary") the first path of
    BINARY_PATHS that applies, else the first kernel path of PATHS that applies, else its
    row of SEQUENCES (None: the registry's cost fields describe it)."""
    for applies, seq in (BINARY_PATHS.get(op_type, ()) if build == "binary" else ()):
        if applies(ins, attrs, fmt, chip_name):
            return seq
    for applies, seq in PATHS.get(op_type, ()):
        if applies(ins, attrs, fmt, chip_name):
            return seq
    return SEQUENCES.get(op_type)


#: the scalar-operand form of binary instructions (x + 2.0: vadds at the unary rate)
_SCALAR_FORM = {"vadd": "vadds", "vsub": "vadds", "vmul": "vmuls", "vmax": "vmaxs",
                "vmin": "vmins"}


# ----------------------------------------------------------------------------- resolution
def vconv_part(src: str, dst: str, elems: float, label: str = "") -> SeqPart:
    """A vconv of `elems` elements (per element of the task) from `src` to `dst`: its repeats
    count 256 bytes of the wider dtype, at the unary rate (module note, Compute dtype)."""
    wide = max(src, dst, key=itemsize)
    return SeqPart(f"vconv {_short(src)}->{_short(dst)}{label}", "unary", wide, itemsize(wide),
                   ELEM, elems)


def vclass_of_registry(opdef: Any, ins: Sequence[Value]) -> str:
    """The chip class of an op's registry `vec_class`; a BINARY op whose other operands have
    one element runs the scalar-operand instructions (vadds/vmuls/vmaxs) at the unary rate."""
    vclass = VEC_CLASS.get(opdef.vec_class, "unary")
    if opdef.vec_class == VecClass.BINARY and _scalar_operands(ins):
        return "unary"
    return vclass


def _scalar_operands(ins: Sequence[Value]) -> bool:
    """Whether every operand but the largest has one element (x + 2.0, Max(x, 0))."""
    if len(ins) < 2:
        return False
    sizes = sorted(v.numel for v in ins)
    return all(k == 1 for k in sizes[:-1])


def derived_steps(opdef: Any, ins: Sequence[Value], outs: Sequence[Value],
                  attrs: dict) -> tuple[Step, ...]:
    """The sequence of an op absent from SEQUENCES, from its registry cost fields:
    `vec_passes` instructions of `vec_class` and its `vec_extra` instructions."""
    vclass = vclass_of_registry(opdef, ins)
    name = f"v{opdef.vec_class.value}"
    if vclass == "unary" and opdef.vec_class == VecClass.BINARY:
        name += "s"     # the scalar-operand form
    steps = [Step(name, vclass, ELEM, opdef.vec_passes(ins, outs, attrs))]
    for extra_class, count in opdef.vec_extra:
        steps.append(Step(f"v{extra_class.value}", VEC_CLASS.get(extra_class, "unary"), ELEM,
                          float(count)))
    return tuple(steps)


def resolve(op_type: str, opdef: Any, ins: Sequence[Value], outs: Sequence[Value],
            attrs: dict, per_task: float, const: Callable[[str], Any] | None = None,
            align_bytes: int = 32, fmt: str = "ND", chip_name: str = "",
            stored: Sequence[Value] | None = None,
            fold_width: int = 0,
            entire_reduce: bool = False,
            build: str = "") -> tuple[list[SeqPart], float, str]:
    """An op's sequence as task parts: `per_task` is the op's largest operand's elements per
    element of the task (1 for a lone op); `fmt` the format its main input is read in and
    `chip_name` the chip (they pick a kernel path, PATHS, from the inputs as stored in GM:
    `stored`, when `ins` are bf16 values widened to the dtype they compute in;
    `fold_width`: see `_fold_part`; `entire_reduce`: its reductions along an innermost axis
    are TBE's "entire_reduce", `SeqPart.entire`; `build`: the kernel build, see
    `sequence_for`). Returns
    (parts, extra UB bytes per task element for its fp32 working buffers, a one-line
    description for `explain`). Over 60
    lines: one walk over the sequence's steps, which share the cast point, the row padding
    and the scalar-operand form among their four shapes."""
    const = const or (lambda name: None)
    vals = [*ins, *outs]
    big = max([v.numel for v in vals] + [1])
    width = max([itemsize(v.dtype) for v in vals] + [1])
    dtype = max(vals, key=lambda v: itemsize(v.dtype)).dtype if vals else "float16"
    seq = sequence_for(op_type, ins if stored is None else stored, attrs, fmt, chip_name,
                       build)
    if seq is None:
        steps = derived_steps(opdef, ins, outs, attrs)
        parts = [SeqPart(s.instr, s.vclass, dtype, width, ELEM, per_task, 0, s.count)
                 for s in steps]
        return parts, 0.0, "vector sequence (from the registry's cost fields): " + \
            ", ".join(_describe(p) for p in parts)
    data = ins[0] if ins else outs[0]
    parts: list[SeqPart] = []
    temp = 0.0
    if seq.conversion:
        parts.append(vconv_part(data.dtype, outs[0].dtype, per_task))
        return parts, 0.0, "vector sequence: " + _describe(parts[0])
    cast = seq.fp32 and data.dtype in _NARROW_FLOATS
    # the data's own dtype before the up-cast (and for ops without fp32 compute)
    base = data.dtype if (seq.fp32 or seq.rows) else dtype
    scale = per_task / big
    in_elems = data.numel * scale
    length, inner = ROW_RULES[seq.rows](ins, attrs, const) if seq.rows else (1, 1)
    length = max(int(length), 1)
    strided = inner > 1

    def pad(item: int) -> float:
        """Rows start on 32-byte UB blocks: every step pays its dtype's row padding."""
        if not seq.rows or strided:
            return 1.0
        if seq.row_align_elems:
            return math.ceil(length / seq.row_align_elems) * seq.row_align_elems / length
        return math.ceil(length * item / align_bytes) * align_bytes / item / length

    rows = in_elems / length
    scalar = _scalar_operands(ins)
    for i, s in enumerate(seq.steps):
        if cast and i == seq.cast_at:
            parts.append(vconv_part(data.dtype, "float32",
                                    in_elems * pad(itemsize(data.dtype))))
            temp = 2 * 4 * in_elems   # two fp32 working buffers per element
        cdtype = "float32" if (cast and i >= seq.cast_at) or s.convert else base
        item = itemsize(cdtype) if (seq.fp32 or seq.rows or s.convert) else width
        if s.shape == REDUCE and strided:
            parts.append(_fold_part(s, cdtype, item, in_elems, length, fold_width,
                                    align_bytes))
        elif s.shape in (REDUCE, _COLUMNS):
            parts.append(SeqPart(s.instr, s.vclass, cdtype, item, s.shape,
                                 in_elems * pad(item), math.ceil(length * pad(item)),
                                 s.count, s.index, entire_reduce, s.halving))
        elif s.shape == LOOP:
            row = math.ceil(length * pad(item))
            call = s.width if s.width > 1 else row
            parts.append(SeqPart(s.instr, s.vclass, cdtype, item, LOOP,
                                 in_elems * pad(item) * call / row, call, s.count))
        elif s.shape == ROW:
            parts.append(SeqPart(s.instr, s.vclass, cdtype, item, ROW,
                                 rows * seq.stat_width * s.width, 0, s.count))
        else:
            instr, vclass = s.instr, s.vclass
            if vclass == "binary" and scalar and not seq.rows:
                instr, vclass = _SCALAR_FORM.get(instr, instr + "s"), "unary"
            grow = s.pad(ins if stored is None else stored, attrs) if s.pad else 1.0
            parts.append(SeqPart(instr, vclass, cdtype, item * s.spread, ELEM,
                                 (in_elems if seq.rows else per_task) * pad(item) * grow, 0,
                                 s.count))
    gamma = (stored if stored is not None else ins)[1:2]
    if seq.recast and gamma and gamma[0].dtype in _NARROW_FLOATS:
        # the row-sized gamma cast up again for every row, before the Mul by it (RmsNorm
        # NORMAL, rms_norm.h ComputeMulGammaCast)
        g = gamma[0].dtype
        parts.insert(len(parts) - 1, vconv_part(g, "float32", in_elems * pad(itemsize(g)),
                                                " (gamma)"))
    if cast and outs[0].dtype in _NARROW_FLOATS:
        out = outs[0]
        parts.append(vconv_part("float32", out.dtype,
                                out.numel * scale * pad(itemsize(out.dtype))))
    text = ("vector sequence" + (f" ({data.dtype} computed in float32)" if cast else "")
            + (f", rows of {length}" + (f" strided by {inner}" if strided else "")
               if seq.rows else "") + ": " + (", ".join(_describe(p) for p in parts) or "none")
            + (f"; {seq.note}" if seq.note else ""))
    return parts, temp, text


def _fold_part(s: Step, dtype: str, item: int, elems: float, length: int, width: int,
               align_bytes: int) -> SeqPart:
    """A reduction over a strided axis of `length` rows as element-wise folds of its row
    slices (vmax / vadd), (L - 1) / L passes over the data: without a `width`, one pass at the
    binary rate; with one, a separate instruction per reduced row over the `width` inner
    elements that row holds in the UB (padded to a 32-byte block), each waiting out the one
    before it, since every row's fold reads the accumulator the previous one wrote (a LOOP
    part: TBE's emitter for such a reduction, `vec_reduce_nlst_axis`, issues one vmax / vadd
    per iteration of the reduced axis)."""
    fold = "vmax" if s.vclass == "reduce_max" else "vadd"
    count = s.count * (length - 1) / length
    if not width:
        return SeqPart(f"{fold} (fold of {s.instr} over a strided axis)", "binary", dtype,
                       item, ELEM, elems, 0, count)
    row = math.ceil(width * item / align_bytes) * align_bytes // item
    return SeqPart(f"{fold} (fold of {s.instr}, one per reduced row of {row})", "binary",
                   dtype, item, LOOP, elems * row / width, row, count)


def _short(dtype: str) -> str:
    return {"float16": "f16", "float32": "f32", "bfloat16": "bf16"}.get(dtype, dtype)


def _describe(p: SeqPart) -> str:
    tag = {REDUCE: f" [reduce tree at the {p.vclass} rate]", ROW: " [per row]",
           _COLUMNS: " [one per column block of the row]",
           LOOP: " [one call per row]"}.get(p.shape, "")
    n = f"{p.count:g} x " if p.count != 1 else ""
    return f"{n}{p.instr}{tag}"


def sequence_text(parts: Sequence[SeqPart]) -> str:
    """The parts as one line (instruction names in order)."""
    return ", ".join(_describe(p) for p in parts)


__all__ = ["BINARY_PATHS", "ELEM", "HEAD_LOOPS", "HeadLoop", "LOOP", "LAYER_NORM_CUBE_CHIPS",
           "LAYER_NORM_CUBE_ROWS",
           "LAYER_NORM_TIK_CHIPS", "LAYER_NORM_TIK_MIN_ROW", "LAYER_NORM_TIK_ROW_ALIGN",
           "LAYER_NORM_V4_CHIPS", "PATHS",
           "REDUCE", "RMS_NORM_A2_CHIPS", "rms_norm_mode",
           "REPEAT_BYTES", "ROW", "SEQUENCES", "OpSequence", "SeqPart", "Step",
           "VEC_CLASS", "arg_segment", "derived_steps", "instr_cycles", "part_cycles", "part_steps",
           "reduce_row_cycles", "repeat_cycles", "resolve", "rope_loop", "sequence_for",
           "sequence_text", "vclass_of_registry", "vconv_part"]
