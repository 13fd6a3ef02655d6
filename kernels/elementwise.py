"""Element-wise kernels: numba scalar functions, turned into broadcasting ufuncs.

The scalar functions (`_add`, `_relu`, ...) are the single definition of each op's arithmetic:
the per-op ufuncs below are built from them, and fused composite kernels call them inline.
fp16 arithmetic is done in fp32 and rounded back, as the vector unit's fp16 results are
correctly rounded per instruction.
"""

from __future__ import annotations

import numpy as np
from numba import njit, vectorize

from .config import JIT

_FLOAT_SIGS = ["float32(float32)", "float64(float64)"]
_FLOAT_SIGS2 = ["float32(float32, float32)", "float64(float64, float64)"]
_NUM_SIGS2 = _FLOAT_SIGS2 + ["int32(int32, int32)", "int64(int64, int64)"]


@njit(inline="always", **JIT)
def _add(a, b):
    return a + b


@njit(inline="always", **JIT)
def _mul(a, b):
    return a * b


@njit(inline="always", **JIT)
def _relu(a):
    return a if a > 0 else a - a  # +0 for negatives, NaN stays NaN


add_ufunc = vectorize(_NUM_SIGS2, **JIT)(lambda a, b: _add(a, b))
mul_ufunc = vectorize(_NUM_SIGS2, **JIT)(lambda a, b: _mul(a, b))
relu_ufunc = vectorize(_FLOAT_SIGS + ["int32(int32)", "int64(int64)"], **JIT)(lambda a: _relu(a))


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a ufunc computes in: fp16 widens to fp32, small ints to int32."""
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype.kind in "iu" and dtype.itemsize < 4 or dtype == np.bool_:
        return np.dtype(np.int32)
    if dtype.kind == "u":
        return np.dtype(np.int64)
    return dtype


def apply_ufunc(ufunc, args: list) -> np.ndarray:
    """Run a numba ufunc on arrays of one dtype, widening fp16/small ints and rounding back."""
    dtype = np.result_type(*args)
    work = _compute_dtype(dtype)
    out = ufunc(*[np.asarray(a, dtype=work) for a in args])
    return np.asarray(out).astype(dtype, copy=False)


def binary(ufunc):
    """The registry kernel (args, attrs) -> [out] for a broadcasting binary ufunc."""
    return lambda args, attrs: [apply_ufunc(ufunc, args[:2])]


def unary(ufunc):
    return lambda args, attrs: [apply_ufunc(ufunc, args[:1])]
