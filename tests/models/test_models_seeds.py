"""The seed examples and fusion patterns build, validate and compute the right values."""

import numpy as np
import pytest
from models_helpers import feeds

import ascendsim as asim
from ascendsim.models.seeds import CHAIN_OPS


def test_net_basic_fuse_is_mul_then_add(rng):
    g = asim.models.net_basic_fuse()
    g.validate()
    assert [n.op_type for n in g.nodes] == ["Mul", "Add"]
    assert g.values[g.inputs[0]].shape == (4, 4)
    x = rng.standard_normal((4, 4)).astype(np.float32)
    np.testing.assert_allclose(asim.execute(g, {"x": x})[g.outputs[0]], x * 2 + 1, rtol=1e-6)


def test_net_composite_fuse_is_pow_of_mul_add(rng):
    g = asim.models.net_composite_fuse(shape=(3, 5, 7))
    g.validate()
    assert [n.op_type for n in g.nodes] == ["Mul", "Add", "Pow"]
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    np.testing.assert_allclose(asim.execute(g, {"x": x})[g.outputs[0]], (x * 2 + 1) ** 3,
                               rtol=1e-5)


def test_matmul_bias_relu_values():
    g = asim.models.matmul_bias_relu(m=8, k=32, n=16, dtype="float32")
    g.validate()
    assert [n.op_type for n in g.nodes] == ["MatMul", "Add", "Relu"]
    f = feeds(g)
    w, b = g.const_value("fc.weight"), g.const_value("fc.bias")
    assert w.shape == (32, 16) and b.shape == (16,)
    out = asim.execute(g, f)[g.outputs[0]]
    np.testing.assert_allclose(out, np.maximum(f["x"] @ w + b, 0), rtol=1e-5, atol=1e-5)


def test_conv_bn_relu_structure_and_values():
    g = asim.models.conv_bn_relu(batch=2, cin=3, cout=8, h=9, w=9, k=3, dtype="float32")
    g.validate()
    assert [n.op_type for n in g.nodes] == ["Conv", "BatchNormalization", "Relu"]
    out = asim.execute(g, feeds(g))[g.outputs[0]]
    assert out.shape == (2, 8, 9, 9)
    assert np.isfinite(out).all() and (out >= 0).all() and (out > 0).mean() > 0.2
    strided = asim.models.conv_bn_relu(batch=1, cin=16, cout=32, h=56, w=56, k=3, stride=2)
    assert strided.values[strided.outputs[0]].shape == (1, 32, 28, 28)


@pytest.mark.parametrize("length", [1, 4, 6, 9])
def test_elementwise_chain_length_and_values(length):
    g = asim.models.elementwise_chain(n=64, length=length, dtype="float32")
    g.validate()
    assert len(g.nodes) == length
    assert g.nodes[0].op_type == "Add" and len(g.inputs) == 2
    f = feeds(g)
    y = f["x"] + f["y"]
    for i in range(1, length):
        op, c = CHAIN_OPS[(i - 1) % len(CHAIN_OPS)]
        y = {"mul": np.multiply, "add": np.add, "sub": np.subtract,
             "relu": np.maximum, "abs": lambda v, _: np.abs(v)}[op](y, np.float32(c or 0))
    np.testing.assert_allclose(asim.execute(g, f)[g.outputs[0]], y, rtol=1e-6)
    expected = ["Add", "Mul", "Add", "Relu", "Sub", "Mul", "Abs", "Mul", "Add"][:length]
    assert [n.op_type for n in g.nodes] == expected


def test_seed_models_default_dtypes():
    assert asim.models.net_basic_fuse().values["x"].dtype == "float32"
    assert asim.models.matmul_bias_relu().values["x"].dtype == "float16"
    assert asim.models.conv_bn_relu(dtype="float32").values["x"].dtype == "float32"
