"""load_onnx: attribute mapping across opsets, constants, symbolic dims, closed control-flow
bodies, unique names, and the one clear error per kind of bad input."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ascendsim as asim
from ascendsim.execute import execute  # asim.execute can be shadowed by the submodule
from ascendsim.frontend.onnx import ONNX_DTYPES, load_onnx

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=21, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def _run(model, **feeds):
    g = load_onnx(model)
    return g, execute(g, feeds)


# ---------------------------------------------------------------- older opsets -> opset 21
def test_reshape_opset4_shape_attribute_becomes_constant_input(rng) -> None:
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    m = _model([helper.make_node("Reshape", ["x"], ["y"], shape=[0, -1])],
               [_vi("x", [2, 3, 4])], [_vi("y", None)], opset=4)
    g, out = _run(m, x=x)
    node = g.nodes[0]
    assert node.op_type == "Reshape" and g.is_const(node.inputs[1])
    assert g.values["y"].shape == (2, 12)
    np.testing.assert_array_equal(out["y"], x.reshape(2, 12))


def test_slice_opset9_and_pad_opset2_and_split_opset11_attributes(rng) -> None:
    x = rng.standard_normal((4, 6)).astype(np.float32)
    nodes = [helper.make_node("Slice", ["x"], ["s"], starts=[1, 0], ends=[3, 100], axes=[0, 1]),
             helper.make_node("Pad", ["s"], ["p"], pads=[0, 1, 0, 2], mode="constant", value=5.0),
             helper.make_node("Split", ["p"], ["a", "b"], axis=1, split=[4, 5])]
    m = _model(nodes, [_vi("x", [4, 6])], [_vi("a", None), _vi("b", None)], opset=9)
    g, out = _run(m, x=x)
    padded = np.pad(x[1:3], [(0, 0), (1, 2)], constant_values=5.0)
    np.testing.assert_array_equal(out["a"], padded[:, :4])
    np.testing.assert_array_equal(out["b"], padded[:, 4:])
    assert g.values["b"].shape == (2, 5)


def test_split_without_sizes_uses_the_output_count(rng) -> None:
    x = rng.standard_normal((6, 2)).astype(np.float32)
    m = _model([helper.make_node("Split", ["x"], ["a", "b", "c"])],
               [_vi("x", [6, 2])], [_vi(n, None) for n in "abc"], opset=13)
    _, out = _run(m, x=x)
    for k, n in enumerate("abc"):
        np.testing.assert_array_equal(out[n], x[2 * k:2 * k + 2])


def test_squeeze_unsqueeze_opset11_axes_attribute(rng) -> None:
    x = rng.standard_normal((3, 1, 4)).astype(np.float32)
    nodes = [helper.make_node("Squeeze", ["x"], ["s"], axes=[1]),
             helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0, 3])]
    m = _model(nodes, [_vi("x", [3, 1, 4])], [_vi("u", None)], opset=11)
    g, out = _run(m, x=x)
    assert g.values["u"].shape == (1, 3, 4, 1)
    np.testing.assert_array_equal(out["u"], x.reshape(1, 3, 4, 1))


def test_legacy_broadcast_axis_on_binary_op(rng) -> None:
    """Opset < 7 `Add(broadcast=1, axis=1)` of a (2,3,4,5) and a (3,) means per-channel."""
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    m = _model([helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)],
               [_vi("x", [2, 3, 4, 5])], [_vi("y", None)],
               inits=[numpy_helper.from_array(b, "b")], opset=6)
    _, out = _run(m, x=x)
    np.testing.assert_allclose(out["y"], x + b.reshape(3, 1, 1), rtol=1e-6)


def test_initializer_that_is_also_an_input_is_a_constant() -> None:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = _model([helper.make_node("Transpose", ["w"], ["y"])], [_vi("w", [2, 3])],
               [_vi("y", None)], inits=[numpy_helper.from_array(w, "w")])
    g = load_onnx(m, fold_constants=False)
    assert g.inputs == [] and g.is_const("w")
    np.testing.assert_array_equal(execute(g, {})["y"], w.T)


def test_constant_nodes_and_constant_expressions_fold() -> None:
    nodes = [helper.make_node("Constant", [], ["c"], value_ints=[2, -1]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Reshape", ["x", "c"], ["y"])]
    m = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", None), _vi("s", None)])
    g = load_onnx(m)
    assert [n.op_type for n in g.nodes] == ["Reshape"]     # Constant and static Shape folded
    assert g.values["y"].shape == (2, 12)
    np.testing.assert_array_equal(g.const_value("s"), [2, 3, 4])
    g2 = load_onnx(m, fold_constants=False)
    assert sorted(n.op_type for n in g2.nodes) == ["Reshape", "Shape"]


def test_constant_of_shape_weights_stay_lazy() -> None:
    shape = numpy_helper.from_array(np.array([64, 32], np.int64), "shape")
    fill = numpy_helper.from_array(np.array([0.5], np.float32), "v")
    m = _model([helper.make_node("ConstantOfShape", ["shape"], ["w"], value=fill),
                helper.make_node("Add", ["x", "w"], ["y"])],
               [_vi("x", [64, 32])], [_vi("y", None)], inits=[shape])
    g = load_onnx(m)
    assert isinstance(g.constants["w"], asim.ir.LazyTensor)
    assert g.values["w"].shape == (64, 32) and g.values["w"].dtype == "float32"
    out = execute(g, {"x": np.zeros((64, 32), np.float32)})["y"]
    np.testing.assert_array_equal(out, np.full((64, 32), 0.5, np.float32))


def test_dynamic_dims_stay_symbolic_or_bind(rng) -> None:
    x = rng.standard_normal((5, 3)).astype(np.float32)
    m = _model([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])],
               [_vi("x", ["batch", 3])], [_vi("y", None)])
    g = load_onnx(m)
    assert g.values["x"].shape == ("batch", 3) and g.values["y"].shape == (3, "batch")
    np.testing.assert_array_equal(execute(g, {"x": x})["y"], x.T)
    assert load_onnx(m, input_shapes={"batch": 5}).values["y"].shape == (3, 5)
    assert load_onnx(m, input_shapes={"x": (7, 3)}).values["y"].shape == (3, 7)
    with pytest.raises(asim.GraphError, match="input_shapes names btach.*symbolic dims: batch"):
        load_onnx(m, input_shapes={"btach": 5})


def test_reshape_of_a_runtime_shape_gives_symbolic_dims(rng) -> None:
    x = rng.standard_normal((2, 6)).astype(np.float32)
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])],
               [_vi("x", [2, 6]), _vi("s", [3], TensorProto.INT64)], [_vi("y", None)])
    g = load_onnx(m)
    assert all(isinstance(d, str) for d in g.values["y"].shape) and len(g.values["y"].shape) == 3
    out = execute(g, {"x": x, "s": np.array([3, 2, 2], np.int64)})["y"]
    np.testing.assert_array_equal(out, x.reshape(3, 2, 2))


def test_unnamed_nodes_get_unique_names_and_duplicate_names_are_rejected() -> None:
    nodes = [helper.make_node("Identity", ["x"], ["a"], name="n"),
             helper.make_node("Identity", ["a"], ["b"]),
             helper.make_node("Identity", ["b"], ["c"])]
    g = load_onnx(_model(nodes, [_vi("x", [2])], [_vi("c", None)]))
    names = [n.name for n in g.nodes]
    assert len(set(names)) == 3 and names[0] == "n" and names[2].startswith("Identity_")
    # ONNX IR: names are unique within the node namespace; issue 14 found them renamed
    nodes[1] = helper.make_node("Identity", ["a"], ["b"], name="n")
    with pytest.raises(asim.GraphError, match="two nodes named 'n'"):
        load_onnx(_model(nodes, [_vi("x", [2])], [_vi("c", None)]))


def test_dtype_table_covers_the_ir_dtypes() -> None:
    assert ONNX_DTYPES[TensorProto.FLOAT] == "float32"
    assert ONNX_DTYPES[TensorProto.FLOAT16] == "float16"
    assert ONNX_DTYPES[TensorProto.INT64] == "int64"
    assert ONNX_DTYPES[TensorProto.BOOL] == "bool"
    for code, name in ONNX_DTYPES.items():
        if code == TensorProto.BFLOAT16 and helper.tensor_dtype_to_np_dtype(code).name != name:
            continue    # onnx < 1.19 maps bfloat16 to a numpy stand-in (no ml_dtypes)
        assert helper.tensor_dtype_to_np_dtype(code).name == name


# ---------------------------------------------------------------- control flow
def _if_model(opset=21):
    """y = x + w if cond else x * 2: the branches read outer values x and w."""
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["t"])], "then", [],
                               [_vi("t", None)])
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["e"])], "else", [],
                               [_vi("e", None)], initializer=[two])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    return _model([node], [_vi("cond", [], TensorProto.BOOL), _vi("x", [2, 3])],
                  [_vi("y", None)], inits=[w], opset=opset)


def test_if_branches_are_closed_graphs(rng, tmp_path) -> None:
    path = tmp_path / "if.onnx"
    path.write_bytes(_if_model().SerializeToString())
    g = load_onnx(path)
    node = g.nodes[0]
    assert node.inputs == ("cond", "x")     # the outer value is an explicit input
    then_g, else_g = node.attrs["then_branch"], node.attrs["else_branch"]
    assert then_g.inputs == ["x"] and else_g.inputs == ["x"]
    assert then_g.is_const("w")              # outer constants are copied in
    x = rng.standard_normal((2, 3)).astype(np.float32)
    out_t = execute(g, {"cond": np.array(True), "x": x})["y"]
    out_e = execute(g, {"cond": np.array(False), "x": x})["y"]
    np.testing.assert_allclose(out_t, x + 1, rtol=1e-6)
    np.testing.assert_allclose(out_e, x * 2, rtol=1e-6)


def test_loop_with_captured_value_and_scan_output() -> None:
    """acc += x each iteration (x captured from outside); scan out the running acc."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("c_in", [], TensorProto.BOOL),
                 _vi("acc_in", [3])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("acc_out", [3]), _vi("scan", [3])])
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "scans"], body=body)
    m = _model([node], [_vi("x", [3]), _vi("acc0", [3])], [_vi("acc", None), _vi("scans", None)],
               inits=[numpy_helper.from_array(np.array(4, np.int64), "M")])
    g = load_onnx(m)
    loop = g.nodes[0]
    assert loop.attrs["num_captured"] == 1 and loop.inputs[-1] == "x"
    assert g.values["scans"].shape == (4, 3)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    out = execute(g, {"x": x, "acc0": np.zeros(3, np.float32)})
    np.testing.assert_allclose(out["acc"], 4 * x)
    np.testing.assert_allclose(out["scans"], np.outer(np.arange(1, 5), x))


