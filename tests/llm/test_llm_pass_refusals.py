"""RmsNorm / SwiGlu / RotaryMul fusion passes on hand-built graphs: what fuses, what is refused
and why (the reason lands in the pass log)."""

from __future__ import annotations

import numpy as np

import ascendsim as asim

NO_UB = {"Switch": {"UBFusion": {"ALL": "off"}}}


def _opt(g):
    return asim.optimize(g, "ascend910b", fusion_switch=NO_UB)


def _types(g):
    return [n.op_type for n in g.nodes]


def _same(g, res, rng, tol=1e-5):
    feeds = {n: rng.standard_normal(g.values[n].shape).astype(np.float32) for n in g.inputs}
    a, b = asim.execute(g, feeds), asim.execute(res.graph, feeds)
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=tol, atol=tol)


def _rms(axes=(-1,), gamma=True):
    g = asim.Graph("rms")
    x = g.input("x", (2, 3, 8))
    ms = g.reduce_mean(g.mul(x, x), np.array(axes, np.int64), keepdims=1)
    y = g.div(x, g.sqrt(g.add(ms, 1e-6)))
    if gamma:
        y = g.mul(y, np.linspace(0.5, 1.5, 8, dtype=np.float32))
    g.output(y)
    return g


def test_rms_norm_fuses_with_and_without_gamma(rng):
    for gamma in (True, False):
        g = _rms(gamma=gamma)
        res = _opt(g)
        assert _types(res.graph) == ["RmsNorm"]
        assert res.graph.nodes[0].attrs["epsilon"] == np.float32(1e-6)
        _same(g, res, rng)


def test_rms_norm_refuses_other_axes():
    res = _opt(_rms(axes=(1,)))
    assert "RmsNorm" not in _types(res.graph)
    assert "not the last axis" in res.log.explain()


def _swiglu(b_start=4, other_use=False):
    g = asim.Graph("swiglu")
    x = g.input("x", (3, 8))
    a = g.slice(x, np.array([0]), np.array([4]), np.array([-1]))
    b = g.slice(x, np.array([b_start]), np.array([b_start + 4]), np.array([-1]))
    s = g.sigmoid(a)
    g.output(g.mul(b, g.mul(s, a)))          # operands in the other order
    if other_use:
        g.output(s)
    return g


def test_swiglu_fuses_either_operand_order(rng):
    g = _swiglu()
    res = _opt(g)
    assert _types(res.graph) == ["SwiGlu"]
    _same(g, res, rng)


def test_swiglu_refusals_say_why():
    res = _opt(_swiglu(b_start=2))        # overlapping, not the two halves
    assert "SwiGlu" not in _types(res.graph)
    assert "not the two halves" in res.log.explain()
    res = _opt(_swiglu(other_use=True))
    assert "SwiGlu" not in _types(res.graph)
    assert "other uses" in res.log.explain()


def _rotary(cos_shape=(1, 1, 4, 8)):
    g = asim.Graph("rope")
    x = g.input("x", (2, 2, 4, 8))
    cos = np.cos(np.linspace(0, 1, int(np.prod(cos_shape)))).reshape(cos_shape).astype(np.float32)
    sin = np.sin(np.linspace(0, 1, int(np.prod(cos_shape)))).reshape(cos_shape).astype(np.float32)
    x1 = g.slice(x, np.array([0]), np.array([4]), np.array([-1]))
    x2 = g.slice(x, np.array([4]), np.array([8]), np.array([-1]))
    rot = g.concat(g.neg(x2), x1, axis=-1)
    g.output(g.add(g.mul(rot, sin), g.mul(x, cos)))
    return g


def test_rotary_fuses(rng):
    g = _rotary()
    res = _opt(g)
    assert _types(res.graph) == ["RotaryMul"]
    _same(g, res, rng)
