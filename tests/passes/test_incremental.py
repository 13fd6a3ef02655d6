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


def _verdict(check, graph) -> str:
    try:
        check(graph, "P")
    except GraphError as exc:
        return str(exc)
    return "ok"


def test_verifier_that_skips_passed_nodes_gives_the_full_check_verdict():
    """After each edit (a value re-shaped, a constant replaced, a node rewired, a repair) the
    verifier that skips nodes it passed before says exactly what a full check says."""
    import numpy as np

    from ascendsim.ir.graph import Node
    from ascendsim.passes.verify import verify_graph

    g = asim.Graph("v")
    x = g.input("x", (2, 6))
    shape = g.const(np.array([3, 4], np.int64), name="shape")
    r = g.reshape(g.relu(x), shape)
    g.output(g.exp(g.neg(r)))
    check = Verifier()
    full = lambda graph, name: verify_graph(graph, name)  # noqa: E731
    assert _verdict(check, g) == _verdict(full, g) == "ok"
    relu, reshape, neg = g.nodes[0], g.nodes[1], g.nodes[2]
    edits = [
        # a Value object replaced by a wrong one: the writer is re-inferred
        lambda: g.values.__setitem__(neg.outputs[0], Value(neg.outputs[0], (4, 3), "float32")),
        lambda: g.values.__setitem__(neg.outputs[0], Value(neg.outputs[0], (3, 4), "float32")),
        # the constant a Reshape reads as its shape replaced: the Reshape is re-inferred
        lambda: g.constants.__setitem__("shape", np.array([4, 3], np.int64)),
        lambda: g.constants.__setitem__("shape", np.array([3, 4], np.int64)),
        # a node rewired to read a value of another shape (a new Node object)
        lambda: g.nodes.__setitem__(2, Node(neg.name, "Neg", (relu.outputs[0],), neg.outputs)),
        lambda: g.nodes.__setitem__(2, neg),
        # the Reshape's output re-declared: the readers see a new Value object
        lambda: g.values.__setitem__(reshape.outputs[0],
                                     Value(reshape.outputs[0], (12,), "float32")),
    ]
    verdicts = []
    for edit in edits:
        edit()
        verdicts.append(_verdict(check, g))
        assert verdicts[-1] == _verdict(full, g)
    assert verdicts[1::2] == ["ok"] * 3 and len(set(verdicts[::2])) == 4   # four failures
