"""`asim.grad`: a new graph with `<name>_grad` outputs; parameters; errors."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.autodiff import parameters


def _linear_model():
    g = asim.Graph("linear")
    x = g.input("x", (4, 3), "float64")
    w = g.const(np.arange(6.0).reshape(3, 2) / 10, name="w")
    b = g.const(np.array([0.5, -0.5]), name="b")
    y = g.add(g.matmul(x, w), b)
    loss = g.reduce_sum(g.mul(y, y), [0, 1], keepdims=0)
    g.output(y, loss)
    return g, loss


def test_grad_returns_a_new_graph_with_named_gradient_outputs():
    g, loss = _linear_model()
    before = (list(g.outputs), len(g.nodes), dict(g.values))
    gg = asim.grad(g, loss)
    assert (list(g.outputs), len(g.nodes), dict(g.values)) == before     # input untouched
    assert gg.outputs[-2:] == ["w_grad", "b_grad"]
    x = np.random.default_rng(0).standard_normal((4, 3))
    out = asim.execute(gg, {"x": x})
    w, b = g.const_value("w"), g.const_value("b")
    dy = 2 * (x @ w + b)                                # d sum(y^2) / dy
    np.testing.assert_allclose(out["w_grad"], x.T @ dy, rtol=1e-12)
    np.testing.assert_allclose(out["b_grad"], dy.sum(0), rtol=1e-12)


def test_grad_with_respect_to_an_input_and_an_unreached_value():
    g, loss = _linear_model()
    other = g.input("unused", (2,), "float64")
    gg = asim.grad(g, loss.name, wrt=["x", other])
    out = asim.execute(gg, {"x": np.ones((4, 3)), "unused": np.ones(2)})
    assert out["x_grad"].shape == (4, 3)
    np.testing.assert_array_equal(out["unused_grad"], np.zeros(2))   # loss does not read it


def test_parameters_are_float_weights_not_state_scalars_or_indices():
    g = asim.models.resnet(batch=1, image=32, layers=(1, 1, 1, 1), width=8, dtype="float32")
    params = parameters(g)
    assert "stem.conv.weight" in params and "stem.bn.weight" in params
    assert "stem.bn.bias" in params and "fc.bias" in params
    assert not any("running" in p for p in params)     # BN statistics are state
    bert = asim.models.bert(batch=1, seq_len=4, layers=1, hidden=8, heads=2, vocab=10,
                            dtype="float32")
    params = parameters(bert)
    assert "embeddings.word" in params and "layer0.attention.query.weight" in params
    assert all(bert.values[p].rank >= 1 and bert.values[p].numel > 1 for p in params)
    assert all(bert.values[p].dtype == "float32" for p in params)  # no int ids/shapes/axes


def test_an_op_without_a_rule_is_named():
    g = asim.Graph("floor")
    x = g.input("x", (3,), "float32")
    loss = g.reduce_sum(g.floor(g.mul(x, g.const(np.ones(3, np.float32), name="w"))), [0],
                        keepdims=0)
    g.output(loss)
    with pytest.raises(asim.UnsupportedOpError, match=r"'Floor'.*no gradient rule"):
        asim.grad(g, loss)


def test_loss_must_be_a_float_scalar():
    g, _ = _linear_model()
    with pytest.raises(asim.GraphError, match=r"loss '.*' must be a one-element float value"):
        asim.grad(g, g.outputs[0])
