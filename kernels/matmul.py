"""Kernels of the matrix-multiply family: MatMul (+ optional bias), Gemm, BiasAdd.

Numerics follow the cube: fp16 operands are widened to fp32, products and sums are fp32, the
bias joins the fp32 accumulator, and the result is rounded to fp16 once at the end (so a fused
MatMul+BiasAdd rounds once where the unfused pair rounds twice). fp32 stays fp32, float64
stays float64. int8/uint8 operands accumulate in int32 (CANN's int8 MatMul output).

Where the time goes: float GEMMs call BLAS sgemm/dgemm through `np.matmul` on the widened
operands (numba has no CPU float16 type, and its own `np.dot` needs SciPy, which the project
does not depend on); the widening is numpy's F16C cast. Integer GEMMs, which BLAS does not
do, run in `_gemm_blocked`, a cache-blocked parallel numba kernel (packed B panel shared by
parallel row blocks, four rank-1 updates per pass vectorised along the output row). The bench
(bench/kernels.py) also times `_gemm_blocked` on fp32 to show how far pure numba is from BLAS.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from . import elementwise as ew
from .config import JIT

_MB, _KB, _NB = 32, 128, 512     # row block, depth block, column panel (panel = 256 KiB fp32)


@njit(**JIT)
def _row_update(arow, panel, orow, kb, nb):
    """orow += arow @ panel[:kb, :nb], four depth steps per pass over the row."""
    kk = 0
    while kk + 4 <= kb:
        a0, a1, a2, a3 = arow[kk], arow[kk + 1], arow[kk + 2], arow[kk + 3]
        p0, p1, p2, p3 = panel[kk], panel[kk + 1], panel[kk + 2], panel[kk + 3]
        for j in range(nb):
            orow[j] += a0 * p0[j] + a1 * p1[j] + a2 * p2[j] + a3 * p3[j]
        kk += 4
    while kk < kb:
        a0, p0 = arow[kk], panel[kk]
        for j in range(nb):
            orow[j] += a0 * p0[j]
        kk += 1


@njit(parallel=True, **JIT)
def _gemm_blocked(a, b, out):
    """out += a @ b for 2-D a (M,K), b (K,N), out (M,N); a and b already in out's dtype."""
    m, k = a.shape
    n = b.shape[1]
    panel = np.empty((_KB, _NB), dtype=out.dtype)
    n_rb = (m + _MB - 1) // _MB
    for k0 in range(0, k, _KB):
        kb = min(_KB, k - k0)
        for j0 in range(0, n, _NB):
            nb = min(_NB, n - j0)
            panel[:kb, :nb] = b[k0:k0 + kb, j0:j0 + nb]
            for rb in prange(n_rb):
                for i in range(rb * _MB, min(m, (rb + 1) * _MB)):
                    _row_update(a[i, k0:k0 + kb], panel, out[i, j0:j0 + nb], kb, nb)


def acc_dtype(dtype: np.dtype) -> np.dtype:
    """The cube accumulator dtype for an operand dtype: fp16->fp32, int8->int32."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.dtype(np.int32)
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def out_dtype(dtype: np.dtype) -> np.dtype:
    """The MatMul output dtype: the operand dtype, except int8/uint8 -> int32."""
    dtype = np.dtype(dtype)
    return np.dtype(np.int32) if dtype.kind in "iu" else dtype


def gemm_numba(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for 2-D operands computed by the pure-numba blocked kernel (no BLAS)."""
    acc = acc_dtype(a.dtype)
    out = np.zeros((a.shape[0], b.shape[1]), dtype=acc)
    _gemm_blocked(np.ascontiguousarray(a, dtype=acc), np.ascontiguousarray(b, dtype=acc), out)
    return out


def _int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul semantics (1-D operands, broadcast batch) with int32 accumulation in numba."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    aa = np.broadcast_to(a2, batch + (m, k)).reshape(-1, m, k)
    bb = np.broadcast_to(b2, batch + (k, n)).reshape(-1, k, n)
    out = np.zeros((aa.shape[0], m, n), dtype=np.int32)
    for i in range(out.shape[0]):
        out[i] = gemm_numba(aa[i], bb[i])
    out = out.reshape(batch + (m, n))
    if b.ndim == 1:
        out = out[..., 0]
    if a.ndim == 1:
        out = out[..., 0, :] if b.ndim > 1 else out[..., 0]
    return out


def matmul_values(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """numpy.matmul semantics, cube numerics, optional bias (1-D, along the last axis)."""
    acc = acc_dtype(a.dtype)
    if acc.kind == "i":
        out = _int_matmul(a, b)
    else:
        out = np.matmul(a.astype(acc, copy=False), b.astype(acc, copy=False))
    if bias is not None:
        out = out + bias.astype(acc, copy=False)
    return np.asarray(out).astype(out_dtype(a.dtype), copy=False)


def matmul(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of MatMul: (A, B, bias?) -> [Y]."""
    return [matmul_values(args[0], args[1], args[2] if len(args) > 2 else None)]


def gemm(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of Gemm: alpha * A' @ B' + beta * C, accumulated in fp32 for fp16."""
    a, b = args[0], args[1]
    c = args[2] if len(args) > 2 else None
    acc = acc_dtype(a.dtype)
    aa = a.T if attrs.get("transA", 0) else a
    bb = b.T if attrs.get("transB", 0) else b
    y = matmul_values(aa.astype(acc, copy=False), bb.astype(acc, copy=False))
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = y * acc.type(alpha)
    if c is not None and beta != 0.0:
        y = y + acc.type(beta) * c.astype(acc, copy=False)
    return [np.asarray(y).astype(out_dtype(a.dtype), copy=False)]


def channel_axis(ndim: int, data_format: str) -> int:
    """The channel axis of a BiasAdd: 1 for NC..., the last one for N...C."""
    return 1 if data_format.startswith("NC") else ndim - 1


def bias_add(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of BiasAdd: x + bias along the channel axis (numba add ufunc)."""
    x, bias = args[0], args[1]
    shape = [1] * x.ndim
    shape[channel_axis(x.ndim, attrs.get("data_format", "NCHW"))] = -1
    return [ew.apply_ufunc(ew.add_ufunc, [x, bias.reshape(shape)])]
