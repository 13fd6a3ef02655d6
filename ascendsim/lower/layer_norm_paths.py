"""CANN's LayerNorm kernel paths, picked by chip, format, dtype and shape where CANN picks
them: on the first-generation 910 (and the 310P) TBE layer_norm.py's cube path for fp16
FRACTAL_NZ rows of the widths it lists and the TIK kernel of layer_norm_tik.py for ND data; on
the A2 / A3 aclnnLayerNorm's LayerNormV4 SingleRead template and TBE's LayerNormV3 for every
other ND case. vector_seq.PATHS turns them into `OpSequence`s; the DSL sequence
(vector_seq.SEQUENCES) covers the rest."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..ir.tensor import Value
from .seq_types import A2_A3_CHIPS, NARROW_FLOATS, NormSchedule
from .seq_types import conversion as _conv
from .seq_types import elem as _e
from .seq_types import per_row as _w
from .seq_types import reduction as _r
from .seq_types import row_loop as _loop
from .vector_rows import norm_axis

#: CANN's LayerNorm on fp16 FRACTAL_NZ data where the reductions run on the cube
#: (ops/built-in/tbe/impl/layer_norm.py `_check_vector_to_cube` -> tbe/dsl/compute/
#: layer_norm_cube.py, scheduled by static_schedule/layer_norm_cube_schedule.py): per 16 rows
#: the cube computes sum(x) as x . ones and sum(x*x) as the diagonal of x . x^T (fp16 in, fp32
#: in L0C, 2 * L/16 fractal mmads); the vector casts x to fp32 (cast_x_ub), moves the two
#: 16x16 sums from L0C (on coupled chips L0C -> UB is a V-pipe move), derives mean and variance
#: and rsqrt = exp(-0.5 * ln(var + eps)) on those 16-wide statistics (nz_mean, xx_sum_cub
#: broadcast, xx_sum, mean_mul, nz_var, var_add_eps, vlog, var_log_mul, vexp), casts mean and
#: variance to fp16, then makes four full-shape fp32 passes: x - mean, * rsqrt, * gamma,
#: + beta (x_sub_mean, mean_mul_var, scale_mul, scale_add; the statistics are read with a
#: stride, not materialised), and casts the result back (cast_res). The schedule tiles the UB
#: by one 16-row group (`_get_tiling`: CUB_matrix [k, 1, 16, 16]), binds row groups to cores
#: (block_dim = min(groups, CORE_NUM)) and defines `_double_buffer` but never calls it, so
#: each group's load, vector work and store run one after another (`buffers=1`, `row_tile=16`).
LAYER_NORM_CUBE = (
    _w("vmov (L0C->UB: sum x)"), _w("vmuls"), _w("vmov (L0C->UB: sum x*x)"),
    _w("vbrcb (diagonal)"), _w("vmuls"), _w("vmul", "binary"), _w("vsub", "binary"),
    _w("vadds"), _w("vln", "exp"), _w("vmuls"), _w("vexp", "exp"),
    _w("vconv f32->f16 (mean)"), _w("vconv f32->f16 (variance)"),
    _e("vsub", "binary"), _e("vmul", "binary"), _e("vmul", "binary"), _e("vadd", "binary"))

#: chips whose CANN short SoC version takes the LayerNorm cube path (`_check_vector_to_cube`
#: lists Ascend910 - every first-generation 910 SoC, 910A/910B/910ProA/910ProB - and Ascend310P,
#: with 610 and 310B that ascendsim has no chip for; neither the A2 "910B" (Ascend910B1..B4)
#: nor the Ascend310)
LAYER_NORM_CUBE_CHIPS = frozenset({"ascend910", "ascend910b_gen1", "ascend310p"})
#: the row widths the cube path takes: `_check_vector_to_cube` lists ori_shape[-1] in (1024, 768,
#: 96, 384, 192, 128, 512, 256) and the NZ shape[-4] (width / 16) in (64, 48, 6, 12, 24, 16, 32),
#: which leaves 128 out (8 is not in the second list); earlier copies list 1024 and 768 only
LAYER_NORM_CUBE_ROWS = frozenset({96, 192, 256, 384, 512, 768, 1024})


def layer_norm_cube(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN runs this LayerNorm on its cube path (`_check_vector_to_cube`, impl_mode
    high_performance, CANN's default): FRACTAL_NZ float16 data of rank 2 or 3 normalised over
    its last axis only, that axis one of the listed widths, on an Ascend910-class chip."""
    if chip_name not in LAYER_NORM_CUBE_CHIPS or fmt != "FRACTAL_NZ" or not ins:
        return False
    x = ins[0]
    shape = [int(d) for d in x.shape]
    return (x.dtype == "float16" and len(shape) in (2, 3)
            and norm_axis(attrs.get("axis", -1), len(shape)) == len(shape) - 1
            and shape[-1] in LAYER_NORM_CUBE_ROWS)


