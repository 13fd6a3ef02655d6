"""CondRemovePass: an If with a constant condition becomes its live branch, inlined."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _branches() -> tuple[asim.Graph, asim.Graph]:
    t = asim.Graph("then")
    a = t.input("a", (4,))
    t.output(t.mul(t.relu(a), 3.0))
    e = asim.Graph("else")
    b = e.input("b", (4,))
    e.output(e.neg(b))
    return t, e


def _if_graph(cond) -> asim.Graph:
    t, e = _branches()
    g = asim.Graph("ifg")
    x = g.input("x", (4,))
    y = g.if_(cond if not isinstance(cond, bool) else np.array(cond), x,
              then_branch=t, else_branch=e)
    g.output(g.add(y, 1.0))
    return g


def test_true_branch_inlined(same_outputs):
    res = same_outputs(_if_graph(True))
    assert op_types(res.graph) == ["Relu", "Mul", "Add"]
    assert res.log.counts()["CondRemovePass"] == (1, 1)
    assert all(n.name.startswith("If_") for n in res.graph.nodes[:2])


def test_false_branch_inlined(same_outputs):
    res = same_outputs(_if_graph(False))
    assert op_types(res.graph) == ["Neg", "Add"]


def test_condition_folded_first(same_outputs):
    """The condition only becomes constant after folding (Greater of two constants)."""
    t, e = _branches()
    g = asim.Graph("fold_cond")
    x = g.input("x", (4,))
    cond = g.greater(np.array(2.0, np.float32), np.array(1.0, np.float32))
    g.output(g.if_(cond, x, then_branch=t, else_branch=e))
    res = same_outputs(g)
    assert op_types(res.graph) == ["Relu", "Mul"]
    assert res.graph.outputs == g.outputs


def test_dynamic_condition_kept(same_outputs):
    t, e = _branches()
    g = asim.Graph("dyn")
    x = g.input("x", (4,))
    c = g.input("c", (), dtype="bool")
    g.output(g.if_(c, x, then_branch=t, else_branch=e))
    res = same_outputs(g)
    assert op_types(res.graph) == ["If"]
    assert res.log.counts()["CondRemovePass"] == (0, 0)


def test_branch_returning_its_input_gets_identity(same_outputs):
    t = asim.Graph("then")
    a = t.input("a", (4,))
    t.output(a)
    e = asim.Graph("else")
    b = e.input("b", (4,))
    e.output(e.neg(b))
    g = asim.Graph("pt")
    x = g.input("x", (4,))
    y = g.if_(np.array(True), x, then_branch=t, else_branch=e)
    g.output(y)
    res = same_outputs(g)
    assert op_types(res.graph) == ["Identity"]
    assert res.graph.outputs == [y.name]
