"""`reinfer(graph, changed)` re-infers only what a change reaches, and gives the graph a
whole-graph `reinfer` gives (seeded random graphs with shape chains that fold)."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.passes import constant_folding, shapes


def _graph(seed: int) -> asim.Graph:
    """Element-wise chains, Reshapes whose shape is computed from Shape/Gather/Concat (folds
    make their outputs static), and plain Reshapes to constant shapes."""
    rng = np.random.default_rng(seed)
    g = asim.Graph(f"s{seed}")
    x = g.input("x", (2, 3, 4))
    vals = [x, g.relu(x)]
    for step in range(12):
        v = vals[int(rng.integers(len(vals)))]
        kind = 1 if step == 0 else int(rng.integers(4))
        if kind == 0:
            vals.append(getattr(g, str(rng.choice(["relu", "exp", "neg"])))(v))
        elif kind == 1 and v.rank >= 2:        # Reshape(v, Concat(Gather(Shape(v), 0), -1))
            d0 = g.gather(g.shape(v), np.array([0], np.int64), axis=0)
            vals.append(g.reshape(v, g.concat(d0, np.array([-1], np.int64), axis=0)))
        elif kind == 2:
            vals.append(g.add(v, g.neg(v)))
        else:
            vals.append(g.reshape(v, np.array([-1], np.int64)))
    read = {i for n in g.nodes for i in n.inputs}
    g.output(*[v for v in vals[1:] if v.name not in read])
    return g


def _spec(graph: asim.Graph) -> list[tuple]:
    return [(n.name, n.op_type, n.inputs, n.outputs,
             [(graph.values[o].shape, graph.values[o].dtype) for o in n.outputs if o])
            for n in graph.nodes]


@pytest.mark.parametrize("seed", range(10))
def test_folding_with_incremental_reinfer_gives_the_full_reinfer_graph(seed, monkeypatch):
    fast = asim.optimize(_graph(seed))
    calls: list[int] = []
    full = shapes.reinfer

    def whole_graph(graph, changed=None):
        calls.append(len(changed or ()))
        full(graph)                             # the whole graph, as before `changed`

    monkeypatch.setattr(constant_folding, "reinfer", whole_graph)
    slow = asim.optimize(_graph(seed))
    assert _spec(fast.graph) == _spec(slow.graph)
    assert sorted(fast.graph.constants) == sorted(slow.graph.constants)
    assert calls                                 # something folded


def test_incremental_reinfer_touches_only_the_readers_of_a_change(monkeypatch):
    g = asim.Graph("wide")
    x = g.input("x", (4, 4))
    chains = [g.exp(g.relu(x)) for _ in range(20)]
    y = g.reshape(chains[0], np.array([16], np.int64))
    g.output(y, *chains[1:])
    seen: list[str] = []
    infer = shapes.infer_node

    def counted(graph, node):
        seen.append(node.name)
        return infer(graph, node)

    monkeypatch.setattr(shapes, "infer_node", counted)
    shape_const = g.nodes[-1].inputs[1]
    shapes.reinfer(g, {shape_const})
    assert seen == [g.nodes[-1].name]            # only the Reshape reads the changed name
    seen.clear()
    shapes.reinfer(g)
    assert len(seen) == len(g.nodes)
