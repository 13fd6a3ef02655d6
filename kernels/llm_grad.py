"""Kernels of the LLM ops' backward (CANN's gradient kernels): RmsNormGrad, RotaryMulGrad,
SwiGluGrad, FlashAttentionScoreGrad, the weight gradient of GroupedMatmul (group_type 2: the
groups split the contraction axis), MoeInitRoutingV2Grad and MoeFinalizeRoutingV2Grad.

As the forward kernels (kernels/llm.py): loops compute in fp32 (fp64 for fp64 input, so that
gradient checks run in float64) and the wrappers round once to the output dtype.
Formulas and sources: `ascendsim/ir/ops/llm_grads.py`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT
from .elementwise import scalar_exp, scalar_sigmoid
from .norm import work_dtype


def _w(a, work) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=work)


# ----------------------------------------------------------------------------- RmsNormGrad
@njit(**JIT)
def _rms_grad_rows(dy, x, rstd, g, dx, dg):
    """dx = rstd * (dy*g - xhat * mean(dy*g*xhat)), xhat = x*rstd; dg += dy*xhat."""
    rows, n = x.shape
    for j in range(n):
        dg[j] = 0.0
    for r in range(rows):
        k = rstd[r]
        m = 0.0
        for j in range(n):
            m += dy[r, j] * g[j] * x[r, j] * k
        m /= n
        for j in range(n):
            xhat = x[r, j] * k
            dx[r, j] = k * (dy[r, j] * g[j] - xhat * m)
            dg[j] += dy[r, j] * xhat


def rms_norm_grad(dy: np.ndarray, x: np.ndarray, rstd: np.ndarray, gamma: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(dx in x's dtype, dgamma in fp32, fp64 for fp64 x) of RmsNorm over gamma's axes."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    cols = int(np.prod(np.shape(gamma), dtype=np.int64))
    x2 = _w(x, work).reshape(-1, cols)
    dx = np.empty_like(x2)
    dg = np.empty(cols, dtype=work)
    _rms_grad_rows(_w(dy, work).reshape(-1, cols), x2, _w(rstd, work).reshape(-1),
                   _w(gamma, work).reshape(cols), dx, dg)
    return dx.reshape(x.shape).astype(x.dtype, copy=False), dg.reshape(np.shape(gamma))


# ----------------------------------------------------------------------------- RotaryMulGrad
@njit(**JIT)
def _rotary_grad_rows(dy, x, c, s, dx, dc, ds):
    """dx = dy*c + rotate_half^T(dy*s) (rotate_half^T(z) = cat(z2, -z1)); per element
    dc = dy*x, ds = dy*rotate_half(x) (summed to r1/r2's shapes by the wrapper)."""
    rows, d = x.shape
    h = d // 2
    for r in range(rows):
        for j in range(d):
            if j < h:
                back = dy[r, j + h] * s[r, j + h]
                rot = -x[r, j + h]
            else:
                back = -dy[r, j - h] * s[r, j - h]
                rot = x[r, j - h]
            dx[r, j] = dy[r, j] * c[r, j] + back
            dc[r, j] = dy[r, j] * x[r, j]
            ds[r, j] = dy[r, j] * rot


def _sum_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and a.shape[lead + i] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape) if axes else a


