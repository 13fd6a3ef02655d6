"""The fusion passes scale with the graph: a long element-wise ladder optimises in seconds.

Every pass used to re-index the whole graph for every group it committed (and the verifier
re-inferred every node after every pass), so a graph of n ops with n/3 groups took O(n^2):
minutes at this size. This is not a timed test; it checks that the run finishes and that the
result is right (every op is kept exactly once, groups respect the limits, same values).
"""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import assert_same_values, fused

from ascendsim.api import optimize
from ascendsim.errors import GraphError
from ascendsim.ir.graph import Graph
from ascendsim.ir.tensor import Value
from ascendsim.passes.fusion_rules import get_rules
from ascendsim.passes.graph_kernel import DEFAULT_MAX_OPS
from ascendsim.passes.partition import FusionGraph, op_count
from ascendsim.passes.ub_fusion import fuse_nodes
from ascendsim.passes.verify import Verifier, verify_graph

RUNGS = 1000          # 3 ops a rung: 3,000 element-wise ops
#: rungs of the ladder whose graph-kernel values are executed: each composite compiles its own
#: kernel, so the values are checked on composites of the full size limit, fewer of them
VALUE_RUNGS = 100


def ladder(rungs: int = RUNGS, sides: int = 8, seed: int = 0) -> Graph:
    """Two rails of element-wise ops; each rung adds a side input to rail x, activates it,
    and mixes it into rail y (so x's value has two readers: chains must stop there)."""
    rng = np.random.default_rng(seed)
    g = Graph("ladder")
    side = [g.input(f"s{k}", (4,)) for k in range(sides)]
    x, y = g.input("x", (4,)), g.input("y", (4,))
    acts = (g.relu, g.sigmoid, g.tanh)
    for i in range(rungs):
        x = g.add(x, side[int(rng.integers(sides))])
        x = acts[i % len(acts)](x)
        y = g.mul(y, x) if i % 2 else g.add(y, x)
    g.output(x)
    g.output(y)
    return g


def _ops(graph: Graph) -> int:
    return sum(op_count(n) for n in graph.nodes)


def test_long_ladder_ub_fusion_finishes_and_keeps_every_op():
    g = ladder()
    assert len(g.nodes) == 3 * RUNGS
    res = optimize(g)
    groups = fused(res.graph)
    assert _ops(res.graph) == len(g.nodes)
    # x's add + activation pair up behind every rung (the activation's output escapes to y)
    assert len(groups) >= RUNGS // 2
    assert max(op_count(n) for n in groups) <= get_rules("seed").eltwise_max
    effected = sum(e for m, e in res.log.counts().values())
    assert effected >= len(groups)
    assert_same_values(g, res.graph)


def test_long_ladder_graph_kernel_finishes_and_keeps_every_op():
    g = ladder()
    res = optimize(g, graph_kernel=True)
    groups = fused(res.graph)
    assert _ops(res.graph) == len(g.nodes)
    assert all(op_count(n) <= DEFAULT_MAX_OPS for n in groups)
    # connected ops merge up to the size limit: few composites, none tiny
    assert len(groups) <= 2 * len(g.nodes) // DEFAULT_MAX_OPS + 2
    short = ladder(VALUE_RUNGS)
    kept = optimize(short, graph_kernel=True).graph
    assert max(op_count(n) for n in fused(kept)) == DEFAULT_MAX_OPS
    assert_same_values(short, kept)


def _same_analysis(fg: FusionGraph) -> None:
    """An analysis kept up to date by commits equals a fresh one, up to renumbering."""
    fresh = FusionGraph(fg.graph)
    assert [n.name for n in fg.live_nodes()] == [n.name for n in fresh.nodes]
    assert [n.name for n in fg.graph.nodes] == [n.name for n in fresh.nodes]
    m = {i: fresh.index[n.name] for i, n in enumerate(fg.nodes) if n is not None}
    assert {v: m[i] for v, i in fg.producer.items()} == fresh.producer
    assert {v: [m[i] for i in rs] for v, rs in fg.readers.items()} == fresh.readers
    assert [[m[s] for s in fg.succ[i]] for i in sorted(m)] == fresh.succ


def test_commits_keep_the_analysis_equal_to_a_fresh_one():
    g = ladder(40)
    fg = FusionGraph(g)
    # pairs along the rails: an op and its first reader
    for k in range(0, 30, 4):
        head = fg.live_nodes()[k]
        nxt = fg.users(head.outputs[0])[0]
        fuse_nodes(g, [head, nxt], {"fusion": "UB", "pattern": "test"}, fg=fg)
        _same_analysis(fg)
    verify_graph(g)


def test_commit_that_breaks_the_order_resorts_like_graph_toposort():
    g = Graph("order")
    x = g.input("x", (4,))
    a = g.relu(x)
    b = g.exp(a)              # reads a, sits between a and c
    c = g.neg(a)
    g.output(b)
    g.output(c)
    fg = FusionGraph(g)
    fused = fuse_nodes(g, [g.nodes[0], g.nodes[2]], {"fusion": "UB", "pattern": "test"},
                       fg=fg)
    assert [n.name for n in g.nodes] == [fused.name, g.nodes[1].name]
    assert fg.resorts == 1
    _same_analysis(fg)
    verify_graph(g)


def _two_chains() -> Graph:
    """Two independent chains built one after the other (Kahn's order interleaves them)."""
    g = Graph("two")
    for rail in ("p", "q"):
        v = g.input(rail, (4,))
        for _ in range(6):
            v = g.relu(g.exp(v))
        g.output(v)
    return g


def test_resort_orders_as_graph_toposort():
    g = _two_chains()
    expected = g.copy()
    expected.toposort()
    fg = FusionGraph(g)
    fg.resort()
    assert [n.name for n in g.nodes] == [n.name for n in expected.nodes]
    assert [n.name for n in g.nodes] != [n.name for n in _two_chains().nodes]  # reordered
    _same_analysis(fg)


def test_verifier_memory_still_catches_a_changed_value():
    g = ladder(5)
    check = Verifier()
    check(g, "first")
    node = g.nodes[3]
    out = node.outputs[0]
    g.values[out] = Value(out, (5,), "float32")
    with pytest.raises(GraphError, match=f"pass 'Broken' broke graph 'ladder'.*'{node.name}'"):
        check(g, "Broken")
