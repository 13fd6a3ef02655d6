"""Decoder builder: prefill + decode logits equal a full-sequence forward, presets, errors."""

from __future__ import annotations

import numpy as np
import pytest
from llm_helpers import prefill_then_decode

import ascendsim as asim
from ascendsim.models.decoder import decoder, decoder_config, decoder_presets, empty_cache


def _prefill_then_decode(preset, ids, prompt, dtype="float32"):
    """Logits of the prompt and of each next token (`llm_helpers.prefill_then_decode`)."""
    return prefill_then_decode(lambda **kw: decoder(preset, dtype=dtype, **kw), ids, prompt)


@pytest.mark.parametrize("preset", ["tiny-gqa-1m", "tiny-moe-1m"])
def test_prefill_plus_decode_equals_full_forward(rng, preset):
    ids = rng.integers(0, 128, (2, 7))
    full = decoder(preset, batch=2, seq_len=7, all_logits=True, dtype="float32")
    want = asim.execute(full, {"input_ids": ids, **empty_cache(full)})["logits"]
    got = _prefill_then_decode(preset, ids, prompt=4)
    # fp32 throughout: only summation order differs (cache length, one row vs many)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_prefill_after_context_equals_full_forward(rng):
    """A second prefill chunk (context_len > 0) sees the first chunk's cache."""
    ids = rng.integers(0, 128, (1, 6))
    full = decoder(batch=1, seq_len=6, all_logits=True, dtype="float32")
    want = asim.execute(full, {"input_ids": ids, **empty_cache(full)})["logits"]
    first = decoder(batch=1, seq_len=4, all_logits=True, dtype="float32")
    o1 = asim.execute(first, {"input_ids": ids[:, :4], **empty_cache(first)})
    second = decoder(batch=1, seq_len=2, context_len=4, all_logits=True, dtype="float32")
    feeds = {"input_ids": ids[:, 4:]}
    for n in second.inputs:
        if n.startswith("past"):
            c = o1["present" + n[4:]]
            feeds[n] = np.concatenate([c, np.zeros_like(c[:, :, :2])], axis=2)
    got = asim.execute(second, feeds)["logits"]
    np.testing.assert_allclose(got, want[:, 4:], rtol=1e-4, atol=1e-5)


def test_last_token_logits_by_default(rng):
    g = decoder(seq_len=5, dtype="float32")
    full = decoder(seq_len=5, dtype="float32", all_logits=True)
    ids = rng.integers(0, 128, (1, 5))
    a = asim.execute(g, {"input_ids": ids, **empty_cache(g)})["logits"]
    b = asim.execute(full, {"input_ids": ids, **empty_cache(full)})["logits"]
    assert a.shape == (1, 1, 128)
    np.testing.assert_allclose(a[:, 0], b[:, -1], rtol=1e-5, atol=1e-6)


#: parameter counts the model cards state (B = 1e9), within 2% (rounding of the cards)
STATED = {"qwen2-0.5b": 0.49e9, "llama2-7b": 6.74e9, "llama2-70b": 69.0e9,
          "qwen1.5-moe-14b-a2.7b": 14.3e9}


def test_presets_carry_sizes_and_match_model_cards():
    presets = decoder_presets()
    assert {"qwen2-0.5b", "llama2-7b", "llama2-70b", "qwen1.5-moe-14b-a2.7b"} <= set(presets)
    for name, params in STATED.items():
        cfg = presets[name]
        assert cfg.source and abs(cfg.params() / params - 1) < 0.02, (name, cfg.params())
    assert presets["qwen1.5-moe-14b-a2.7b"].moe
    assert presets["llama2-70b"].kv_heads == 8


def test_full_size_graph_is_lazy_and_shape_only():
    g = decoder("llama2-70b", batch=1, seq_len=16, layers=2)
    assert g.values["present_key.1"].shape == (1, 8, 16, 128)
    assert g.values["logits"].shape == (1, 1, 32000)
    assert "decoder" in asim.models.names()


@pytest.mark.parametrize("kw,msg", [
    (dict(phase="decode", seq_len=4, context_len=3), "decode adds one token"),
    (dict(phase="decode"), "context_len"),
    (dict(phase="train", seq_len=2), "phase='train'"),
    (dict(seq_len=None), "prefill needs"),
    (dict(seq_len=2, heads=3), "not a multiple of heads"),
    (dict(seq_len=2, bogus=1), "unknown argument"),
])
def test_bad_arguments_name_the_key(kw, msg):
    with pytest.raises(asim.ConfigError, match=msg):
        decoder(**kw)


def test_unknown_preset():
    with pytest.raises(asim.ConfigError, match="unknown decoder preset 'gpt5'"):
        decoder_config("gpt5")


def test_models_get_passes_config_overrides():
    g = asim.models.get("decoder", preset="llama2-7b", seq_len=8, layers=2)
    assert "present_key.1" in g.outputs and "present_key.2" not in g.values
    with pytest.raises(asim.ConfigError, match="unknown argument.*bogus"):
        asim.models.get("decoder", seq_len=2, bogus=1)
