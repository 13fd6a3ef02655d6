"""Kernels of the LLM ops: RmsNorm, RotaryMul, SwiGlu, GroupedMatmul, MoE routing, KV-cache
append and fused attention (FlashAttentionScore / IncreFlashAttention).

Every loop computes in fp32 (fp64 for fp64 input) and the wrappers round back to the input
dtype, as the vector unit and the cube's fp32 accumulator do. The attention kernel is the
flash-attention recurrence itself: one pass over the keys with a running max and a running
sum (online softmax), so the scores row is never materialised, as in CANN's fused kernels.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT
from .elementwise import scalar_exp, scalar_sigmoid
from .norm import work_dtype


# ----------------------------------------------------------------------------- RmsNorm
@njit(**JIT)
def _rms_rows(x, g, eps, y, rstd):
    """y = x * rsqrt(mean(x^2) + eps) * g per row; rstd per row."""
    rows, n = x.shape
    for r in range(rows):
        q = 0.0
        for j in range(n):
            q += x[r, j] * x[r, j]
        k = 1.0 / np.sqrt(q / n + eps)
        rstd[r] = k
        for j in range(n):
            y[r, j] = x[r, j] * k * g[j]


def rms_norm(x: np.ndarray, gamma: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """RMS normalisation over the trailing `gamma.ndim` axes; returns (y, rstd in fp32)."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    cols = int(np.prod(np.shape(gamma), dtype=np.int64))
    x2 = np.ascontiguousarray(x, dtype=work).reshape(-1, cols)
    g = np.ascontiguousarray(np.asarray(gamma, dtype=work).reshape(cols))
    y = np.empty_like(x2)
    rstd = np.empty(x2.shape[0], dtype=work)
    _rms_rows(x2, g, work.type(eps), y, rstd)
    lead = x.shape[:x.ndim - np.ndim(gamma)]
    return (y.reshape(x.shape).astype(x.dtype, copy=False),
            rstd.reshape(lead + (1,) * np.ndim(gamma)).astype(
                np.float64 if work == np.float64 else np.float32))


# ----------------------------------------------------------------------------- RotaryMul
@njit(**JIT)
def _rotary_rows(x, c, s, y):
    """y = x * c + rotate_half(x) * s per row, rotate_half(x) = cat(-x2, x1)."""
    rows, d = x.shape
    h = d // 2
    for r in range(rows):
        for j in range(d):
            rot = -x[r, j + h] if j < h else x[r, j - h]
            y[r, j] = x[r, j] * c[r, j] + rot * s[r, j]


