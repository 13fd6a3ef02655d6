"""The pass framework: Decision, the CANN log format, fusion_result.json, verifier, dumps."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import optimize
from ascendsim.errors import GraphError
from ascendsim.hw import get_chip
from ascendsim.ir.graph import Node
from ascendsim.passes import Decision, Pass, PassLog, PassManager
from ascendsim.passes.base import GE, PassContext, PassResult, no, require
from ascendsim.passes.log import PassRecord, pattern_line, ub_line
from ascendsim.passes.manager import Stage
from ascendsim.passes.verify import verify_graph

_CTX = PassContext(chip=get_chip("ascend910"))


def _mm_bias_graph(n: int = 2) -> asim.Graph:
    g = asim.Graph("mm")
    x = g.input("x", (4, 8))
    for i in range(n):
        w = g.const(np.full((8, 8), 0.1 * (i + 1), np.float32))
        x = g.add(g.matmul(x, w), np.arange(8, dtype=np.float32))
    g.output(x)
    return g


def test_decision_and_or_keep_reasons():
    assert Decision(True).and_(no("b")).why == "b"
    assert no("a").and_(lambda: pytest.fail("must not be evaluated")).why == "a"
    assert no("a").or_(no("b")).why == "a; and b"
    assert Decision(True).or_(no("b"))
    assert not require(False, "x") and require(True, "x")


def test_log_line_format_is_cann_exact():
    assert pattern_line(0, "MatMulBiasAddFusionPass", "MatMulBiasAddFusion", 2, 2) == (
        "GraphId[0], GraphFusionPass[MatMulBiasAddFusionPass]: pattern=MatMulBiasAddFusion, "
        "matched_times=2, effected_times=2.")
    # CANN prints no GraphId prefix when nothing matched
    assert pattern_line(3, "P", "Q", 0, 0) == "GraphFusionPass[P]: pattern=Q, matched_times=0, " \
                                              "effected_times=0."
    assert ub_line("TbeEltwiseFusionPass") == ("Run buffer fusion pass successfully, pass name:"
                                               "TbeEltwiseFusionPass.")


def test_optimize_log_lists_passes_in_order(same_outputs):
    res = same_outputs(_mm_bias_graph(2))
    lines = str(res.log).splitlines()
    assert ("GraphId[0], GraphFusionPass[MatMulBiasAddFusionPass]: pattern=MatMulBiasAddFusion, "
            "matched_times=2, effected_times=2.") in lines
    names = res.log.pass_names()
    assert names.index("ConstantFoldingPass") < names.index("AABiasaddConvFusion") \
        < names.index("MatMulBiasAddFusionPass")
    # one line per pattern of every pass that ran, nothing else
    n_patterns = sum(len(r.result.patterns) if r.group != "UBFusion" else 1
                     for r in res.log.records if r.ran)
    assert len(lines) == n_patterns
    assert [n.op_type for n in res.graph.nodes] == ["MatMul", "MatMul"]


def test_fusion_result_json(tmp_path):
    res = optimize(_mm_bias_graph(2))
    path = res.log.write_fusion_result_json(tmp_path / "fusion_result.json")
    doc = json.loads(path.read_text())
    assert doc[0]["session_and_graph_id"] == "0_0"
    assert doc[0]["graph_fusion"]["MatMulBiasAddFusionPass"] == {"effect_times": "2",
                                                                  "match_times": "2"}
    # passes switched off are not listed (as ATC does)
    assert "SoftmaxSmallOpFusionPass" not in doc[0]["graph_fusion"]


def test_explain_says_why_not():
    g = asim.Graph("mm2d")
    x = g.input("x", (4, 8))
    y = g.add(g.matmul(x, g.const(np.ones((8, 3), np.float32))), np.ones((4, 3), np.float32))
    g.output(y)
    res = optimize(g)
    assert res.log.counts()["MatMulBiasAddFusionPass"] == (1, 0)
    text = res.log.explain()
    assert "why not 'Add_" in text and "needs a 1-D bias" in text
    assert res.log.refusals[0].pass_name == "MatMulBiasAddFusionPass"


class _BreakingPass(Pass):
    """Rewires a node to read a value that does not exist."""

    name = "BreakingPass"
    group = GE
    patterns = ("Break",)

    def run(self, graph, ctx: PassContext) -> PassResult:
        n = graph.nodes[0]
        graph.nodes[0] = Node(n.name, n.op_type, ("nowhere",) + n.inputs[1:], n.outputs,
                              n.attrs)
        return self.new_result()


class _ShapeLiar(Pass):
    name = "ShapeLiar"
    group = GE
    patterns = ("Lie",)

    def run(self, graph, ctx: PassContext) -> PassResult:
        o = graph.nodes[0].outputs[0]
        v = graph.values[o]
        graph.values[o] = asim.Value(o, (99,), v.dtype)
        return self.new_result()


@pytest.mark.parametrize("bad, text", [(_BreakingPass, "reads 'nowhere'"),
                                       (_ShapeLiar, r"infers to float32\[4, 8\]")])
def test_verifier_names_the_pass_that_broke_the_graph(bad, text):
    mgr = PassManager([Stage("ge", "after GE", (bad,))], ctx=_CTX)
    with pytest.raises(GraphError, match=f"pass '{bad.name}' broke graph 'mm'.*{text}"):
        mgr.run(_mm_bias_graph(1))


def test_verifier_checks_fused_subgraph_boundary():
    g = asim.Graph("f")
    x = g.input("x", (4,))
    y = g.relu(g.add(x, 1.0))
    g.output(y)
    sub = g.copy("sub")
    sub.inputs, sub.outputs = ["x"], [y.name]
    outer = g.copy()
    outer.nodes = []
    outer.add_fused(sub, {"fusion": "UB", "pattern": "P", "display_type": "AddRelu"})
    verify_graph(outer)
    bad = outer.copy()
    bad.nodes = [Node(n.name, n.op_type, n.inputs, ("other",), n.attrs, n.subgraph)
                 for n in bad.nodes]
    bad.values["other"] = bad.values[y.name]
    bad.outputs = ["other"]
    with pytest.raises(GraphError, match="subgraph's outputs"):
        verify_graph(bad, "X")


def test_input_graph_is_not_changed():
    g = _mm_bias_graph(2)
    before = [n.op_type for n in g.nodes]
    optimize(g)
    assert [n.op_type for n in g.nodes] == before


def test_dumps_one_dot_per_stage(tmp_path):
    res = optimize(_mm_bias_graph(1), dump_dir=tmp_path)
    names = sorted(p.name for p in tmp_path.glob("*.dot"))
    assert names[:3] == ["00_initial.dot", "01_after_ge.dot", "02_after_graph_fusion.dot"]
    text = (tmp_path / "02_after_graph_fusion.dot").read_text()
    assert "MatMul" in text and "float32[4,8]" in text and text.startswith("digraph")
    assert '\\nMatMul\\nfloat32[4,8]"' in text and "\\\\n" not in text   # newlines, once escaped
    assert res.log.dumps[0].endswith("00_initial.dot")


def test_fused_node_is_drawn_as_cluster(tmp_path):
    from ascendsim.passes.dot import to_dot

    g = asim.Graph("f")
    x = g.input("x", (4,))
    y = g.relu(g.add(x, 1.0))
    g.output(y)
    sub = g.copy("sub")
    sub.inputs, sub.outputs = ["x"], [y.name]
    outer = g.copy()
    outer.nodes = []
    outer.add_fused(sub, {"fusion": "UB", "pattern": "TbeEltwiseFusion",
                          "display_type": "AddRelu"}, name="fused0")
    text = to_dot(outer)
    assert 'subgraph "cluster_fused0"' in text and "UB TbeEltwiseFusion" in text
    assert '"fused0/Relu_' in text


def test_graph_kernel_flag_enables_its_stages(tmp_path):
    off = optimize(_mm_bias_graph(1))
    assert not any(r.stage.startswith("graph_kernel") for r in off.log.records)
    on = optimize(_mm_bias_graph(1), graph_kernel=True, dump_dir=tmp_path)
    stages = {r.stage for r in on.log.records}
    assert {"graph_kernel_basic", "graph_kernel_composite"} <= stages
    assert (tmp_path / "02_after_graph_kernel_basic.dot").exists()  # right after GE


def test_stage_without_passes_is_logged_not_faked(tmp_path):
    mgr = PassManager([Stage("ge", "after GE", ()), Stage("x", "after X", (), option="gk")],
                      ctx=_CTX, dump_dir=tmp_path, enabled_options={"gk": True})
    res = mgr.run(_mm_bias_graph(1))
    assert "stage 'x' has no passes registered; graph unchanged" in res.log.notes
    assert [p.name for p in tmp_path.iterdir()] == ["00_initial.dot"]
    assert str(res.log) == ""


def test_log_record_counts_sum_patterns():
    r = PassResult("P", GE)
    r.matched("a")
    r.effected("a")
    r.matched("b")
    log = PassLog(records=[PassRecord("ge", r)])
    assert log.counts() == {"P": (2, 1)}
    assert str(log).splitlines() == [
        "GraphId[0], GraphFusionPass[P]: pattern=a, matched_times=1, effected_times=1.",
        "GraphId[0], GraphFusionPass[P]: pattern=b, matched_times=1, effected_times=0."]


class _FakeUbPass(Pass):
    """A UB-group pass, to check the log's CANN buffer-fusion line."""

    name = "TbeFakeFusionPass"
    group = "UBFusion"
    patterns = ("TbeFakeFusion",)

    def run(self, graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        res.matched("TbeFakeFusion")
        return res


def test_ub_pass_logs_cann_buffer_fusion_line():
    res = PassManager([Stage("ub_fusion", "after UB", (_FakeUbPass,))],
                      ctx=_CTX).run(_mm_bias_graph(1))
    assert str(res.log) == "Run buffer fusion pass successfully, pass name:TbeFakeFusionPass."
    doc = res.log.fusion_result()[0]
    assert doc["ub_fusion"] == {"TbeFakeFusionPass": {"effect_times": "0", "match_times": "1"}}
