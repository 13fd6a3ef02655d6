"""Training kernels (CANN's training ops): BatchNorm training statistics, update and gradients,
max-pool with argmax and its gradient, softmax cross-entropy, LayerNorm gradients, dropout
masks, the fused optimizers (Momentum, Adam, AdamW, LAMB's two phases) and the float-status
overflow check. The formulas and their sources are in `ascendsim/ir/ops/training.py`.

Every kernel computes in fp32 (fp64 for fp64 input, so that gradient checks can run in
float64) and rounds once to the output dtype, as the vector unit does for fp16 data.
Reductions accumulate in float64 (numba's `0.0`), then round to the work dtype.
Per-channel vectors (C elements) are computed with numpy in the work dtype; every
per-element loop is a numba kernel.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .config import JIT


def work_dtype(*arrays: np.ndarray) -> np.dtype:
    """float64 when any array is float64, else float32 (fp16 computed in fp32)."""
    if any(np.asarray(a).dtype == np.float64 for a in arrays):
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _w(a, work: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=work)


def scalar(a, work: np.dtype):
    """The single value of a 0-d or one-element array, as a `work` scalar."""
    return work.type(np.asarray(a).reshape(-1)[0])


def as_nc_s(x: np.ndarray, work: np.dtype) -> np.ndarray:
    """(N, C, *spatial) as a contiguous (N, C, S) array of the work dtype."""
    x = np.asarray(x)
    return _w(x, work).reshape(x.shape[0], x.shape[1], -1)


# ----------------------------------------------------------------------------- BatchNorm
@njit(**JIT)
def _bn_reduce(x, s, q):
    """s[c] = sum of x[:, c, :], q[c] = sum of x[:, c, :]^2 (float64 accumulators)."""
    n0, c0, s0 = x.shape
    for c in range(c0):
        a = 0.0
        b = 0.0
        for n in range(n0):
            for k in range(s0):
                v = x[n, c, k]
                a += v
                b += v * v
        s[c] = a
        q[c] = b


def bn_training_reduce(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel sum and square sum over every axis but 1 (float32, float64 for fp64 x)."""
    work = work_dtype(x)
    x3 = as_nc_s(x, work)
    s = np.empty(x3.shape[1], dtype=work)
    q = np.empty(x3.shape[1], dtype=work)
    _bn_reduce(x3, s, q)
    return s, q


@njit(**JIT)
def _bn_apply(x, k, m, off, y):
    """y[n, c, s] = (x[n, c, s] - m[c]) * k[c] + off[c] (k = rstd * scale)."""
    n0, c0, s0 = x.shape
    for n in range(n0):
        for c in range(c0):
            kc, mc, oc = k[c], m[c], off[c]
            for v in range(s0):
                y[n, c, v] = (x[n, c, v] - mc) * kc + oc


def batch_stats(s: np.ndarray, q: np.ndarray, n: int, work: np.dtype
                ) -> tuple[np.ndarray, np.ndarray]:
    """Batch mean and biased variance from the sums (variance clamped at 0 against rounding)."""
    inv_n = work.type(1.0 / n)
    bm = _w(s, work) * inv_n
    bv = np.maximum(_w(q, work) * inv_n - bm * bm, work.type(0))
    return bm, bv


def bn_training_update(x, s, q, scale, offset, mean, var, factor: float, eps: float
                       ) -> list[np.ndarray]:
    """(y, mean_out, variance_out, batch_mean, batch_variance); see BNTrainingUpdate."""
    x = np.asarray(x)
    work = work_dtype(x, s, scale, mean)
    x3 = as_nc_s(x, work)
    n = x3.shape[0] * x3.shape[2]
    bm, bv = batch_stats(s, q, n, work)
    rstd = work.type(1) / np.sqrt(bv + work.type(eps))
    k = rstd * _w(scale, work)
    y3 = np.empty_like(x3)
    _bn_apply(x3, k, bm, _w(offset, work), y3)
    f = work.type(factor)
    unbias = work.type(n / (n - 1)) if n > 1 else work.type(1)
    stat = np.dtype(np.asarray(mean).dtype)
    mean_out = _w(mean, work) * (work.type(1) - f) + bm * f
    var_out = _w(var, work) * (work.type(1) - f) + bv * unbias * f
    return [y3.reshape(x.shape).astype(x.dtype, copy=False), mean_out.astype(stat),
            var_out.astype(stat), bm.astype(stat), bv.astype(stat)]