#: CANN's LayerNorm on ND data on a first-generation 910: layer_norm.py runs the TIK kernel of
#: layer_norm_tik.py whenever `if_tik_support` holds, not the DSL sequence of SEQUENCES
#: (ops/built-in/tbe/impl/layer_norm.py and layer_norm_tik.py, public canndev copy
#: dengguojie/vue-element-admin). Its SplitN mode (a row fits half the UB) loads a tile of whole
#: rows and works in fp32: zero the tile (vector_dup, in the input dtype), cast an fp16 tile up,
#: per row x*x and two vec_reduce_add (sum x, sum x*x); on the tile's per-row values E(x),
#: E(x^2), E(x)^2, the variance, |var| (vmuls, vmuls, vmul, vsub, vabs), then -mean and
#: 1/sqrt(var + eps) (vmuls, vadds, vsqrt, vector_dup, vdiv); per row x + (-mean), * rstd
#: (vadds, vmuls with the two values read into scalar registers); x*x and these row passes are
#: TIK `for_range` loops over the tile's rows, one vector call per row (LOOP steps: the scalar
#: unit issues each, and on a chip with a dependent-step latency each waits out the one
#: before); gamma and beta are loaded one row long and, for fp16 data, cast up over the whole
#: tile's buffer (`exec_vec_cmd` counts the buffer, batch_num x data_num elements); per row
#: * gamma, + beta; the result cast back. Rows per core ceil(rows / cores)
#: (`_mode_compute`). The loop over a core's row tiles runs two TIK threads (`thread_num = 2`,
#: each tile on its own half of the UB: `LAYER_NORM_TIK_BUDGET`), but a tile's sums end on the
#: scalar unit: TIK's vec_reduce_add over more than one repeat (tik_reduce_api `_second_add`,
#: `_final_add`) moves the last vcadd's result through UB with `set_as`, a scalar read that
#: waits for the vector pipe, twice a row, and `_stand_data` reads each row's mean and rstd
#: the same way. A wait on the scalar pipe blocks the instructions queued behind it (SetFlag /
#: WaitFlag, Ascend C API reference for the Atlas training series), so the next tile's load,
#: issued after this tile's instructions, starts only once this tile's sums are back: one slot
#: in effect (`buffers=1`), as in RmsNormGrad's long rows on the A2. A row too long for half
#: the UB (SplitD) is read from GM twice: the sums pass, then the normalising pass. The round
#: trips themselves (a V -> S wait and scalar UB accesses, several a row) are not costed: no
#: public cycle figure.
_TIK_STATS = (
    _w("vmuls (E(x))"), _w("vmuls (E(x^2))"), _w("vmul", "binary"), _w("vsub", "binary"),
    _w("vabs"), _w("vmuls (-mean)"), _w("vadds (+eps)"), _w("vsqrt", "sqrt"),
    _w("vector_dup (1)"), _w("vdiv", "div"))
LAYER_NORM_TIK = (
    _e("vector_dup (zero the tile)", "unary"), _loop("vmul (x*x)", "binary"),
    _r("vcadd (sum x)"), _r("vcadd (sum x*x)"), *_TIK_STATS,
    _loop("vadds (-mean)", "unary"), _loop("vmuls (rstd)", "unary"),
    _loop("vmul (gamma)", "binary"), _loop("vadd (beta)", "binary"))
