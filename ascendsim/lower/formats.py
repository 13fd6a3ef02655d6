"""Tensor formats in GM: names, padded sizes, and which operands stay ND.

Note on the model
-----------------
Activations feeding the cube live in NC1HWC0 (conv, C0 = the K fractal: 16, int8 32) or
FRACTAL_NZ (matmul, 16x16 blocks; on split chips (910B) MatMul takes and gives ND, converting
in flight: `matmul_format.takes_nd`); element-wise, broadcast, reduce and segment ops keep the
5-D/NZ format of their input, so a chain conv -> bn -> relu -> conv converts nothing. Where a
value's format must change (an ND graph input feeding a conv; a 5-D value feeding a reshape,
a transpose, an AI CPU op or a graph output) one TransData task is inserted per (value,
format), not per consumer (`movement.ensure`). Constants (weights) are assumed converted
offline. Padded formats cost their padded bytes.
"""

from __future__ import annotations

import math

from ..ir.tensor import LAYOUTS, Value, itemsize
from .tiling import ceil_to

ND, NC1HWC0, NZ = LAYOUTS

# Layout and model constants (not chip data: CANN's formats are the same on every chip, and the
# rest are rules of this model, named here once):
#: the fractal edge of FRACTAL_NZ (16 x 16 blocks) and NC1HWC0's C0 for 2- and 4-byte dtypes
FRACTAL = 16
#: NC1HWC0's C0 for 1-byte dtypes (the int8 K fractal is 32 wide)
FRACTAL_INT8 = 32
#: an operand with 1/8 or fewer of the elements of the op's largest value (a bias, a
#: per-channel scale, a per-row statistic) is broadcast from ND, never converted to the
#: 5-D or fractal format
SMALL_OPERAND_RATIO = 8


def is_small_operand(numel: int, largest: int) -> bool:
    """Whether an operand is small enough to stay ND beside a larger value (see above)."""
    return numel * SMALL_OPERAND_RATIO <= largest


def c0_of(dtype: str) -> int:
    """NC1HWC0's C0: 32 for 1-byte dtypes (the int8 K fractal), else 16."""
    return FRACTAL_INT8 if itemsize(dtype) == 1 else FRACTAL


def padded_numel(v: Value, fmt: str) -> int:
    """Elements a value occupies in a format (NC1HWC0 pads C to C0, NZ pads the last 2 dims)."""
    key = (v.shape, v.dtype, fmt)
    n = _PADDED.get(key)
    if n is None:
        shape = [int(d) for d in v.shape]
        if fmt == NC1HWC0 and len(shape) >= 3:
            shape[1] = ceil_to(shape[1], c0_of(v.dtype))
        elif fmt == NZ and len(shape) >= 2:
            shape[-1] = ceil_to(shape[-1], FRACTAL)
            shape[-2] = ceil_to(shape[-2], FRACTAL)
        n = math.prod(shape)
        if len(_PADDED) >= _PADDED_MAX:
            _PADDED.clear()
        _PADDED[key] = n
    return n


def padded_bytes(v: Value, fmt: str) -> int:
    """Bytes a value occupies in a format (its padded elements)."""
    return padded_numel(v, fmt) * itemsize(v.dtype)


#: padded_numel by (shape, dtype, format): every layer of a model asks for the same shapes
_PADDED: dict[tuple, int] = {}
_PADDED_MAX = 1 << 16

__all__ = ["ND", "NC1HWC0", "NZ", "FRACTAL", "FRACTAL_INT8", "SMALL_OPERAND_RATIO",
           "is_small_operand", "c0_of", "padded_numel", "padded_bytes"]
