"""Reductions: kernels vs tests/naive.py over arbitrary axis sets (fp32, fp16, ints), ONNX
axes semantics (absent/empty/noop), fp32 accumulation of fp16, ArgMax/ArgMin, and errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import HYPOTHESIS, assert_close, random_array
from naive import reduce as naive_reduce

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.registry import Category, VecClass, get_op

MODES = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
         "ReduceProd": "prod", "ReduceSumSquare": "sum_square", "ReduceL1": "l1",
         "ReduceL2": "l2", "ReduceLogSum": "log_sum", "ReduceLogSumExp": "log_sum_exp"}


def run(op: str, x, axes=None, **attrs):
    opdef = get_op(op)
    args = [x] if axes is None else [x, np.asarray(axes, np.int64)]
    return opdef.kernel(args, {**opdef.attrs, **attrs})[0]


@st.composite
def shape_and_axes(draw):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    rank = len(shape)
    axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                         unique_by=lambda a: a % rank))
    return shape, axes


@HYPOTHESIS
@given(op=st.sampled_from(sorted(MODES)), dtype=st.sampled_from(["float32", "float16"]),
       sa=shape_and_axes(), keepdims=st.booleans(), seed=st.integers(0, 2**16))
def test_float_reductions_match_naive(op, dtype, sa, keepdims, seed):
    shape, axes = sa
    low = 0.1 if op == "ReduceLogSum" else -2.0
    high = 1.2 if op == "ReduceProd" else 2.0
    x = random_array(np.random.default_rng(seed), shape, dtype, low, high)
    got = run(op, x, axes, keepdims=int(keepdims))
    assert_close(got, naive_reduce(MODES[op], x, axes, keepdims), dtype, scale=2.0)


@HYPOTHESIS
@given(op=st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceSumSquare", "ReduceL1"]),
       dtype=st.sampled_from(["int32", "int64", "int8"]), sa=shape_and_axes(),
       seed=st.integers(0, 2**16))
def test_int_reductions_are_exact(op, dtype, sa, seed):
    shape, axes = sa
    x = random_array(np.random.default_rng(seed), shape, dtype, -3, 3)
    want = naive_reduce(MODES[op], x, axes, True).astype(dtype)
    assert_close(run(op, x, axes), want, dtype)


def test_absent_or_empty_axes_reduce_everything_unless_noop():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert run("ReduceSum", x).shape == (1, 1, 1)
    assert run("ReduceSum", x, [], keepdims=0) == x.sum()
    np.testing.assert_array_equal(run("ReduceSum", x, [], noop_with_empty_axes=1), x)
    assert_close(run("ReduceMean", x, [1, 2], keepdims=0), x.mean(axis=(1, 2)), "float32")


def test_fp16_sum_accumulates_in_fp32():
    # a fp16 running sum stalls at 2048 (2048 + 1 rounds back to 2048); fp32 does not
    x = np.ones(3000, dtype=np.float16)
    assert run("ReduceSum", x, [0], keepdims=0) == np.float16(3000)
    assert run("ReduceMean", x.reshape(30, 100), [1])[0, 0] == 1.0


def test_empty_and_nan_reductions_follow_onnx():
    empty = np.zeros((2, 0, 3), np.float32)
    assert np.all(run("ReduceMax", empty, [1]) == -np.inf)
    assert np.all(run("ReduceSum", empty, [1]) == 0)
    assert np.all(run("ReduceProd", empty, [1]) == 1)
    x = np.float32([[1, np.nan, 3]])
    assert np.isnan(run("ReduceMax", x, [1])[0, 0]) and np.isnan(run("ReduceMin", x, [1])[0, 0])
    b = np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(run("ReduceMax", b, [1], keepdims=0), [True, False])


def test_argmax_argmin_ties_and_last_index():
    x = np.float32([[1, 5, 5, 0], [2, 2, -1, -1]])
    np.testing.assert_array_equal(run("ArgMax", x, axis=1, keepdims=0), [1, 0])
    np.testing.assert_array_equal(run("ArgMax", x, axis=1, keepdims=0, select_last_index=1),
                                  [2, 1])
    np.testing.assert_array_equal(run("ArgMin", x, axis=-1), [[3], [2]])
    np.testing.assert_array_equal(run("ArgMin", x, axis=1, select_last_index=1), [[3], [3]])
    rng = np.random.default_rng(5)
    y = rng.standard_normal((3, 4, 5)).astype(np.float16)
    np.testing.assert_array_equal(run("ArgMax", y, axis=1, keepdims=0), y.argmax(axis=1))
    assert run("ArgMax", y).dtype == np.int64


def test_builder_shapes_and_errors():
    g = asim.Graph()
    x = g.input("x", ("batch", 3, 4), "float16")
    assert g.reduce_sum(x, axes=[1, -1], keepdims=0).shape == ("batch",)
    assert g.reduce_max(x, [0]).shape == (1, 3, 4)
    assert g.reduce_mean(x).shape == (1, 1, 1)
    assert g.reduce_l2(x, [], noop_with_empty_axes=1).shape == ("batch", 3, 4)
    am = g.arg_max(x, axis=2, keepdims=0)
    assert (am.shape, am.dtype) == (("batch", 3), "int64")
    with pytest.raises(GraphError, match=r"node 'r' \(ReduceSum\): axis 3 is out of range for "
                                         r"rank 3 of input 'x'"):
        g.reduce_sum(x, axes=[3], name="r")
    with pytest.raises(GraphError, match="repeat an axis"):
        g.reduce_sum(x, axes=[1, -2])
    ax = g.input("ax", (1,), "int64")          # axes known only at run time: symbolic dims
    kept = g.reduce_sum(x, ax)
    assert len(kept.shape) == 3 and all(isinstance(d, str) for d in kept.shape)
    assert len(g.reduce_sum(x, ax, keepdims=0).shape) == 2
    nlen = g.input("nlen", ("n",), "int64")
    with pytest.raises(GraphError, match="unknown length and keepdims=0"):
        g.reduce_sum(x, nlen, keepdims=0)
    with pytest.raises(GraphError, match=r"\(ArgMin\): axis -4 is out of range"):
        g.arg_min(x, axis=-4)
    b = g.input("b", (2,), "bool")
    with pytest.raises(GraphError, match="'b' has dtype bool"):
        g.reduce_sum(b)


def test_registry_entries():
    for op in MODES:
        d = get_op(op)
        assert (d.category, d.vec_class, d.needs_const_inputs) == (
            Category.REDUCE, VecClass.REDUCE, (1,))
        assert d.attrs == {"keepdims": 1, "noop_with_empty_axes": 0}
    g = asim.Graph()
    x = g.input("x", (4, 8))
    y = g.reduce_sum_square(x, [1])
    assert get_op("ReduceSumSquare").flops([x], [y], {}) == 64


def test_execute_through_a_graph():
    g = asim.Graph()
    x = g.input("x", (2, 3, 4), "float32")
    y = g.reduce_mean(g.mul(x, x), axes=[0, 2], keepdims=0)
    g.output(y)
    xv = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    assert_close(execute(g, {"x": xv})[y.name], (xv.astype(np.float64) ** 2).mean((0, 2)),
                 "float32")
