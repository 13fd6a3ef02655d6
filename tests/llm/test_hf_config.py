"""decoder(config=...): Hugging Face config.json files of every supported family build at full
size, tiny versions run to finite values with prefill + decode equal to a full forward, and
configs the decoder does not build are ConfigErrors naming the field."""

from __future__ import annotations

import json

import numpy as np
import pytest
from llm_helpers import prefill_then_decode

import ascendsim as asim
from ascendsim.models.decoder import PRESETS, decoder, empty_cache, rope_frequencies
from ascendsim.models.hf_config import FAMILIES, from_hf, load, shipped

SHIPPED = shipped()

#: parameter counts the model cards state (B = 1e9), within 2 %
STATED = {"llama3-8b": 8.03e9, "llama3-70b": 70.6e9, "qwen2.5-7b": 7.61e9,
          "qwen3-0.6b": 0.6e9, "qwen3-8b": 8.19e9, "qwen3-30b-a3b": 30.5e9,
          "mixtral-8x7b": 46.7e9, "deepseek-v2-lite": 15.7e9, "deepseek-v3": 671e9,
          "qwen2.5-72b": 72.7e9}


def tiny(name: str, **extra) -> dict:
    """A shipped config shrunk to a few thousand parameters, its family's structure kept."""
    c = load(SHIPPED[name])
    mt = c["model_type"]
    c.update(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=128,
             intermediate_size=96)
    if "num_key_value_heads" in c:
        c["num_key_value_heads"] = 4 if mt.startswith("deepseek") else 2
    if "head_dim" in c:
        c["head_dim"] = 32                     # != 64 / 4: Qwen3's own head size
    if mt.startswith("deepseek"):
        c.update(kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
                 moe_intermediate_size=24, first_k_dense_replace=1, n_routed_experts=8,
                 num_experts_per_tok=2)
        if c.get("q_lora_rank"):
            c["q_lora_rank"] = 24
        if mt == "deepseek_v3":
            c.update(n_group=4, topk_group=2)
    if "num_experts" in c:
        c.update(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=24)
    if "shared_expert_intermediate_size" in c:
        c["shared_expert_intermediate_size"] = 48
    if "num_local_experts" in c:
        c["num_local_experts"] = 4
    c.update(extra)
    return c


def _changed(cfg: dict, change: dict) -> dict:
    """`cfg` with the fields of `change` set, or removed where the value is None."""
    for k, v in change.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    return cfg


def _prefill_then_decode(cfg, ids, prompt):
    return prefill_then_decode(lambda **kw: decoder(config=cfg, dtype="float32", **kw), ids,
                               prompt)


# one tiny model per family (and DeepSeek-V2's group-limited routing, V2 with q_lora)
TINY = {
    "llama": tiny("llama3.1-8b"),
    "qwen2": tiny("qwen2.5-7b"),
    "qwen3": tiny("qwen3-8b"),
    "qwen2_moe": tiny("qwen1.5-moe-14b-a2.7b", norm_topk_prob=True),
    "qwen3_moe": tiny("qwen3-30b-a3b"),
    "mixtral": tiny("mixtral-8x7b"),
    "deepseek_v2": tiny("deepseek-v2-lite"),
    "deepseek_v2_grouped": tiny("deepseek-v2-lite", topk_method="group_limited_greedy",
                                n_group=4, topk_group=2, q_lora_rank=24,
                                routed_scaling_factor=16.0),
    "deepseek_v3": tiny("deepseek-v3"),
}


