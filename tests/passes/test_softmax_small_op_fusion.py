"""SoftmaxSmallOpFusionPass: off by default; ReduceMax/Sub/Exp/ReduceSum/Div -> Softmax."""

from __future__ import annotations

import numpy as np

import ascendsim as asim

ON = {"Switch": {"GraphFusion": {"SoftmaxSmallOpFusionPass": "on"}, "UBFusion": {"ALL": "off"}}}


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _g(axis_max=-1, axis_sum=-1, keep=1, extra_use=False) -> asim.Graph:
    g = asim.Graph("sm")
    x = g.input("x", (3, 7))
    m = g.reduce_max(x, np.array([axis_max], np.int64), keepdims=keep)
    e = g.exp(g.sub(x, m))
    y = g.div(e, g.reduce_sum(e, np.array([axis_sum], np.int64), keepdims=keep))
    g.output(y)
    if extra_use:
        g.output(e)
    return g


def test_off_by_default(same_outputs):
    res = same_outputs(_g())
    assert "Softmax" not in op_types(res.graph)
    assert not res.log.record("SoftmaxSmallOpFusionPass").ran


def test_fires_when_switched_on(same_outputs):
    res = same_outputs(_g(), fusion_switch=ON)
    assert op_types(res.graph) == ["Softmax"]
    assert res.graph.nodes[0].attrs["axis"] == 1
    assert res.log.counts()["SoftmaxSmallOpFusionPass"] == (1, 1)


def test_different_axes_refused(same_outputs):
    res = same_outputs(_g(axis_max=0, axis_sum=1), fusion_switch=ON)
    assert "Softmax" not in op_types(res.graph)
    assert "not the same single axis" in res.log.refusals[0].why


def test_escaping_exp_refused(same_outputs):
    res = same_outputs(_g(extra_use=True), fusion_switch=ON)
    assert "other uses" in res.log.refusals[0].why
