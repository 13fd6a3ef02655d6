"""ONNX import of TensorProto.BFLOAT16: inputs, initializers (raw and int32_data), Cast to=16,
and float attributes of ops on bf16 data; values are float32 arrays holding bf16 numbers."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ascendsim.execute import execute
from ascendsim.frontend.onnx import load_onnx
from ascendsim.kernels import bf16

BF = TensorProto.BFLOAT16


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_bf16_input_and_initializers_import_and_run() -> None:
    w_bits = np.array([[0x3F80, 0x4000], [0xBF80, 0x3F00]], np.uint16)   # 1, 2; -1, 0.5
    w = helper.make_tensor("w", BF, [2, 2], w_bits.tobytes(), raw=True)
    b = helper.make_tensor("b", BF, [2], [0.25, 1.0])                     # int32_data form
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"]),
                helper.make_node("Add", ["y", "b"], ["z"]),
                helper.make_node("Cast", ["z"], ["f"], to=TensorProto.FLOAT)],
               [helper.make_tensor_value_info("x", BF, [3, 2])],
               [helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 2])], [w, b])
    g = load_onnx(m)
    assert g.values["x"].dtype == "bfloat16" and g.values["w"].dtype == "bfloat16"
    assert g.values["z"].dtype == "bfloat16" and g.values["f"].dtype == "float32"
    assert np.array_equal(bf16.to_bits(g.const_value("w")), w_bits)
    x = np.array([[1.0, 2.0], [0.5, -3.0], [1 + 2.0 ** -8, 0.0]])
    out = execute(g, {"x": x})["f"]
    xr = bf16.round_bf16(x).astype(np.float64)                 # 1 + 2**-8 ties to 1.0
    ref = xr @ np.array([[1.0, 2.0], [-1.0, 0.5]]) + np.array([0.25, 1.0])
    assert np.array_equal(out, bf16.round_bf16(ref))


def test_cast_to_bfloat16_and_float_attribute_on_bf16_data() -> None:
    m = _model([helper.make_node("Cast", ["x"], ["h"], to=BF),
                helper.make_node("LeakyRelu", ["h"], ["y"], alpha=0.1)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
               [helper.make_tensor_value_info("y", BF, [4])])
    g = load_onnx(m)
    assert g.values["h"].dtype == "bfloat16" and g.values["y"].dtype == "bfloat16"
    x = np.array([-1.0, 3.0, 1 + 3 * 2.0 ** -8, -2.5], np.float32)
    y = execute(g, {"x": x})["y"]
    assert [int(v) for v in bf16.to_bits(y)] == [0xBDCD, 0x4040, 0x3F82, 0xBE80]
