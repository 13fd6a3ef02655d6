"""The fusion passes inside `optimize`: registration, switches, dumps, fusion_result.json."""

from __future__ import annotations

import json

from fusion_helpers import assert_same_values, fused

from ascendsim.api import optimize
from ascendsim.ir.graph import Graph


def _chain() -> Graph:
    g = Graph("pipe")
    v = g.add(g.input("x", (64,)), g.input("y", (64,)))
    g.output(g.exp(g.relu(g.mul(v, 0.5))))
    return g


def test_ub_passes_run_in_optimize_and_log_like_cann(tmp_path):
    g = _chain()
    opt = optimize(g)
    assert [n.attrs["pattern"] for n in fused(opt.graph)] == \
        ["TbeEltwiseFusion"]
    names = opt.log.pass_names()
    ub = ["TbeConvElemwiseFusionPass", "TbeReduceElemwiseFusionPass",
          "TbeSegmentElemwiseFusionPass", "TbeEltwiseFusionPass", "AutomaticUbFusion"]
    assert [n for n in names if n in ub] == ub
    assert "Run buffer fusion pass successfully, pass name:TbeEltwiseFusionPass." in str(opt.log)
    doc = json.loads(opt.log.write_fusion_result_json(tmp_path / "fusion_result.json")
                     .read_text())
    assert doc[0]["ub_fusion"]["TbeEltwiseFusionPass"] == {"effect_times": "1",
                                                           "match_times": "1"}
    assert_same_values(g, opt.graph)


def test_switch_file_turns_ub_passes_off():
    g = _chain()
    opt = optimize(g, fusion_switch={"Switch": {"UBFusion": {"ALL": "off"}}})
    assert not fused(opt.graph)
    opt = optimize(g, fusion_switch={"Switch": {"UBFusion": {"TbeEltwiseFusionPass": "off"}}})
    assert not fused(opt.graph)
    assert "TbeEltwiseFusionPass" not in opt.log.pass_names()


def test_graph_kernel_dumps(tmp_path):
    g = _chain()
    opt = optimize(g, graph_kernel=True, dump_dir=tmp_path,
                   fusion_switch={"Switch": {"UBFusion": {"ALL": "off"}}})
    dumps = sorted(p.name for p in tmp_path.glob("*.dot"))
    assert any("graph_kernel_basic" in d for d in dumps)
    assert any("graph_kernel_composite" in d for d in dumps)
    (node,) = fused(opt.graph)
    assert node.attrs["fusion"] == "GraphKernel"
    assert_same_values(g, opt.graph)
