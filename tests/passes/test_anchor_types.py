"""A UB or rewrite pass's `anchor_types` (the op types its scan calls `match` on) leaves out
only nodes `match` rejects: on training and inference graphs, in the state each pass starts
from, `match` finds nothing at a node of another op type (so the scan that skips them finds
the groups the full scan finds)."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.passes import manager
from ascendsim.passes.base import RewritePass
from ascendsim.passes.fusion_rules import RULE_SETS
from ascendsim.passes.partition import FusionGraph
from ascendsim.passes.rewrite import GraphView
from ascendsim.passes.ub_fusion import UbFusionPass

GRAPHS = {
    "bert_step": lambda: asim.models.bert_training_step(batch=2, seq_len=64, layers=1),
    "resnet_step": lambda: asim.models.resnet_training_step(batch=2, image=32),
    "resnet50": lambda: asim.models.resnet50(batch=1),
    "conv_bn_relu": lambda: asim.models.conv_bn_relu(),
}


def _starting_graphs(monkeypatch, name: str, kind: type) -> list[tuple[type, asim.Graph]]:
    """The graph each pass of `kind` starts from when `optimize` runs model `name` (the
    passes run one by one, each graph checked first)."""
    states: list[tuple[type, asim.Graph]] = []
    run_pass = manager.PassManager._run_pass

    def recording(self, p, graph):
        if isinstance(p, kind):
            states.append((type(p), graph.copy()))
        return run_pass(self, p, graph)

    monkeypatch.setattr(manager.PassManager, "_run_pass", recording)
    asim.optimize(GRAPHS[name]())
    return states


def _ub_passes() -> list[type[UbFusionPass]]:
    stage = next(s for s in manager.default_stages() if s.name == "ub_fusion")
    return [p for p in stage.passes if issubclass(p, UbFusionPass)]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_match_finds_nothing_outside_the_anchor_types(name, monkeypatch):
    states = _starting_graphs(monkeypatch, name, UbFusionPass)
    assert {cls for cls, _ in states} == set(_ub_passes())
    anchored = 0
    for cls, graph in states:
        p = cls()
        anchors = p.anchor_types()
        if anchors is None:
            continue
        anchored += 1
        fg = FusionGraph(graph)
        for rules in RULE_SETS.values():
            for node in fg.live_nodes():
                if node.op_type not in anchors:
                    assert p.match(fg, node, rules) is None, (cls.__name__, node)
    assert anchored >= 8


def test_the_anchor_scan_is_used_by_every_named_ub_pass():
    named = [p for p in _ub_passes() if p.__name__ != "AutomaticUbFusion"]
    assert all(p().anchor_types() for p in named)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_rewrite_match_finds_nothing_outside_the_anchor_types(name, monkeypatch):
    states = _starting_graphs(monkeypatch, name, RewritePass)
    anchored = 0
    for cls, graph in states:
        p = cls()
        anchors = p.anchor_types()
        if anchors is None:
            continue
        anchored += 1
        view = GraphView(graph)
        for node in graph.nodes:
            if node.op_type not in anchors:
                assert p.match(graph, node, view) is None, (cls.__name__, node)
    assert anchored >= 10
