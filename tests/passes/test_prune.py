"""PrunePass: prune to requested outputs and drop dead nodes."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.api import optimize
from ascendsim.errors import GraphError


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _g() -> tuple[asim.Graph, asim.Value]:
    g = asim.Graph("p")
    x = g.input("x", (4,))
    mid = g.relu(x)
    g.sigmoid(x)                      # dead: no output needs it
    g.output(g.exp(mid))
    return g, mid


def test_dead_node_removed(same_outputs):
    g, _ = _g()
    res = same_outputs(g)
    assert op_types(res.graph) == ["Relu", "Exp"]
    assert res.log.counts()["PrunePass"] == (1, 1)


def test_prune_to_requested_outputs():
    g, mid = _g()
    res = optimize(g, outputs=[mid.name])
    assert res.graph.outputs == [mid.name]
    assert op_types(res.graph) == ["Relu"]


def test_unknown_output_is_an_error():
    g, _ = _g()
    with pytest.raises(GraphError, match="no value.*'nope'|nope"):
        optimize(g, outputs=["nope"])
