"""The incremental pass machinery (issue 15): batch rewrite scans, in-place replace_nodes and
the verifier's skip of an unchanged graph give the graph and log the slow forms gave."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.ir.tensor import Value
from ascendsim.passes.matmul_biasadd_fusion import MatMulBiasAddFusionPass
from ascendsim.passes.rewrite import in_order
from ascendsim.passes.verify import Verifier


def _shape(graph: asim.Graph) -> list[tuple]:
    return [(n.name, n.op_type, n.inputs, n.outputs, repr(sorted(n.attrs.items())))
            for n in graph.nodes]


def _log(opt) -> list[tuple]:
    return [(r.stage, r.name, {k: (s.matched, s.effected) for k, s in r.result.patterns.items()},
             sorted((f.node, f.why) for f in r.result.refusals)) for r in opt.log.records]


def test_batch_matmul_bias_scan_gives_the_one_rewrite_per_scan_graph(monkeypatch):
    def step() -> asim.Graph:             # built anew: fresh node names count per graph
        return asim.models.bert_training_step(batch=2, seq_len=64, layers=2)

    batched = asim.optimize(step())
    monkeypatch.setattr(MatMulBiasAddFusionPass, "batch", False)
    single = asim.optimize(step())
    assert _shape(batched.graph) == _shape(single.graph)
    assert sorted(batched.graph.constants) == sorted(single.graph.constants)
    assert _log(batched) == _log(single)
    fused = batched.log.records[[r.name for r in batched.log.records].index(
        "MatMulBiasAddFusionPass")].result.patterns["MatMulBiasAddFusion"]
    assert fused.effected > 2                 # several layers fused in one scan


def test_a_second_bias_add_is_refused_as_the_slow_mode_refuses_it():
    # MatMul -> Add(b1) -> Add(b2): after the first fusion the second Add reads a MatMul with
    # a bias; a batch scan's stale view hid that producer, the next scan finds and refuses it
    g = asim.Graph("mm2")
    x = g.input("x", (8, 16), "float16")
    w = g.input("w", (16, 4), "float16")
    b1, b2 = g.input("b1", (4,), "float16"), g.input("b2", (4,), "float16")
    g.output(g.add(g.add(g.matmul(x, w), b1), b2))
    opt = asim.optimize(g)
    rec = next(r for r in opt.log.records if r.name == "MatMulBiasAddFusionPass")
    assert rec.result.patterns["MatMulBiasAddFusion"].effected == 1
    assert any("already has a bias" in f.why for f in rec.result.refusals)


def test_replace_nodes_still_resorts_when_a_helper_node_was_appended():
    # PowToMul with exponent 3 appends a helper Mul the new node reads: the graph must end up
    # in order (the in-place insert cannot tell, so it walks and re-sorts)
    g = asim.Graph("pow3")
    x = g.input("x", (4, 4), "float32")
    g.output(g.relu(g.pow(x, 3.0)))
    opt = asim.optimize(g)
    assert in_order(opt.graph)
    # the helper x*x, then x*(x*x) fused with the ReLU by UB fusion
    assert [n.op_type for n in opt.graph.nodes] == ["Mul", "FusedOp"]


def test_verifier_skips_an_unchanged_graph_but_not_a_changed_one():
    g = asim.Graph("v")
    y = g.relu(g.input("x", (4,), "float32"))
    g.output(y)
    check = Verifier()
    check(g, "first")
    check(g, "unchanged")                     # nothing to do: same objects
    g.values[y.name] = Value(y.name, (5,), "float32")
    with pytest.raises(GraphError, match="pass 'Broken' broke graph 'v'"):
        check(g, "Broken")
