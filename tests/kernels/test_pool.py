"""MaxPool (and its Indices), AveragePool, GlobalAveragePool, GlobalMaxPool: values vs ONNX
Runtime and numpy, shape inference, flops and errors."""

import numpy as np
import pytest

from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.graph import Graph
from ascendsim.ir.registry import Category, Unit, get_op
from ascendsim.kernels.pool import max_pool_with_indices


def ort_run(op_type: str, inputs: list, attrs: dict, out_dtypes: tuple = ()) -> list:
    """Run one ONNX node in ONNX Runtime (opset 21): the reference for ONNX semantics."""
    import onnxruntime as ort
    from onnx import helper

    names = [f"i{k}" for k in range(len(inputs))]
    out_dtypes = out_dtypes or (inputs[0].dtype,)
    outs = [f"o{k}" for k in range(len(out_dtypes))]
    elem = helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        [helper.make_node(op_type, names, outs, **attrs)], "t",
        [helper.make_tensor_value_info(n, elem(a.dtype), a.shape) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info(o, elem(np.dtype(d)), None)
         for o, d in zip(outs, out_dtypes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(outs, dict(zip(names, inputs)))


def run_op(builder: str, x: np.ndarray, **attrs) -> np.ndarray:
    g = Graph("t")
    y = getattr(g, builder)(g.input("x", x.shape, x.dtype), **attrs)
    g.output(y)
    out = execute(g, {"x": x})[y.name]
    assert out.shape == tuple(y.shape) and out.dtype.name == y.dtype
    return out


WINDOWS = [
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 2, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "strides": [3, 3], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [1, 2], "dilations": [2, 2], "pads": [1, 1, 0, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 3], "strides": [3, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"},
]


@pytest.mark.parametrize("attrs", WINDOWS)
def test_max_pool_matches_onnxruntime(rng, attrs):
    x = rng.standard_normal((2, 3, 10, 11)).astype(np.float32)
    got = run_op("max_pool", x, **attrs)
    ref, _ = ort_run("MaxPool", [x], attrs, ("float32", "int64"))
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("attrs", WINDOWS)
def test_average_pool_matches_onnxruntime(rng, attrs, include_pad):
    x = rng.standard_normal((2, 3, 10, 11)).astype(np.float32)
    attrs = {**attrs, "count_include_pad": include_pad}
    got = run_op("average_pool", x, **attrs)
    if attrs.get("ceil_mode") and include_pad:
        # the divisor of a window that the ceil mode runs past the padded input changed between
        # onnx releases (its reference before 1.18 and onnxruntime before 1.24 count the
        # overrun as padding): compare with the current spec's rule, written out below
        ref = _average_pool_ceil_include_pad(x, attrs)
    else:
        (ref,) = ort_run("AveragePool", [x], attrs)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def _average_pool_ceil_include_pad(x: np.ndarray, attrs: dict) -> np.ndarray:
    """AveragePool with ceil_mode=1, count_include_pad=1 and no dilation, as onnx's reference
    (1.18 and later) computes it: explicit pads count in the divisor, the part of a last
    window that the ceil mode runs past the padded input does not."""
    (kh, kw), (sh, sw) = attrs["kernel_shape"], attrs["strides"]
    t, left, b, r = attrs.get("pads", [0, 0, 0, 0])
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (t, b), (left, r)])
    hp, wp = xp.shape[2:]
    oh, ow = -(-(hp - kh) // sh) + 1, -(-(wp - kw) // sw) + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:min(i * sh + kh, hp), j * sw:min(j * sw + kw, wp)]
            out[:, :, i, j] = win.sum(axis=(2, 3)) / (win.shape[2] * win.shape[3])
    return out.astype(np.float32)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_match_onnxruntime(rng, storage_order):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1],
             "storage_order": storage_order}
    y, idx = max_pool_with_indices(x, attrs)
    ref_y, ref_idx = ort_run("MaxPool", [x], attrs, ("float32", "int64"))
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(idx, ref_idx)
    if storage_order == 0:  # the index points at the max in the flattened input
        np.testing.assert_array_equal(x.reshape(-1)[idx], y)