def rotary_mul_grad(x: np.ndarray, r1: np.ndarray, r2: np.ndarray, dy: np.ndarray
                    ) -> list[np.ndarray]:
    """(dx, dr1, dr2) of RotaryMul "half" mode; dr1/dr2 summed over r1/r2's broadcast axes."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    d = x.shape[-1]
    full = lambda a: _w(np.broadcast_to(np.asarray(a, work), x.shape), work).reshape(-1, d)  # noqa: E731
    x2 = _w(x, work).reshape(-1, d)
    dx, dc, ds = np.empty_like(x2), np.empty_like(x2), np.empty_like(x2)
    _rotary_grad_rows(full(dy), x2, full(r1), full(r2), dx, dc, ds)
    return [dx.reshape(x.shape).astype(x.dtype, copy=False),
            _sum_to(dc.reshape(x.shape), np.shape(r1)).astype(x.dtype, copy=False),
            _sum_to(ds.reshape(x.shape), np.shape(r2)).astype(x.dtype, copy=False)]


# ----------------------------------------------------------------------------- SwiGluGrad
@njit(**JIT)
def _swiglu_grad_rows(dy, x, dx):
    """y = silu(a)*b: da = dy*b*sig(a)*(1 + a*(1 - sig(a))), db = dy*silu(a)."""
    rows, n = x.shape
    h = n // 2
    for r in range(rows):
        for j in range(h):
            a = x[r, j]
            b = x[r, j + h]
            sg = scalar_sigmoid(a)
            dx[r, j] = dy[r, j] * b * sg * (1.0 + a * (1.0 - sg))
            dx[r, j + h] = dy[r, j] * a * sg


def swiglu_grad(dy: np.ndarray, x: np.ndarray, dim: int) -> np.ndarray:
    """CANN SwiGluGrad: the cotangent of SwiGlu's input x (halves split along `dim`)."""
    x = np.asarray(x)
    work = work_dtype(x.dtype)
    xt = _w(np.moveaxis(x, dim, -1), work)
    rows = xt.reshape(-1, xt.shape[-1])
    dyt = _w(np.moveaxis(np.asarray(dy), dim, -1), work).reshape(rows.shape[0], -1)
    dx = np.empty_like(rows)
    _swiglu_grad_rows(dyt, rows, dx)
    out = np.moveaxis(dx.reshape(xt.shape), -1, dim)
    return np.ascontiguousarray(out).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- attention
@njit(**JIT)
def _flash_attention_grad(q, k, v, dout, out, mask, scale, causal, dq, dk, dv):
    """Per query row: recompute the scores and their softmax (row max and sum, as the
    forward), then dV += P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
    dQ = scale dS K, dK += scale dS^T Q; GQA heads accumulate into their kv head."""
    b_n, h_n, s_n, d_n = q.shape
    hkv, t_n = k.shape[1], k.shape[2]
    group = h_n // hkv
    p = np.empty(t_n, dtype=q.dtype)
    for b in range(b_n):
        for h in range(h_n):
            kh = h // group
            for i in range(s_n):
                last = t_n - 1 if not causal else min(t_n - 1, i + t_n - s_n)
                m = -np.inf
                for t in range(last + 1):
                    sc = 0.0
                    for d in range(d_n):
                        sc += q[b, h, i, d] * k[b, kh, t, d]
                    p[t] = sc * scale + mask[b, h, i, t]
                    m = max(m, p[t])
                tot = 0.0
                for t in range(last + 1):
                    p[t] = scalar_exp(p[t] - m) if p[t] > -np.inf else 0.0
                    tot += p[t]
                inv = 1.0 / tot if tot > 0 else 0.0
                delta = 0.0
                for d in range(d_n):
                    delta += dout[b, h, i, d] * out[b, h, i, d]
                for t in range(last + 1):
                    pt = p[t] * inv
                    dp = 0.0
                    for d in range(d_n):
                        dp += dout[b, h, i, d] * v[b, kh, t, d]
                        dv[b, kh, t, d] += pt * dout[b, h, i, d]
                    ds = pt * (dp - delta) * scale
                    for d in range(d_n):
                        dq[b, h, i, d] += ds * k[b, kh, t, d]
                        dk[b, kh, t, d] += ds * q[b, h, i, d]


def flash_attention_grad(q: np.ndarray, k: np.ndarray, v: np.ndarray, dout: np.ndarray,
                         out: np.ndarray, mask: np.ndarray | None, scale: float, causal: bool
                         ) -> list[np.ndarray]:
    """(dq, dk, dv) of softmax(q k^T * scale + mask) v in BNSD layout (GQA, causal as the
    forward kernel); `out` is the forward's attention_out (for rowsum(dO * O))."""
    q = np.asarray(q)
    work = work_dtype(q.dtype)
    b, h, s, _ = q.shape
    t = k.shape[2]
    m = (np.zeros((1, 1, 1, 1), work) if mask is None else np.asarray(mask, dtype=work))
    m = np.broadcast_to(m.reshape((1,) * (4 - m.ndim) + m.shape), (b, h, s, t))
    dq = np.zeros(q.shape, dtype=work)
    dk = np.zeros(np.shape(k), dtype=work)
    dv = np.zeros(np.shape(v), dtype=work)
    _flash_attention_grad(_w(q, work), _w(k, work), _w(v, work), _w(dout, work),
                          _w(out, work), m, work.type(scale), bool(causal), dq, dk, dv)
    return [a.astype(q.dtype, copy=False) for a in (dq, dk, dv)]