def rotary_mul(x: np.ndarray, r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """torch_npu.npu_rotary_mul "half" mode; r1 (cos) and r2 (sin) broadcast to x."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    d = x.shape[-1]
    x2 = np.ascontiguousarray(x, dtype=work).reshape(-1, d)
    c = np.ascontiguousarray(np.broadcast_to(np.asarray(r1, work), x.shape)).reshape(-1, d)
    s = np.ascontiguousarray(np.broadcast_to(np.asarray(r2, work), x.shape)).reshape(-1, d)
    y = np.empty_like(x2)
    _rotary_rows(x2, c, s, y)
    return y.reshape(x.shape).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- SwiGlu
@njit(**JIT)
def _swiglu_rows(x, y):
    """y = silu(a) * b for each row [a | b] of x."""
    rows, n = x.shape
    h = n // 2
    for r in range(rows):
        for j in range(h):
            a = x[r, j]
            y[r, j] = a * scalar_sigmoid(a) * x[r, j + h]


def swiglu(x: np.ndarray, dim: int) -> np.ndarray:
    """CANN SwiGlu: split `dim` in two halves a, b; silu(a) * b."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    xt = np.ascontiguousarray(np.moveaxis(x, dim, -1), dtype=work)
    rows = xt.reshape(-1, xt.shape[-1])
    y = np.empty((rows.shape[0], rows.shape[1] // 2), dtype=work)
    _swiglu_rows(rows, y)
    out = np.moveaxis(y.reshape(xt.shape[:-1] + (xt.shape[-1] // 2,)), -1, dim)
    return np.ascontiguousarray(out).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- GroupedMatmul
@njit(**JIT)
def _grouped_mm(x, w, ends, y):
    """Rows [ends[e-1], ends[e]) of x times w[e] (fp32 accumulation)."""
    start = 0
    for e in range(w.shape[0]):
        stop = min(ends[e], x.shape[0])
        for t in range(start, stop):
            for n in range(w.shape[2]):
                acc = 0.0
                for k in range(x.shape[1]):
                    acc += x[t, k] * w[e, k, n]
                y[t, n] = acc
        start = max(start, stop)


def grouped_matmul(x: np.ndarray, w: np.ndarray, group_list: np.ndarray) -> np.ndarray:
    """x (T, K) split into consecutive row groups (cumulative ends `group_list`, CANN's
    group_list_type 0), group e multiplied by w[e] (K, N); rows past the last end are 0."""
    x = np.asarray(x)
    work = np.float32 if x.dtype != np.float64 else np.float64
    y = np.zeros((x.shape[0], w.shape[2]), dtype=work)
    _grouped_mm(np.ascontiguousarray(x, dtype=work), np.ascontiguousarray(w, dtype=work),
                np.asarray(group_list, dtype=np.int64), y)
    return y.astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- MoE routing
@njit(**JIT)
def _topk_softmax(x, k, y, idx):
    """Softmax of each row, then its k largest entries (ties: lower expert first)."""
    rows, e = x.shape
    p = np.empty(e, dtype=x.dtype)
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, e):
            m = max(m, x[r, j])
        s = 0.0
        for j in range(e):
            p[j] = scalar_exp(x[r, j] - m)
            s += p[j]
        for j in range(e):
            p[j] /= s
        for t in range(k):
            best = -1
            for j in range(e):
                if p[j] >= 0 and (best < 0 or p[j] > p[best]):
                    best = j
            y[r, t] = p[best]
            idx[r, t] = best
            p[best] = -1.0


def moe_gating_top_k_softmax(x: np.ndarray, k: int) -> list[np.ndarray]:
    """CANN MoeGatingTopKSoftmax: (y, expert_idx, row_idx) of router logits x (T, E)."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    x2 = np.ascontiguousarray(x, dtype=work).reshape(-1, x.shape[-1])
    t = x2.shape[0]
    y = np.empty((t, k), dtype=work)
    idx = np.empty((t, k), dtype=np.int32)
    _topk_softmax(x2, int(k), y, idx)
    row_idx = (np.arange(k, dtype=np.int32)[None, :] * t
               + np.arange(t, dtype=np.int32)[:, None])
    return [y.astype(x.dtype), idx, row_idx]


def moe_init_routing(x: np.ndarray, expert_idx: np.ndarray, num_experts: int
                     ) -> list[np.ndarray]:
    """Token copies sorted by expert (stable): expanded_x (T*k, H), expanded_row_idx (T*k,)
    giving for each (t, j) (flattened t*k + j) its row in expanded_x, and the cumulative
    token count per expert (GroupedMatmul's group_list)."""
    x = np.asarray(x)
    flat = np.asarray(expert_idx, dtype=np.int64).reshape(-1)
    k = flat.size // max(x.shape[0], 1)
    order = np.argsort(flat, kind="stable")
    expanded_x = np.ascontiguousarray(x[order // k])
    pos = np.empty(flat.size, dtype=np.int32)
    pos[order] = np.arange(flat.size, dtype=np.int32)
    counts = np.bincount(flat, minlength=num_experts)[:num_experts]
    return [expanded_x, pos, np.cumsum(counts).astype(np.int64)]


@njit(**JIT)
def _finalize(ex, scales, pos, out):
    t_n, k = scales.shape
    for t in range(t_n):
        for j in range(k):
            row = pos[t * k + j]
            w = scales[t, j]
            for h in range(ex.shape[1]):
                out[t, h] += w * ex[row, h]


def moe_finalize_routing(expanded: np.ndarray, scales: np.ndarray, pos: np.ndarray
                         ) -> np.ndarray:
    """out[t] = sum_j scales[t, j] * expanded[pos[t*k + j]] (the weighted un-permute)."""
    expanded = np.asarray(expanded)
    work = work_dtype(expanded.dtype)
    sc = np.ascontiguousarray(scales, dtype=work)
    out = np.zeros((sc.shape[0], expanded.shape[1]), dtype=work)
    _finalize(np.ascontiguousarray(expanded, dtype=work), sc, np.asarray(pos, np.int64), out)
    return out.astype(expanded.dtype, copy=False)


# ----------------------------------------------------------------------------- KV cache
def kv_cache_append(cache: np.ndarray, update: np.ndarray, position: int, axis: int
                    ) -> np.ndarray:
    """The cache with `update` written at [position, position + len) along `axis` (a copy:
    the executor keeps graph values immutable; the simulator models it as in place)."""
    out = np.array(cache, copy=True)
    sl = [slice(None)] * out.ndim
    sl[axis] = slice(position, position + update.shape[axis])
    out[tuple(sl)] = update
    return out


def paged_cache_scatter(cache: np.ndarray, update: np.ndarray, slots: np.ndarray, nz: bool
                        ) -> np.ndarray:
    """The paged cache with token t of `update` (T, ...) written at slot slots[t] (block
    slot // block_size, row slot % block_size); a negative slot skips its token, as CANN's
    ScatterPaKvCache does. ND ("Norm"): cache (blocks, block_size, ...) takes the token as
    row [block, row]; PA_NZ: cache (blocks, H * itemsize / 32, block_size, 32 / itemsize),
    or (blocks, heads, head_size * itemsize / 32, block_size, 32 / itemsize), the same bytes,
    takes it as column [block, :, row, :] of 32-byte pieces. A copy, as kv_cache_append."""
    cache = np.asarray(cache)
    if nz and cache.ndim == 5:
        flat = cache.reshape(cache.shape[0], -1, cache.shape[3], cache.shape[4])
        return paged_cache_scatter(flat, update, slots, nz).reshape(cache.shape)
    out = np.array(cache, copy=True)
    block_size = out.shape[2] if nz else out.shape[1]
    capacity = out.shape[0] * block_size
    slots = np.asarray(slots).reshape(-1)
    tokens = update.reshape(update.shape[0], -1)
    for t, s in enumerate(slots.tolist()):
        if s < 0:
            continue
        if s >= capacity:
            raise ValueError(f"slot_mapping[{t}] = {s} is outside the cache's {capacity} "
                             f"slots ({out.shape[0]} blocks of {block_size})")
        block, row = divmod(s, block_size)
        if nz:
            out[block, :, row, :] = tokens[t].reshape(out.shape[1], out.shape[3])
        else:
            out[block, row] = tokens[t].reshape(out.shape[2:])
    return out


# ----------------------------------------------------------------------------- attention
@njit(**JIT)
def _flash_attention(q, k, v, mask, scale, causal, out):
    """Online-softmax attention. q (B, H, S, D); k, v (B, Hkv, T, D); mask (B, H, S, T)
    additive (a broadcast view); causal: query i sees keys t <= i + T - S."""
    b_n, h_n, s_n, d_n = q.shape
    hkv, t_n = k.shape[1], k.shape[2]
    group = h_n // hkv
    acc = np.empty(d_n, dtype=q.dtype)
    for b in range(b_n):
        for h in range(h_n):
            kh = h // group
            for i in range(s_n):
                m = -np.inf
                s = 0.0
                acc[:] = 0.0
                last = t_n - 1 if not causal else min(t_n - 1, i + t_n - s_n)
                for t in range(last + 1):
                    sc = 0.0
                    for d in range(d_n):
                        sc += q[b, h, i, d] * k[b, kh, t, d]
                    sc = sc * scale + mask[b, h, i, t]
                    if sc == -np.inf:
                        continue
                    m_new = max(m, sc)
                    corr = scalar_exp(m - m_new) if m > -np.inf else 0.0
                    p = scalar_exp(sc - m_new)
                    s = s * corr + p
                    for d in range(d_n):
                        acc[d] = acc[d] * corr + p * v[b, kh, t, d]
                    m = m_new
                inv = 1.0 / s if s > 0 else 0.0
                for d in range(d_n):
                    out[b, h, i, d] = acc[d] * inv


def flash_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                    scale: float, causal: bool) -> np.ndarray:
    """softmax(q k^T * scale + mask) v in BNSD layout, kv heads shared by H / Hkv query heads
    (GQA); causal aligns the last query with the last key (CANN sparse_mode 3)."""
    q = np.asarray(q)
    work = work_dtype(q.dtype)
    b, h, s, _ = q.shape
    t = k.shape[2]
    m = (np.zeros((1, 1, 1, 1), work) if mask is None else np.asarray(mask, dtype=work))
    m = np.broadcast_to(m.reshape((1,) * (4 - m.ndim) + m.shape), (b, h, s, t))
    out = np.empty(q.shape, dtype=work)
    _flash_attention(np.ascontiguousarray(q, dtype=work), np.ascontiguousarray(k, dtype=work),
                     np.ascontiguousarray(v, dtype=work), m, work.type(scale), bool(causal),
                     out)
    return out.astype(q.dtype, copy=False)


# ----------------------------------------------------------------------------- MoeGatingTopK
@njit(**JIT)
def _gating_top_k(x, bias, k, k_group, group_count, group_mode, norm_type, renorm, scale, eps,
                  y, idx, out):
    """Per row: scores s = softmax(x) or sigmoid(x); choice c = s + bias; the `k_group` best
    of `group_count` equal expert groups (group score: max of c, or the sum of its two largest
    when group_mode = 1); the k best c among those groups (ties: lower expert first); weights
    s at the picks, divided by their sum (+ eps) when renorm, times `scale`."""
    rows, e = x.shape
    gsize = e // group_count
    c = np.empty(e, dtype=x.dtype)
    gs = np.empty(group_count, dtype=x.dtype)
    for r in range(rows):
        if norm_type == 0:
            m = x[r, 0]
            for j in range(1, e):
                m = max(m, x[r, j])
            tot = 0.0
            for j in range(e):
                out[r, j] = scalar_exp(x[r, j] - m)
                tot += out[r, j]
            for j in range(e):
                out[r, j] /= tot
        else:
            for j in range(e):
                out[r, j] = scalar_sigmoid(x[r, j])
        for j in range(e):
            c[j] = out[r, j] + bias[j]
        if group_count > 1:
            for gi in range(group_count):
                b1 = -np.inf
                b2 = -np.inf
                for j in range(gi * gsize, (gi + 1) * gsize):
                    if c[j] > b1:
                        b2 = b1
                        b1 = c[j]
                    elif c[j] > b2:
                        b2 = c[j]
                gs[gi] = b1 + b2 if group_mode == 1 else b1
            for _ in range(group_count - k_group):      # drop the worst groups
                worst = 0
                for gi in range(1, group_count):
                    if gs[gi] < gs[worst]:
                        worst = gi
                gs[worst] = np.inf
                for j in range(worst * gsize, (worst + 1) * gsize):
                    c[j] = -np.inf
        tot = 0.0
        for t in range(k):
            best = -1
            for j in range(e):
                if c[j] > -np.inf and (best < 0 or c[j] > c[best]):
                    best = j
            idx[r, t] = best
            y[r, t] = out[r, best]
            tot += out[r, best]
            c[best] = -np.inf
        for t in range(k):
            y[r, t] = (y[r, t] / (tot + eps) if renorm else y[r, t]) * scale


def moe_gating_top_k(x: np.ndarray, bias: np.ndarray | None, k: int, k_group: int,
                     group_count: int, group_select_mode: int, norm_type: int, renorm: int,
                     routed_scaling_factor: float, eps: float) -> list[np.ndarray]:
    """MoeGatingTopK of router logits x (T, E): (y (T, k), expert_idx int32, scores (T, E))."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    x2 = np.ascontiguousarray(x, dtype=work).reshape(-1, x.shape[-1])
    t, e = x2.shape
    b = (np.zeros(e, work) if bias is None
         else np.ascontiguousarray(np.asarray(bias, work).reshape(e)))
    y = np.empty((t, k), dtype=work)
    idx = np.empty((t, k), dtype=np.int32)
    out = np.empty((t, e), dtype=work)
    _gating_top_k(x2, b, int(k), int(k_group), int(group_count), int(group_select_mode),
                  int(norm_type), int(renorm), work.type(routed_scaling_factor), work.type(eps),
                  y, idx, out)
    return [y.astype(x.dtype), idx, out.astype(x.dtype)]