@njit(**JIT)
def _bn_update_grad(g, x, bm, rstd, ds, do):
    """ds[c] = sum g * (x - bm) * rstd, do[c] = sum g (float64 accumulators)."""
    n0, c0, s0 = x.shape
    for c in range(c0):
        a = 0.0
        b = 0.0
        m, r = bm[c], rstd[c]
        for n in range(n0):
            for k in range(s0):
                gv = g[n, c, k]
                a += gv * ((x[n, c, k] - m) * r)
                b += gv
        ds[c] = a
        do[c] = b


def bn_training_update_grad(grads, x, bm, bv, eps: float) -> list[np.ndarray]:
    """(diff_scale, diff_offset) per channel; see BNTrainingUpdateGrad."""
    work = work_dtype(grads, x, bm)
    g3, x3 = as_nc_s(grads, work), as_nc_s(x, work)
    rstd = work.type(1) / np.sqrt(_w(bv, work) + work.type(eps))
    ds = np.empty(x3.shape[1], dtype=work)
    do = np.empty(x3.shape[1], dtype=work)
    _bn_update_grad(g3, x3, _w(bm, work), rstd, ds, do)
    stat = np.asarray(bm).dtype
    return [ds.astype(stat), do.astype(stat)]


@njit(**JIT)
def _bn_reduce_grad(g, x, bm, rstd, k, ds_n, do_n, dx):
    """dx = k * (g - do/n - (x - bm) * rstd * ds/n) with k = scale * rstd per channel."""
    n0, c0, s0 = x.shape
    for n in range(n0):
        for c in range(c0):
            m, r, kc, a, b = bm[c], rstd[c], k[c], ds_n[c], do_n[c]
            for v in range(s0):
                xhat = (x[n, c, v] - m) * r
                dx[n, c, v] = kc * (g[n, c, v] - b - xhat * a)


def bn_training_reduce_grad(grads, x, ds, do, scale, bm, bv, eps: float) -> np.ndarray:
    """dx of batch-statistics BatchNorm; see BNTrainingReduceGrad."""
    grads = np.asarray(grads)
    work = work_dtype(grads, x, ds, scale)
    g3, x3 = as_nc_s(grads, work), as_nc_s(x, work)
    n = x3.shape[0] * x3.shape[2]
    rstd = work.type(1) / np.sqrt(_w(bv, work) + work.type(eps))
    k = _w(scale, work) * rstd
    inv_n = work.type(1.0 / n)
    dx = np.empty_like(g3)
    _bn_reduce_grad(g3, x3, _w(bm, work), rstd, k, _w(ds, work) * inv_n,
                    _w(do, work) * inv_n, dx)
    return dx.reshape(grads.shape).astype(grads.dtype, copy=False)


# ----------------------------------------------------------------------------- max pool
@njit(**JIT)
def _scatter_planes(grad, idx, dx):
    """dx[p, idx[p, j]] += grad[p, j] for every plane p and output position j."""
    for p in range(grad.shape[0]):
        for j in range(grad.shape[1]):
            dx[p, idx[p, j]] += grad[p, j]


def max_pool_grad_with_argmax(x, grad, argmax) -> np.ndarray:
    """Exact scatter-add of `grad` to the argmax positions of each (n, c) plane of x
    (ValueError for an index outside the plane; the executor names the node)."""
    x, grad = np.asarray(x), np.asarray(grad)
    work = work_dtype(x, grad)
    planes = x.shape[0] * x.shape[1]
    plane = int(np.prod(x.shape[2:], dtype=np.int64))
    idx = np.ascontiguousarray(argmax, dtype=np.int64).reshape(planes, -1)
    if idx.size and (idx.min() < 0 or idx.max() >= plane):
        raise ValueError(f"argmax holds indices {int(idx.min())}..{int(idx.max())}, outside "
                         f"the H*W plane of {plane} elements")
    dx = np.zeros((planes, plane), dtype=work)
    _scatter_planes(_w(grad, work).reshape(planes, -1), idx, dx)
    return dx.reshape(x.shape).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- cross-entropy