# ----------------------------------------------------------------------------- GroupedMatmul
@njit(**JIT)
def _grouped_mm_k(xt, dy, ends, out):
    """out[e] = xt[:, rows of group e] @ dy[rows of group e] (groups split the T axis)."""
    start = 0
    for e in range(out.shape[0]):
        stop = min(ends[e], xt.shape[1])
        for kk in range(xt.shape[0]):
            for n in range(dy.shape[1]):
                acc = 0.0
                for t in range(start, stop):
                    acc += xt[kk, t] * dy[t, n]
                out[e, kk, n] = acc
        start = max(start, stop)


def grouped_matmul_split_k(xt: np.ndarray, dy: np.ndarray, group_list: np.ndarray
                           ) -> np.ndarray:
    """CANN GroupedMatmul group_type 2 (groups split K): xt (K, T), dy (T, N) ->
    (E, K, N), group e contracting its consecutive rows of T (the weight gradient)."""
    xt = np.asarray(xt)
    work = np.float64 if xt.dtype == np.float64 else np.float32
    gl = np.asarray(group_list, dtype=np.int64)
    out = np.zeros((gl.shape[0], xt.shape[0], np.shape(dy)[1]), dtype=work)
    _grouped_mm_k(_w(xt, work), _w(dy, work), gl, out)
    return out.astype(xt.dtype, copy=False)


# ----------------------------------------------------------------------------- MoE routing
@njit(**JIT)
def _init_routing_grad(dex, pos, k, dx):
    for t in range(dx.shape[0]):
        for j in range(k):
            row = pos[t * k + j]
            for c in range(dx.shape[1]):
                dx[t, c] += dex[row, c]


def moe_init_routing_grad(d_expanded: np.ndarray, expanded_row_idx: np.ndarray, k: int
                          ) -> np.ndarray:
    """CANN MoeInitRoutingV2Grad (dropless): dx[t] = sum_j d_expanded[row_idx[t*k + j]]."""
    d_expanded = np.asarray(d_expanded)
    work = work_dtype(d_expanded.dtype)
    pos = np.asarray(expanded_row_idx, dtype=np.int64)
    dx = np.zeros((pos.shape[0] // k, d_expanded.shape[1]), dtype=work)
    _init_routing_grad(_w(d_expanded, work), pos, int(k), dx)
    return dx.astype(d_expanded.dtype, copy=False)


@njit(**JIT)
def _finalize_grad(dy, ex, scales, pos, dex, dsc):
    t_n, k = scales.shape
    for t in range(t_n):
        for j in range(k):
            row = pos[t * k + j]
            w = scales[t, j]
            acc = 0.0
            for c in range(dy.shape[1]):
                dex[row, c] = w * dy[t, c]
                acc += ex[row, c] * dy[t, c]
            dsc[t, j] = acc


def moe_finalize_routing_grad(dy: np.ndarray, expanded: np.ndarray, scales: np.ndarray,
                              expanded_row_idx: np.ndarray) -> list[np.ndarray]:
    """CANN MoeFinalizeRoutingV2Grad (dropless, no bias): d_expanded[row_idx[t*k + j]] =
    scales[t, j] * dy[t], d_scales[t, j] = <expanded[row_idx[t*k + j]], dy[t]>."""
    expanded = np.asarray(expanded)
    work = work_dtype(expanded.dtype)
    sc = _w(scales, work)
    dex = np.zeros(expanded.shape, dtype=work)
    dsc = np.empty(sc.shape, dtype=work)
    _finalize_grad(_w(dy, work), _w(expanded, work), sc,
                   np.asarray(expanded_row_idx, np.int64), dex, dsc)
    return [dex.astype(expanded.dtype, copy=False),
            dsc.astype(np.asarray(scales).dtype, copy=False)]
