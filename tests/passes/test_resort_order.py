"""`FusionGraph.resort` orders the graph exactly as `Graph.toposort` would, on real models.

The fusion passes re-sort hundreds of times on a large graph, so `resort` works from the
index (pending counts from the successor lists, a renumbering instead of a rebuild). The
simulated task order follows the node order, so every re-sort the passes make while optimising
these models is checked against `Graph.toposort` on a copy of the graph at that moment.
"""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.passes.partition import FusionGraph

CASES = {
    "bert_step_graph_kernels": (
        lambda: asim.models.bert_training_step(batch=2, seq_len=64, layers=2),
        {"graph_kernel": True}),
    "bert_step_default": (
        lambda: asim.models.bert_training_step(batch=2, seq_len=64, layers=2), {}),
    "resnet_step_graph_kernels": (
        lambda: asim.models.resnet_training_step(batch=2, image=32), {"graph_kernel": True}),
    "bert_inference_graph_kernels": (
        lambda: asim.models.bert(batch=2, seq_len=64, layers=2, hidden=128, heads=2),
        {"graph_kernel": True}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_resort_matches_graph_toposort(case, monkeypatch):
    build, options = CASES[case]
    original = FusionGraph.resort
    checked = []

    def checked_resort(self: FusionGraph) -> None:
        expected = self.graph.copy()
        expected.nodes = list(self.live_nodes())
        expected.toposort()
        original(self)
        got = [n.name for n in self.graph.nodes]
        assert got == [n.name for n in expected.nodes]
        assert [n.name for n in self.live_nodes()] == got
        checked.append(len(got))

    monkeypatch.setattr(FusionGraph, "resort", checked_resort)
    asim.optimize(build(), "ascend910", **options)
    if case.endswith("graph_kernels") and case.startswith("bert_step"):
        assert checked, "the graph-kernel pass re-sorted nothing: the check ran on no case"