#: fp16 data: gamma's and beta's casts run over the whole tile buffer (a vconv's repeats
#: count the fp32 side: lower/vector_seq.py `vconv_part`)
LAYER_NORM_TIK_NARROW = (
    *LAYER_NORM_TIK[:-2], _conv("vconv f16->f32 (gamma, whole tile)"),
    LAYER_NORM_TIK[-2], _conv("vconv f16->f32 (beta, whole tile)"),
    LAYER_NORM_TIK[-1])
#: the TIK kernel's rows per loop (`_get_each_loop_batch_num`, as `lower.vector.rows_per_loop`
#: takes it over the whole UB): each thread's half UB less 4 x (32 - 4) bytes, over
#: (2 x 4 + 4 / 64) bytes per 64-aligned column (x and x*x in fp32, the reduce work tensor),
#: plus the input dtype's bytes for 2-byte data, and 4 x 4 bytes per row; both halves counted
LAYER_NORM_TIK_BUDGET = (2 * 4 * (32 - 4), 2 * (2 * 4 + 4 / 64), 2 * 4 * 4)
LAYER_NORM_TIK_NARROW_BUDGET = (2 * 4 * (32 - 4), 2 * (2 * 4 + 4 / 64 + 2), 2 * 4 * 4)
#: chips whose CANN SoC version is "Ascend910" (if_tik_support `support_version`; at most 32
#: AI Cores): the first-generation 910 parts
LAYER_NORM_TIK_CHIPS = frozenset({"ascend910", "ascend910b_gen1"})
#: the shortest normalised row the TIK kernel takes (if_support_shape `min_support_num`)
LAYER_NORM_TIK_MIN_ROW = 128
#: the TIK kernel's UB rows are aligned to one fp32 repeat, 64 elements, in both the fp32 and
#: the input-dtype buffers (`data_num_align = _get_align_num(data_num, ub_repeat_data_num)`)
LAYER_NORM_TIK_ROW_ALIGN = 64