# ---------------------------------------------------------------- bad input
def test_unknown_op_names_node_op_and_opset() -> None:
    m = _model([helper.make_node("FancyOp", ["x"], ["y"], name="fancy1")],
               [_vi("x", [2])], [_vi("y", None)], opset=17)
    with pytest.raises(asim.UnsupportedOpError, match=r"'FancyOp' \(node 'fancy1'\) at opset 17"):
        load_onnx(m)


def test_unsupported_attribute_value_is_named() -> None:
    m = _model([helper.make_node("Transpose", ["x"], ["y"], colour="blue", name="t")],
               [_vi("x", [2, 2])], [_vi("y", None)])
    with pytest.raises(asim.UnsupportedOpError, match=r"node 't'.*attribute 'colour'"):
        load_onnx(m)


def test_malformed_file_is_a_clear_error(tmp_path) -> None:
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"this is not a protobuf \xff\xfe")
    with pytest.raises(asim.GraphError, match=r"cannot parse ONNX model from '.*x\.onnx'"):
        load_onnx(bad)
    with pytest.raises(asim.GraphError, match=r"cannot read ONNX model '.*missing\.onnx'"):
        load_onnx(tmp_path / "missing.onnx")


def test_truncated_protobuf_is_a_clear_error(tmp_path) -> None:
    data = _if_model().SerializeToString()
    cut = tmp_path / "cut.onnx"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(asim.GraphError, match=r"cannot parse ONNX model from '.*cut\.onnx'"):
        load_onnx(cut)


