"""CANN's Ascend C RmsNorm on the A2 and A3 (ops-nn norm/rms_norm) as kernel paths of
lower/vector_seq.py: which mode its tiling picks from x and gamma (`rms_norm_mode`), each
mode's vector steps and its MERGE_N tiling budget. vector_seq builds the OpSequences of its
PATHS from them, as it does from layer_norm_paths.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir.tensor import Value, itemsize
from .seq_types import A2_A3_CHIPS
from .seq_types import NARROW_FLOATS as _NARROW_FLOATS
from .seq_types import elem as _e
from .seq_types import per_row as _w
from .seq_types import reduction as _r

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
RMS_NORM_NORMAL = (_e("vmul", "binary"), _r("vcadd"), _e("vmuls", "unary"),
                    _e("vmul", "binary"))
#: RmsNorm MERGE_N mode (rms_norm_merge_n.h `KernelRmsNormMergeN::Compute`), per UB loop of
#: rowFactor rows: Cast x, Mul x*x over every row, ReduceSumMultiN (strided Adds of all rows
#: per 64 columns, one WholeReduceSum of a repeat per row), then on the rows' values Muls
#: 1/n, Adds eps, Sqrt, Duplicate 1, Div; the rstd spread back over the rows (the BroadCast
#: API to [rows, numColAlign]), Mul x*rstd, Mul gamma (broadcast to rowFactor rows once per
#: core), Cast back; no scalar round trip
_MERGE_N_HEAD = (_e("vmul", "binary"), _r("vcadd"), _w("vmuls"), _w("vadds"),
                 _w("vsqrt", "sqrt"), _w("vdup"), _w("vdiv", "div"))
RMS_NORM_MERGE_N = (*_MERGE_N_HEAD, _e("vbrcb (rstd to rows)", "unary"),
                     _e("vmul", "binary"), _e("vmul", "binary"))
#: Its queues have depth 1 (rms_norm_base.h BUFFER_NUM = 1), but for fp16/bf16 x the input slot
#: is freed right after the Cast (inQueueX.FreeTensor) and no V_S wait stops the scalar unit
#: within a loop, so the next loop's CopyIn overlaps this one's compute and the output slot is
#: awaited only by the final Cast: two slots in effect (`narrow_slots`); fp32 x is held until
#: the Mul by rstd, near the end: one. (NORMAL keeps one for every dtype: its scalar unit waits
#: for each row's ReduceSum (V_S) before it issues the rest of the row, the next CopyIn among it.)
#: its isPerformance form: Brcb writes each row's rstd to one 32-byte block (doPerformanceRstd),
#: the Muls by rstd and by gamma read those blocks and gamma with repeat strides (repeatByRow)
RMS_NORM_MERGE_N_PERF = (*_MERGE_N_HEAD, _w("vbrcb (rstd)", width=8),
                          _e("vmul", "binary"), _e("vmul", "binary"))
MERGE_N_NOTE = ("CANN's Ascend C RmsNorm, MERGE_N mode (ops-nn rms_norm_merge_n.h): rowFactor "
                 "= (UB - 1024) / (numColAlign x 16 + 260) rows per loop step, each vector "
                 "instruction over all of them, rstd on the vector unit; queues of depth 1 "
                 "(rms_norm_base.h BUFFER_NUM = 1), x's slot freed after its Cast for fp16/bf16 "
                 "(the next load overlaps the compute); whole rows per core, min(rows, AIV cores) "
                 "cores")


__all__ = ["MERGE_N_NOTE", "RMS_NORM_A2_CHIPS", "RMS_NORM_MERGE_N", "RMS_NORM_MERGE_N_BUDGET",
           "RMS_NORM_MERGE_N_PERF", "RMS_NORM_NORMAL", "RMS_NORM_PERF_COLS", "RMS_NORM_PERF_DIMS",
           "RMS_NORM_SMALL_REDUCE", "RMS_NORM_UB_FACTOR", "rms_mode", "rms_norm_mode"]
