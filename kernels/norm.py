"""Normalisation kernels: Softmax/LogSoftmax, row normalisation (LayerNorm, InstanceNorm,
BatchNorm statistics), per-channel affine (BatchNorm inference) and LRN.

Every kernel computes in fp32 (fp64 for fp64 input) and the wrappers round back to the input
dtype, as the vector unit does for fp16 normalisations. Softmax subtracts the row max first
(the stable form CANN's kernels use), and the statistics are two-pass (mean, then the mean of
squared deviations), not E[x^2] - E[x]^2.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT
from .elementwise import scalar_div, scalar_exp, scalar_log, scalar_max, scalar_rsqrt


def work_dtype(dtype: np.dtype) -> np.dtype:
    """fp64 stays fp64; every other dtype is computed in fp32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


@njit(**JIT)
def _softmax_rows(x, log, out):
    """Softmax (or LogSoftmax when `log`) of each row of a 2-D array."""
    rows, n = x.shape
    for r in range(rows):
        if n == 0:
            continue
        m = x[r, 0]
        for j in range(1, n):
            m = scalar_max(m, x[r, j])
        s = 0.0                        # fp64 sum of the (work dtype) exponentials
        for j in range(n):
            e = scalar_exp(x[r, j] - m)
            s += e
            out[r, j] = e
        if log:
            shift = m + scalar_log(s)
            for j in range(n):
                out[r, j] = x[r, j] - shift
        else:
            inv = scalar_div(1.0, s)
            for j in range(n):
                out[r, j] *= inv


def softmax(x: np.ndarray, axis: int, log: bool = False) -> np.ndarray:
    """(Log)Softmax of `x` along `axis` (already normalised to [0, rank)); a non-last axis is
    moved last first, so that every row is contiguous."""
    x = np.asarray(x)
    xt = np.ascontiguousarray(np.moveaxis(x, axis, -1), dtype=work_dtype(x.dtype))
    rows = xt.reshape(-1, x.shape[axis]) if x.ndim else xt.reshape(1, 1)
    out = np.empty_like(rows)
    _softmax_rows(rows, log, out)
    res = np.moveaxis(out.reshape(xt.shape), -1, axis) if x.ndim else out.reshape(())
    return np.ascontiguousarray(res).astype(x.dtype, copy=False)


@njit(**JIT)
def _row_stats(x, mean, var):
    """Per-row mean and population variance of a 2-D array (two passes)."""
    rows, n = x.shape
    for r in range(rows):
        s = 0.0
        for j in range(n):
            s += x[r, j]
        m = s / n if n else 0.0
        q = 0.0
        for j in range(n):
            d = x[r, j] - m
            q += d * d
        mean[r] = m
        var[r] = q / n if n else 0.0


@njit(**JIT)
def _norm_rows(x, g, b, eps, y, mean, inv):
    """y = (x - mean) * rsqrt(var + eps) * g + b per row; g, b are (rows, n) (maybe broadcast
    views); mean and inv (the inverse std) are written too."""
    rows, n = x.shape
    _row_stats(x, mean, inv)
    for r in range(rows):
        inv[r] = scalar_rsqrt(inv[r] + eps)
        m, k = mean[r], inv[r]
        for j in range(n):
            y[r, j] = (x[r, j] - m) * k * g[r, j] + b[r, j]


def normalize_rows(x2: np.ndarray, g2: np.ndarray, b2: np.ndarray, eps: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalise each row of `x2` (rows, n), then scale by g2 and shift by b2 (both
    broadcastable to x2). Returns (y in the work dtype, mean, inverse std) per row."""
    work = work_dtype(x2.dtype)
    x2 = np.ascontiguousarray(x2, dtype=work)
    g2 = np.broadcast_to(np.asarray(g2, dtype=work), x2.shape)
    b2 = np.broadcast_to(np.asarray(b2, dtype=work), x2.shape)
    y = np.empty_like(x2)
    mean = np.empty(x2.shape[0], dtype=work)
    inv = np.empty(x2.shape[0], dtype=work)
    _norm_rows(x2, g2, b2, work.type(eps), y, mean, inv)
    return y, mean, inv


@njit(**JIT)
def _channel_affine(x, a, b, y):
    """y[n, c, s] = x[n, c, s] * a[c] + b[c] (BatchNorm at inference, folded)."""
    n0, n1, n2 = x.shape
    for n in range(n0):
        for c in range(n1):
            ac, bc = a[c], b[c]
            for s in range(n2):
                y[n, c, s] = x[n, c, s] * ac + bc


def batch_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
               var: np.ndarray, eps: float) -> np.ndarray:
    """Inference BatchNormalization over channel axis 1 with the given statistics."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    k = np.asarray(scale, work) / np.sqrt(np.asarray(var, work) + work.type(eps))
    shift = np.asarray(bias, work) - np.asarray(mean, work) * k
    n, c = (x.shape[0], x.shape[1]) if x.ndim > 1 else (x.shape[0], 1)
    x3 = np.ascontiguousarray(x, dtype=work).reshape(n, c, -1)
    y = np.empty_like(x3)
    _channel_affine(x3, k.astype(work), shift.astype(work), y)
    return y.reshape(x.shape).astype(x.dtype, copy=False)


def channel_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population variance per channel (axis 1) over batch and spatial dims."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    c = x.shape[1]
    rows = np.ascontiguousarray(np.moveaxis(x, 1, 0), dtype=work).reshape(c, -1)
    mean = np.empty(c, dtype=work)
    var = np.empty(c, dtype=work)
    _row_stats(rows, mean, var)
    return mean, var


@njit(**JIT)
def _lrn3(x, size, alpha, beta, bias, y):
    """ONNX LRN over axis 1 of x (n, c, s): window [c - (size-1)//2, c + ceil((size-1)/2)]."""
    n0, n1, n2 = x.shape
    lo_off = (size - 1) // 2
    hi_off = size - 1 - lo_off
    for n in range(n0):
        for s in range(n2):
            for c in range(n1):
                q = 0.0
                for k in range(max(0, c - lo_off), min(n1 - 1, c + hi_off) + 1):
                    q += x[n, k, s] * x[n, k, s]
                y[n, c, s] = x[n, c, s] / (bias + alpha / size * q) ** beta


def lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """Local response normalisation across channels (axis 1) of an (N, C, ...) tensor."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    x3 = np.ascontiguousarray(x, dtype=work).reshape(x.shape[0], x.shape[1], -1)
    y = np.empty_like(x3)
    _lrn3(x3, int(size), float(alpha), float(beta), float(bias), y)
    return y.reshape(x.shape).astype(x.dtype, copy=False)