@pytest.mark.parametrize("family", sorted(TINY))
def test_tiny_family_prefill_plus_decode_equals_full_forward(rng, family):
    cfg = TINY[family]
    ids = rng.integers(0, 128, (2, 6))
    full = decoder(config=cfg, batch=2, seq_len=6, all_logits=True, dtype="float32")
    want = asim.execute(full, {"input_ids": ids, **empty_cache(full)})["logits"]
    got = _prefill_then_decode(cfg, ids, prompt=4)
    assert np.isfinite(want).all() and np.abs(want).max() > 0.1
    # fp32; DeepSeek's decode runs the absorbed latent form, prefill the naive one
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_families_cover_the_supported_model_types():
    assert set(FAMILIES) == {"llama", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral",
                             "deepseek_v2", "deepseek_v3"}
    assert {load(p)["model_type"] for p in SHIPPED.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_config_builds_at_full_size(name):
    data = load(SHIPPED[name])
    assert data["_source"].startswith("https://huggingface.co/")
    cfg = from_hf(SHIPPED[name])
    assert PRESETS[name] == cfg                       # the preset is a name for the file
    g = decoder(name, phase="decode", context_len=8)
    assert g.values["logits"].shape == (1, 1, data["vocab_size"])
    n_cache = sum(1 for i in g.inputs if i.startswith("past_"))
    assert n_cache == data["num_hidden_layers"] * (1 if cfg.mla else 2)
    if name in STATED:
        assert abs(cfg.params() / STATED[name] - 1) < 0.02, (name, cfg.params())


def test_existing_presets_keep_their_numbers():
    """The presets that were hand-written keep every field the graph reads."""
    old = {"qwen2-0.5b": (896, 24, 14, 2, 4864, 151936, 1e-6, 1e6, True, True),
           "llama2-7b": (4096, 32, 32, 32, 11008, 32000, 1e-5, 1e4, False, False),
           "llama2-70b": (8192, 80, 64, 8, 28672, 32000, 1e-5, 1e4, False, False),
           "qwen1.5-moe-14b-a2.7b": (2048, 24, 16, 16, 5632, 151936, 1e-6, 1e6, True, False)}
    for name, want in old.items():
        c = PRESETS[name]
        assert (c.hidden, c.layers, c.heads, c.kv_heads, c.ffn, c.vocab, c.eps, c.rope_theta,
                c.qkv_bias, c.tie_embeddings) == want
        assert c.head_size == 0 and not c.qk_norm and not c.rope_scaling and not c.mla
    moe = PRESETS["qwen1.5-moe-14b-a2.7b"]
    assert (moe.experts, moe.top_k, moe.expert_ffn, moe.shared_ffn, moe.norm_topk) == \
        (60, 4, 1408, 5632, False)


def test_config_fields_reach_the_model():
    q3 = PRESETS["qwen3-0.6b"]
    assert q3.qk_norm and q3.head_dim == 128 and q3.hidden // q3.heads == 64
    v3 = PRESETS["deepseek-v3"]
    assert (v3.mla, v3.q_lora_rank, v3.kv_lora_rank, v3.first_dense, v3.router, v3.n_group,
            v3.topk_group, v3.group_score, v3.score_bias, v3.routed_scale, v3.norm_topk,
            v3.shared_ffn, v3.shared_gate) == \
        (True, 1536, 512, 3, "sigmoid", 8, 4, "top2", True, 2.5, True, 2048, False)
    assert [v3.moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    assert v3.kv_cache_bytes(1, 1000, "bfloat16") == 61 * 1000 * 576 * 2
    lite = PRESETS["deepseek-v2-lite"]
    assert (lite.q_lora_rank, lite.n_group, lite.router, lite.routed_scale) == \
        (0, 1, "softmax", 1.0)
    mix = PRESETS["mixtral-8x7b"]
    assert (mix.experts, mix.top_k, mix.expert_ffn, mix.norm_topk, mix.shared_ffn) == \
        (8, 2, 14336, True, 0)


def test_config_as_path_folder_and_dict(tmp_path):
    data = tiny("qwen3-8b")
    (tmp_path / "config.json").write_text(json.dumps(data))
    a = decoder(config=str(tmp_path / "config.json"), seq_len=3)
    b = decoder(config=tmp_path, seq_len=3)
    c = decoder(config=data, seq_len=3)
    assert len(a.nodes) == len(b.nodes) == len(c.nodes)
    assert asim.models.get("decoder", config=data, seq_len=3, layers=1).values[
        "present_key.0"].shape == (1, 2, 3, 32)


def test_rope_scaling_llama3_and_yarn():
    base = from_hf(tiny("llama3-8b"))
    l31 = PRESETS["llama3.1-8b"]
    inv0, _ = rope_frequencies(PRESETS["llama3-8b"])
    inv, att = rope_frequencies(l31)
    assert att == 1.0 and inv[0] == inv0[0]                  # high frequencies kept
    np.testing.assert_allclose(inv[-1], inv0[-1] / 8)        # low frequencies / factor
    assert rope_frequencies(base)[1] == 1.0
    inv_v3, att_v3 = rope_frequencies(PRESETS["deepseek-v3"])
    assert inv_v3.shape == (32,) and att_v3 == 1.0           # mscale == mscale_all_dim
    _, att_lite = rope_frequencies(PRESETS["deepseek-v2-lite"])
    assert att_lite == 1.0
    yarn = from_hf(tiny("qwen2.5-7b", rope_scaling={"type": "yarn", "factor": 4.0,
                                                    "original_max_position_embeddings": 32768}))
    inv_y, att_y = rope_frequencies(yarn)
    assert att_y == pytest.approx(0.1 * np.log(4.0) + 1.0)


@pytest.mark.parametrize("change,msg", [
    (dict(model_type="gpt2"), "model_type 'gpt2' is not supported"),
    (dict(model_type=None), "model_type is missing"),
    (dict(intermediate_size=None), "intermediate_size is missing"),
    (dict(rope_scaling={"rope_type": "longrope", "factor": 4.0}),
     "rope_scaling type 'longrope' is not supported"),
    (dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
     "rope_scaling type 'dynamic'"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}),
     "rope_scaling.low_freq_factor is missing"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 2.0, "mrope_section": [16, 24, 24]}),
     "rope_scaling.mrope_section"),
    (dict(quantization_config={"quant_method": "awq", "bits": 4}), "quantization_config"),
    (dict(use_sliding_window=True), "use_sliding_window"),
    (dict(hidden_act="gelu"), "hidden_act='gelu'"),
    (dict(partial_rotary_factor=0.5), "partial_rotary_factor is not known"),
    (dict(num_attention_heads=5), "heads"),
])
def test_bad_config_is_a_config_error_naming_the_field(change, msg):
    cfg = _changed(tiny("qwen2.5-7b"), change)
    with pytest.raises(asim.ConfigError, match=msg):
        decoder(config=cfg, seq_len=2)