@njit(**JIT)
def _softmax_xent(x, lab, loss, back):
    """Per row: loss = -sum(lab * (x - lse)), back = softmax(x) - lab (max-subtracted)."""
    rows, c = x.shape
    for r in range(rows):
        m = x[r, 0]
        for j in range(1, c):
            if x[r, j] > m:
                m = x[r, j]
        s = 0.0
        for j in range(c):
            e = np.exp(x[r, j] - m)
            back[r, j] = e
            s += e
        lse = m + np.log(s)
        inv = 1.0 / s
        acc = 0.0
        for j in range(c):
            acc -= lab[r, j] * (x[r, j] - lse)
            back[r, j] = back[r, j] * inv - lab[r, j]
        loss[r] = acc


def softmax_cross_entropy_with_logits(features, labels) -> list[np.ndarray]:
    """(loss[N], backprop[N, C]); see SoftmaxCrossEntropyWithLogits."""
    features = np.asarray(features)
    work = work_dtype(features, labels)
    x, lab = _w(features, work), _w(labels, work)
    loss = np.empty(x.shape[0], dtype=work)
    back = np.empty_like(x)
    _softmax_xent(x, lab, loss, back)
    return [loss.astype(features.dtype), back.astype(features.dtype)]


# ----------------------------------------------------------------------------- LayerNorm
@njit(**JIT)
def _ln_x_backprop(dy, x, mean, rstd, gamma, dx):
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, g = dy * gamma."""
    rows, cols = x.shape
    for r in range(rows):
        m, k = mean[r], rstd[r]
        a = 0.0
        b = 0.0
        for j in range(cols):
            g = dy[r, j] * gamma[j]
            a += g
            b += g * ((x[r, j] - m) * k)
        a /= cols
        b /= cols
        for j in range(cols):
            xhat = (x[r, j] - m) * k
            dx[r, j] = k * (dy[r, j] * gamma[j] - a - xhat * b)


@njit(**JIT)
def _ln_beta_gamma(dy, x, mean, rstd, dgamma, dbeta):
    """dgamma[j] = sum_r dy * xhat, dbeta[j] = sum_r dy (float64 accumulators)."""
    rows, cols = x.shape
    acc_g = np.zeros(cols)
    acc_b = np.zeros(cols)
    for r in range(rows):
        m, k = mean[r], rstd[r]
        for j in range(cols):
            acc_g[j] += dy[r, j] * ((x[r, j] - m) * k)
            acc_b[j] += dy[r, j]
    for j in range(cols):
        dgamma[j] = acc_g[j]
        dbeta[j] = acc_b[j]


def _rows(x: np.ndarray, axis: int, work: np.dtype) -> np.ndarray:
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return _w(x, work).reshape(rows, -1)


def layer_norm_x_backprop(dy, x, mean, rstd, gamma, axis: int) -> np.ndarray:
    """dx of LayerNorm over axes [axis, rank); see LayerNormXBackprop."""
    dy, x = np.asarray(dy), np.asarray(x)
    work = work_dtype(dy, x, gamma)
    x2, dy2 = _rows(x, axis, work), _rows(dy, axis, work)
    g = np.broadcast_to(_w(gamma, work), x.shape[axis:]).reshape(-1)
    dx = np.empty_like(x2)
    _ln_x_backprop(dy2, x2, _w(mean, work).reshape(-1), _w(rstd, work).reshape(-1),
                   np.ascontiguousarray(g), dx)
    return dx.reshape(x.shape).astype(dy.dtype, copy=False)


def layer_norm_beta_gamma_backprop(dy, x, mean, rstd, axis: int) -> list[np.ndarray]:
    """(dgamma, dbeta) of shape x.shape[axis:], float32 (float64 for fp64 input)."""
    dy, x = np.asarray(dy), np.asarray(x)
    work = work_dtype(dy, x)
    x2, dy2 = _rows(x, axis, work), _rows(dy, axis, work)
    dgamma = np.empty(x2.shape[1], dtype=work)
    dbeta = np.empty(x2.shape[1], dtype=work)
    _ln_beta_gamma(dy2, x2, _w(mean, work).reshape(-1), _w(rstd, work).reshape(-1),
                   dgamma, dbeta)
    shape = x.shape[axis:]
    return [dgamma.reshape(shape), dbeta.reshape(shape)]


# ----------------------------------------------------------------------------- dropout
def mask_bytes(numel: int) -> int:
    """Bytes of CANN's bit-packed dropout mask: 128-element groups of 16 bytes."""
    return -(-int(numel) // 128) * 16


def drop_out_gen_mask(shape, keep_prob: float, seed: int, seed2: int) -> np.ndarray:
    """Bit-packed keep mask (bit i of byte j keeps element 8j + i, little-endian bit order),
    Bernoulli(keep_prob) from numpy's PCG64 seeded with (seed, seed2): deterministic."""
    numel = int(np.prod(shape, dtype=np.int64))
    rng = np.random.default_rng([int(seed), int(seed2)])
    keep = rng.random(numel, dtype=np.float32) < np.float32(keep_prob)
    out = np.zeros(mask_bytes(numel), dtype=np.uint8)
    packed = np.packbits(keep, bitorder="little")
    out[:packed.size] = packed
    return out


def unpack_mask(mask: np.ndarray, numel: int) -> np.ndarray:
    """Keep flags (uint8 0/1) for `numel` elements: a bit-packed mask of mask_bytes(numel)
    bytes, or a mask of one byte per element."""
    mask = np.asarray(mask, dtype=np.uint8).reshape(-1)
    if mask.size == numel:
        return (mask != 0).astype(np.uint8)
    return np.unpackbits(mask, bitorder="little")[:numel]


@njit(**JIT)
def _do_mask(x, keep, scale, y):
    for i in range(x.size):
        y[i] = x[i] * scale if keep[i] else 0.0


def drop_out_do_mask(x, mask, keep_prob) -> np.ndarray:
    """y = x * mask / keep_prob (0 where dropped)."""
    x = np.asarray(x)
    work = work_dtype(x)
    xf = _w(x, work).reshape(-1)
    kp = scalar(keep_prob, work)
    scale = work.type(1) / kp if kp > 0 else work.type(0)
    y = np.empty_like(xf)
    _do_mask(xf, unpack_mask(mask, xf.size), scale, y)
    return y.reshape(x.shape).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- optimizers
@njit(**JIT)
def _momentum(var, accum, grad, lr, mom, nesterov, var_o, acc_o):
    for i in range(var.size):
        a = accum[i] * mom + grad[i]
        acc_o[i] = a
        if nesterov:
            var_o[i] = var[i] - lr * (grad[i] + mom * a)
        else:
            var_o[i] = var[i] - lr * a


@njit(**JIT)
def _adam(var, m, v, grad, lr_t, b1, b2, eps, decay, nesterov, var_o, m_o, v_o):
    """Adam in TF's ApplyAdam form; `decay` (1 - lr*wd, AdamW) scales var first."""
    one = b1 - b1 + 1
    for i in range(var.size):
        g = grad[i]
        mi = m[i] + (g - m[i]) * (one - b1)
        vi = v[i] + (g * g - v[i]) * (one - b2)
        m_o[i] = mi
        v_o[i] = vi
        step = mi * b1 + (one - b1) * g if nesterov else mi
        var_o[i] = var[i] * decay - lr_t * step / (np.sqrt(vi) + eps)


def _flat(arrays, work) -> list[np.ndarray]:
    return [_w(a, work).reshape(-1) for a in arrays]


def _outs(results, like: np.ndarray) -> list[np.ndarray]:
    return [r.reshape(like.shape).astype(like.dtype, copy=False) for r in results]


def apply_momentum(var, accum, lr, grad, momentum, use_nesterov: bool) -> list[np.ndarray]:
    var = np.asarray(var)
    work = work_dtype(var, grad)
    fv, fa, fg = _flat((var, accum, grad), work)
    vo, ao = np.empty_like(fv), np.empty_like(fv)
    _momentum(fv, fa, fg, scalar(lr, work), scalar(momentum, work), bool(use_nesterov), vo, ao)
    return _outs((vo, ao), var)


def apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, eps, grad,
               weight_decay=None, use_nesterov: bool = False) -> list[np.ndarray]:
    """ApplyAdam (weight_decay None) or ApplyAdamW (var *= 1 - lr*weight_decay first)."""
    var = np.asarray(var)
    work = work_dtype(var, grad)
    one = work.type(1)
    b1p, b2p, lr_s = scalar(beta1_power, work), scalar(beta2_power, work), scalar(lr, work)
    lr_t = lr_s * np.sqrt(one - b2p) / (one - b1p)
    decay = one if weight_decay is None else one - lr_s * scalar(weight_decay, work)
    fv, fm, fvv, fg = _flat((var, m, v, grad), work)
    vo, mo, vvo = np.empty_like(fv), np.empty_like(fv), np.empty_like(fv)
    _adam(fv, fm, fvv, fg, work.type(lr_t), scalar(beta1, work), scalar(beta2, work),
          scalar(eps, work), work.type(decay), bool(use_nesterov), vo, mo, vvo)
    return _outs((vo, mo, vvo), var)


