"""LayerNormFusionPass: PyTorch's decomposed LayerNorm -> LayerNormalization; refusals."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _ln(gamma_shape=(8,), affine=True, axes=(-1,), square="pow") -> asim.Graph:
    g = asim.Graph("ln")
    x = g.input("x", (2, 3, 8))
    ax = np.array(axes, np.int64)
    mean = g.reduce_mean(x, ax, keepdims=1)
    d = g.sub(x, mean)
    sq = g.pow(d, 2.0) if square == "pow" else g.mul(d, d)
    var = g.reduce_mean(sq, ax, keepdims=1)
    n = g.div(d, g.sqrt(g.add(var, 1e-5)))
    if affine:
        gamma = np.linspace(0.5, 1.5, int(np.prod(gamma_shape)), dtype=np.float32)
        n = g.add(g.mul(n, gamma.reshape(gamma_shape)), np.full(gamma_shape, 0.1, np.float32))
    g.output(n)
    return g


def test_fires_with_affine(same_outputs):
    res = same_outputs(_ln(), rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["LayerNormalization"]
    node = res.graph.nodes[0]
    assert node.attrs["axis"] == 2 and abs(node.attrs["epsilon"] - 1e-5) < 1e-12
    assert res.log.counts()["LayerNormFusionPass"] == (1, 1)


def test_fires_without_affine_and_with_mul_square(same_outputs):
    res = same_outputs(_ln(affine=False, square="mul"), rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["LayerNormalization"]


def test_two_trailing_axes(same_outputs):
    res = same_outputs(_ln(gamma_shape=(3, 8), axes=(-2, -1)), rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["LayerNormalization"]
    assert res.graph.nodes[0].attrs["axis"] == 1


def test_non_trailing_axis_refused(same_outputs):
    res = same_outputs(_ln(affine=False, axes=(1,)))
    assert "LayerNormalization" not in op_types(res.graph)
    assert "not the trailing axes" in res.log.refusals[0].why


def test_gamma_of_wrong_shape_refused(same_outputs):
    """gamma broadcasting over the batch axes is legal unfused, not for the fused op."""
    res = same_outputs(_ln(gamma_shape=(3, 1)))
    assert "LayerNormalization" not in op_types(res.graph)
    assert "gamma shape [3, 1] is not [8]" in res.log.refusals[0].why
