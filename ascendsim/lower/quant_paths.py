"""CANN's Ascend C DynamicQuant on the A2 and A3 (ops-nn quant/dynamic_quant, read in the public
copy jbgztxdy/ops-nn at 732de1d) as kernel paths of lower/vector_seq.py: which kernel its
tiling picks for a per-token quantisation without smooth scales (`dynamic_quant_mode`), and
each kernel's vector steps. vector_seq takes `DYNAMIC_QUANT_PATHS` into its PATHS.

The tiling (op_host/dynamic_quant_tiling.cpp) tries, in order: the single-row kernel (key 100:
rows of 4096, 5120 or 10240 elements, 4..384 rows; not modelled, such shapes take the general
path here), the multi-row kernel (key 10, `CheckMultiRowPreconditions`: 128 <= row <= 16320
elements and the row a multiple of 8, 16320 = min((UB - 1024 - 3392) / 11 rounded down to 64,
255 x 64)), and the general path, whose double-buffered kernel (keys 2 and 3,
dynamic_quant_db.h) takes rows up to 15040 elements (its UB budget, 13 bytes per 16-aligned
element under 195584: `CalculateMaxUbSizePerRow`). Longer rows (keys 0, 1 and 6: one row a
step, or rows in chunks of 10240) keep the registry's cost fields."""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.tensor import Value
from .seq_types import A2_A3_CHIPS, NARROW_FLOATS, OpSequence
from .seq_types import conversion as _conv
from .seq_types import elem as _e
from .seq_types import per_row as _w
from .seq_types import row_loop as _loop

#: multi-row kernel (key 10): rows of at least this many elements, a multiple of 8, at most
#: MULTI_ROW_MAX; each step takes MULTI_ROW_MAX // row whole rows
MULTI_ROW_MIN = 128
MULTI_ROW_MAX = 16320
MULTI_ROW_ALIGN = 8
#: the double-buffered general kernel (keys 2 / 3): rows up to this many elements; a step takes
#: min(255, 195584 // (11 x the row aligned to 16 elements)) rows (`SetTilingData`)
DB_MAX_ROW = 15040
DB_BUDGET = (1024, 11, 0)


def dynamic_quant_mode(ins: Sequence[Value], fmt: str, chip_name: str) -> str:
    """The kernel CANN's DynamicQuant tiling picks on an A2 / A3 chip for x alone (no smooth
    scales, no group index), by the row length (x's last axis): "MULTI_ROW", "DB", or ""
    (another chip or format, another dtype, or a row past the double-buffered kernel)."""
    if chip_name not in A2_A3_CHIPS or fmt != "ND" or len(ins) != 1 or not ins[0].shape:
        return ""
    x = ins[0]
    if x.dtype not in NARROW_FLOATS:
        return ""
    row = int(x.shape[-1])
    if MULTI_ROW_MIN <= row <= MULTI_ROW_MAX and row % MULTI_ROW_ALIGN == 0:
        return "MULTI_ROW"
    return "DB" if row <= DB_MAX_ROW else ""


def _mode(name: str):
    """A PATHS condition: DynamicQuant runs the kernel `name` (`dynamic_quant_mode`)."""
    def applies(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
        return dynamic_quant_mode(ins, fmt, chip_name) == name
    return applies


#: the multi-row kernel (dynamic_quant_multi_row.h `DynamicQuantMultiRow`), per step of whole
#: rows: one contiguous copy in, Cast to fp32 and Abs over the step; per row the Max folds of
#: its repeats (one call a row); one WholeReduceMax of a repeat per row, Div 127 / max and the
#: BroadCast API's spread of the rows' scales (Brcb, then a Copy to the rows) over all rows;
#: Mul, Cast to int16, to half; the scale max / 127 on the rows' values; Cast to int8; one
#: contiguous copy out. A single UB buffer, x's part freed after its Cast (V_MTE2 flag): the
#: next step's load overlaps this one's compute.
DYNAMIC_QUANT_MULTI_ROW = (
    _e("vabs", "unary"), _loop("vmax (fold of the row's repeats)", "binary"),
    _w("vcmax (WholeReduceMax)", "reduce_max", width=64), _w("vdiv (127 / max)", "div"),
    _w("vbrcb (BroadCast)", width=8), _e("vcopy (BroadCast)", "unary"),
    _e("vmul", "binary"), _conv("vconv f32->s16"), _conv("vconv s16->f16"),
    _w("vmul (max / 127)", "binary"), _e("vconv f16->s8", "unary"))
#: the double-buffered general kernel (dynamic_quant_db.h `ProcessSymmetric`), per step of up to
#: 255 rows, every call inside its for loop over the rows with a PipeBarrier<PIPE_V> between
#: dependent calls: Cast to fp32 (costed over the step, the sequence's up-cast), Abs, the Max
#: folds, a WholeReduceMax of one repeat, the row's max cast again, Brcb of it, Div 127 / max on 8
#: values, Mul of the row by the scale, Casts to int16 and half, the scale max / 127 written by one
#: masked Mul, Cast to int8. The input queue is double-buffered, the output and scale buffers
#: single (rows of a step are computed while the previous step's copy out finishes). A row that is
#: not whole 32-byte blocks is copied in as one burst, and every output row (int8) is copied out as
#: one.
DYNAMIC_QUANT_DB = (
    _loop("vabs", "unary"), _loop("vmax (fold of the row's repeats)", "binary"),
    _loop("vcmax (WholeReduceMax)", "reduce_max", width=64),
    _loop("vconv (the row, for its max)", "unary"), _loop("vbrcb", "unary", width=8),
    _loop("vdiv (127 / max)", "div", width=8), _loop("vmul (by the scale)", "binary"),
    _loop("vconv f32->s16", "unary"), _loop("vconv s16->f16", "unary"),
    _loop("vmul (max / 127)", "binary", width=8), _loop("vconv f16->s8", "unary"))

_NOTE = "CANN's Ascend C DynamicQuant (ops-nn quant/dynamic_quant)"

DYNAMIC_QUANT_PATHS = (
    (_mode("MULTI_ROW"), OpSequence(
        DYNAMIC_QUANT_MULTI_ROW, fp32=True, rows="axis", whole_rows=True, buffers=2,
        tile=lambda dtype: MULTI_ROW_MAX,
        note=_NOTE + ", multi-row kernel (dynamic_quant_multi_row.h): 16320 // row whole rows "
             "a step (modelled as tiles of up to 16320 elements), each vector call over all of "
             "them but the per-row Max folds; one contiguous copy each way")),
    (_mode("DB"), OpSequence(
        DYNAMIC_QUANT_DB, fp32=True, rows="axis", whole_rows=True, buffers=2,
        row_budget=DB_BUDGET, row_bursts="rows_out",
        note=_NOTE + ", double-buffered general kernel (dynamic_quant_db.h): min(255, "
             "195584 // (11 x the row aligned to 16)) rows a step, every vector call one a "
             "row behind a PipeBarrier; a row not of whole 32-byte blocks copied in as one "
             "burst, every output row copied out as one")),
)

