"""The lowering's speed caches give what the plain computations give: a symbolic shape is
still refused after static ones were seen, and an L2 chain's chunks lower as without the
rebound-subgraph cache."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.lower.lowering import lower


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
    from ascendsim.lower import composite

    g = asim.Graph("convs")
    # 1x1 convs: memory-bound, so the L2 pass splits the batch (at batch 128, 4 x 32: at
    # batch 64 the dead chunk intermediates evicted from the 910's L2 cost their write-back
    # and the split no longer pays)
    v = g.input("x", (128, 64, 56, 56), "float16")
    for i in range(2):
        w = g.weight(f"w{i}", (64, 64, 1, 1), "float16", seed=i, scale=0.3)
        v = g.relu(g.conv(v, w))
    g.output(v)
    opt = asim.optimize(g, "ascend910").graph
    (node,) = [n for n in opt.nodes if n.attrs.get("fusion") == "L2"]
    assert node.attrs["batch_split"] > 1
    assert any(n.subgraph is not None for n in node.subgraph.nodes)    # UB nodes inside
    fast = lower(opt, "ascend910", "block")
    monkeypatch.setattr(composite, "rebound",
                        lambda low, n: composite.rebound_subgraph(n, low.values))
    slow = lower(opt, "ascend910", "block")
    assert _task_view(fast) == _task_view(slow)
    assert len(fast.tasks) >= 2 * node.attrs["batch_split"]
