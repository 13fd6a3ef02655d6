"""Fusion switch files: both CANN formats, ALL + overrides, mandatory passes, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import optimize
from ascendsim.errors import ConfigError
from ascendsim.passes import load_fusion_switch

GRAPH_FUSION_PASSES = {"AABiasaddConvFusion", "ConvBatchnormFusionPass",
                       "MatMulBiasAddFusionPass", "SoftmaxSmallOpFusionPass",
                       "LayerNormFusionPass", "GeluFusionPass", "PowToMulFusionPass",
                       "ChannelAlignFusionPass", "SplitConcatElemwiseFusionPass",
                       "FlashAttentionFusionPass", "RmsNormFusionPass", "RotaryMulFusionPass",
                       "SwiGluFusionPass"}


def _graph() -> asim.Graph:
    g = asim.Graph("sw")
    x = g.input("x", (1, 3, 6, 6))
    c = g.conv(x, g.const(np.ones((4, 3, 3, 3), np.float32) * 0.1), kernel_shape=[3, 3])
    c = g.add(c, np.arange(4, dtype=np.float32).reshape(4, 1, 1))
    y = g.pow(g.reshape(c, np.array([1, -1], np.int64)), 2.0)
    g.output(y)
    return g


def _ran(res) -> set[str]:
    return {r.name for r in res.log.records if r.ran and r.group == "GraphFusion"}


def _write(tmp_path, doc) -> str:
    p = tmp_path / "fusion_switch.cfg"
    p.write_text(json.dumps(doc) if isinstance(doc, dict) else doc)
    return str(p)


def test_all_off_leaves_only_non_disableable_passes(tmp_path, same_outputs):
    path = _write(tmp_path, {"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "on"}}})
    res = same_outputs(_graph(), fusion_switch=path)
    assert _ran(res) == {"AABiasaddConvFusion"}
    assert res.log.counts()["AABiasaddConvFusion"] == (1, 1)
    assert any("AABiasaddConvFusion cannot be switched off" in n for n in res.log.notes)
    assert "GraphFusionPass[PowToMulFusionPass]" not in str(res.log)
    assert [n.op_type for n in res.graph.nodes if n.op_type == "Pow"] == ["Pow"]


def test_override_turns_one_pass_back_on(tmp_path, same_outputs):
    path = _write(tmp_path, {"Switch": {"GraphFusion": {"ALL": "off",
                                                        "PowToMulFusionPass": "on"}}})
    res = same_outputs(_graph(), fusion_switch=path)
    assert _ran(res) == {"AABiasaddConvFusion", "PowToMulFusionPass"}
    assert "Pow" not in [n.op_type for n in res.graph.nodes]


def test_default_off_pass_runs_only_when_named():
    res = optimize(_graph())
    assert _ran(res) == GRAPH_FUSION_PASSES - {"SoftmaxSmallOpFusionPass",
                                               "ChannelAlignFusionPass"}
    res = optimize(_graph(), fusion_switch={"Switch": {"GraphFusion": {
        "SoftmaxSmallOpFusionPass": "on"}}})
    assert "SoftmaxSmallOpFusionPass" in _ran(res)


def test_old_line_format_bad_line(tmp_path):
    with pytest.raises(ConfigError, match=r"line 2 \(PowToMulFusionPass\)' has value 'of'"):
        load_fusion_switch(_write(tmp_path, "AABiasaddConvFusion:off\nPowToMulFusionPass:of\n"))
    with pytest.raises(ConfigError, match="line 1: 'PowToMulFusionPass' is not"):
        load_fusion_switch(_write(tmp_path, "PowToMulFusionPass\n"))


def test_old_line_format(tmp_path):
    path = _write(tmp_path, "# legacy ATC format\nPowToMulFusionPass:off\n\n"
                            "AABiasaddConvFusion:off\n")
    res = optimize(_graph(), fusion_switch=path)
    ran = _ran(res)
    assert "PowToMulFusionPass" not in ran and "AABiasaddConvFusion" in ran
    assert "MatMulBiasAddFusionPass" in ran


def test_typo_is_a_clear_error(tmp_path):
    path = _write(tmp_path, {"Switch": {"GraphFusion": {"PowToMulFusionPas": "off"}}})
    with pytest.raises(ConfigError) as err:
        optimize(_graph(), fusion_switch=path)
    msg = str(err.value)
    assert "Switch.GraphFusion.PowToMulFusionPas" in msg and "unknown pass" in msg
    assert "valid names: ALL, AABiasaddConvFusion" in msg and "PowToMulFusionPass" in msg


def test_bad_value_names_the_key():
    with pytest.raises(ConfigError, match=r"'Switch.GraphFusion.ALL' has value 'of'; expected"):
        load_fusion_switch({"Switch": {"GraphFusion": {"ALL": "of"}}})
    with pytest.raises(ConfigError, match="key 'PowToMulFusionPass' has value 'no'"):
        load_fusion_switch({"ConvBatchnormFusionPass": "on", "PowToMulFusionPass": "no"})


def test_unknown_group_and_wrong_group(tmp_path):
    with pytest.raises(ConfigError, match="unknown group 'GraphFusionX'; valid groups"):
        load_fusion_switch({"Switch": {"GraphFusionX": {"ALL": "off"}}})
    with pytest.raises(ConfigError, match="belongs to group 'GraphFusion', not 'UBFusion'"):
        load_fusion_switch({"Switch": {"UBFusion": {"PowToMulFusionPass": "off"}}})
    with pytest.raises(ConfigError, match="does not exist"):
        load_fusion_switch(tmp_path / "missing.cfg")
    bad = _write(tmp_path, "{not json")
    with pytest.raises(ConfigError, match="invalid JSON at line 1"):
        load_fusion_switch(bad)


def test_cann_names_not_modelled_are_accepted_and_noted():
    """The seed's example file loads although ascendsim has no SoftmaxFusionPass."""
    res = optimize(_graph(), fusion_switch={"Switch": {"GraphFusion": {
        "ALL": "off", "SoftmaxFusionPass": "on"}, "UBFusion": {"ALL": "on"}}})
    assert _ran(res) == {"AABiasaddConvFusion"}
    assert any("SoftmaxFusionPass" in n and "does not model" in n for n in res.log.notes)


def test_ub_group_switch_off(tmp_path):
    res = optimize(_graph(), fusion_switch={"Switch": {"UBFusion": {"ALL": "off"}}})
    assert not any(r.ran for r in res.log.records if r.group == "UBFusion")
    assert "Run buffer fusion pass successfully" not in str(res.log)
