"""The lowering's speed caches give what the plain computations give: every task's traffic
equals `phase_traffic` of its own phases (the cache keys on the core groups' identity), and
a symbolic shape is still refused after static ones were seen."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.lower.lowering import lower, phase_traffic


def test_every_task_traffic_equals_phase_traffic_of_its_phases():
    g = asim.optimize(asim.models.bert_training_step(batch=2, seq_len=64, layers=2),
                      "ascend910").graph
    prog = lower(g, "ascend910", "block")
    shared = 0
    seen: dict[tuple, int] = {}
    for t in prog.tasks:
        assert t.traffic == phase_traffic(t.phases), t.op_name
        key = tuple(id(gr) for ph in t.phases for gr in ph.groups)
        shared += key in seen
        seen[key] = 1
    assert shared > 20          # the cache was hit: tasks share their tiled groups


def test_symbolic_shape_still_refused():
    g = asim.Graph("sym")
    x = g.input("x", ("n", 4))
    g.output(g.relu(x))
    with pytest.raises(GraphError, match="symbolic shape"):
        lower(g, "ascend910", "block")


def _task_view(prog) -> list[tuple]:
    return [(t.op_name, t.op_type, t.phases, t.deps, t.traffic, t.inputs, t.outputs, t.notes)
            for t in prog.tasks]


def test_l2_chain_chunks_lower_as_without_the_rebound_cache(monkeypatch):
    """An L2 batch-split chain of UB-fused ConvRelu nodes: its chunks reuse the inner
    nodes' rebound subgraphs and the chunk shapes; the program equals one lowered with
    `rebound_subgraph` called afresh for every node of every chunk."""
    import ascendsim.lower.lowering as lowering

    g = asim.Graph("convs")
    v = g.input("x", (64, 48, 56, 56), "float16")
    for i in range(2):
        w = g.weight(f"w{i}", (48, 48, 3, 3), "float16", seed=i, scale=0.3)
        v = g.relu(g.conv(v, w, pads=[1, 1, 1, 1]))
    g.output(v)
    opt = asim.optimize(g, "ascend910").graph
    (node,) = [n for n in opt.nodes if n.attrs.get("fusion") == "L2"]
    assert node.attrs["batch_split"] > 1
    assert any(n.subgraph is not None for n in node.subgraph.nodes)    # UB nodes inside
    fast = lower(opt, "ascend910", "block")
    monkeypatch.setattr(lowering._Lowering, "_rebound",
                        lambda self, n: lowering.rebound_subgraph(n, self.values))
    slow = lower(opt, "ascend910", "block")
    assert _task_view(fast) == _task_view(slow)
    assert len(fast.tasks) >= 2 * node.attrs["batch_split"]
