"""Pass attribution (issue 26): leave-one-out and cumulative gains, each reproduced by the one
`simulate` call it names; single fusion instances left out with the `exclude` option."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.attribution import attribute
from ascendsim.errors import ConfigError, GraphError
from ascendsim.ir import Graph


@pytest.fixture(scope="module")
def bert():
    return asim.models.bert_encoder_layer(batch=2, seq_len=64, hidden=256, heads=4, ffn=1024)


@pytest.fixture(scope="module")
def bert_att(bert):
    return attribute(bert, "ascend910")


@pytest.fixture(scope="module")
def resnet():
    return asim.models.resnet(batch=1, image=32, layers=(1, 1, 1, 1), width=16)


def test_cumulative_gains_add_up(bert_att) -> None:
    a = bert_att
    assert a.units, "the default passes change a BERT layer"
    total = sum(u.cumulative.time_us for u in a.units)
    assert total == pytest.approx(a.baseline.time_us - a.full.time_us, abs=1e-9)
    for u in a.units:
        assert u.interaction_us == pytest.approx(u.loo.time_us - u.cumulative.time_us)
    names = [u.name for u in a.units]
    assert "MatMulBiasAddFusionPass" in names
    assert a.unit("MatMulBiasAddFusionPass").instances >= 4


def test_every_leave_one_out_gain_is_one_simulate_call(bert, bert_att) -> None:
    a = bert_att
    for u in a.units:
        r = asim.simulate(bert, "ascend910", fusion=u.loo_fusion)
        assert r.time_us - a.full.time_us == pytest.approx(u.loo.time_us, abs=1e-9), u.name
        assert len(r.trace.tasks) - a.full.tasks == u.loo.tasks
        # the cumulative step is one call too
        c = asim.simulate(bert, "ascend910", fusion=u.cumulative_fusion)
        b = asim.simulate(bert, "ascend910", fusion=u.before_fusion)
        assert b.time_us - c.time_us == pytest.approx(u.cumulative.time_us, abs=1e-9)


def test_instance_rows_reproduce_and_identical_ones_run_once(bert, bert_att) -> None:
    a = bert_att
    rows = [r for r in a.instances if r.gain is not None and not r.same_as]
    assert rows
    for row in rows[:3]:
        r = asim.simulate(bert, "ascend910", fusion=row.fusion)
        assert r.time_us - a.full.time_us == pytest.approx(row.gain.time_us, abs=1e-9)
        excluded = [f for f in r.pass_log.refusals if "exclude option" in f.why]
        assert [f.pass_name for f in excluded] == [row.instance.pass_name]
    # q, k, v and the attention output projection are the same MatMul+bias at the same shape
    qkv = [r for r in a.instances if r.instance.pass_name == "MatMulBiasAddFusionPass"
           and r.same_as]
    assert len(qkv) >= 3
    rep = next(r for r in a.instances if r.instance.key == qkv[0].same_as)
    assert rep.count == len([r for r in a.instances if r.same_as == rep.instance.key]) + 1
    assert "Add_0" in a.instance_table()


def test_exclude_option_checks_names(bert) -> None:
    with pytest.raises(ConfigError, match="unknown pass 'NoSuchPass'"):
        asim.simulate(bert, fusion={"exclude": ["NoSuchPass:Add_0"]})
    with pytest.raises(ConfigError, match="PassName:node"):
        asim.simulate(bert, fusion={"exclude": ["Add_0"]})


def test_graph_kernel_is_one_unit(bert) -> None:
    a = attribute(bert, "ascend910", fusion={"graph_kernel": True}, instances=False,
                  passes=["BasicOpsFusion"])
    assert [u.name for u in a.units] == ["graph_kernel"]
    u = a.unit("graph_kernel")
    assert u.loo_fusion == {"graph_kernel": False}
    r = asim.simulate(bert, "ascend910", fusion=u.loo_fusion)
    assert r.time_us - a.full.time_us == pytest.approx(u.loo.time_us, abs=1e-9)


def test_resnet_conv_bn_relu(resnet) -> None:
    a = attribute(resnet, "ascend910", max_instances=3)
    assert {"ConvBatchnormFusionPass", "TbeConvElemwiseFusionPass"} <= {u.name for u in a.units}
    assert sum(r.gain is not None for r in a.instances if not r.same_as) == 3
    assert a.waterfall()[0] == ("as given", a.given.time_us)
    assert a.waterfall()[-1][1] == pytest.approx(a.full.time_us)


def test_waterfall_plot(bert_att, tmp_path) -> None:
    path = tmp_path / "w.png"
    bert_att.plot_waterfall(str(path))
    assert path.stat().st_size > 1000


def test_bad_requests(bert) -> None:
    with pytest.raises(ConfigError, match="unknown pass 'FooFusionPass'"):
        attribute(bert, passes=["FooFusionPass"])
    with pytest.raises(ConfigError, match="did not change"):
        attribute(bert, passes=["SwiGluFusionPass"])
    empty = Graph("empty")
    x = empty.input("x", (4,), "float16")
    empty.output(x)
    with pytest.raises(GraphError, match="has no ops"):
        attribute(empty)
    with pytest.raises(ConfigError, match="no passes"):
        attribute(bert, fusion=False)


def test_cli_attribute(capsys) -> None:
    from ascendsim.cli import main

    assert main(["attribute", "conv_bn_relu", "--no-progress", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "Pass attribution" in out and "ConvBatchnormFusionPass" in out
    assert main(["attribute", "conv_bn_relu", "--pass", "Nope"]) != 0
    assert "unknown pass 'Nope'" in capsys.readouterr().err


def test_exclude_one_graph_kernel_and_one_ub_instance(bert) -> None:
    gk = asim.simulate(bert, fusion={"graph_kernel": True})
    made = gk.pass_log.record("BasicOpsFusion").result.instances
    assert made and all(i.members for i in made)
    one = made[0]
    r = asim.simulate(bert, fusion={"graph_kernel": True, "exclude": [one.key]})
    assert len(r.pass_log.record("BasicOpsFusion").result.instances) == len(made) - 1
    composites = [n for n in r.graph.nodes if n.attrs.get("fusion") == "GraphKernel"]
    assert all(one.members[0] not in {m.name for m in n.subgraph.nodes} for n in composites)
    ub = asim.simulate(bert).pass_log.record("TbeReduceElemwiseFusionPass").result.instances
    r = asim.simulate(bert, fusion={"exclude": [ub[0].key]})
    left = r.pass_log.record("TbeReduceElemwiseFusionPass").result.instances
    assert [i.members for i in left] == [i.members for i in ub[1:]]


def test_decoder_layer_on_910b() -> None:
    g = asim.models.decoder("tiny-gqa-1m", layers=1, batch=1, seq_len=64)
    a = attribute(g, "ascend910b", instances=False)
    assert {"FlashAttentionFusionPass", "RmsNormFusionPass"} <= {u.name for u in a.units}
    for u in a.units:
        r = asim.simulate(g, "ascend910b", fusion=u.loo_fusion)
        assert r.time_us - a.full.time_us == pytest.approx(u.loo.time_us, abs=1e-9), u.name
