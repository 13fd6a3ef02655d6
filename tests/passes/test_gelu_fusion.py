"""GeluFusionPass: erf and tanh decompositions -> Gelu, in the exporters' three orders."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _tail(g, x, c, order):
    if order == 0:
        return g.mul(g.mul(x, c), 0.5)
    if order == 1:
        return g.mul(g.mul(x, 0.5), c)
    return g.mul(x, g.mul(c, 0.5))


@pytest.mark.parametrize("order", [0, 1, 2])
def test_erf_form(order, same_outputs):
    g = asim.Graph("gelu")
    x = g.input("x", (4, 6))
    c = g.add(g.erf(g.div(x, math.sqrt(2.0))), 1.0)
    g.output(_tail(g, x, c, order))
    res = same_outputs(g, rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["Gelu"]
    assert res.graph.nodes[0].attrs["approximate"] == "none"
    pat = res.log.record("GeluFusionPass").result.patterns
    assert (pat["GeluErfFusion"].effected, pat["GeluTanhFusion"].matched) == (1, 0)


def test_tanh_form(same_outputs):
    g = asim.Graph("gelu_tanh")
    x = g.input("x", (4, 6))
    inner = g.mul(g.add(x, g.mul(g.pow(x, 3.0), 0.044715)), math.sqrt(2 / math.pi))
    g.output(_tail(g, x, g.add(g.tanh(inner), 1.0), 0))
    res = same_outputs(g, rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["Gelu"]
    assert res.graph.nodes[0].attrs["approximate"] == "tanh"
    assert "pattern=GeluTanhFusion, matched_times=1, effected_times=1." in str(res.log)


def test_escaping_intermediate_refused(same_outputs):
    g = asim.Graph("gelu_esc")
    x = g.input("x", (4, 6))
    e = g.erf(g.mul(x, 1 / math.sqrt(2.0)))
    g.output(_tail(g, x, g.add(e, 1.0), 0), e)
    res = same_outputs(g)
    assert "Gelu" not in op_types(res.graph)
    assert "other uses" in res.log.refusals[0].why


def test_wrong_constant_does_not_match(same_outputs):
    g = asim.Graph("not_gelu")
    x = g.input("x", (4, 6))
    c = g.add(g.erf(g.div(x, np.float32(1.5))), 1.0)
    g.output(_tail(g, x, c, 0))
    res = same_outputs(g)
    assert "Gelu" not in op_types(res.graph)
    assert res.log.counts()["GeluFusionPass"] == (0, 0)


def test_fp16_constants_match_within_fp16_precision(same_outputs):
    """fp16 stores sqrt(2) as 1.414: still the erf GELU."""
    g = asim.Graph("gelu16")
    x = g.input("x", (4, 6), dtype="float16")
    c = g.add(g.erf(g.div(x, np.float16(math.sqrt(2.0)))), np.float16(1.0))
    g.output(_tail(g, x, c, 0))
    res = same_outputs(g, rtol=5e-3, atol=5e-3)
    assert op_types(res.graph) == ["Gelu"]