def test_cyclic_graph_is_a_clear_error() -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second")]
    m = _model(nodes, [_vi("x", [2])], [_vi("b", None)])
    with pytest.raises(asim.GraphError, match=r"cycle through node\(s\) first, second"):
        load_onnx(m)


def test_dangling_input_names_node_and_value() -> None:
    m = _model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [_vi("x", [2])],
               [_vi("y", None)])
    with pytest.raises(asim.GraphError, match=r"node 'r' \(Relu\) reads 'ghost'"):
        load_onnx(m)


def test_unsupported_dtype_is_named() -> None:
    m = _model([helper.make_node("Identity", ["x"], ["y"])],
               [_vi("x", [2], TensorProto.STRING)], [_vi("y", None)])
    with pytest.raises(asim.GraphError, match="graph input 'x' has dtype string"):
        load_onnx(m)
    newer = _model([helper.make_node("Identity", ["x"], ["y"])], [_vi("x", [2])],
                   [_vi("y", None)], opset=99)
    with pytest.raises(asim.GraphError, match="model uses opset 99"):
        load_onnx(newer)


def test_missing_onnx_package_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(asim.AscendSimError,
                       match=r"pip install 'ascendsim\[onnx\]'.*pip install -e '\.\[onnx\]'"):
        load_onnx("model.onnx")


def test_load_onnx_is_exported() -> None:
    assert asim.load_onnx is load_onnx


def test_softmax_before_opset13_normalises_over_the_flattened_tail(rng) -> None:
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [_vi("x", [2, 3, 4])],
               [_vi("y", None)], opset=11)
    g, out = _run(m, x=x)
    flat = x.reshape(2, 12)
    want = np.exp(flat - flat.max(1, keepdims=True))
    want = (want / want.sum(1, keepdims=True)).reshape(2, 3, 4)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-7)
    assert g.values["y"].shape == (2, 3, 4)
    last = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [_vi("x", [2, 3, 4])],
                  [_vi("y", None)], opset=11)
    assert [n.op_type for n in load_onnx(last).nodes] == ["Softmax"]   # no reshapes needed


