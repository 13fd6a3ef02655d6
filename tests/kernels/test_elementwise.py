"""Element-wise ops: kernels vs tests/naive.py references (fp32, fp16, ints, with broadcasting),
ONNX edge semantics (integer Div, Pow types, Clip, Cast), shape/dtype inference and errors."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes
from naive import HYPOTHESIS, assert_close, elementwise, random_array, trunc_div
from numba import njit

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.ops.elementwise import scalar_args
from ascendsim.ir.registry import Category, Unit, VecClass, get_op

# (op, low, high): input range where the op is defined and well conditioned
UNARY = [("Sqrt", 0.1, 4), ("Rsqrt", 0.1, 4), ("Exp", -4, 4), ("Log", 0.1, 4), ("Neg", -3, 3),
         ("Abs", -3, 3), ("Reciprocal", 0.5, 4), ("Relu", -3, 3), ("Sigmoid", -6, 6),
         ("Tanh", -3, 3), ("Erf", -3, 3), ("Gelu", -3, 3), ("LeakyRelu", -3, 3),
         ("Floor", -3, 3), ("Ceil", -3, 3), ("Round", -3, 3), ("Sign", -3, 3), ("Sin", -3, 3),
         ("Cos", -3, 3), ("Softplus", -30, 30), ("Elu", -3, 3), ("Selu", -3, 3),
         ("HardSigmoid", -4, 4), ("HardSwish", -4, 4)]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"]
COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]


def run(op: str, *args, **attrs):
    opdef = get_op(op)
    outs = opdef.kernel(list(args), {**opdef.attrs, **attrs})
    return outs[0] if len(outs) == 1 else outs


@HYPOTHESIS
@given(spec=st.sampled_from(UNARY), dtype=st.sampled_from(["float32", "float16"]),
       shape=st.lists(st.integers(1, 5), max_size=3), seed=st.integers(0, 2**16))
def test_unary_matches_naive(spec, dtype, shape, seed):
    op, low, high = spec
    x = random_array(np.random.default_rng(seed), shape, dtype, low, high)
    assert_close(run(op, x), elementwise(op, x), dtype)


@HYPOTHESIS
@given(op=st.sampled_from(BINARY + COMPARE),
       dtype=st.sampled_from(["float32", "float16", "int32", "int64", "int8"]),
       shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4),
       seed=st.integers(0, 2**16))
def test_binary_broadcast_matches_naive(op, dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    a = random_array(rng, shapes.input_shapes[0], dtype, -9, 9)
    b = random_array(rng, shapes.input_shapes[1], dtype, -9, 9)
    if op == "Div":
        b = np.where(b == 0, 3, b).astype(dtype)
    got = run(op, a, b)
    if op == "Div" and dtype.startswith("int"):
        want = trunc_div(a, b)
    else:
        want = elementwise(op, a, b)
    assert got.shape == shapes.result_shape
    assert_close(got, want, "bool" if op in COMPARE else dtype)


@HYPOTHESIS
@given(dtype=st.sampled_from(["float32", "float16", "int32"]),
       shapes=mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3),
       op=st.sampled_from(["Sum", "Max", "Min", "Where"]), seed=st.integers(0, 2**16))
def test_ternary_and_variadic_broadcast(dtype, shapes, op, seed):
    rng = np.random.default_rng(seed)
    args = [random_array(rng, s, dtype) for s in shapes.input_shapes]
    if op == "Where":
        args[0] = args[0] > 0
    assert_close(run(op, *args), elementwise(op, *args), dtype)


def test_int_div_truncates_toward_zero_like_onnx():
    a = np.array([-3, 3, -3, 3, 7, -7, 5], np.int32)
    b = np.array([2, 2, -2, -2, 7, 2, 0], np.int32)
    np.testing.assert_array_equal(run("Div", a, b), [-1, 1, 1, -1, 1, -3, 0])
    np.testing.assert_array_equal(run("Div", a.astype(np.int64), b.astype(np.int64)),
                                  trunc_div(a, b))


def test_float_div_by_zero_is_ieee_not_an_exception():
    out = run("Div", np.float32([1, -1, 0]), np.float32([0, 0, 0]))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])
    assert run("Reciprocal", np.float16([0.0]))[0] == np.inf
    assert np.isnan(run("Log", np.float32([-1]))[0]) and run("Log", np.float32([0]))[0] == -np.inf


def test_pow_types_follow_the_base():
    x = np.float32([1, 2, 3])
    assert_close(run("Pow", x, np.int64([4, 5, 6])), [1, 32, 729], "float32")
    np.testing.assert_array_equal(run("Pow", np.int64([1, 2, 3]), np.float32([4, 5, 0.5])),
                                  [1, 32, 1])
    np.testing.assert_array_equal(run("Pow", np.int32([2, -3, 2, -1]), np.int32([10, 3, -1, -3])),
                                  [1024, -27, 0, -1])
    assert_close(run("Pow", np.float16([1.5, 4]), np.float16(0.5)), [1.5**0.5, 2.0], "float16")


def test_clip_bounds_are_optional_and_min_over_max_gives_max():
    x = np.float32([-2, -0.5, 0.5, 2])
    np.testing.assert_array_equal(run("Clip", x, np.float32(-1), np.float32(1)), [-1, -0.5, 0.5, 1])
    np.testing.assert_array_equal(run("Clip", x, None, np.float32(0)), [-2, -0.5, 0, 0])
    np.testing.assert_array_equal(run("Clip", x, np.float32(0)), [0, 0, 0.5, 2])
    np.testing.assert_array_equal(run("Clip", x, np.float32(2), np.float32(1)), [1, 1, 1, 1])
    np.testing.assert_array_equal(run("Clip", np.int64([-5, 5])), [-5, 5])


def test_sigmoid_does_not_overflow_at_extremes():
    out = run("Sigmoid", np.float32([-100, -20, 0, 20, 100]))
    assert_close(out, elementwise("Sigmoid", np.float64([-100, -20, 0, 20, 100])), "float32")
    assert np.all(np.isfinite(out))


def test_attribute_ops_use_their_attributes():
    x = np.float32([-2, 0, 2])
    assert_close(run("LeakyRelu", x, alpha=0.5), [-1, 0, 2], "float32")
    assert_close(run("Gelu", x, approximate="tanh"), elementwise("Gelu", x, approximate="tanh"),
                 "float32")
    assert not np.allclose(run("Gelu", x, approximate="tanh"), run("Gelu", x))


def test_cast_accepts_onnx_codes_and_dtype_names():
    g = asim.Graph()
    x = g.input("x", (3,), "float32")
    assert g.cast(x, to=10).dtype == "float16"
    assert g.nodes[-1].attrs["to"] == "float16"      # the node stores the dtype name
    assert g.cast(x, to="int32").dtype == "int32"
    assert g.cast(x, to=np.bool_).dtype == "bool"
    with pytest.raises(GraphError, match=r"node 'c' \(Cast\).*data type 8"):
        g.cast(x, to=8, name="c")
    with pytest.raises(GraphError, match="'to' is required"):
        g.cast(x)
    np.testing.assert_array_equal(run("Cast", np.float32([-1.7, 2.7, 0]), to=6), [-1, 2, 0])
    np.testing.assert_array_equal(run("Cast", np.float32([-1.7, 0, 3]), to="bool"),
                                  [True, False, True])


def test_prelu_isnan_isinf():
    x = np.float32([[-2, 3], [-4, np.inf]])
    slope = np.float32([0.5, 0.1])
    assert_close(run("PRelu", x, slope), elementwise("PRelu", x, slope), "float32")
    y = np.float16([np.nan, np.inf, -np.inf, 1])
    np.testing.assert_array_equal(run("IsNaN", y), [True, False, False, False])
    np.testing.assert_array_equal(run("IsInf", y), [False, True, True, False])
    np.testing.assert_array_equal(run("IsInf", y, detect_negative=0), [False, True, False, False])
    g = asim.Graph()
    a = g.input("a", (2, 3))
    assert g.prelu(a, g.const(np.float32([0.1]))).shape == (2, 3)
    assert g.is_nan(a).dtype == "bool"
    with pytest.raises(GraphError, match=r"slope 'b' of shape \(4, 3\) does not broadcast"):
        g.prelu(a, g.input("b", (4, 3)))


def test_logic_ops_on_bool():
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    for op in ("And", "Or", "Xor"):
        assert_close(run(op, a, b), elementwise(op, a, b), "bool")
    assert_close(run("Not", a), ~a, "bool")


def test_dropout_inference_is_identity_with_optional_mask():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run("Dropout", x), x)
    y, mask = run("Dropout", x, np.float32(0.5), None, num_outputs=2)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == np.bool_ and mask.all()
    y, mask = run("Dropout", np.ones((50, 50), np.float32), np.float32(0.25), np.bool_(True),
                  num_outputs=2, seed=3)
    assert 0.65 < mask.mean() < 0.85
    np.testing.assert_allclose(y[mask], 1 / 0.75)
    assert np.all(y[~mask] == 0)


def test_builder_infers_shapes_and_dtypes():
    g = asim.Graph()
    a = g.input("a", (2, 1, 4), "float16")
    b = g.input("b", (3, 1), "float16")
    assert g.add(a, b).shape == (2, 3, 4)
    assert g.less(a, b).dtype == "bool"
    assert g.sum(a, b, a).shape == (2, 3, 4)
    assert g.where(g.greater(a, b), a, b).shape == (2, 3, 4)
    assert g.pow(a, 2.0).dtype == "float16"
    assert g.clip(a, 0.0, 6.0).shape == (2, 1, 4)
    y, mask = g.dropout(a, num_outputs=2)
    assert (y.dtype, mask.dtype) == ("float16", "bool")
    n = g.input("n", ("batch", 4), "int32")
    assert g.mul(n, n).shape == ("batch", 4)
    assert g.not_(g.equal(n, n)).dtype == "bool"


def test_builder_errors_name_node_and_problem():
    g = asim.Graph()
    a = g.input("a", (2, 3), "float32")
    h = g.input("h", (2, 3), "float16")
    i = g.input("i", (2, 3), "int32")
    with pytest.raises(GraphError, match=r"node 'm' \(Mul\).*different dtypes.*'a': float32"):
        g.mul(a, h, name="m")
    with pytest.raises(GraphError, match=r"node 's' \(Sqrt\).*'i' has dtype int32"):
        g.sqrt(i, name="s")
    with pytest.raises(GraphError, match=r"\(Gelu\).*'none' or 'tanh'"):
        g.gelu(a, approximate="erf")
    with pytest.raises(GraphError, match=r"\(Where\).*condition 'a'"):
        g.where(a, a, a)
    with pytest.raises(GraphError, match=r"\(Clip\).*must be a scalar"):
        g.clip(a, g.const(np.zeros(3, np.float32)))
    with pytest.raises(GraphError, match=r"\(And\).*'a' has dtype float32"):
        g.and_(a, a)
    with pytest.raises(GraphError, match=r"num_outputs must be one of \[1, 2\]"):
        g.dropout(a, num_outputs=3)


def test_graph_execute_runs_the_kernels():
    g = asim.Graph()
    x = g.input("x", (2, 3), "float32")
    y = g.sigmoid(g.sub(g.mul(x, 2.0), g.exp(x)))
    g.output(y)
    xv = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = elementwise("Sigmoid", 2 * xv.astype(np.float64) - np.exp(xv.astype(np.float64)))
    assert_close(execute(g, {"x": xv})[y.name], want, "float32")


def test_registry_costs_and_units():
    assert get_op("Pow").unit == Unit.AICPU
    assert get_op("Add").unit == Unit.VECTOR and get_op("Add").commutative
    assert get_op("Add").category == Category.BROADCAST
    assert get_op("Exp").category == Category.ELEMWISE
    assert get_op("Sigmoid").vec_class == VecClass.EXP
    assert get_op("Div").vec_class == VecClass.DIV
    assert get_op("Sqrt").vec_class == VecClass.SQRT
    g = asim.Graph()
    x = g.input("x", (4, 8))
    y = g.gelu(x)
    s = g.sum(x, x, x)
    assert get_op("Gelu").flops([x], [y], {}) == 8 * 32
    assert get_op("Sum").flops([x, x, x], [s], {}) == 2 * 32
    g.dropout(x)
    assert get_op("Dropout").unit_for(g.nodes[-1], {}) == Unit.NONE
    g.dropout(x, 0.1, g.const(np.array(True)))
    node = g.nodes[-1]
    consts = {n: g.const_value(n) for n in node.inputs if g.is_const(n)}
    assert get_op("Dropout").unit_for(node, consts) == Unit.VECTOR


def test_scalar_functions_inline_into_user_kernels():
    """Fused composite kernels call OpDef.scalar (+ scalar_args) inside their own njit loop."""
    add, sig, leaky = get_op("Add").scalar, get_op("Sigmoid").scalar, get_op("LeakyRelu").scalar
    (alpha,) = scalar_args("LeakyRelu", {"alpha": 0.2})

    @njit
    def fused(x, y, out):
        for i in range(x.size):
            out[i] = leaky(sig(add(x[i], y[i])) - 0.5, alpha)

    x = np.linspace(-3, 3, 7, dtype=np.float32)
    out = np.empty_like(x)
    fused(x, x, out)
    s = elementwise("Sigmoid", 2 * x.astype(np.float64)) - 0.5
    assert_close(out, np.where(s >= 0, s, 0.2 * s), "float32")
    assert scalar_args("Gelu", {"approximate": "tanh"}) == (1.0,)
    assert scalar_args("Add", {}) == ()