@pytest.mark.parametrize("op,shape,attrs", [
    ("MaxPool", (2, 3, 15), {"kernel_shape": [4], "strides": [3], "pads": [2, 1]}),
    ("AveragePool", (2, 3, 15), {"kernel_shape": [4], "strides": [2], "ceil_mode": 1}),
    ("MaxPool", (1, 2, 6, 7, 5), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 1]}),
    ("AveragePool", (1, 2, 6, 7, 5), {"kernel_shape": [3, 2, 2], "pads": [1, 0, 1, 1, 0, 0],
                                      "count_include_pad": 1}),
])
def test_pool_1d_3d_match_onnxruntime(rng, op, shape, attrs):
    x = rng.standard_normal(shape).astype(np.float32)
    builder = "max_pool" if op == "MaxPool" else "average_pool"
    out_dtypes = ("float32", "int64") if op == "MaxPool" else ()
    np.testing.assert_allclose(run_op(builder, x, **attrs),
                               ort_run(op, [x], attrs, out_dtypes)[0], rtol=1e-5, atol=1e-6)


def test_fp16_pools_round_once(rng):
    x = rng.uniform(0, 4, (2, 4, 6, 6)).astype(np.float16)
    got = run_op("average_pool", x, kernel_shape=[3, 3])
    ref = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    np.testing.assert_array_equal(got, ref.mean(axis=(-1, -2)).astype(np.float16))
    np.testing.assert_array_equal(run_op("max_pool", x, kernel_shape=[3, 3]),
                                  ref.max(axis=(-1, -2)).astype(np.float16))
    gap = run_op("global_average_pool", x)
    assert gap.dtype == np.float16 and gap.shape == (2, 4, 1, 1)
    np.testing.assert_array_equal(
        gap, x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float16))


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 5)])
def test_global_pools(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    axes = tuple(range(2, len(shape)))
    np.testing.assert_allclose(run_op("global_average_pool", x),
                               x.mean(axis=axes, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(run_op("global_max_pool", x), x.max(axis=axes, keepdims=True))


def test_pool_registry_facts_and_flops():
    g = Graph("s")
    x = g.input("x", (2, 8, 112, 112))
    y = g.max_pool(x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert y.shape == (2, 8, 56, 56)
    op = get_op("MaxPool")
    assert op.category == Category.SEGMENT and op.unit == Unit.VECTOR
    assert op.flops([x], [y], g.node(y.name).attrs) == 2 * 8 * 56 * 56 * 9
    gp = g.global_average_pool(y)
    assert gp.shape == (2, 8, 1, 1)
    assert get_op("GlobalAveragePool").flops([y], [gp], {}) == 2 * 8 * 56 * 56
    sym = g.average_pool(g.input("s", ("n", 8, 32, 32)), kernel_shape=[2, 2], strides=[2, 2])
    assert sym.shape == ("n", 8, 16, 16)


@pytest.mark.parametrize("attrs,msg", [
    ({}, r"node 'p' \(MaxPool\): kernel_shape is required"),
    ({"kernel_shape": [3, 3], "pads": [1, 1, 1]}, r"pads has 3 values, expected 4"),
    ({"kernel_shape": [3]}, r"kernel_shape \[3\] has 1 values, expected 2"),
    ({"kernel_shape": [3, 3], "storage_order": 2}, r"storage_order must be 0 or 1"),
    ({"kernel_shape": [9, 9]}, r"window of extent 9 does not fit input size 8"),
])
def test_pool_errors(attrs, msg):
    g = Graph("e")
    x = g.input("x", (1, 2, 8, 8))
    with pytest.raises(GraphError, match=msg):
        g.max_pool(x, name="p", **attrs)


def test_pool_rejects_bad_rank_and_dtype():
    g = Graph("e")
    with pytest.raises(GraphError, match=r"X 'x' \(4, 4\) must be \(N, C, 1 to 3 spatial dims\)"):
        g.global_max_pool(g.input("x", (4, 4)), name="gp")
    with pytest.raises(GraphError, match=r"dtype int32 of 'i' is not supported"):
        g.average_pool(g.input("i", (1, 1, 4, 4), "int32"), kernel_shape=[2, 2], name="ap")
