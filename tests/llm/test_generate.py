"""generate(): serving metrics, sampled decode steps, the capacity check."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.llm import activation_peak, decode_contexts, generate
from ascendsim.lower.lowering import padded_bytes
from ascendsim.models.decoder import decoder


def test_70b_fp16_does_not_fit_one_910b():
    with pytest.raises(asim.CapacityError) as err:
        generate("llama2-70b", "ascend910b", batch=1, prompt_len=128, new_tokens=16)
    msg = str(err.value)
    # 68.98e9 parameters x 2 bytes = 128.5 GiB of weights against 64 GiB of HBM
    assert "llama2-70b does not fit one ascend910b" in msg
    assert "weights 128.4" in msg and "HBM 64.00 GiB" in msg
    assert "KV cache" in msg and "activations" in msg
    assert "at least 3 chips" in msg


def test_kv_cache_can_be_what_does_not_fit():
    """7B fits alone; a big batch x context cache does not, and the message says so."""
    with pytest.raises(asim.CapacityError, match=r"KV cache 64\.00 GiB \(batch 64 x 2048"):
        generate("llama2-7b", "ascend910b", batch=64, prompt_len=2000, new_tokens=48)


def test_generate_metrics_are_consistent():
    r = generate("tiny-gqa-1m", "ascend910b", batch=2, prompt_len=32, new_tokens=9)
    assert [c for c, _ in r.decode] == [32, 36, 39]
    assert len(r.decode_step_ms) == 8
    assert r.ttft_ms == pytest.approx(r.prefill.time_us / 1e3)
    assert r.tpot_ms == pytest.approx(np.mean(r.decode_step_ms))
    total_s = (r.ttft_ms + sum(r.decode_step_ms)) / 1e3
    assert r.tokens_per_s == pytest.approx(2 * 9 / total_s)
    assert r.hbm_peak_bytes == r.memory.weights + r.memory.kv_cache + r.memory.activations
    # the tiny model: 2 layers x 2 KV heads x 16 dims, fp16, 41 positions x 2 sequences
    assert r.memory.kv_cache == 2 * 2 * 2 * 2 * 41 * 16 * 2
    assert "interpolated" in r.notes[0]
    assert "TTFT" in r.table()


def test_decode_step_grows_with_context():
    """Decode reads the whole cache: a 4x longer context takes longer (HBM-bound attention)."""
    short = asim.simulate(decoder("qwen2-0.5b", layers=2, batch=8, phase="decode",
                                  context_len=1024), "ascend910b")
    long = asim.simulate(decoder("qwen2-0.5b", layers=2, batch=8, phase="decode",
                                 context_len=4096), "ascend910b")
    assert long.time_us > short.time_us


def test_decode_contexts_spread():
    assert decode_contexts(100, 1, 3) == []
    assert decode_contexts(100, 2, 3) == [100]
    assert decode_contexts(100, 101, 3) == [100, 150, 199]


def test_activation_peak_counts_live_values_only():
    g = asim.Graph("chain")
    x = g.input("x", (256,), "float32")
    y = g.relu(g.exp(x))                 # exp (1 KiB) dies when relu has read it
    g.output(g.neg(y))
    assert activation_peak(g) == 2 * 1024


def test_bad_arguments():
    with pytest.raises(asim.ConfigError, match="new_tokens=0"):
        generate("tiny-gqa-1m", new_tokens=0)
    with pytest.raises(asim.ConfigError, match="overrides"):
        generate(lambda **kw: decoder(**kw), layers=1)


def test_decode_cache_append_is_in_place_in_the_memory_plan():
    """KvCacheAppend writes into the cache it is given: the present keys/values of a decode
    step are the past cache's blocks, counted once (a 7B decode at batch 16 x 4096 then fits
    the 910B2's 64 GiB: 12.55 GiB of weights + 32 GiB of cache)."""
    g = decoder("tiny-gqa-1m", batch=2, phase="decode", context_len=40)
    res = asim.simulate(g, "ascend910b")
    assert sum("present" in o for o in g.outputs) == 4
    io = [*g.inputs, *(o for o in g.outputs if "present" not in o)]   # ids, caches, logits
    assert res.memory.by_category["inputs_outputs"] == sum(
        padded_bytes(g.values[v], "ND") for v in io)
    big = decoder("llama2-7b", batch=16, phase="decode", context_len=4096)
    plan = asim.simulate(big, "ascend910b").memory
    assert 44 * 2**30 < plan.peak_bytes < 46 * 2**30
