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


def _reference_cse(graph: asim.Graph) -> None:
    """The pass as it was: `Graph.replace_uses` over the whole graph after every merge."""
    from ascendsim.passes.common_subexpression_elimination import _key
    from ascendsim.passes.rewrite import remove_nodes

    seen, dup, outputs = {}, [], set(graph.outputs)
    for idx in range(len(graph.nodes)):
        node = graph.nodes[idx]
        key = _key(node)
        if key is None:
            continue
        first = seen.setdefault(key, node)
        if first is node or any(o in outputs for o in node.outputs):
            continue
        for old, new in zip(node.outputs, first.outputs):
            if old:
                graph.replace_uses(old, new)
        dup.append(node)
    if dup:
        remove_nodes(graph, dup)


def _ladder_of_duplicates(seed: int) -> asim.Graph:
    """Random duplicates, commutative swaps and duplicates that appear only once the
    duplicates they read were merged (merges cascade down the graph)."""
    rng = np.random.default_rng(seed)
    g = asim.Graph("dups")
    vals = [g.input(f"x{k}", (4,)) for k in range(3)]
    for _ in range(120):
        a, b = (vals[int(i)] for i in rng.integers(max(0, len(vals) - 8), len(vals), 2))
        kind = int(rng.integers(4))
        v = g.add(a, b) if kind == 0 else g.add(b, a) if kind == 1 else \
            g.relu(a) if kind == 2 else g.mul(a, b)
        vals.append(v)
    g.output(*vals[-4:])
    return g


def test_one_pass_renaming_equals_replace_uses_per_merge():
    from ascendsim.hw import get_chip
    from ascendsim.passes.base import PassContext
    from ascendsim.passes.common_subexpression_elimination import (
        CommonSubexpressionEliminationPass,
    )

    merged = 0
    for seed in range(5):
        fast, slow = _ladder_of_duplicates(seed), _ladder_of_duplicates(seed)
        res = CommonSubexpressionEliminationPass().run(
            fast, PassContext(chip=get_chip("ascend910")))
        _reference_cse(slow)
        assert [(n.name, n.op_type, n.inputs, n.outputs) for n in fast.nodes] == \
            [(n.name, n.op_type, n.inputs, n.outputs) for n in slow.nodes]
        assert fast.outputs == slow.outputs and list(fast.values) == list(slow.values)
        merged += res.patterns["CommonSubexpression"].effected
    assert merged >= 20           # the graphs hold many (cascading) duplicates
