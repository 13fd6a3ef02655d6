"""LLM fusion passes: fused == unfused values (fp16, GQA, causal), what each pass produces,
refusals, and the fusion-switch file turning them off."""

from __future__ import annotations

import numpy as np
import pytest
from llm_helpers import attention_graph, naive_attention

import ascendsim as asim
from ascendsim.models.decoder import decoder, empty_cache

NO_UB = {"Switch": {"UBFusion": {"ALL": "off"}}}
#: fp16 graph vs fused kernel (fp32 inside): the unfused graph rounds scores, probabilities
#: and products to fp16 (2^-11 relative each); outputs are averages of O(1) values
FP16_ATOL = 4e-3


def _feeds(graph, rng):
    return {n: rng.standard_normal(graph.values[n].shape).astype(graph.values[n].dtype)
            for n in graph.inputs}


def _types(graph):
    return [n.op_type for n in graph.nodes]


@pytest.mark.parametrize("b,h,hkv,s,t,mask,op,causal", [
    (2, 4, 2, 6, 6, "causal", "FlashAttentionScore", 1),        # prefill, GQA, causal
    (1, 4, 1, 3, 7, "causal", "FlashAttentionScore", 1),        # prefill after a context
    (2, 4, 4, 5, 5, "padding", "FlashAttentionScore", 0),       # MHA, additive mask kept
    (3, 6, 2, 1, 9, None, "IncreFlashAttention", 0),            # decode, GQA
])
def test_fused_attention_equals_unfused(rng, b, h, hkv, s, t, mask, op, causal):
    g = attention_graph(b, h, hkv, s, t, 16, "float16", mask)
    feeds = _feeds(g, rng)
    res = asim.optimize(g, "ascend910b", fusion_switch=NO_UB)
    assert _types(res.graph) == [op]
    node = res.graph.nodes[0]
    assert node.inputs[:3] == ("q", "k", "v")          # the repeat copies are gone (GQA)
    if op == "FlashAttentionScore":
        assert node.attrs["causal"] == causal and node.attrs["head_num"] == h
        assert len(node.inputs) == (4 if mask == "padding" else 3)
    else:
        assert (node.attrs["num_heads"], node.attrs["num_key_value_heads"]) == (h, hkv)
    before = asim.execute(g, feeds)
    after = asim.execute(res.graph, feeds)
    (name,) = before
    np.testing.assert_allclose(after[name].astype(np.float32), before[name].astype(np.float32),
                               atol=FP16_ATOL, rtol=0)
    # and both agree with the float64 reference
    ref_mask = None
    if mask == "causal":
        vis = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
        ref_mask = np.where(vis, 0.0, -np.inf)
    elif mask == "padding":
        ref_mask = g.const_value(g.nodes[[n.op_type for n in g.nodes].index("Add")].inputs[1])
    ref = naive_attention(feeds["q"], feeds["k"], feeds["v"], ref_mask)
    np.testing.assert_allclose(after[name].astype(np.float64), ref, atol=FP16_ATOL, rtol=0)


def test_attention_refused_when_probabilities_are_read(rng):
    g = attention_graph(1, 2, 1, 4, 4, 8, "float32", "causal", extra_use=True)
    res = asim.optimize(g, "ascend910b", fusion_switch=NO_UB)
    assert "FlashAttentionScore" not in _types(res.graph)
    assert "other uses" in res.log.explain()


def test_flash_attention_switched_off_by_fusion_switch():
    g = decoder("tiny-gqa-1m", seq_len=4)
    on = asim.optimize(g, "ascend910b")
    off = asim.optimize(g, "ascend910b", fusion_switch={
        "Switch": {"GraphFusion": {"FlashAttentionFusionPass": "off"}}})
    assert _types(on.graph).count("FlashAttentionScore") == 2
    assert "FlashAttentionScore" not in _types(off.graph)
    assert "Softmax" in {t for n in off.graph.nodes for t in
                         ([n.op_type] + ([m.op_type for m in n.subgraph.nodes]
                                         if n.subgraph is not None else []))}
    # the other LLM fusions still ran
    assert "RmsNorm" in _types(off.graph) or any(
        "RmsNorm" in [m.op_type for m in n.subgraph.nodes]
        for n in off.graph.nodes if n.subgraph is not None)


@pytest.mark.parametrize("preset,kw", [
    ("tiny-gqa-1m", dict(seq_len=6)),
    ("tiny-gqa-1m", dict(phase="decode", context_len=5, batch=2)),
    ("tiny-moe-1m", dict(seq_len=6)),
])
def test_decoder_fusions_fire_and_keep_values(rng, preset, kw):
    """Each LLM pass fires once per site of the tiny decoder; logits stay within fp16."""
    g = decoder(preset, **kw)
    res = asim.optimize(g, "ascend910b", fusion_switch=NO_UB)
    counts = res.log.counts()
    layers = 2
    assert counts["RmsNormFusionPass"] == (2 * layers + 1, 2 * layers + 1)
    assert counts["RotaryMulFusionPass"] == (2 * layers, 2 * layers)
    assert counts["SwiGluFusionPass"][1] == layers * (2 if preset == "tiny-moe-1m" else 1)
    assert counts["FlashAttentionFusionPass"] == (layers, layers)
    types = _types(res.graph)
    # (the MoE's shared-expert gate keeps its own Sigmoid)
    gone = ("Softmax", "Neg", "Expand", "ReduceMean", "Sqrt") + (
        () if preset == "tiny-moe-1m" else ("Sigmoid",))
    for op in gone:
        assert op not in types, op
    feeds = {"input_ids": rng.integers(0, 128, g.values["input_ids"].shape)}
    for n in g.inputs:
        if n.startswith("past"):
            feeds[n] = rng.uniform(-1, 1, g.values[n].shape).astype(g.values[n].dtype)
    a, b = asim.execute(g, feeds), asim.execute(res.graph, feeds)
    # two fp16 layers of re-rounded sums; logits are O(1)-O(3)
    np.testing.assert_allclose(b["logits"].astype(np.float32), a["logits"].astype(np.float32),
                               atol=2e-2, rtol=0)
    for k in a:
        if k.startswith("present"):
            np.testing.assert_allclose(b[k].astype(np.float32), a[k].astype(np.float32),
                                       atol=1e-2, rtol=0)


def test_fused_decoder_fp32_matches_closely(rng):
    g = decoder("tiny-gqa-1m", seq_len=5, dtype="float32")
    res = asim.optimize(g, "ascend910b")
    feeds = {"input_ids": rng.integers(0, 128, (1, 5)), **empty_cache(g)}
    a, b = asim.execute(g, feeds), asim.execute(res.graph, feeds)
    np.testing.assert_allclose(b["logits"], a["logits"], rtol=1e-4, atol=1e-4)
