"""CANN's Ascend C RmsNorm and RmsNormGrad on the A2 and A3 (ops-nn norm/rms_norm,
norm/rms_norm_grad) as kernel paths of lower/vector_seq.py: which mode each tiling picks
(`rms_norm_mode`, `rms_norm_grad_mode`), each mode's vector steps and its tiling budget.
vector_seq builds the OpSequences of its PATHS from them, as it does from layer_norm_paths.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir.tensor import Value, itemsize
from .seq_types import A2_A3_CHIPS
from .seq_types import NARROW_FLOATS as _NARROW_FLOATS
from .seq_types import column_blocks as _cols
from .seq_types import conversion as _conv
from .seq_types import elem as _e
from .seq_types import per_row as _w
from .seq_types import reduction as _r
from .seq_types import row_loop as _loop

#: the chips whose RmsNorm is the Ascend C kernel of ops-nn norm/rms_norm: the A2 and A3 (the
#: first-generation 910 and the 910_95 take other branches of its tiling)
RMS_NORM_A2_CHIPS = A2_A3_CHIPS
#: rms_norm_tiling.cpp (same-dtype branch): rows up to SMALL_REDUCE_NUM aligned elements take
#: MERGE_N on the 910B; a row longer than UB_FACTOR_B16 / UB_FACTOR_B32 elements (by x's dtype
#: as stored: fp16 and bf16 2 bytes) is split (SPLIT_D); the rows between take NORMAL
RMS_NORM_SMALL_REDUCE = 2000
RMS_NORM_UB_FACTOR = {2: 12288, 4: 10240}
#: rms_norm_tiling.cpp isPerformance (MERGE_N's Brcb form): x of rank 2 with at most 512 rows,
#: or of rank 3 with dims 0 and 1 at most 512 and 8; gamma of rank 1; rows of at most 5120;
#: fp16 or bf16 (PERFORMANC_DIM_ONE_MAX, PERFORMANC_DIM_TWO_MAX, PERFORMANC_DIM_THREE_MAX)
RMS_NORM_PERF_DIMS = (512, 8)
RMS_NORM_PERF_COLS = 5120
#: MERGE_N rows per UB loop: rowFactor = (UB - UB_USED) / (numColAlign * 16 + 260)
RMS_NORM_MERGE_N_BUDGET = (1024, 16, 260)


def rms_norm_mode(ins: Sequence[Value], fmt: str, chip_name: str) -> str:
    """The mode CANN's Ascend C RmsNorm runs in on an A2 chip (ops-nn rms_norm_tiling.cpp
    `Tiling4RmsNorm`, same-dtype branch), from x and gamma as stored: "MERGE_N" (the row's
    32-byte-aligned length at most SMALL_REDUCE_NUM, 2000), "MERGE_N_PERF" (MERGE_N with the
    isPerformance Brcb form), "NORMAL" (up to the UB factor: 12288 elements for 2-byte
    dtypes, 10240 for fp32), "SPLIT_D" (longer); for the mixed-dtype branch (fp16/bf16 x, fp32
    gamma) "MERGE_N" as well, else "MIXED" (its NORMAL, SINGLE_ROW and SPLIT_D modes, which
    it picks by UB budget, are not told apart); "" off A2, off ND or without gamma."""
    if chip_name not in RMS_NORM_A2_CHIPS or fmt != "ND" or len(ins) < 2:
        return ""
    x, gamma = ins[0], ins[1]
    item = itemsize(x.dtype)
    cols = int(gamma.numel)
    if x.dtype != gamma.dtype or item not in RMS_NORM_UB_FACTOR:
        # CalMixDtypeTiling: MERGE_N (never the isPerformance form) up to SMALL_REDUCE_NUM
        # elements aligned to 16; the UB-budget modes past it
        mixed = x.dtype in _NARROW_FLOATS and gamma.dtype == "float32"
        return "MERGE_N" if mixed and -(-cols // 16) * 16 <= RMS_NORM_SMALL_REDUCE else "MIXED"
    per_block = 32 // item
    col_align = -(-cols // per_block) * per_block
    if col_align > RMS_NORM_SMALL_REDUCE:
        return "NORMAL" if col_align <= RMS_NORM_UB_FACTOR[item] else "SPLIT_D"
    shape = [int(d) for d in x.shape]
    dims_ok = (len(shape) == 2 and shape[0] <= RMS_NORM_PERF_DIMS[0]) or (
        len(shape) == 3 and shape[0] <= RMS_NORM_PERF_DIMS[0]
        and shape[1] <= RMS_NORM_PERF_DIMS[1])
    perf = (dims_ok and len(gamma.shape) == 1 and cols <= RMS_NORM_PERF_COLS
            and x.dtype in _NARROW_FLOATS)
    return "MERGE_N_PERF" if perf else "MERGE_N"


def rms_mode(*modes: str) -> Callable[..., bool]:
    """A PATHS condition: the RmsNorm runs in one of `modes` (`rms_norm_mode`)."""
    def applies(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
        return rms_norm_mode(ins, fmt, chip_name) in modes
    return applies


#: RmsNorm NORMAL mode (ops-nn norm/rms_norm/op_kernel/rms_norm.h `KernelRmsNorm`): per row,
#: CopyIn -> Cast to fp32 -> Mul x*x -> ReduceSumHalfInterval (halving Adds, one
#: WholeReduceSum) -> V_S flag, rstd = 1/sqrt(sum/n + eps) on the scalar unit, S_V flag ->
#: Muls by rstd -> Cast gamma to fp32 (every row: ComputeMulGammaCast, `recast`) -> Mul gamma
#: -> Cast back -> CopyOutY; queues of depth BUFFER_NUM = 1 (rms_norm_base.h). The rstd
#: arithmetic is scalar, not vector work.
RMS_NORM_NORMAL = (_e("vmul", "binary"), _r("vcadd", halving=True), _e("vmuls", "unary"),
                    _e("vmul", "binary"))
#: RmsNorm MERGE_N mode (rms_norm_merge_n.h `KernelRmsNormMergeN::Compute`), per UB loop of
#: rowFactor rows: Cast x, Mul x*x over every row, ReduceSumMultiN (reduce_common.h: a
#: Duplicate of 64 zeros a row, then a for loop of one Add per 64-column block of the row, each
#: over all the rows (one repeat a row) with a PipeBarrier<PIPE_V> after it, then one
#: WholeReduceSum of a repeat a row: ceil(numCol / 64) + 2 dependent instructions, a
#: `column_blocks` step), then on the rows' values Muls 1/n, Adds eps, Sqrt, Duplicate 1, Div;
#: the rstd spread back over the rows (the BroadCast API to [rows, numColAlign]; on v220
#: broadcast_v220_impl.h `TwoDimBroadCastLastDimAlign220`: a Brcb of each row's value to a
#: 32-byte block, a barrier, a Copy to the rows), Mul x*rstd, Mul gamma (broadcast to
#: rowFactor rows once per core), Cast back; no scalar round trip
_MERGE_N_HEAD = (_e("vmul", "binary"), _w("vdup", width=64), _cols("vadd (column blocks)"),
                 _w("vcadd (whole reduce)", "reduce", width=64), _w("vmuls"), _w("vadds"),
                 _w("vsqrt", "sqrt"), _w("vdup"), _w("vdiv", "div"))
RMS_NORM_MERGE_N = (*_MERGE_N_HEAD, _w("vbrcb", width=8), _e("vcopy (rstd to rows)", "unary"),
                     _e("vmul", "binary"), _e("vmul", "binary"))
#: Its queues have depth 1 (rms_norm_base.h BUFFER_NUM = 1), but for fp16/bf16 x the input slot
#: is freed right after the Cast (inQueueX.FreeTensor) and no V_S wait stops the scalar unit
#: within a loop, so the next loop's CopyIn overlaps this one's compute and the output slot is
#: awaited only by the final Cast: two slots in effect (`narrow_slots`); fp32 x is held until
#: the Mul by rstd, near the end: one. (NORMAL keeps one for every dtype: its scalar unit waits
#: for each row's ReduceSum (V_S) before it issues the rest of the row, the next CopyIn among it.)
#: its isPerformance form: Brcb writes each row's rstd to one 32-byte block (doPerformanceRstd),
#: the Muls by rstd and by gamma read those blocks and gamma with repeat strides (repeatByRow,
#: `mulRepeat`: a for loop of one Mul per 64-column block over all the rows, a barrier after
#: each: `column_blocks` steps)
RMS_NORM_MERGE_N_PERF = (*_MERGE_N_HEAD, _w("vbrcb (rstd)", width=8),
                          _cols("vmul (by rstd)"), _cols("vmul (by gamma)"))
MERGE_N_NOTE = ("CANN's Ascend C RmsNorm, MERGE_N mode (ops-nn rms_norm_merge_n.h): rowFactor "
                 "= (UB - 1024) / (numColAlign x 16 + 260) rows per loop step, each vector "
                 "instruction over all of them, rstd on the vector unit; queues of depth 1 "
                 "(rms_norm_base.h BUFFER_NUM = 1), x's slot freed after its Cast for fp16/bf16 "
                 "(the next load overlaps the compute); whole rows per core, min(rows, AIV cores) "
                 "cores")


#: RmsNormGrad's tiling on the A2 (ops-nn norm/rms_norm_grad/op_host/rms_norm_grad_tiling.cpp
#: `Tiling4RmsNormGrad`, jbgztxdy/ops-nn at 23a53ff; the same split in hicann/ops-nn at de4ef03):
#: rows of gamma's length up to UB_SPLIT_N_MAX_COLS take tiling key 1 (UB_SPLIT_N), whose
#: kernel on DAV_2201 is RmsNormGradSplitNHighPrecision; rows whose aligned length is at most
#: SMALL_D_MAX_COLS take its ComputeSmallD branch, the rest its one-row Compute; longer rows
#: take key 2 (split D, not modelled: the registry's cost fields). Rows bind to cores in
#: blocks of ceil(rows / cores).
RMS_NORM_GRAD_SPLIT_N_MAX_COLS = 6080
RMS_NORM_GRAD_SMALL_D_MAX_COLS = 640
#: CalcSmallDBufferSize: ubFactor = (195584 - colAlign * 10) / (colAlign * 24 + 268) rows per
#: UB loop (195584 = the A2's 196608-byte UB less 1024)
RMS_NORM_GRAD_SMALL_D_BUDGET = (1024, 24, 268, 10)
#: its UB bytes per element of dx: the dy, x and dx queues, two slots each, sized in fp32
#: (InitInputQue / InitOutputQue: ubFactor * colValAlign * sizeof(float) a slot, any dtype)
RMS_NORM_GRAD_SMALL_D_UB_BYTES = 2 * 3 * 4


def rms_norm_grad_mode(ins: Sequence[Value], fmt: str, chip_name: str) -> str:
    """The branch CANN's RmsNormGrad (dy, x, rstd, gamma) runs on an A2 chip: "SMALL_D"
    (ComputeSmallD: rowFactor rows a UB loop), "ROW" (Compute: one row a loop) or "" (off
    the A2, off ND, split D, or dy not fp16 / bf16 / fp32)."""
    if chip_name not in RMS_NORM_A2_CHIPS or fmt != "ND" or len(ins) < 4:
        return ""
    if ins[0].dtype not in (*_NARROW_FLOATS, "float32"):
        return ""
    cols = max(int(ins[-1].numel), 1)
    if cols > RMS_NORM_GRAD_SPLIT_N_MAX_COLS:
        return ""
    per_block = 32 // itemsize(ins[0].dtype)
    return "SMALL_D" if -(-cols // per_block) * per_block <= RMS_NORM_GRAD_SMALL_D_MAX_COLS \
        else "ROW"


def rms_grad_mode(mode: str, fp16: bool) -> Callable[..., bool]:
    """A PATHS condition: RmsNormGrad runs `mode` (`rms_norm_grad_mode`) on fp16 data
    (`fp16`) or on bf16 / fp32 data."""
    def applies(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
        return rms_norm_grad_mode(ins, fmt, chip_name) == mode and \
            (ins[0].dtype == "float16") == fp16
    return applies


def _x_cast(fp16: bool) -> tuple:
    """x's own Cast to fp32 on fp16 data (dy's is the sequence's `fp32` cast; bf16 values
    are cast by lower/bf16.py, each input and output; fp32 data has none)."""
    return (_conv("vconv f16->f32 (x)"),) if fp16 else ()


def rms_norm_grad_row(fp16: bool) -> tuple:
    """RmsNormGrad's one-row Compute (rms_norm_grad_split_n_high_precision.h, jbgztxdy/ops-nn
    at a9ca10d; the same in CANN 8.1.RC1's shipped kernel): per row, Cast x, Muls x by rstd,
    Cast dy, Mul dy * x^, Add into dgamma, Mul dy by gamma, Mul by x^, the row sum
    (ReduceSumHalfInterval: halving Adds, one WholeReduceSum), Muls x^ by the mean, Sub, Muls
    by rstd, Cast back. rstd and the sum reach the scalar unit by GetValue after a V_S wait
    (the round trips are not costed: no public cycle figure)."""
    return (*_x_cast(fp16), _e("vmuls", "unary"), _e("vmul", "binary"),
            _e("vadd (dgamma)", "binary"), _e("vmul", "binary"), _e("vmul", "binary"),
            _r("vcadd", halving=True), _e("vmuls", "unary"), _e("vsub", "binary"),
            _e("vmuls", "unary"))


def rms_norm_grad_small_d(fp16: bool) -> tuple:
    """RmsNormGrad's ComputeSmallD (the same file), per UB loop of rowFactor rows: rstd
    broadcast along the rows (the BroadCast API on v220: Brcb, then a Copy to the rows), Cast
    x, Mul x^, Cast dy, Mul dy * x^; one Add into dgamma per row (a for loop over the rows,
    a PipeBarrier after each); gamma broadcast down the rows (Or of 16-bit lanes); Mul dy by
    gamma, Mul by x^; the row sums (ReduceSumMultiN: Duplicate, one Add per 64-column block
    of the row over all rows, a WholeReduceSum of a repeat per row), Muls by 1/n; the mean
    broadcast, Mul, Sub; rstd broadcast again, Mul; Cast back."""
    brcb = (_w("vbrcb", width=8), _e("vcopy (to rows)", "unary"))
    return (*brcb, *_x_cast(fp16), _e("vmul", "binary"), _e("vmul", "binary"),
            _loop("vadd (dgamma)"), _e("vor (gamma to rows)", "binary"),
            _e("vmul", "binary"), _e("vmul", "binary"), _w("vdup", width=64),
            _cols("vadd (column blocks)"), _w("vcadd (whole reduce)", "reduce", width=64),
            _w("vmuls"), *brcb,
            _e("vmul", "binary"), _e("vsub", "binary"), *brcb, _e("vmul", "binary"))


RMS_NORM_GRAD_NOTE = ("CANN's Ascend C RmsNormGrad on the A2 (ops-nn rms_norm_grad_split_n_high_"
                      "precision.h): whole rows per core, in fp32; dgamma summed per core in UB "
                      "and added to GM atomically at the end, the cores' adds served one "
                      "after another on that one row (same-address access); the SyncAll at "
                      "the start not costed")


__all__ = ["MERGE_N_NOTE", "RMS_NORM_A2_CHIPS", "RMS_NORM_MERGE_N", "RMS_NORM_MERGE_N_BUDGET",
           "RMS_NORM_MERGE_N_PERF", "RMS_NORM_NORMAL", "RMS_NORM_PERF_COLS", "RMS_NORM_PERF_DIMS",
           "RMS_NORM_SMALL_REDUCE", "RMS_NORM_UB_FACTOR", "rms_mode", "rms_norm_mode",
           "RMS_NORM_GRAD_NOTE", "RMS_NORM_GRAD_SMALL_D_BUDGET", "RMS_NORM_GRAD_SMALL_D_MAX_COLS",
           "RMS_NORM_GRAD_SMALL_D_UB_BYTES",
           "RMS_NORM_GRAD_SPLIT_N_MAX_COLS", "rms_grad_mode", "rms_norm_grad_mode",
           "rms_norm_grad_row", "rms_norm_grad_small_d"]
