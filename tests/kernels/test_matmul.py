"""MatMul (with the optional CANN bias), Gemm and BiasAdd: values, cube numerics (fp16 in,
fp32 accumulate, one rounding; int8 -> int32), shape inference and errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.graph import Graph
from ascendsim.ir.registry import get_op
from ascendsim.kernels.matmul import gemm_numba


def run_op(builder: str, arrays: list, **attrs) -> np.ndarray:
    """Build a one-node graph with the arrays as inputs and execute it."""
    g = Graph("t")
    ins = [g.input(f"in{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    y = getattr(g, builder)(*ins, **attrs)
    g.output(y)
    out = execute(g, {f"in{i}": a for i, a in enumerate(arrays)})[y.name]
    assert out.shape == tuple(y.shape) and out.dtype.name == y.dtype
    return out


@pytest.mark.parametrize("sa,sb", [
    ((5, 7), (7, 3)), ((7,), (7, 3)), ((5, 7), (7,)), ((7,), (7,)),
    ((2, 1, 5, 7), (3, 7, 4)), ((4, 7), (2, 7, 3)), ((2, 3, 5, 7), (7, 2)),
])
def test_matmul_follows_numpy(rng, sa, sb):
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    np.testing.assert_allclose(run_op("matmul", [a, b]), np.matmul(a, b), rtol=1e-5, atol=1e-5)


@settings(max_examples=30, derandomize=True, deadline=None)
@given(batch_a=st.lists(st.integers(1, 3), max_size=2), batch_b=st.lists(st.integers(1, 3),
       max_size=2), m=st.integers(1, 6), k=st.integers(1, 9), n=st.integers(1, 6),
       vec_a=st.booleans(), vec_b=st.booleans(), bcast=st.booleans())
def test_matmul_shapes_and_broadcasting_property(batch_a, batch_b, m, k, n, vec_a, vec_b, bcast):
    if bcast:  # make the batch dims broadcast-compatible by putting 1 where they differ
        width = min(len(batch_a), len(batch_b))
        for i in range(1, width + 1):
            if batch_a[-i] != batch_b[-i]:
                batch_b[-i] = 1
    sa = (k,) if vec_a else tuple(batch_a) + (m, k)
    sb = (k,) if vec_b else tuple(batch_b) + (k, n)
    rng = np.random.default_rng(7)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    try:
        ref = np.matmul(a, b)
    except ValueError:
        with pytest.raises(GraphError, match="do not broadcast"):
            run_op("matmul", [a, b])
        return
    got = run_op("matmul", [a, b])
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_fp16_matmul_accumulates_in_fp32():
    # K=4096 products of ~1.0: the sum ~3000 is where fp16 spacing is 2, so an fp16
    # accumulator stalls and loses hundreds; the cube's fp32 accumulator is exact to 1 ulp.
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 1.0, (1, 4096)).astype(np.float16)
    b = rng.uniform(0.5, 1.0, (4096, 1)).astype(np.float16)
    got = run_op("matmul", [a, b])
    exact = float((a.astype(np.float64) @ b.astype(np.float64))[0, 0])
    assert got.dtype == np.float16
    assert abs(float(got[0, 0]) - exact) <= float(np.spacing(np.float16(exact)))
    acc16 = np.float16(0)
    for p in (a[0] * b[:, 0]):      # what an fp16 accumulator would give
        acc16 = np.float16(acc16 + p)
    assert abs(float(acc16) - exact) > 100


def assert_rounded_once(got: np.ndarray, exact: np.ndarray) -> None:
    """fp16 results of an fp32 accumulation, rounded to fp16 once: within half an fp16 spacing
    of the exact (float64) value, plus the fp32 accumulator's own rounding. Exact equality with
    numpy's fp32 matmul would depend on the summation order of the BLAS build and the CPU: a
    sum near an fp16 rounding boundary rounds either way."""
    assert got.dtype == np.float16
    half = 0.5 * np.spacing(np.abs(got).astype(np.float16)).astype(np.float64)
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - exact), half * 1.001 + 1e-6)


def test_fp16_bias_joins_the_fp32_accumulator(rng):
    a = rng.standard_normal((8, 64)).astype(np.float16)
    b = rng.standard_normal((64, 16)).astype(np.float16)
    bias32 = rng.standard_normal(16).astype(np.float32)
    prod = a.astype(np.float64) @ b.astype(np.float64)
    assert_rounded_once(run_op("matmul", [a, b, bias32]), prod + bias32)
    bias16 = bias32.astype(np.float16)
    assert_rounded_once(run_op("matmul", [a, b, bias16]), prod + bias16)


def test_int8_matmul_accumulates_in_int32(rng):
    a = rng.integers(-128, 128, (2, 3, 300), dtype=np.int8)
    b = rng.integers(-128, 128, (300, 5), dtype=np.int8)
    a[0, 0] = -128
    b[:, 0] = -128      # 300 * 16384 = 4.9M overflows int16, not int32
    bias = np.arange(5, dtype=np.int32)
    got = run_op("matmul", [a, b, bias])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64) + bias)
    assert got[0, 0, 0] == 300 * 128 * 128
    np.testing.assert_array_equal(run_op("matmul", [a[0, 0], b[:, 1]]),
                                  a[0, 0].astype(np.int64) @ b[:, 1])


def test_blocked_numba_gemm_crosses_every_block_edge(rng):
    # odd sizes cross every block edge (row block 32, depth 128 with a tail of 1..3, panel 512)
    a = rng.integers(-128, 128, (70, 263), dtype=np.int8)
    b = rng.integers(-128, 128, (263, 530), dtype=np.int8)
    np.testing.assert_array_equal(gemm_numba(a, b), a.astype(np.int64) @ b.astype(np.int64))


def test_matmul_flops_and_shape_with_symbolic_batch():
    g = Graph("s")
    x = g.input("x", ("batch", 128, 64))
    y = g.matmul(x, g.weight("w", (64, 32)), g.const(np.zeros(32, np.float32)))
    assert y.shape == ("batch", 128, 32)
    gb = g.bind(batch=3)
    out = gb.values[y.name]
    assert get_op("MatMul").flops([gb.values["x"], gb.values["w"]], [out], {}) == \
        2 * 3 * 128 * 32 * 64


@pytest.mark.parametrize("sa,sb,bias,msg", [
    ((4, 5), (6, 3), None, r"node 'mm' \(MatMul\): inner dimensions differ: 'a' \(4, 5\) has K=5"),
    ((2, 4, 5), (3, 5, 2), None, r"do not broadcast in node 'mm'|node 'mm'.*do not broadcast"),
    ((4, 5), (5, 3), (4,), r"bias 'bias' has shape \(4,\), expected \(3,\)"),
    ((4, 5), (5,), (1,), r"bias 'bias' needs a 2-D or higher B"),
])
def test_matmul_shape_errors(sa, sb, bias, msg):
    g = Graph("e")
    ins = [g.input("a", sa), g.input("b", sb)]
    if bias is not None:
        ins.append(g.input("bias", bias))
    with pytest.raises(GraphError, match=msg):
        g.matmul(*ins, name="mm")


def test_matmul_dtype_errors():
    g = Graph("e")
    a = g.input("a", (4, 5), "float16")
    with pytest.raises(GraphError, match=r"'a' is float16 but 'b' is float32"):
        g.matmul(a, g.input("b", (5, 3)), name="mm")
    with pytest.raises(GraphError, match=r"dtype int64 of 'i' is not supported"):
        g.matmul(g.input("i", (4, 5), "int64"), g.input("j", (5, 3), "int64"), name="mm2")
    with pytest.raises(GraphError, match=r"bias 'bb' is float64; with float16 operands it must "
                                         r"be float16 or float32"):
        g.matmul(a, g.input("b16", (5, 3), "float16"), g.input("bb", (3,), "float64"))


@pytest.mark.parametrize("ta,tb,alpha,beta,cshape", [
    (0, 0, 1.0, 1.0, None), (1, 0, 0.5, 2.0, (3,)), (0, 1, 1.0, -1.0, (4, 1)),
    (1, 1, 2.0, 0.5, (4, 3)), (0, 0, 1.0, 3.0, ()),
])
def test_gemm_matches_formula(rng, ta, tb, alpha, beta, cshape):
    a = rng.standard_normal((6, 4) if ta else (4, 6)).astype(np.float32)
    b = rng.standard_normal((3, 6) if tb else (6, 3)).astype(np.float32)
    arrays = [a, b]
    want = alpha * ((a.T if ta else a) @ (b.T if tb else b))
    if cshape is not None:
        c = rng.standard_normal(cshape).astype(np.float32)
        arrays.append(c)
        want = want + beta * c
    got = run_op("gemm", arrays, transA=ta, transB=tb, alpha=alpha, beta=beta)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gemm_fp16_rounds_once_and_errors(rng):
    a = rng.standard_normal((5, 32)).astype(np.float16)
    b = rng.standard_normal((32, 7)).astype(np.float16)
    c = rng.standard_normal((7,)).astype(np.float16)
    exact = 0.5 * (a.astype(np.float64) @ b.astype(np.float64)) + 2.0 * c.astype(np.float64)
    assert_rounded_once(run_op("gemm", [a, b, c], alpha=0.5, beta=2.0), exact)
    g = Graph("e")
    with pytest.raises(GraphError, match=r"node 'gm' \(Gemm\): C 'c' \(5,\) does not broadcast"):
        g.gemm(g.input("a", (4, 6)), g.input("b", (6, 3)), g.input("c", (5,)), name="gm")
    with pytest.raises(GraphError, match=r"inner dimensions differ: A' is \(6, 4\)"):
        g.gemm(g.input("a2", (4, 6)), g.input("b2", (6, 3)), transA=1, name="gm2")


@pytest.mark.parametrize("fmt,shape,axis", [("NCHW", (2, 3, 4, 5), 1), ("NHWC", (2, 4, 5, 3), 3),
                                             ("NCHW", (2, 3), 1), ("NDHWC", (1, 2, 2, 2, 3), 4)])
def test_bias_add_channel_axis(rng, fmt, shape, axis):
    x = rng.standard_normal(shape).astype(np.float16)
    bias = rng.standard_normal(3).astype(np.float16)
    bshape = [1] * len(shape)
    bshape[axis] = 3
    want = (x.astype(np.float32) + bias.astype(np.float32).reshape(bshape)).astype(np.float16)
    np.testing.assert_array_equal(run_op("bias_add", [x, bias], data_format=fmt), want)


def test_bias_add_errors():
    g = Graph("e")
    x = g.input("x", (2, 3, 4, 5))
    with pytest.raises(GraphError, match=r"node 'ba' \(BiasAdd\): bias 'b' has shape \(5,\), "
                                         r"expected \(3,\): the channels of 'x'"):
        g.bias_add(x, g.input("b", (5,)), name="ba")
    with pytest.raises(GraphError, match=r"data_format 'CHWN' is not one of"):
        g.bias_add(x, g.input("b3", (3,)), data_format="CHWN", name="ba2")
