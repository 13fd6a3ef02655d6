"""Normalisations: Softmax/LogSoftmax, LayerNorm, BatchNorm, InstanceNorm and LRN kernels vs
tests/naive.py (fp32, fp16), optional outputs, and shape/dtype/axis errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import HYPOTHESIS, TOLERANCE, assert_close, random_array
from naive import batch_norm as naive_bn
from naive import instance_norm as naive_in
from naive import layer_norm as naive_ln
from naive import lrn as naive_lrn
from naive import softmax as naive_softmax

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.registry import Category, get_op


def run(op: str, *args, **attrs):
    opdef = get_op(op)
    outs = opdef.kernel(list(args), {**opdef.attrs, **attrs})
    return outs[0] if len(outs) == 1 else outs


@st.composite
def shape_and_axis(draw):
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    return shape, draw(st.integers(-len(shape), len(shape) - 1))


@HYPOTHESIS
@given(sa=shape_and_axis(), dtype=st.sampled_from(["float32", "float16"]), log=st.booleans(),
       seed=st.integers(0, 2**16))
def test_softmax_matches_naive(sa, dtype, log, seed):
    shape, axis = sa
    x = random_array(np.random.default_rng(seed), shape, dtype, -5, 5)
    got = run("LogSoftmax" if log else "Softmax", x, axis=axis)
    assert_close(got, naive_softmax(x, axis, log), dtype)
    if not log:
        sums = got.astype(np.float64).sum(axis=axis)
        np.testing.assert_allclose(sums, 1.0, rtol=4 * TOLERANCE[dtype]["rtol"] * shape[axis])


def test_softmax_is_stable_for_large_inputs():
    x = np.float32([[1000, 1001, 1002], [-1000, -1000, -1000]])
    assert_close(run("Softmax", x), naive_softmax(x), "float32")
    assert_close(run("LogSoftmax", x, axis=1), naive_softmax(x, 1, log=True), "float32")


@HYPOTHESIS
@given(sa=shape_and_axis(), dtype=st.sampled_from(["float32", "float16"]),
       with_bias=st.booleans(), seed=st.integers(0, 2**16))
def test_layer_norm_matches_naive(sa, dtype, with_bias, seed):
    shape, axis = sa
    rng = np.random.default_rng(seed)
    x = random_array(rng, shape, dtype)
    norm_shape = shape[axis % len(shape):]
    scale = random_array(rng, norm_shape, dtype, 0.5, 1.5)
    bias = random_array(rng, norm_shape[-1:], dtype) if with_bias else None  # broadcasts
    args = [x, scale] + ([bias] if with_bias else [])
    y, mean, inv = run("LayerNormalization", *args, axis=axis, num_outputs=3)
    want_y, want_mean, want_inv = naive_ln(x, scale, bias, axis)
    assert_close(y, want_y, dtype, scale=4.0)
    assert_close(mean, want_mean, "float32")
    assert_close(inv, want_inv, "float32", scale=10.0)


def test_batch_norm_inference_matches_naive():
    rng = np.random.default_rng(7)
    for dtype in ("float32", "float16"):
        x = random_array(rng, (2, 3, 4, 5), dtype)
        s, b, m = (random_array(rng, (3,), dtype) for _ in range(3))
        v = random_array(rng, (3,), dtype, 0.5, 2)
        assert_close(run("BatchNormalization", x, s, b, m, v, epsilon=1e-3),
                     naive_bn(x, s, b, m, v, 1e-3), dtype, scale=2.0)
    x2 = random_array(rng, (4, 3), "float32")     # (N, C) without spatial dims
    assert_close(run("BatchNormalization", x2, s.astype(np.float32), b.astype(np.float32),
                     m.astype(np.float32), v.astype(np.float32)),
                 naive_bn(x2, s, b, m, v), "float32")


def test_batch_norm_training_uses_batch_statistics():
    rng = np.random.default_rng(8)
    x = random_array(rng, (4, 2, 3, 3), "float32")
    s, b = np.float32([1.0, 2.0]), np.float32([0.0, -1.0])
    m, v = np.float32([0.5, -0.5]), np.float32([1.0, 2.0])
    y, rm, rv = run("BatchNormalization", x, s, b, m, v, training_mode=1, momentum=0.9,
                    num_outputs=3)
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    assert_close(y, naive_bn(x, s, b, bm, bv), "float32")
    assert_close(rm, m * 0.9 + bm * 0.1, "float32")
    assert_close(rv, v * 0.9 + bv * 0.1, "float32")


def test_instance_norm_matches_naive():
    rng = np.random.default_rng(9)
    for dtype in ("float32", "float16"):
        x = random_array(rng, (2, 3, 4, 5), dtype)
        s, b = random_array(rng, (3,), dtype), random_array(rng, (3,), dtype)
        assert_close(run("InstanceNormalization", x, s, b), naive_in(x, s, b), dtype, scale=4.0)


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_lrn_matches_naive(size):
    x = random_array(np.random.default_rng(size), (2, 6, 3, 2), "float32")
    got = run("LRN", x, size=size, alpha=0.01, beta=0.75, bias=2.0)
    assert_close(got, naive_lrn(x, size, 0.01, 0.75, 2.0), "float32")


def test_builder_shapes_and_optional_outputs():
    g = asim.Graph()
    x = g.input("x", ("batch", 8, 16), "float16")
    s = g.input("s", (16,), "float16")
    assert g.softmax(x, axis=1).shape == ("batch", 8, 16)
    y, mean, inv = g.layer_normalization(x, s, s, num_outputs=3)
    assert (y.dtype, mean.shape, mean.dtype) == ("float16", ("batch", 8, 1), "float32")
    assert inv.shape == ("batch", 8, 1)
    assert g.layer_normalization(x, s).shape == ("batch", 8, 16)
    img = g.input("img", (2, 4, 5, 5), "float32")
    c = g.input("c", (4,), "float32")
    assert g.batch_normalization(img, c, c, c, c).shape == (2, 4, 5, 5)
    _, rm, rv = g.batch_normalization(img, c, c, c, c, training_mode=1, num_outputs=3)
    assert rm.shape == rv.shape == (4,)
    assert g.instance_normalization(img, c, c).shape == (2, 4, 5, 5)
    assert g.lrn(img, size=3).shape == (2, 4, 5, 5)
    assert get_op("BatchNormalization").category == Category.BROADCAST
    assert get_op("LRN").category == Category.SEGMENT
    assert get_op("Softmax").category == get_op("LayerNormalization").category == Category.REDUCE


def test_builder_errors_name_the_problem():
    g = asim.Graph()
    x = g.input("x", (2, 8, 16), "float32")
    with pytest.raises(GraphError, match=r"node 'sm' \(Softmax\): axis 3 is out of range for "
                                         r"input 'x' of shape \(2, 8, 16\)"):
        g.softmax(x, axis=3, name="sm")
    bad = g.input("bad", (8,), "float32")
    with pytest.raises(GraphError, match=r"Scale 'bad' of shape \(8,\) does not broadcast to "
                                         r"\(16,\)"):
        g.layer_normalization(x, bad)
    with pytest.raises(GraphError, match=r"stash_type"):
        g.layer_normalization(x, g.input("s16", (16,)), stash_type=7)
    c = g.input("c", (16,), "float32")
    with pytest.raises(GraphError, match=r"scale 'c' has shape \(16,\); expected \(8,\)"):
        g.batch_normalization(x, c, c, c, c)
    c8 = g.input("c8", (8,), "float32")
    with pytest.raises(GraphError, match="only with training_mode=1"):
        g.batch_normalization(x, c8, c8, c8, c8, num_outputs=3)
    with pytest.raises(GraphError, match=r"\(LRN\).*'size' must be a positive int"):
        g.lrn(x)
    i = g.input("i", (2, 8), "int32")
    with pytest.raises(GraphError, match="'i' has dtype int32"):
        g.softmax(i)


def test_execute_through_a_graph():
    g = asim.Graph()
    x = g.input("x", (3, 8), "float32")
    s = g.const(np.linspace(0.5, 1.5, 8, dtype=np.float32))
    y = g.softmax(g.layer_normalization(x, s, epsilon=1e-3), axis=-1)
    g.output(y)
    xv = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    want = naive_softmax(naive_ln(xv, g.const_value(s.name), None, -1, 1e-3)[0])
    assert_close(execute(g, {"x": xv})[y.name], want, "float32")