@njit(**JIT)
def _lamb_phase1(grad, v, m, var, b1, omb1, b2, omb2, eps, c1, c2, wd, upd, v_o, m_o):
    """next_v/next_m moments, bias-corrected (divided by c1 = 1 - b1^t, c2 = 1 - b2^t),
    update = m_hat / (sqrt(v_hat) + eps) + wd * var."""
    for i in range(var.size):
        g = grad[i]
        nv = v[i] * b2 + g * g * omb2
        nm = m[i] * b1 + g * omb1
        v_o[i] = nv
        m_o[i] = nm
        upd[i] = (nm / c1) / (np.sqrt(nv / c2) + eps) + wd * var[i]


def lamb_apply_optimizer_assign(grad, v, m, var, beta1, omb1, beta2, omb2, eps, step,
                                weight_decay) -> list[np.ndarray]:
    var = np.asarray(var)
    work = work_dtype(var, grad)
    one = work.type(1)
    b1, b2, t = scalar(beta1, work), scalar(beta2, work), scalar(step, work)
    # beta^t as exp(t * ln beta), the form of CANN's kernel
    c1 = one - work.type(np.exp(t * np.log(b1)))
    c2 = one - work.type(np.exp(t * np.log(b2)))
    fg, fv, fm, fw = _flat((grad, v, m, var), work)
    upd, vo, mo = np.empty_like(fg), np.empty_like(fg), np.empty_like(fg)
    _lamb_phase1(fg, fv, fm, fw, b1, scalar(omb1, work), b2, scalar(omb2, work),
                 scalar(eps, work), c1, c2, scalar(weight_decay, work), upd, vo, mo)
    return _outs((upd, vo, mo), var)


