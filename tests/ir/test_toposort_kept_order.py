"""`Graph.toposort` returns at once when Kahn's algorithm would keep the order; its result is
then the full sort's (seeded random orders of random DAGs, with empty output names, cycles and
duplicate names)."""

from __future__ import annotations

import random

import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.ir.graph import Graph, Node


def _dag(rng: random.Random, n: int) -> Graph:
    g = Graph("dag")
    vals = [g.input("x", (2,)).name]
    for k in range(n):
        ins = tuple(rng.sample(vals, min(len(vals), rng.randint(1, 2))))
        if rng.random() < 0.1:
            ins += ("",)                         # an absent optional input
        out = f"v{k}"
        g.nodes.append(Node(f"n{k}", "Add" if len(ins) > 1 else "Relu", ins, (out,)))
        vals.append(out)
    return g


def _sorted(graph: Graph, monkeypatch, fast: bool) -> list[str] | str:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(Graph, "_kahn_keeps_order", lambda self: False)
        g = graph.copy()
        try:
            g.toposort()
        except GraphError as exc:
            return str(exc)
        return [n.name for n in g.nodes]


@pytest.mark.parametrize("seed", range(6))
def test_kept_order_equals_the_full_sort(seed, monkeypatch):
    rng = random.Random(seed)
    kept = 0
    for _ in range(60):
        g = _dag(rng, rng.randint(2, 14))
        kind = rng.random()
        if kind < 0.3:                           # shuffled: rarely in Kahn's order
            rng.shuffle(g.nodes)
        elif kind < 0.5:                         # one swap of neighbours
            i = rng.randrange(len(g.nodes) - 1)
            g.nodes[i], g.nodes[i + 1] = g.nodes[i + 1], g.nodes[i]
        elif kind < 0.6:                         # a node writing an empty name
            n = g.nodes[0]
            g.nodes[0] = Node(n.name, n.op_type, n.inputs, ("",) + n.outputs)
        elif kind < 0.7:                         # a cycle: the first node reads the last
            n, last = g.nodes[0], g.nodes[-1]
            g.nodes[0] = Node(n.name, n.op_type, n.inputs + last.outputs, n.outputs)
        elif kind < 0.75:                        # a duplicate node name
            n = g.nodes[-1]
            g.nodes[-1] = Node(g.nodes[0].name, n.op_type, n.inputs, n.outputs)
        full = _sorted(g, monkeypatch, fast=False)
        assert _sorted(g, monkeypatch, fast=True) == full
        kept += isinstance(full, list) and full == [n.name for n in g.nodes]
    assert 3 < kept < 50                         # both answers are exercised


def test_a_sorted_graph_is_kept_without_a_sort():
    g = asim.models.bert_encoder_layer(batch=1, seq_len=16)
    g.toposort()
    assert g._kahn_keeps_order()
    before = list(g.nodes)
    g.toposort()
    assert g.nodes == before
