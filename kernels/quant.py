"""Kernels of the quantised-inference ops: DynamicQuant (per-token symmetric int8) and
QuantBatchMatmul (int8 x int8 -> int32 accumulation, dequantised by a per-channel weight scale
and a per-token activation scale in the epilogue)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT


@njit(**JIT)
def _dynamic_quant_rows(x, y, scale):
    rows, n = x.shape
    for r in range(rows):
        m = 0.0
        for j in range(n):
            m = max(m, abs(x[r, j]))
        s = m / 127.0 if m > 0 else 1.0
        scale[r] = s
        for j in range(n):
            q = np.round(x[r, j] / s)
            y[r, j] = min(127.0, max(-128.0, q))


def dynamic_quant(x: np.ndarray) -> list[np.ndarray]:
    """torch_npu.npu_dynamic_quant: per row (token) scale = max|x| / 127 (float32),
    y = round(x / scale) in int8."""
    x = np.asarray(x)
    n = x.shape[-1]
    x2 = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, n)
    y = np.empty(x2.shape, np.float32)
    scale = np.empty(x2.shape[0], np.float32)
    _dynamic_quant_rows(x2, y, scale)
    return [y.astype(np.int8).reshape(x.shape), scale.reshape(x.shape[:-1])]


def quant_weight(w: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """Symmetric int8 of a (K, N) weight with the per-output-channel `scale` (N,) (or one for
    all): round(w / scale) clipped to [-127, 127]."""
    w = np.asarray(w, np.float32)
    return np.clip(np.round(w / np.float32(scale)), -127, 127).astype(np.int8)


def quant_batch_matmul(x1: np.ndarray, x2: np.ndarray, scale: np.ndarray,
                       pertoken: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    """(x1 int8 @ x2 int8) accumulated exactly in int32 (int64 here), times scale[n] and
    pertoken[m], plus bias, in float64 (the caller rounds to the output dtype)."""
    acc = np.matmul(np.asarray(x1, np.int64), np.asarray(x2, np.int64)).astype(np.float64)
    y = acc * np.asarray(scale, np.float64)
    if pertoken is not None:
        y = y * np.asarray(pertoken, np.float64)[..., None]
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y
