"""CANN's training kernels (ascendsim/ir/ops/training.py): values against float64 numpy
references, gradient kernels against float64 central finite differences of their forward
ops, determinism of the dropout mask, shape errors naming the node.

Tolerances: results of fp32 kernels are compared with the shared fp32 table (a few ulps of
sums over <= 1000 elements); finite differences run in float64 with h = 1e-6 on well-
conditioned inputs (no max-pool ties, variance far from 0), where the central difference
error (h^2 * third derivative ~ 1e-12) and the rounding (1e-16 / h ~ 1e-10) stay far below
the 1e-6 relative bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import HYPOTHESIS, assert_close

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.registry import get_op

FD_H = 1e-6
FD_RTOL = 1e-6


def run(op: str, *args, **attrs):
    opdef = get_op(op)
    outs = opdef.kernel([np.asarray(a) if a is not None else None for a in args],
                        {**opdef.attrs, **attrs})
    return outs[0] if len(outs) == 1 else outs


def directional_check(f, x: np.ndarray, grad: np.ndarray, rng, directions: int = 3) -> None:
    """<grad, d> equals the central difference of the scalar f along seeded directions d."""
    for _ in range(directions):
        d = rng.standard_normal(x.shape)
        fd = (f(x + FD_H * d) - f(x - FD_H * d)) / (2 * FD_H)
        an = float(np.sum(grad * d))
        assert abs(fd - an) <= FD_RTOL * max(1.0, abs(fd)), f"directional {an} vs fd {fd}"


# ----------------------------------------------------------------------------- BatchNorm
def bn_reference(x, scale, offset, mean, var, factor, eps):
    x = x.astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    s, q = x.sum(axis=axes), (x * x).sum(axis=axes)
    bm = s / n
    bv = q / n - bm * bm
    shp = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - bm.reshape(shp)) / np.sqrt(bv.reshape(shp) + eps) * scale.reshape(shp) \
        + offset.reshape(shp)
    return (s, q, y, mean * (1 - factor) + bm * factor,
            var * (1 - factor) + bv * n / (n - 1) * factor, bm, bv)


def _bn_inputs(rng, shape, dtype="float32"):
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    params = [rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c), rng.uniform(-1, 1, c),
              rng.uniform(0.5, 2, c)]
    return x, [p.astype("float64" if dtype == "float64" else "float32") for p in params]


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 16, 7, 7), (3, 5)])
def test_bn_training_reduce_and_update_match_numpy(rng, shape):
    x, (scale, offset, mean, var) = _bn_inputs(rng, shape)
    s, q = run("BNTrainingReduce", x)
    ref = bn_reference(x, scale, offset, mean, var, 0.1, 1e-5)
    # sums of up to ~800 elements of magnitude ~3: fp32 accumulation error ~1e-4 absolute
    assert_close(s, ref[0], "float32", scale=10)
    assert_close(q, ref[1], "float32", scale=10)
    outs = run("BNTrainingUpdate", x, s, q, scale, offset, mean, var, factor=0.1, epsilon=1e-5)
    for got, want in zip(outs, ref[2:]):
        assert_close(got, want, "float32", scale=10)


@HYPOTHESIS
@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4).filter(
    lambda s: np.prod(s) // s[1] > 1), seed=st.integers(0, 2**16))
def test_bn_training_kernels_over_shapes(shape, seed):
    """Any (N, C, ...) shape with more than one element per channel."""
    rng = np.random.default_rng(seed)
    x, (scale, offset, mean, var) = _bn_inputs(rng, tuple(shape))
    s, q = run("BNTrainingReduce", x)
    ref = bn_reference(x, scale, offset, mean, var, 0.1, 1e-5)
    y, mean_out, var_out, bm, bv = run("BNTrainingUpdate", x, s, q, scale, offset, mean, var)
    # the sums accumulate in float64 from fp32 products: a few ulps
    np.testing.assert_allclose(s, ref[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(q, ref[1], rtol=1e-5, atol=1e-5)
    # variance = E[x^2] - mean^2 cancels: its error is ~ulps of E[x^2], and y's relative error
    # is that over (variance + eps)
    ex2 = ref[1] / (x.size // x.shape[1])
    np.testing.assert_allclose(bv, ref[6], atol=1e-6 * float(ex2.max()) + 1e-7)
    np.testing.assert_allclose(var_out, ref[4], rtol=1e-5, atol=1e-6 * float(ex2.max()))
    np.testing.assert_allclose(bm, ref[5], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mean_out, ref[3], rtol=1e-5, atol=1e-6)
    cond = (ex2 / (ref[6] + 1e-5)).reshape((1, -1) + (1,) * (x.ndim - 2))
    err = np.abs(y - ref[2])
    assert np.all(err <= 1e-5 * (1 + cond) * (1 + np.abs(ref[2]))), float(err.max())


def test_bn_training_update_fp16_rounds_once(rng):
    x, (scale, offset, mean, var) = _bn_inputs(rng, (2, 4, 3, 3), "float16")
    s, q = run("BNTrainingReduce", x)
    assert s.dtype == np.float32 and q.dtype == np.float32
    y, mo, vo, bm, bv = run("BNTrainingUpdate", x, s, q, scale, offset, mean, var)
    assert y.dtype == np.float16 and mo.dtype == np.float32
    ref = bn_reference(x, scale, offset, mean, var, 0.1, 1e-5)
    assert_close(y, ref[2], "float16")
    assert_close(bv, ref[6], "float32", scale=10)


def test_bn_gradient_kernels_equal_finite_differences_of_update(rng):
    """BNTrainingUpdateGrad/ReduceGrad = d/d(scale, offset, x) of sum(grads * y) with y from
    BNTrainingReduce + BNTrainingUpdate, in float64."""
    x, (scale, offset, mean, var) = _bn_inputs(rng, (3, 4, 3, 2), "float64")
    grads = rng.standard_normal(x.shape)
    eps = 1e-3

    def loss(xv, sc=scale, of=offset):
        s, q = run("BNTrainingReduce", xv)
        y = run("BNTrainingUpdate", xv, s, q, sc, of, mean, var, epsilon=eps)[0]
        return float(np.sum(grads * y))

    s, q = run("BNTrainingReduce", x)
    _, _, _, bm, bv = run("BNTrainingUpdate", x, s, q, scale, offset, mean, var, epsilon=eps)
    ds, do = run("BNTrainingUpdateGrad", grads, x, bm, bv, epsilon=eps)
    dx = run("BNTrainingReduceGrad", grads, x, ds, do, scale, bm, bv, epsilon=eps)
    assert dx.dtype == np.float64
    directional_check(loss, x, dx, rng)
    directional_check(lambda sc: loss(x, sc=sc), scale, ds, rng)
    directional_check(lambda of: loss(x, of=of), offset, do, rng)


# ----------------------------------------------------------------------------- max pool
def maxpool_reference(x, k, s, p):
    """(y, argmax) by loops; argmax = flat index in the (H, W) plane, first max wins."""
    n, c, h, w = x.shape
    ho = (h + p[0] + p[2] - k[0]) // s[0] + 1
    wo = (w + p[1] + p[3] - k[1]) // s[1] + 1
    y = np.full((n, c, ho, wo), -np.inf)
    arg = np.zeros((n, c, ho, wo), dtype=np.int64)
    for b, ch, i, j in np.ndindex(n, c, ho, wo):
        for a, e in np.ndindex(k[0], k[1]):
            r, col = i * s[0] - p[0] + a, j * s[1] - p[1] + e
            if 0 <= r < h and 0 <= col < w and x[b, ch, r, col] > y[b, ch, i, j]:
                y[b, ch, i, j] = x[b, ch, r, col]
                arg[b, ch, i, j] = r * w + col
    return y, arg


@pytest.mark.parametrize("k,s,p", [((3, 3), (2, 2), (1, 1, 1, 1)), ((2, 2), (2, 2), (0, 0, 0, 0)),
                                   ((3, 2), (1, 2), (0, 1, 1, 0))])
def test_max_pool_with_argmax_and_grad_match_numpy(rng, k, s, p):
    x = rng.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(np.float32) / 10
    attrs = {"kernel_shape": list(k), "strides": list(s), "pads": list(p)}
    y, arg = run("MaxPoolWithArgmax", x, **attrs)
    ry, rarg = maxpool_reference(x, k, s, p)
    np.testing.assert_array_equal(y, ry.astype(np.float32))
    assert arg.dtype == np.int32
    np.testing.assert_array_equal(arg, rarg)
    grad = rng.standard_normal(y.shape).astype(np.float32)
    dx = run("MaxPoolGradWithArgmax", x, grad, arg, **attrs)
    ref = np.zeros((6, 7 * 6))
    np.add.at(ref, (np.repeat(np.arange(6), grad[0, 0].size), rarg.reshape(-1)),
              grad.astype(np.float64).reshape(-1))
    assert_close(dx, ref.reshape(x.shape), "float32")


def test_max_pool_grad_is_the_exact_gradient(rng):
    x = rng.permutation(2 * 2 * 6 * 6).reshape(2, 2, 6, 6).astype(np.float64) / 7
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    y, arg = run("MaxPoolWithArgmax", x, **attrs)
    w = rng.standard_normal(y.shape)
    dx = run("MaxPoolGradWithArgmax", x, w, arg, **attrs)
    directional_check(lambda xv: float(np.sum(w * run("MaxPoolWithArgmax", xv, **attrs)[0])),
                      x, dx, rng)


def test_max_pool_grad_rejects_out_of_plane_argmax():
    g = asim.Graph("t")
    x = g.input("x", (1, 1, 4, 4))
    grad = g.input("grad", (1, 1, 2, 2))
    arg = g.input("arg", (1, 1, 2, 2), "int32")
    g.output(g.max_pool_grad_with_argmax(x, grad, arg, kernel_shape=[2, 2], strides=[2, 2],
                                         name="mpg"))
    feeds = {"x": np.zeros((1, 1, 4, 4), np.float32), "grad": np.ones((1, 1, 2, 2), np.float32),
             "arg": np.full((1, 1, 2, 2), 16, np.int32)}
    with pytest.raises(GraphError, match="'mpg'.*outside the H\\*W plane"):
        execute(g, feeds)


# ----------------------------------------------------------------------------- cross-entropy
def test_softmax_cross_entropy_matches_numpy_and_its_gradient(rng):
    f = rng.uniform(-4, 4, (5, 7))
    lab = rng.dirichlet(np.ones(7), size=5)
    loss, back = run("SoftmaxCrossEntropyWithLogits", f.astype(np.float32),
                     lab.astype(np.float32))
    lse = np.log(np.exp(f - f.max(1, keepdims=True)).sum(1)) + f.max(1)
    ref_loss = -(lab * (f - lse[:, None])).sum(1)
    ref_back = np.exp(f - lse[:, None]) - lab
    assert_close(loss, ref_loss, "float32", scale=10)
    assert_close(back, ref_back, "float32")
    loss64, back64 = run("SoftmaxCrossEntropyWithLogits", f, lab)
    directional_check(lambda fv: float(run("SoftmaxCrossEntropyWithLogits", fv, lab)[0].sum()),
                      f, back64, rng)


def test_softmax_cross_entropy_is_stable_for_large_logits():
    f = np.float32([[1000, 1001, 1002], [-1000, -1000, -1000]])
    lab = np.float32([[0, 0, 1], [1, 0, 0]])
    loss, back = run("SoftmaxCrossEntropyWithLogits", f, lab)
    assert np.all(np.isfinite(loss)) and np.all(np.isfinite(back))
    np.testing.assert_allclose(loss, [0.40760596, np.log(3)], rtol=1e-6)


# ----------------------------------------------------------------------------- LayerNorm
def ln_forward(x, gamma, beta, axis, eps):
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return (x - mean) * rstd * gamma + beta, mean, rstd


@pytest.mark.parametrize("shape,axis", [((4, 6), -1), ((2, 3, 8), 2), ((2, 3, 4), 1)])
def test_layer_norm_backprops_equal_finite_differences(rng, shape, axis):
    x = rng.standard_normal(shape) * 1.5
    ax = axis % len(shape)
    gamma = rng.uniform(0.5, 1.5, shape[ax:])
    beta = rng.uniform(-1, 1, shape[ax:])
    dy = rng.standard_normal(shape)
    eps = 1e-5
    _, mean, rstd = ln_forward(x, gamma, beta, ax, eps)
    dx = run("LayerNormXBackprop", dy, x, mean, rstd, gamma, axis=axis)
    dgamma, dbeta = run("LayerNormBetaGammaBackprop", dy, x, mean, rstd, axis=axis)
    assert dgamma.shape == shape[ax:]
    directional_check(lambda xv: float(np.sum(dy * ln_forward(xv, gamma, beta, ax, eps)[0])),
                      x, dx, rng)
    directional_check(lambda gv: float(np.sum(dy * ln_forward(x, gv, beta, ax, eps)[0])),
                      gamma, dgamma, rng)
    directional_check(lambda bv: float(np.sum(dy * ln_forward(x, gamma, bv, ax, eps)[0])),
                      beta, dbeta, rng)


def test_layer_norm_backprop_takes_onnx_layer_norm_statistics(rng):
    """mean/rstd straight from LayerNormalization's Mean/InvStdDev outputs (fp32)."""
    g = asim.Graph("t")
    x = g.input("x", (4, 16))
    dy = g.input("dy", (4, 16))
    gamma = g.const(rng.uniform(0.5, 1.5, 16).astype(np.float32))
    beta = g.const(np.zeros(16, np.float32))
    _, mean, rstd = g.layer_normalization(x, gamma, beta, num_outputs=3)
    g.output(g.layer_norm_x_backprop(dy, x, mean, rstd, gamma),
             *g.layer_norm_beta_gamma_backprop(dy, x, mean, rstd))
    xv = rng.standard_normal((4, 16)).astype(np.float32)
    dyv = rng.standard_normal((4, 16)).astype(np.float32)
    out = list(execute(g, {"x": xv, "dy": dyv}).values())
    gv = g.const_value(gamma.name).astype(np.float64)
    _, m, r = ln_forward(xv.astype(np.float64), gv, 0.0, 1, 1e-5)
    ref_dx = run("LayerNormXBackprop", dyv.astype(np.float64), xv.astype(np.float64), m, r, gv)
    # the fp32 statistics carry ~1e-6 relative error into dx
    assert_close(out[0], ref_dx, "float32", scale=10)
    assert out[1].dtype == np.float32 and out[1].shape == (16,)


