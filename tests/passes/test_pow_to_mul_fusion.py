"""PowToMulFusionPass: Pow by 2 or 3 -> Mul chain; other exponents refused."""

from __future__ import annotations

import pytest

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


@pytest.mark.parametrize("e, ops", [(2.0, ["Mul"]), (3.0, ["Mul", "Mul"])])
def test_pow_becomes_mul(e, ops, same_outputs):
    g = asim.Graph("pow")
    x = g.input("x", (5, 3))
    g.output(g.pow(x, e))
    res = same_outputs(g)
    assert op_types(res.graph) == ops
    assert res.graph.outputs == g.outputs
    assert res.log.counts()["PowToMulFusionPass"] == (1, 1)


def test_other_exponent_refused(same_outputs):
    g = asim.Graph("pow")
    x = g.input("x", (5, 3))
    g.output(g.pow(g.abs(x), 0.5))
    res = same_outputs(g)
    assert "Pow" in op_types(res.graph)
    assert res.log.refusals[0].why == "exponent 0.5 is not 2 or 3"


def test_tensor_exponent_not_matched(same_outputs):
    g = asim.Graph("pow")
    x = g.input("x", (5, 3))
    y = g.input("y", (5, 3))
    g.output(g.pow(g.abs(x), y))
    res = same_outputs(g)
    assert res.log.counts()["PowToMulFusionPass"] == (0, 0)