def test_nested_subgraph_captures_through_every_level() -> None:
    """A Loop body holding an If whose branch reads the top-level input x: x is captured by
    the body (an extra Loop input) and again by the branch (an extra If input)."""
    then_g = helper.make_graph([helper.make_node("Add", ["acc_in", "x"], ["t"])], "then", [],
                               [_vi("t", None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["acc_in"], ["e"])], "else", [],
                               [_vi("e", None)])
    body = helper.make_graph(
        [helper.make_node("If", ["c_in"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("c_in", [], TensorProto.BOOL),
                 _vi("acc_in", [2])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("acc_out", [2])])
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc"], body=body)
    m = _model([node], [_vi("x", [2]), _vi("acc0", [2]), _vi("cond", [], TensorProto.BOOL)],
               [_vi("acc", None)], inits=[numpy_helper.from_array(np.array(3, np.int64), "M")])
    g = load_onnx(m)
    loop = g.nodes[0]
    assert loop.inputs[-1] == "x" and loop.attrs["num_captured"] == 1
    inner = loop.attrs["body"].nodes[0]
    assert inner.op_type == "If" and inner.inputs == ("c_in", "acc_in", "x")
    x = np.array([1.0, -1.0], np.float32)
    feeds = {"x": x, "acc0": np.zeros(2, np.float32)}
    out = execute(g, {**feeds, "cond": np.array(True)})["acc"]
    np.testing.assert_allclose(out, 3 * x)
    out = execute(g, {**feeds, "cond": np.array(False)})["acc"]
    np.testing.assert_allclose(out, np.zeros(2))


def test_upsample_opset7_becomes_resize(rng) -> None:
    x = rng.standard_normal((1, 2, 2, 3)).astype(np.float32)
    m = _model([helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])],
               [_vi("x", [1, 2, 2, 3])], [_vi("y", None)], opset=7)
    g, out = _run(m, x=x)
    node = g.nodes[0]
    assert node.op_type == "Resize"
    assert node.attrs["coordinate_transformation_mode"] == "asymmetric"
    assert g.values["y"].shape == (1, 2, 4, 9)
    np.testing.assert_array_equal(out["y"], x.repeat(2, axis=2).repeat(3, axis=3))


def test_resize_opset10_takes_scales_second_and_samples_asymmetric(rng) -> None:
    x = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    m = _model([helper.make_node("Resize", ["x", "scales"], ["y"], mode="nearest")],
               [_vi("x", [1, 1, 2, 2])], [_vi("y", None)], inits=[scales], opset=10)
    g, out = _run(m, x=x)
    assert g.nodes[0].inputs[1:] == ("", "scales")
    np.testing.assert_array_equal(out["y"], x.repeat(2, axis=2).repeat(2, axis=3))


def test_scan_reverse_with_captured_value() -> None:
    """Running sum over rows scanned back to front, plus an outer bias captured by the body."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_mid"]),
         helper.make_node("Add", ["s_mid", "bias"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y"])],
        "body", [_vi("s_in", [2]), _vi("row", [2])], [_vi("s_out", [2]), _vi("y", [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                            scan_input_directions=[1])
    m = _model([node], [_vi("s0", [2]), _vi("x", [3, 2]), _vi("bias", [2])],
               [_vi("s", None), _vi("ys", None)], opset=16)
    g = load_onnx(m)
    assert g.nodes[0].inputs == ("s0", "x", "bias") and g.values["ys"].shape == (3, 2)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    bias = np.array([10.0, 0.0], np.float32)
    out = execute(g, {"s0": np.zeros(2, np.float32), "x": x, "bias": bias})
    want = np.cumsum(x[::-1], axis=0) + np.outer(np.arange(1, 4), bias)
    np.testing.assert_allclose(out["ys"], want)
    np.testing.assert_allclose(out["s"], want[-1])


def test_exported_flatten_pattern_folds_once_the_batch_is_bound(rng) -> None:
    """PyTorch's x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    m = _model(nodes, [_vi("x", ["N", 3, 4])], [_vi("y", None)], inits=inits)
    bound = load_onnx(m, input_shapes={"N": 2})
    assert [n.op_type for n in bound.nodes] == ["Reshape"]
    assert bound.values["y"].shape == (2, 12)
    free = load_onnx(m)
    assert len(free.nodes) == 5 and len(free.values["y"].shape) == 2
    x = rng.standard_normal((5, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(execute(free, {"x": x})["y"], x.reshape(5, 12))