# ----------------------------------------------------------------------------- dropout
def test_dropout_mask_is_cann_bit_packed_deterministic_and_keeps_keep_prob(rng):
    shape = [4, 25, 128]                          # 12800 elements: 100 groups of 128
    m1 = run("DropOutGenMask", shape=shape, keep_prob=0.8, seed=3, seed2=7)
    m2 = run("DropOutGenMask", shape=shape, keep_prob=0.8, seed=3, seed2=7)
    m3 = run("DropOutGenMask", shape=shape, keep_prob=0.8, seed=3, seed2=8)
    assert m1.dtype == np.uint8 and m1.shape == (100 * 16,)
    np.testing.assert_array_equal(m1, m2)
    assert not np.array_equal(m1, m3)
    keep = np.unpackbits(m1, bitorder="little")
    # Binomial(12800, 0.8): std 45 elements; 5 std bound
    assert abs(int(keep.sum()) - 0.8 * 12800) < 5 * 45
    assert run("DropOutGenMask", shape=[3, 5], keep_prob=0.5).shape == (16,)


def test_dropout_do_mask_scales_kept_values(rng):
    x = rng.standard_normal((3, 50)).astype(np.float32)
    mask = run("DropOutGenMask", shape=[3, 50], keep_prob=0.6, seed=1)
    keep = np.unpackbits(mask, bitorder="little")[:150].reshape(3, 50)
    y = run("DropOutDoMask", x, mask, np.float32(0.6))
    assert_close(y, x.astype(np.float64) * keep / 0.6, "float32")
    # the same mask given one byte per element
    np.testing.assert_array_equal(run("DropOutDoMask", x, keep.astype(np.uint8),
                                      np.float32(0.6)), y)


