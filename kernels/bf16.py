"""bfloat16 values without a bfloat16 type: float32 arrays that hold bf16 numbers.

numpy has no bfloat16 dtype and numba has no bf16 scalar type, so a bfloat16 tensor is STORED
as a float32 array whose every element is exactly a bfloat16 number (8 significant bits, the
float32 exponent range). Why float32 and not uint16 bit patterns:

- every kernel computes on it unchanged: the registry's kernels already widen 16-bit floats to
  float32 and compute there, which is what the 910B's vector unit does for bf16 data (it has
  no bf16 arithmetic; CANN's kernels cast to fp32, compute, cast back) and what the cube does
  (bf16 products are exact in fp32, sums accumulate in fp32 in L0C);
- the executor rounds every bf16 output to bf16 once per op (`round_bf16`, round to nearest
  even, as the chip's fp32 -> bf16 conversion in its RINT mode), so values match a real bf16
  computation bit for bit in its storage precision, the way fp16 results are rounded today;
- users get arrays they can use at once (`np.allclose`, plotting, `astype`), with no decoding
  step; uint16 patterns would silently give wrong numbers to any numpy call.

The cost is 4 bytes per element in host memory; timing never looks at the arrays (the IR's
dtype says 2 bytes). `to_bits` / `from_bits` convert to and from the 16-bit patterns for
interchange (ONNX raw data, a torch.bfloat16 tensor viewed as int16).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .config import CACHE

#: the numpy dtype that stores bfloat16 values (see the module note)
STORAGE = np.dtype(np.float32)
#: relative spacing of bf16 numbers: 8 significant bits, so one unit in the last place is
#: 2**-7 of the leading bit and round-to-nearest errs by at most half of it, 2**-8
EPS = 2.0 ** -7
#: smallest positive normal bf16 (same exponent range as float32)
TINY = 2.0 ** -126
#: largest finite bf16, 0x7F7F
MAX = (2.0 - 2.0 ** -7) * 2.0 ** 127


def round_bf16(x: np.ndarray | float) -> np.ndarray:
    """`x` rounded to the nearest bfloat16 (ties to even, overflow to inf, NaN kept quiet),
    as a float32 array (the bf16 storage). float32 and float16 inputs are rounded on the
    float32 bit pattern (add 0x7FFF plus the kept lowest bit, clear the low 16 bits); float64
    and integer inputs are rounded exactly in float64 first, so there is no double rounding;
    an ml_dtypes bfloat16 array (what onnx's numpy_helper returns) is widened exactly."""
    a = np.asarray(x)
    if a.dtype.name == "bfloat16" and a.dtype.itemsize == 2:   # ml_dtypes' (onnx's) bfloat16
        return from_bits(a.view(np.uint16))
    if a.dtype.kind == "f" and a.dtype.itemsize <= 4:
        bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        nan = (bits & 0x7FFFFFFF) > 0x7F800000
        kept = (bits >> 16) & 1
        out = ((bits + np.uint32(0x7FFF) + kept) & np.uint32(0xFFFF0000)).astype(np.uint32)
        out = np.where(nan, bits | np.uint32(0x00400000), out) & np.uint32(0xFFFF0000)
        return out.view(np.float32).reshape(a.shape)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"cannot round dtype {a.dtype} to bfloat16")
    d = np.asarray(a, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        m, e = np.frexp(d)
        normal = np.ldexp(np.rint(m * 256.0), e - 8)
        sub = np.rint(d * 2.0 ** 133) * 2.0 ** -133
        r = np.where(np.abs(d) < TINY, sub, normal)
        r = np.where(np.isfinite(d), r, d)
        return r.astype(np.float32)


def to_bits(x: np.ndarray) -> np.ndarray:
    """The uint16 bfloat16 bit patterns of `x` (rounded to bf16 first)."""
    return (round_bf16(x).view(np.uint32) >> 16).astype(np.uint16)


def from_bits(bits: np.ndarray) -> np.ndarray:
    """float32 bf16 storage from uint16 (or int16) bit patterns."""
    b = np.asarray(bits)
    if b.dtype.kind not in "iu" or b.dtype.itemsize != 2:
        raise TypeError(f"bfloat16 bit patterns must be 16-bit integers, got {b.dtype}")
    return (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


# float32 constants of the scalar rounding (exact powers of two; numba freezes globals)
_F_2P100, _F_2M64, _F_2P64 = np.float32(2.0 ** 100), np.float32(2.0 ** -64), np.float32(2.0 ** 64)
_F_2M110, _F_TINY = np.float32(2.0 ** -110), np.float32(TINY)
_F_SPLIT = np.float32(2.0 ** 16 + 1)


@njit(inline="always", cache=CACHE, fastmath=False)
def round_bf16_scalar(x):
    """`round_bf16` for one float32 inside numba code (composite loops), with the same results:
    Veltkamp's split (x * (2**16 + 1) ...) keeps the top 8 significand bits, rounded to nearest
    even by the float32 adder; values above 2**100 are scaled by 2**-64 first (the product must
    not overflow; the scale back overflows to inf exactly when bf16 does); below 2**-126,
    adding and subtracting 2**-110, whose float32 spacing is bf16's subnormal 2**-133. Needs
    fastmath off (kernels/config.py): reassociation would cancel the rounding."""
    a = abs(x)
    big = a > _F_2P100
    s = a * _F_2M64 if big else a
    p = s * _F_SPLIT
    hi = p - (p - s)
    hi = hi * _F_2P64 if big else hi
    lo = (a + _F_2M110) - _F_2M110
    r = lo if a < _F_TINY else hi
    r = np.float32(math.copysign(r, x))
    return r if math.isfinite(x) else x


__all__ = ["STORAGE", "EPS", "TINY", "MAX", "round_bf16", "round_bf16_scalar", "to_bits",
           "from_bits"]
