"""The fusion advisor (issue 26): ranked candidates with evidence; the switch file it writes
reproduces the predicted gain; composite candidates re-simulate to their gain with equal values."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.ir import Graph


def _softmax_attention(batch: int = 16, seq: int = 128, dim: int = 64) -> Graph:
    """Scores of one attention head with a softmax written as small ops (the default stack
    leaves it decomposed: SoftmaxSmallOpFusionPass is off by default)."""
    g = Graph("small_op_softmax")
    q = g.input("q", (batch, seq, dim), "float16")
    k = g.input("kt", (batch, dim, seq), "float16")
    s = g.matmul(q, k)
    m = g.reduce_max(s, np.array([-1], np.int64), keepdims=1)
    e = g.exp(g.sub(s, m))
    g.output(g.div(e, g.reduce_sum(e, np.array([-1], np.int64), keepdims=1)))
    return g


@pytest.fixture(scope="module")
def softmax_advice():
    return asim.advise(_softmax_attention(), "ascend910", composites=False)


def test_switch_on_candidate_and_switch_file(softmax_advice, tmp_path) -> None:
    a = softmax_advice
    on = [c for c in a.candidates if c.kind == "switch_on"]
    assert [c.name for c in on] == ["SoftmaxSmallOpFusionPass"]
    assert a.switch == {"GraphFusion": {"SoftmaxSmallOpFusionPass": "on"}}
    path = tmp_path / "switch.json"
    a.write_switch(path)
    r = asim.simulate(_softmax_attention(), "ascend910", fusion=str(path))
    assert r.time_us == pytest.approx(a.switch_time_us, abs=1e-9)
    assert a.fused_time_us - r.time_us == pytest.approx(a.switch_gain_us, abs=1e-9)
    assert a.switch_gain_us > 0
    assert "switch file" in a.table()


@pytest.mark.parametrize("model, chip", [
    ("bert", "ascend910"),
    ("decoder", "ascend910b"),
])
def test_top_composite_resimulates_with_equal_values(model, chip) -> None:
    if model == "bert":
        g = asim.models.bert_encoder_layer(batch=2, seq_len=64, hidden=256, heads=4, ffn=1024)
    else:
        g = asim.models.decoder("tiny-gqa-1m", layers=1, batch=1, seq_len=64)
    a = asim.advise(g, chip)
    top = a.composites[0]
    assert top.advised and top.values_ok is True
    assert 0 < top.ub_bytes <= asim.get_chip(chip).ub_bytes
    fused = asim.simulate(g, chip)
    again = asim.simulate(top.graph, chip, fusion=False)
    assert fused.time_us - again.time_us == pytest.approx(top.gain_us, abs=1e-9)
    assert a.candidates == sorted(a.candidates, key=lambda c: -c.gain_us)


def test_resnet_nothing_missing() -> None:
    g = asim.models.resnet(batch=1, image=32, layers=(1, 1, 1, 1), width=16)
    a = asim.advise(g, "ascend910")
    assert all(c.gain_us > 0 for c in a.candidates)
    assert a.switch_time_us == a.fused_time_us or a.switch


def test_composite_over_ub_is_refused() -> None:
    import dataclasses

    import ascendsim.advice as adv

    chip = asim.get_chip("ascend910")
    small = dataclasses.replace(chip, ub_bytes=1024)
    g = asim.models.bert_encoder_layer(batch=2, seq_len=64, hidden=256, heads=4, ffn=1024)
    fused = asim.simulate(g, chip)
    from ascendsim.attribution import Measure

    cands = adv._composites(fused.graph, small, Measure.of(fused), {})
    assert cands and all("does not fit UB" in c.refused for c in cands)
    assert "ub_bytes" not in cands[0].refused and "1024 B" in cands[0].refused


def test_bad_input() -> None:
    empty = Graph("empty")
    x = empty.input("x", (4,), "float16")
    empty.output(x)
    with pytest.raises(GraphError, match="'empty' has no ops"):
        asim.advise(empty)
    with pytest.raises(GraphError, match="needs a Graph"):
        asim.advise("bert")


def test_large_cube_epilogue_checked_without_its_cube_op(monkeypatch) -> None:
    import ascendsim.advice as adv

    monkeypatch.setattr(adv, "VALUE_LIMIT", 1000)      # every whole candidate is "too large"
    g = asim.models.bert_encoder_layer(batch=2, seq_len=64, hidden=256, heads=4, ffn=1024)
    a = asim.advise(g, "ascend910")
    cube = [c for c in a.composites if c.name.startswith("MatMul") and not c.same_as]
    assert cube and all(c.values_ok is True for c in cube)
    assert all("epilogue checked on a random cube output" in c.detail for c in cube)
