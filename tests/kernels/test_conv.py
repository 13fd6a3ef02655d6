"""Conv and ConvTranspose: values vs a naive numpy reference and ONNX Runtime, shape inference,
flops and the errors users see."""

import numpy as np
import pytest

from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.graph import Graph
from ascendsim.ir.registry import Category, Unit, get_op


def ort_run(op_type: str, inputs: list, attrs: dict, out_dtypes: tuple = ()) -> list:
    """Run one ONNX node in ONNX Runtime (opset 21): the reference for ONNX semantics."""
    import onnxruntime as ort
    from onnx import helper

    names = [f"i{k}" for k in range(len(inputs))]
    out_dtypes = out_dtypes or (inputs[0].dtype,)
    outs = [f"o{k}" for k in range(len(out_dtypes))]
    node = helper.make_node(op_type, names, outs, **attrs)
    elem = helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        [node], "t", [helper.make_tensor_value_info(n, elem(a.dtype), a.shape)
                      for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info(o, elem(np.dtype(d)), None)
         for o, d in zip(outs, out_dtypes)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(outs, dict(zip(names, inputs)))


def conv_ref(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """Naive 2-D grouped convolution in float64: pad, then sum over kernel taps."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    out = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for a in range(kh):
            for e in range(kw):
                patch = xs[:, :, a * dilations[0]::strides[0], e * dilations[1]::strides[1]]
                patch = patch[:, :, :oh, :ow]
                out[:, g * mg:(g + 1) * mg] += np.einsum(
                    "nchw,mc->nmhw", patch, w[g * mg:(g + 1) * mg, :, a, e].astype(np.float64))
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def run_op(builder: str, arrays: list, **attrs) -> np.ndarray:
    """Build a one-node graph with the arrays as inputs and execute it."""
    g = Graph("t")
    ins = [g.input(f"in{i}", a.shape, a.dtype) if a is not None else None
           for i, a in enumerate(arrays)]
    y = getattr(g, builder)(*ins, **attrs)
    g.output(y)
    feeds = {f"in{i}": a for i, a in enumerate(arrays) if a is not None}
    out = execute(g, feeds)[y.name]
    assert out.shape == tuple(y.shape) and out.dtype.name == y.dtype
    return out


CONV_CASES = [  # (C, M, group, k, strides, pads, dilations)
    (3, 4, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    (4, 6, 2, (3, 2), (2, 1), (1, 0, 2, 1), (1, 2)),          # grouped, asymmetric pads
    (4, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),          # depthwise, channel multiplier 2
    (5, 5, 5, (5, 5), (2, 2), (2, 2, 2, 2), (2, 2)),          # depthwise, stride 2, dilation 2
    (8, 4, 1, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),          # 1x1 strided
    (6, 3, 3, (2, 3), (3, 2), (0, 2, 1, 0), (2, 1)),          # groups of 2 channels
]


@pytest.mark.parametrize("c,m,group,k,strides,pads,dil", CONV_CASES)
def test_conv2d_matches_naive(rng, c, m, group, k, strides, pads, dil):
    x = rng.standard_normal((2, c, 11, 10)).astype(np.float32)
    w = rng.standard_normal((m, c // group) + k).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    got = run_op("conv", [x, w, b], group=group, strides=list(strides), pads=list(pads),
                 dilations=list(dil))
    ref = conv_ref(x, w, b, strides, pads, dil, group)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_conv_auto_pad_matches_onnxruntime(rng, auto_pad):
    x = rng.standard_normal((1, 3, 10, 9)).astype(np.float32)
    w = rng.standard_normal((4, 3, 4, 3)).astype(np.float32)
    attrs = {"auto_pad": auto_pad, "strides": [3, 2]}
    got = run_op("conv", [x, w], **attrs)
    (ref,) = ort_run("Conv", [x, w], attrs)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,k,attrs", [
    ((2, 3, 17), (4,), {"strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 4, 5, 6, 7), (2, 3, 2), {"strides": [1, 2, 1], "pads": [1, 0, 1, 0, 1, 1],
                                  "group": 2}),
])
def test_conv_1d_3d_match_onnxruntime(rng, shape, k, attrs):
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((4, shape[1] // attrs.get("group", 1)) + k).astype(np.float32)
    got = run_op("conv", [x, w], **attrs)
    (ref,) = ort_run("Conv", [x, w], attrs)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_conv_fp16_accumulates_in_fp32_and_rounds_once(rng):
    # 256 channels x 9 taps = 2304 products per output: fp16 accumulation would drift
    x = rng.uniform(0.5, 1.0, (1, 256, 6, 6)).astype(np.float16)
    w = rng.uniform(0.5, 1.0, (2, 256, 3, 3)).astype(np.float16)
    b = np.array([0.25, -0.5], np.float16)
    got = run_op("conv", [x, w, b], pads=[1, 1, 1, 1])
    assert got.dtype == np.float16
    exact = conv_ref(x, w, b, pads=(1, 1, 1, 1))
    # within one fp16 ulp of the exact result (an fp32 accumulator is far finer than fp16)
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp)


CONVT_CASES = [
    {"strides": [2, 2]},
    {"strides": [2, 3], "pads": [1, 0, 0, 2], "output_padding": [1, 2], "dilations": [1, 1]},
    {"strides": [1, 2], "dilations": [2, 1], "pads": [1, 1, 1, 0]},
    {"strides": [2, 2], "group": 2},
    {"strides": [2, 2], "output_shape": [12, 11]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [3, 2], "auto_pad": "SAME_LOWER"},
]


@pytest.mark.parametrize("attrs", CONVT_CASES)
def test_conv_transpose_matches_onnxruntime(rng, attrs):
    group = attrs.get("group", 1)
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3 * group).astype(np.float32)
    got = run_op("conv_transpose", [x, w, b], **attrs)
    (ref,) = ort_run("ConvTranspose", [x, w, b], attrs)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_conv_transpose_1d_matches_onnxruntime(rng):
    x = rng.standard_normal((1, 2, 7)).astype(np.float32)
    w = rng.standard_normal((2, 3, 4)).astype(np.float32)
    attrs = {"strides": [3], "pads": [1, 2]}
    np.testing.assert_allclose(run_op("conv_transpose", [x, w], **attrs),
                               ort_run("ConvTranspose", [x, w], attrs)[0], rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- graph level
def test_conv_shape_inference_keeps_symbolic_batch_and_counts_group_flops():
    g = Graph("s")
    x = g.input("x", ("batch", 32, 56, 56))
    w = g.weight("w", (64, 8, 3, 3))
    y = g.conv(x, w, group=4, strides=[2, 2], pads=[1, 1, 1, 1], name="c1")
    assert y.shape == ("batch", 64, 28, 28)
    gb = g.bind(batch=2)
    node, out = gb.node("c1"), gb.values["c1"]
    flops = get_op("Conv").flops([gb.values["x"], gb.values["w"]], [out], node.attrs)
    assert flops == 2 * (2 * 64 * 28 * 28) * 8 * 9   # real MACs: 8 input channels per group


def test_conv_transpose_shape_and_flops():
    g = Graph("s")
    x = g.input("x", (1, 16, 7, 7))
    w = g.weight("w", (16, 4, 4, 4))
    y = g.conv_transpose(x, w, group=2, strides=[2, 2], pads=[1, 1, 1, 1])
    assert y.shape == (1, 8, 14, 14)
    flops = get_op("ConvTranspose").flops([x, w], [y], {})
    assert flops == 2 * (16 * 7 * 7) * 4 * 16


def test_cube_ops_are_cube_category():
    for op in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
        assert get_op(op).category == Category.CUBE and get_op(op).unit == Unit.CUBE
    assert get_op("BiasAdd").category == Category.BROADCAST


def test_channel_mismatch_names_node_and_values():
    g = Graph("e")
    x = g.input("x", (1, 3, 8, 8))
    w = g.weight("w", (4, 5, 3, 3))
    with pytest.raises(GraphError, match=r"node 'conv1' \(Conv\): channel mismatch: X 'x' has 3 "
                                         r"channels but W 'w'"):
        g.conv(x, w, name="conv1")


def test_bad_group_is_reported():
    g = Graph("e")
    x = g.input("x", (1, 6, 8, 8))
    with pytest.raises(GraphError, match=r"node 'c' \(Conv\): bad group: W 'w' has 5 output "
                                         r"channels, not divisible by group 3"):
        g.conv(x, g.weight("w", (5, 2, 3, 3)), group=3, name="c")
    with pytest.raises(GraphError, match="group must be >= 1"):
        g.conv(x, g.weight("w0", (6, 6, 3, 3)), group=0, name="c0")
    with pytest.raises(GraphError, match=r"node 't' \(ConvTranspose\): bad group"):
        g.conv_transpose(x, g.weight("w2", (6, 2, 3, 3)), group=4, name="t")


@pytest.mark.parametrize("attrs,msg", [
    ({"pads": [1, 1]}, r"pads has 2 values, expected 4"),
    ({"auto_pad": "SAME"}, r"auto_pad 'SAME' is not one of"),
    ({"kernel_shape": [5, 5]}, r"kernel_shape \[5, 5\] does not match W's spatial dims"),
    ({"strides": [0, 1]}, r"must be >= 1"),
    ({"bogus": 1}, r"unknown attribute\(s\) bogus; valid: auto_pad, block_dim, dilations, group"),
])
def test_conv_attribute_errors(attrs, msg):
    g = Graph("e")
    x = g.input("x", (1, 4, 8, 8))
    with pytest.raises(GraphError, match=msg):
        g.conv(x, g.weight("w", (4, 4, 3, 3)), name="c", **attrs)


def test_conv_bias_and_dtype_errors():
    g = Graph("e")
    x = g.input("x", (1, 4, 8, 8))
    w = g.weight("w", (6, 4, 3, 3))
    with pytest.raises(GraphError, match=r"bias '.*' has shape \(4,\), expected \(6,\)"):
        g.conv(x, w, np.zeros(4, np.float32), name="c")
    with pytest.raises(GraphError, match=r"'x' is float32 but 'w16' is float16"):
        g.conv(x, g.weight("w16", (6, 4, 3, 3), dtype="float16"), name="c2")
    with pytest.raises(GraphError, match=r"window of extent 9 does not fit input size 8"):
        g.conv(x, g.weight("w9", (6, 4, 9, 9)), name="c3")


def test_conv_processes_images_in_chunks_within_the_patch_budget(rng, monkeypatch):
    from ascendsim.kernels import conv as kconv

    x = rng.standard_normal((5, 4, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    # one image's patch matrix is 2*9 rows x 42 columns x 4 bytes: allow two images per chunk
    monkeypatch.setattr(kconv, "COLS_BYTES", 2 * 18 * 42 * 4)
    got = kconv.conv_values(x, w, None, {"group": 2, "pads": [1, 1, 1, 1]})
    np.testing.assert_allclose(got, conv_ref(x, w, pads=(1, 1, 1, 1), group=2),
                               rtol=1e-4, atol=1e-4)


def test_symbolic_spatial_dims_resolve_on_bind():
    g = Graph("s")
    x = g.input("x", (1, 3, "h", "w"))
    y = g.conv(x, g.weight("w", (8, 3, 3, 3)), strides=[2, 2], pads=[1, 1, 1, 1], name="c")
    assert y.shape[:2] == (1, 8) and all(isinstance(d, str) for d in y.shape[2:])
    assert g.bind(h=32, w=17).values["c"].shape == (1, 8, 16, 9)


def test_conv_transpose_fp16_accumulates_in_fp32(rng):
    x = rng.uniform(0.5, 1.0, (1, 512, 3, 3)).astype(np.float16)
    w = rng.uniform(0.5, 1.0, (512, 2, 2, 2)).astype(np.float16)
    got = run_op("conv_transpose", [x, w], strides=[2, 2])
    assert got.dtype == np.float16
    # stride 2, kernel 2: every output gets exactly one tap, a 512-long dot product
    exact = np.einsum("nchw,cmab->nmhawb", x.astype(np.float64), w.astype(np.float64))
    exact = exact.reshape(1, 2, 6, 6)
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp)