@njit(**JIT)
def _axpy(var, upd, a, out):
    for i in range(var.size):
        out[i] = var[i] - a * upd[i]


def lamb_trust_ratio(w_norm: float, g_norm: float, work: np.dtype) -> float:
    """w_norm / g_norm when both are > 0, else 1 (g_norm guarded by the smallest normal)."""
    tiny = work.type(2.0 ** -126) if work != np.float64 else work.type(2.0 ** -1022)
    if w_norm > 0 and g_norm > 0:
        return work.type(w_norm / (g_norm + tiny))
    return work.type(1)


def lamb_apply_weight_assign(w_norm, g_norm, lr, update, var) -> np.ndarray:
    var = np.asarray(var)
    work = work_dtype(var, update)
    ratio = lamb_trust_ratio(scalar(w_norm, work), scalar(g_norm, work), work)
    fw, fu = _flat((var, update), work)
    out = np.empty_like(fw)
    _axpy(fw, fu, work.type(scalar(lr, work) * ratio), out)
    return _outs((out,), var)[0]


# ----------------------------------------------------------------------------- float status
def npu_get_float_status(arrays: list) -> np.ndarray:
    """float32[8]: element 0 is 1.0 when any input holds inf or nan, the rest 0."""
    status = np.zeros(8, dtype=np.float32)
    for a in arrays:
        if a is None:
            continue
        a = np.asarray(a)
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            status[0] = 1.0
            break
    return status
