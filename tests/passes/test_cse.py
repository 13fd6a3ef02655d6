"""CommonSubexpressionEliminationPass: equal nodes merge; outputs keep their names."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def test_duplicates_merge_commutative_too(same_outputs):
    g = asim.Graph("cse")
    x = g.input("x", (4,))
    y = g.input("y", (4,))
    a, b = g.add(x, y), g.add(y, x)            # commutative: same expression
    r1, r2 = g.relu(a), g.relu(b)
    g.output(g.mul(r1, r2))
    res = same_outputs(g)
    assert op_types(res.graph) == ["Add", "Relu", "Mul"]
    assert res.log.counts()["CommonSubexpressionEliminationPass"] == (2, 2)


def test_different_attrs_do_not_merge(same_outputs):
    g = asim.Graph("attrs")
    x = g.input("x", (2, 3))
    a = g.reduce_sum(x, np.array([0], np.int64), keepdims=0)
    b = g.reduce_sum(x, np.array([0], np.int64), keepdims=1)
    g.output(a, b)
    res = same_outputs(g)
    assert op_types(res.graph).count("ReduceSum") == 2


def test_graph_output_duplicate_is_refused(same_outputs):
    g = asim.Graph("outs")
    x = g.input("x", (4,))
    a, b = g.relu(x), g.relu(x)
    g.output(a, b)
    res = same_outputs(g)
    assert res.graph.outputs == [a.name, b.name]
    assert res.log.counts()["CommonSubexpressionEliminationPass"] == (1, 0)
    assert "graph output" in res.log.refusals[0].why