@pytest.mark.parametrize("name,change,msg", [
    ("mixtral-8x7b", dict(sliding_window=4096), "sliding_window=4096"),
    ("llama3-8b", dict(attention_bias=True), "attention_bias"),
    ("deepseek-v3", dict(scoring_func="softmax"), "scoring_func"),
    ("deepseek-v3", dict(n_group=None), "n_group is missing"),
    ("deepseek-v2-lite", dict(topk_method="noaux_tc"), "topk_method"),
    ("deepseek-v2-lite", dict(kv_lora_rank=None), "kv_lora_rank is missing"),
])
def test_family_specific_refusals(name, change, msg):
    cfg = _changed(tiny(name), change)
    with pytest.raises(asim.ConfigError, match=msg):
        decoder(config=cfg, seq_len=2)


def test_unreadable_config_and_preset_with_config(tmp_path):
    with pytest.raises(asim.ConfigError, match="cannot read"):
        decoder(config=tmp_path / "missing.json", seq_len=2)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(asim.ConfigError, match="not JSON"):
        decoder(config=tmp_path / "bad.json", seq_len=2)
    with pytest.raises(asim.ConfigError, match="not both"):
        decoder("llama3-8b", config=tiny("llama3-8b"), seq_len=2)


@pytest.mark.parametrize("name", ["llama3-8b", "qwen2.5-7b"])
def test_full_size_decode_step_simulates_on_the_910b(name):
    res = asim.simulate(decoder(name, phase="decode", context_len=1024), chip="ascend910b")
    ms = res.cycles / 1.8e6          # 910B AI Core clock 1.8 GHz
    # ~15 GB of bf16 weights at the 910B's HBM bandwidth: a decode step of 5..40 ms
    assert 5 < ms < 40, ms
    assert any(t.op_type == "IncreFlashAttention" for t in res.trace.tasks)


def test_latent_attention_decode_is_absorbed():
    """Decode multiplies W_UK into the query and W_UV after attention (no kv_b_proj of the
    whole cache); prefill decompresses the cache with kv_b_proj."""
    cfg = tiny("deepseek-v3")
    dec = decoder(config=cfg, phase="decode", context_len=5)
    pre = decoder(config=cfg, seq_len=5)
    names = {n.name for n in dec.nodes}
    assert "layers.0.self_attn.q_absorb" in names and "layers.0.self_attn.v_absorb" in names
    assert "layers.0.self_attn.kv_b_proj" not in names
    assert "layers.0.self_attn.kv_b_proj" in {n.name for n in pre.nodes}
    assert dec.values["present_key.1"].shape == (1, 1, 6, 32 + 8)
    ops = {n.op_type for n in dec.nodes}
    assert "MoeGatingTopK" in ops