def layer_norm_tik(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN runs this LayerNorm as its TIK kernel (layer_norm_tik.py `if_tik_support`):
    a first-generation 910, ND data, gamma and beta of x's dtype and of the normalised shape,
    epsilon > 0, a normalised row of at least 128 elements, and not a single row whose length
    is a multiple of 16 (that one stays on the DSL kernel)."""
    if chip_name not in LAYER_NORM_TIK_CHIPS or fmt != "ND" or len(ins) < 3:
        return False
    x, gamma, beta = ins[0], ins[1], ins[2]
    if gamma is None or beta is None or not x.shape:
        return False
    shape = [int(d) for d in x.shape]
    axis = norm_axis(attrs.get("axis", -1), len(shape))
    row = math.prod(shape[axis:])
    rows = math.prod(shape[:axis])
    return (gamma.dtype == x.dtype == beta.dtype
            and [int(d) for d in gamma.shape] == shape[axis:]
            and [int(d) for d in beta.shape] == shape[axis:]
            and float(attrs.get("epsilon", 1e-5)) > 0
            and row >= LAYER_NORM_TIK_MIN_ROW and not (rows == 1 and row % 16 == 0))


def layer_norm_tik_narrow(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """The TIK kernel on 2-byte data (its gamma/beta casts over the whole tile)."""
    return layer_norm_tik(ins, attrs, fmt, chip_name) and ins[0].dtype in NARROW_FLOATS


#: what `explain` adds about the TIK kernel path
LAYER_NORM_TIK_NOTE = (
    "CANN's TIK kernel (layer_norm_tik.py): whole rows per core, tiles of rows on half the "
    "UB each (two TIK threads), but the next tile's load issued only after this tile's row "
    "sums are read back on the scalar unit (one slot in effect); the per-row V->S round "
    "trips themselves are not costed (no public cycle figure)")



#: CANN's LayerNormV4 SingleRead template on the A2 chips (Ascend C; hicann ops-nn
#: norm/layer_norm_v4, public copy jbgztxdy/ops-nn): aclnnLayerNorm routes to LayerNormV4 on
#: SocVersion ASCEND910B / ASCEND910_93 only for bf16 x with bf16 gamma over 1024 or 4096
#: elements (op_host/op_api/aclnn_layer_norm.cpp `IsV4SocCheck`; every other fp16/fp32/bf16
#: case goes to LayerNormV3, below), and
#: the SingleRead template (priority 1000) takes it (layer_norm_v4_single_read_tiling.cpp: rows
#: <= cores: one row per core; else all cores, tiles of min(UB rows, 32) rows).
#: op_kernel/layer_norm_v4_single_read.h per tile: cast to fp32, x * 1/n over the tile; per row
#: ReduceSum, the sum read on the scalar unit (GetAccVal), x - mean; (x - mean)^2 and * 1/n over
#: the tile; per row ReduceSum, rstd = 1/sqrt(var + eps) on the scalar unit, * rstd; per row
#: * gamma, + beta (gamma and beta loaded and cast one row long inside the loops: not costed,
#: two rows of up to 32); cast back. x - mean, * rstd, * gamma and + beta are calls in for
#: loops over the tile's rows, one a row (LOOP steps). Its queues have depth 1
#: (`InitBuffer(inQueueX, 1, ...)`): a tile's load, vector work and store run one after
#: another. Modelled: whole rows per core (min(rows, cores) cores), tiles as the UB allows,
#: single-buffered. Off: the template's
#: tiles of min(UB rows, 32) rows handed out whole to cores (64 rows of 4096 run 13 tiles of 5
#: rows on 13 of 40 cores), and the two per-row V -> S -> V round trips (no public cycle figure).
LAYER_NORM_V4_SINGLE_READ = (
    _e("vmuls (x/n)", "unary"), _r("vcadd (ReduceSum: mean)"), _loop("vadds (-mean)", "unary"),
    _e("vmul (square)", "binary"), _e("vmuls (/n)", "unary"), _r("vcadd (ReduceSum: var)"),
    _loop("vmuls (rstd)", "unary"), _loop("vmul (gamma)", "binary"),
    _loop("vadd (beta)", "binary"))
#: chips of CANN SocVersion ASCEND910B (the A2 910B1..B4) and ASCEND910_93 (the A3 910C), the
#: two `IsV4SocCheck` allows V4 on (ops-nn aclnn_layer_norm.cpp)
LAYER_NORM_V4_CHIPS = A2_A3_CHIPS
#: the normalised sizes `IsV4SocCheck` sends to the SingleRead template (MIN/MAX_V4_REDUCE_AXIS)
LAYER_NORM_V4_ROWS = frozenset({1024, 4096})
#: what `explain` adds about the SingleRead path
LAYER_NORM_V4_NOTE = (
    "CANN's Ascend C LayerNormV4 SingleRead template (ops-nn layer_norm_v4_single_read.h): "
    "whole rows per core, single-buffered queues, per-row ReduceSum with mean and rstd on the "
    "scalar unit (the per-row V->S->V round trips are not costed: no public cycle figure)")


def layer_norm_v4_single_read(ins: Sequence[Value], attrs: dict, fmt: str,
                              chip_name: str) -> bool:
    """Whether aclnnLayerNorm runs this LayerNorm as LayerNormV4's SingleRead template: an A2
    chip, ND bf16 x with bf16 gamma (as stored), normalised over 1024 or 4096 elements."""
    if chip_name not in LAYER_NORM_V4_CHIPS or fmt != "ND" or len(ins) < 2 or ins[1] is None:
        return False
    x, gamma = ins[0], ins[1]
    if not x.shape or not x.dtype == gamma.dtype == "bfloat16":
        return False
    shape = [int(d) for d in x.shape]
    return math.prod(shape[norm_axis(attrs.get("axis", -1), len(shape)):]) in LAYER_NORM_V4_ROWS

#: CANN's LayerNormV3 on the A2 / A3, every ND case `IsV4SocCheck` does not send to V4: the TBE
#: DSL kernel impl/dynamic/layer_norm_v3.py (public copy leideng/CANN-8.1.RC1 at 4332a01; the
#: Ascend C LayerNormV3 of ops-nn is registered for the 950 and 350 only), which
#: aclnnLayerNorm calls in high-precision mode (ops-nn aclnn_layer_norm.cpp
#: `LayerNormV3WithImplMode`). `layer_norm_v3_compute`: fp16 and bf16 cast to fp32 with gamma
#: and beta; x * 1/n, reduce_sum (mean); broadcast, x - mean, square, * 1/n, reduce_sum
#: (variance); on the per-row variance + eps, sqrt, 1 / . (rstd); broadcast, * rstd, * gamma,
#: + beta; cast back. A NORM-pattern kernel (classify(..., OpPatternMode.NORM)): rows bound to
#: cores, and a row over its UB budget takes the workspace schedule, where x - mean, read on
#: both sides of the variance reduction, goes to a GM workspace (`NormSchedule`).
LAYER_NORM_V3 = (
    _e("vmuls (x/n)", "unary"), _r("vcadd (mean)"), _e("vbrcb (mean)", "unary"),
    _e("vsub (x - mean)", "binary"), _e("vmul (square)", "binary"), _e("vmuls (/n)", "unary"),
    _r("vcadd (variance)"), _w("vadds (+eps)"), _w("vsqrt", "sqrt"), _w("vdiv (1/sqrt)", "div"),
    _e("vbrcb (rstd)", "unary"), _e("vmul (rstd)", "binary"), _e("vmul (gamma)", "binary"),
    _e("vadd (beta)", "binary"))
#: LayerNormV3's NORM budget and workspace traffic: x read by the mean stage and by x - mean
#: (an input is re-read, not kept), x - mean written to the workspace once and read by the
#: variance stage and the output stage (norm_tilingcase `find_workspace_tensor`: a tensor
#: consumed on both sides of a reduce whose producers hold a reduce or broadcast). The live row
#: tensors (x - mean, the broadcast statistic, the product and gamma or beta: 4) and the
#: scratch of the two fp32 sums (2 x 4096 B, as `_reduce_sum_space` gives one) are read off the
#: compute graph, not from a log; they decide only rows of about 11-15 K fp32 elements.
LAYER_NORM_V3_NORM = NormSchedule(live=4, temp_bytes=2 * 4096, input_reads=2, ws_reads=2)
#: what `explain` adds about the V3 path
LAYER_NORM_V3_NOTE = (
    "CANN's TBE LayerNormV3 (layer_norm_v3.py, high precision as aclnnLayerNorm calls it): "
    "rows bound to cores, rstd per row; a row over the UB budget keeps x - mean in a GM "
    "workspace (x read twice, the workspace written once and read twice)")


def layer_norm_v3(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether aclnnLayerNorm runs this LayerNorm as LayerNormV3's TBE kernel: an A2 / A3 chip,
    ND data (the V4 SingleRead cases are taken before it)."""
    return chip_name in LAYER_NORM_V4_CHIPS and fmt == "ND" and bool(ins)


__all__ = ["LAYER_NORM_CUBE", "LAYER_NORM_CUBE_CHIPS", "LAYER_NORM_CUBE_ROWS", "LAYER_NORM_TIK",
           "LAYER_NORM_TIK_BUDGET", "LAYER_NORM_TIK_CHIPS", "LAYER_NORM_TIK_MIN_ROW",
           "LAYER_NORM_TIK_NARROW", "LAYER_NORM_TIK_NARROW_BUDGET",
           "LAYER_NORM_TIK_NOTE", "LAYER_NORM_TIK_ROW_ALIGN", "layer_norm_cube", "layer_norm_tik",
           "layer_norm_tik_narrow", "LAYER_NORM_V4_CHIPS", "LAYER_NORM_V4_NOTE",
           "LAYER_NORM_V4_ROWS", "LAYER_NORM_V4_SINGLE_READ", "layer_norm_v4_single_read",
           "LAYER_NORM_V3", "LAYER_NORM_V3_NORM", "LAYER_NORM_V3_NOTE", "layer_norm_v3"]