def test_dropout_gen_mask_is_never_folded():
    assert get_op("DropOutGenMask").deterministic is False


# ----------------------------------------------------------------------------- optimizers
def _opt_inputs(rng, n=37):
    return [rng.standard_normal(n).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("nesterov", [0, 1])
def test_apply_momentum_matches_formula(rng, nesterov):
    var, accum, grad = _opt_inputs(rng)
    lr, mom = np.float32(0.05), np.float32(0.9)
    v, a = run("ApplyMomentum", var, accum, lr, grad, mom, use_nesterov=nesterov)
    ra = accum.astype(np.float64) * 0.9 + grad
    rv = var - 0.05 * (grad + 0.9 * ra if nesterov else ra)
    assert_close(a, ra, "float32")
    assert_close(v, rv, "float32")


def _adam_ref(var, m, v, b1p, b2p, lr, b1, b2, eps, g, wd=0.0):
    var, m, v, g = (a.astype(np.float64) for a in (var, m, v, g))
    var = var * (1 - lr * wd)
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    m = m + (g - m) * (1 - b1)
    v = v + (g * g - v) * (1 - b2)
    return var - lr_t * m / (np.sqrt(v) + eps), m, v


@pytest.mark.parametrize("adamw", [False, True])
def test_apply_adam_and_adamw_match_formula(rng, adamw):
    var, m, grad = _opt_inputs(rng)
    v = np.abs(rng.standard_normal(37)).astype(np.float32)
    sc = dict(b1p=0.9 ** 3, b2p=0.999 ** 3, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8)
    f32 = {k: np.float32(val) for k, val in sc.items()}
    if adamw:
        got = run("ApplyAdamW", var, m, v, f32["b1p"], f32["b2p"], f32["lr"], np.float32(0.01),
                  f32["b1"], f32["b2"], f32["eps"], grad)
        ref = _adam_ref(var, m, v, *sc.values(), grad, wd=0.01)
    else:
        got = run("ApplyAdam", var, m, v, *f32.values(), grad)
        ref = _adam_ref(var, m, v, *sc.values(), grad)
    for a, b in zip(got, ref):
        assert_close(a, b, "float32", scale=5)


def test_lamb_phases_match_the_lamb_update(rng):
    """Phase 1 (moments, bias correction, update + wd*var) and phase 2 (trust ratio) give
    LAMB's step w - lr * ||w|| / ||r + wd w|| * (r + wd w)."""
    var, m, grad = _opt_inputs(rng)
    v = np.abs(rng.standard_normal(37)).astype(np.float32)
    b1, b2, eps, step, wd, lr = 0.9, 0.999, 1e-6, 4.0, 0.01, 1e-3
    upd, nv, nm = run("LambApplyOptimizerAssign", grad, v, m, var, np.float32(b1),
                      np.float32(1 - b1), np.float32(b2), np.float32(1 - b2), np.float32(eps),
                      np.float32(step), np.float32(wd))
    g64 = grad.astype(np.float64)
    rv = v * b2 + g64 * g64 * (1 - b2)
    rm = m * b1 + g64 * (1 - b1)
    r = (rm / (1 - b1 ** step)) / (np.sqrt(rv / (1 - b2 ** step)) + eps) + wd * var
    assert_close(nv, rv, "float32")
    assert_close(nm, rm, "float32")
    assert_close(upd, r, "float32", scale=10)
    w_norm = np.float32(np.linalg.norm(var))
    g_norm = np.float32(np.linalg.norm(upd))
    new = run("LambApplyWeightAssign", w_norm, g_norm, np.float32(lr), upd, var)
    assert_close(new, var - lr * float(w_norm) / float(g_norm) * upd.astype(np.float64),
                 "float32")
    # a zero weight norm (fresh layer) gives the trust ratio 1
    zero = run("LambApplyWeightAssign", np.float32(0), g_norm, np.float32(lr), upd, var)
    assert_close(zero, var - lr * upd.astype(np.float64), "float32")


# ----------------------------------------------------------------------------- float status
def test_float_status_flags_inf_and_nan():
    ok = np.ones(5, np.float32)
    assert run("NPUGetFloatStatus", ok, ok).tolist() == [0.0] * 8
    for bad in (np.inf, np.nan):
        arr = np.array([1, bad], np.float16)
        status = run("NPUGetFloatStatus", ok, arr)
        assert status.dtype == np.float32 and status.shape == (8,)
        assert status[0] == 1.0 and status.sum() > 0
    assert run("NPUClearFloatStatus", ok).tolist() == [0.0] * 8


# ----------------------------------------------------------------------------- graph errors
def test_shape_errors_name_the_node_and_input():
    g = asim.Graph("t")
    x = g.input("x", (2, 3, 4, 4))
    s, q = g.bn_training_reduce(x)
    bad = g.input("bad_scale", (4,))
    c = g.input("c", (3,))
    with pytest.raises(GraphError, match="node 'bnu'.*scale 'bad_scale'"):
        g.bn_training_update(x, s, q, bad, c, c, c, name="bnu")
    with pytest.raises(GraphError, match="node 'xent'.*labels"):
        g.softmax_cross_entropy_with_logits(g.input("f", (2, 5)), g.input("l", (2, 4)),
                                            name="xent")
    w = g.input("w", (10,))
    with pytest.raises(GraphError, match="node 'mom'.*lr.*scalar"):
        g.apply_momentum(w, w, g.input("lr", (2,)), w, g.input("mo", ()), name="mom")
    with pytest.raises(GraphError, match="node 'dm'.*mask"):
        g.drop_out_do_mask(x, g.input("mask", (7,), "uint8"), 0.5, name="dm")


def test_training_ops_have_sources_in_their_doc():
    from ascendsim.ir.ops.training import _OPS

    for opdef in _OPS:
        assert "CANN" in opdef.doc and "[" in opdef.doc, opdef.op_type

