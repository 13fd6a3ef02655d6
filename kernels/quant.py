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


# ----------------------------------------------------------------------------- weight-only
#: int4 values one int32 holds in CANN's INT4Pack layout (aclnnConvertWeightToINT4Pack)
INT4_PER_INT32 = 8


def pack_int4(q: np.ndarray) -> np.ndarray:
    """Pack int4 values (an integer array (K, N) in [-8, 7], N a multiple of 8) into int32
    (K, N / 8), eight per word, element j of a word in bits 4j..4j+3 (low nibble first), as
    CANN's INT4Pack stores them."""
    q = np.asarray(q, np.int64)
    k, n = q.shape
    nib = (q & 0xF).reshape(k, n // INT4_PER_INT32, INT4_PER_INT32).astype(np.uint32)
    word = np.zeros((k, n // INT4_PER_INT32), np.uint32)
    for j in range(INT4_PER_INT32):
        word |= nib[:, :, j] << np.uint32(4 * j)
    return word.view(np.int32)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """The int4 values (K, 8 * N8) of an INT4Pack int32 array (K, N8) (pack_int4's inverse),
    as int8 in [-8, 7]."""
    w = np.asarray(packed).view(np.uint32)
    k, n8 = w.shape
    nib = np.empty((k, n8, INT4_PER_INT32), np.int8)
    for j in range(INT4_PER_INT32):
        v = ((w >> np.uint32(4 * j)) & np.uint32(0xF)).astype(np.int8)
        nib[:, :, j] = np.where(v >= 8, v - 16, v)
    return nib.reshape(k, n8 * INT4_PER_INT32)


def group_rows(k: int, scale_rows: int) -> np.ndarray:
    """The row of the (scale_rows, N) antiquant table each of the K weight rows uses: all row
    0 per channel (scale_rows 1), else row // group_size (group_size = ceil(K / rows))."""
    if scale_rows == 1:
        return np.zeros(k, np.int64)
    gs = -(-k // scale_rows)
    return np.arange(k) // gs


def grouped_matmul_dequant(x: np.ndarray, w: np.ndarray, group_list: np.ndarray,
                           scale: np.ndarray, pertoken: np.ndarray) -> np.ndarray:
    """A8W8 GroupedMatmul: row group e of int8 x (T, K) (cumulative ends `group_list`) times
    int8 w[e] (K, N), accumulated exactly (int64), times scale[e, n] and pertoken[t], in
    float64 (the caller rounds to the output dtype); rows past the last end are 0."""
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64)
    sc = np.asarray(scale, np.float64)
    pt = np.asarray(pertoken, np.float64)
    y = np.zeros((x.shape[0], w.shape[2]), np.float64)
    start = 0
    for e, end in enumerate(np.asarray(group_list, np.int64)):
        end = int(min(max(end, start), x.shape[0]))
        if end > start:
            acc = (x[start:end] @ w[e]).astype(np.float64)
            y[start:end] = acc * sc[e][None, :] * pt[start:end, None]
        start = end
    return y


def quant_weight_groups(w: np.ndarray, bits: int, group_size: int = 0
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric weight-only quantisation of a (K, N) float weight to `bits` (8 or 4) per
    output channel (group_size 0) or per group of `group_size` rows of K: (q int8 values in
    [-(2^(b-1) - 1), 2^(b-1) - 1], scale (groups, N) float32 = absmax / (2^(b-1) - 1))."""
    w = np.asarray(w, np.float64)
    k, n = w.shape
    qmax = 2 ** (bits - 1) - 1
    rows = 1 if group_size == 0 else -(-k // group_size)
    idx = group_rows(k, rows)
    absmax = np.zeros((rows, n))
    np.maximum.at(absmax, idx, np.abs(w))
    scale = np.where(absmax > 0, absmax / qmax, 1.0).astype(np.float32)
    q = np.clip(np.round(w / scale[idx]), -qmax, qmax).astype(np.int8)
    return q, scale


@njit(**JIT)
def _antiquant_matmul(x, wq, rows, scale, offset, y):
    m, k = x.shape
    n = wq.shape[1]
    w = np.empty(n, np.float64)
    for kk in range(k):
        g = rows[kk]
        for j in range(n):
            w[j] = (wq[kk, j] + offset[g, j]) * scale[g, j]
        for i in range(m):
            a = x[i, kk]
            for j in range(n):
                y[i, j] += a * w[j]


def weight_quant_batch_matmul(x: np.ndarray, weight: np.ndarray, scale: np.ndarray,
                              offset: np.ndarray | None, bias: np.ndarray | None
                              ) -> np.ndarray:
    """CANN WeightQuantBatchMatmulV2: y = x @ ((weight + offset) * scale) + bias, the weight
    int8 (K, N) or INT4Pack int32 (K, N / 8), scale/offset (1,), (N,) or (groups, N) per
    group of K rows; in float64 (the caller rounds to the output dtype)."""
    x = np.asarray(x, np.float64)
    wq = unpack_int4(weight) if np.asarray(weight).dtype == np.int32 else np.asarray(weight)
    k, n = wq.shape
    s = np.asarray(scale, np.float64)
    s = np.full((1, n), s.item()) if s.size == 1 else s.reshape(-1, n)
    o = np.zeros_like(s) if offset is None else \
        np.broadcast_to(np.asarray(offset, np.float64).reshape(-1, 1 if np.size(offset) == 1
                                                              else n), s.shape)
    rows = group_rows(k, s.shape[0])
    lead = x.shape[:-1]
    x2 = np.ascontiguousarray(x.reshape(-1, k))
    y = np.zeros((x2.shape[0], n))
    _antiquant_matmul(x2, np.ascontiguousarray(wq, np.float64), rows,
                      np.ascontiguousarray(s), np.ascontiguousarray(o), y)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y.reshape(*lead, n)


# ----------------------------------------------------------------------------- KV cache
def ascend_quant(x: np.ndarray, scale: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    """CANN AscendQuantV2 (torch_npu.npu_quantize, div_mode=False): int8 of
    round(x * scale + offset), saturated to [-128, 127]; scale/offset broadcast on x's last
    axis."""
    y = np.asarray(x, np.float64) * np.asarray(scale, np.float64)
    if offset is not None:
        y = y + np.asarray(offset, np.float64)
    return np.clip(np.round(y), -128, 127).astype(np.int8)


def ascend_anti_quant(x: np.ndarray, scale: np.ndarray, offset: np.ndarray | None
                      ) -> np.ndarray:
    """CANN AscendAntiQuantV2 (torch_npu.npu_anti_quant): (x + offset) * scale in float64."""
    y = np.asarray(x, np.float64)
    if offset is not None:
        y = y + np.asarray(offset, np.float64)
    return y * np.asarray(scale, np.float64)
