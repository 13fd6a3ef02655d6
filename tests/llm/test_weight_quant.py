"""Weight-only quantisation (W8A16 / W4A16 as CANN's WeightQuantBatchMatmulV2), the int8 KV
cache, the quantised memory plan and MoE decode reading only the touched experts."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import UnsupportedOpError
from ascendsim.kernels import quant as kq
from ascendsim.models.decoder import decoder, decoder_config, empty_cache


def _wqbmm_graph(x, w, bits, group, offset=False):
    q, scale = kq.quant_weight_groups(w, bits, group)
    stored = kq.pack_int4(q) if bits == 4 else q
    g = asim.Graph(f"w{bits}a16")
    xi = g.input("x", x.shape, "float32")
    s = scale if group else scale.reshape(-1)
    off = g.const(np.full(s.shape, 0.0, np.float32)) if offset else None
    y = g.weight_quant_batch_matmul_v2(xi, g.const(stored), g.const(s), off,
                                       antiquant_group_size=group)
    g.output(y)
    return g, y, q, scale


def test_int4_pack_round_trips_eight_values_per_word(rng):
    q = rng.integers(-8, 8, (5, 24)).astype(np.int8)
    packed = kq.pack_int4(q)
    assert packed.dtype == np.int32 and packed.shape == (5, 3)
    np.testing.assert_array_equal(kq.unpack_int4(packed), q)
    # low nibble first: value j of a word sits in bits 4j..4j+3
    one = np.zeros((1, 8), np.int8)
    one[0, 1] = 3
    assert int(kq.pack_int4(one).view(np.uint32)[0, 0]) == 3 << 4


@pytest.mark.parametrize("bits,group", [(8, 0), (4, 0), (4, 32)])
def test_weight_quant_matmul_within_the_quantisation_error(rng, bits, group):
    """|y - x @ w| per element is at most sum_k |x_k| * scale_k / 2 (round to nearest), and
    the kernel's values equal x @ dequant(q) exactly up to float rounding."""
    x = rng.standard_normal((6, 96)).astype(np.float32)
    w = (rng.standard_normal((96, 40)) * 0.05).astype(np.float32)
    g, y, q, scale = _wqbmm_graph(x, w, bits, group, offset=bits == 8)
    out = asim.execute(g, {"x": x})[y.name].astype(np.float64)
    rows = kq.group_rows(96, scale.shape[0])
    dequant = q.astype(np.float64) * scale.astype(np.float64)[rows]
    np.testing.assert_allclose(out, x.astype(np.float64) @ dequant, rtol=1e-5, atol=1e-5)
    bound = np.abs(x).astype(np.float64) @ (scale.astype(np.float64)[rows] / 2) + 1e-5
    assert np.all(np.abs(out - x.astype(np.float64) @ w) <= bound)


def test_per_group_int4_is_closer_than_per_channel(rng):
    x = rng.standard_normal((16, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 64)) * 0.05).astype(np.float32)
    w[::37] *= 8.0                          # outlier rows: per channel pays for them
    ref = x.astype(np.float64) @ w
    errs = {}
    for group in (0, 32):
        g, y, _, _ = _wqbmm_graph(x, w, 4, group)
        errs[group] = np.abs(asim.execute(g, {"x": x})[y.name] - ref).mean()
    assert errs[32] < 0.7 * errs[0]


def test_weight_quant_bad_shapes_name_the_item():
    g = asim.Graph("bad")
    x = g.input("x", (2, 64), "float16")
    w = g.const(np.zeros((64, 16), np.int8), "w")
    with pytest.raises(asim.GraphError, match="antiquant_group_size=48"):
        g.weight_quant_batch_matmul_v2(x, w, g.const(np.ones((2, 16), np.float16)),
                                       antiquant_group_size=48)
    with pytest.raises(asim.GraphError, match="antiquant_scale 'sc'"):
        g.weight_quant_batch_matmul_v2(x, w, g.const(np.ones(8, np.float16), "sc"))
    with pytest.raises(asim.GraphError, match="weight 'wf'"):
        g.weight_quant_batch_matmul_v2(x, g.const(np.zeros((64, 16), np.float16), "wf"),
                                       g.const(np.ones(16, np.float16)))


@pytest.mark.parametrize("preset", ["tiny-gqa-1m", "tiny-moe-1m"])
def test_weight_only_decoders_match_float_within_quantisation_error(rng, preset):
    ids = rng.integers(0, 128, (2, 6))
    f = decoder(preset, batch=2, seq_len=6, all_logits=True)
    a = asim.execute(f, {"input_ids": ids, **empty_cache(f)})["logits"].astype(np.float64)
    # int4 (15 levels, groups of 32 rows here): a rounding step of ~0.5 sigma, ~15% noise on
    # every weight of the 7 projections of a layer, compounded over 2 random layers
    for mode, (max_err, corr) in {"w8a16": (0.06, 0.999), "w4a16": (0.6, 0.9)}.items():
        q = decoder(preset, batch=2, seq_len=6, all_logits=True, quant=mode)
        assert "WeightQuantBatchMatmulV2" in {n.op_type for n in q.nodes}
        b = asim.execute(q, {"input_ids": ids, **empty_cache(q)})["logits"].astype(np.float64)
        assert np.isfinite(b).all()
        assert np.abs(a - b).max() < max_err * np.abs(a).max(), mode
        assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > corr, mode


def _hbm_read(task) -> int:
    return task.traffic.get(("DDR", "read"), 0)


def _decode_cycles(chip="ascend910b", **kw):
    g = decoder("llama2-7b", layers=1, phase="decode", context_len=512, **kw)
    return asim.simulate(g, chip=chip)


def test_weight_only_decode_is_faster_on_the_910b_and_explain_says_why():
    """Decode at batch 1 reads every weight once per token: the int8 / int4 weight halves /
    quarters those HBM bytes, while the antiquant and the float workspace's L2 round trip
    give part of it back (the lm_head stays fp16 in all three)."""
    fp16, w8, w4 = (_decode_cycles(quant=q) for q in (None, "w8a16", "w4a16"))
    assert w8.cycles < 0.97 * fp16.cycles
    assert w4.cycles < w8.cycles
    name = "layers.0.mlp.gate_up_proj"
    text = w8.explain(name)
    assert "MIX_AIV" in text and "int8 weight" in text and "stays in L2" in text
    hbm = {k: sum(_hbm_read(t) for t in r.trace.tasks if t.op_name == name)
           for k, r in (("fp16", fp16), ("w8", w8))}
    assert hbm["w8"] < 0.6 * hbm["fp16"]


def test_weight_only_prefill_gains_nothing_when_compute_bound():
    def cycles(**kw):
        g = decoder("llama2-7b", layers=1, seq_len=512, **kw)
        return asim.simulate(g, chip="ascend910b").cycles
    assert cycles(quant="w8a16") > 0.98 * cycles()


@pytest.mark.parametrize("chip,mode,what", [
    ("ascend910", "w8a16", "no WeightQuantBatchMatmulV2 kernel"),
    ("ascend310p", "w4a16", "only int8 weights"),
])
def test_a_quant_mode_the_chip_lacks_names_it(chip, mode, what):
    g = decoder(seq_len=4, quant=mode)
    with pytest.raises(UnsupportedOpError, match=f"{chip} has {what}"):
        asim.simulate(g, chip=chip)


def test_310p_runs_w8a16_as_two_phases_in_turn():
    r = asim.simulate(decoder(seq_len=4, quant="w8a16"), chip="ascend310p")
    tasks = [t for t in r.trace.tasks if t.op_type == "WeightQuantBatchMatmulV2"]
    assert tasks and all(t.task_type == "AI_CORE" for t in tasks)


# ----------------------------------------------------------------------------- KV cache int8
def _prefill_then_decode(rng, kv):
    ids = rng.integers(0, 128, (2, 6))
    nxt = rng.integers(0, 128, (2, 1))
    pre = decoder(batch=2, seq_len=6, all_logits=True, kv_cache_dtype=kv)
    out = asim.execute(pre, {"input_ids": ids, **empty_cache(pre)})
    dec = decoder(batch=2, phase="decode", context_len=6, kv_cache_dtype=kv)
    cache = {}
    for n in dec.inputs:
        if n.startswith("past_"):
            src = out[n.replace("past_", "present_")]
            buf = np.zeros(dec.values[n].shape, src.dtype)
            buf[:, :, :6] = src
            cache[n] = buf
    return out, dec, {"input_ids": nxt, **cache}


def test_int8_kv_cache_values_and_fused_decode(rng):
    seed = int(rng.integers(1 << 30))
    ref_out, ref_dec, ref_feeds = _prefill_then_decode(np.random.default_rng(seed), None)
    out, dec, feeds = _prefill_then_decode(np.random.default_rng(seed), "int8")
    assert out["present_key.0"].dtype == np.int8 and dec.values["past_key.0"].dtype == "int8"
    ref = asim.execute(ref_dec, ref_feeds)["logits"].astype(np.float64)
    got = asim.execute(dec, feeds)["logits"].astype(np.float64)
    # 8-bit keys/values at 4 sigma over 127 levels: ~1% noise per entry
    assert np.abs(got - ref).max() < 0.05 * np.abs(ref).max()
    fused = asim.optimize(dec, "ascend910b").graph
    ifa = [n for n in fused.nodes if n.op_type == "IncreFlashAttention"]
    assert ifa and all(fused.values[n.inputs[1]].dtype == "int8" for n in ifa)
    assert "AscendAntiQuantV2" not in {n.op_type for n in fused.nodes}
    np.testing.assert_allclose(asim.execute(fused, feeds)["logits"], got,
                               atol=0.01 * np.abs(got).max())


def test_int8_kv_cache_decode_reads_half_the_cache_bytes():
    """The int8 cache halves the bytes the decode attention reads from HBM. On the 910B its
    cold key rows are paced one burst each (lower/attention.py), the same count at either
    width, so the step gains little time: at most the int8 dequantisation's vector work
    slower. On the first-generation 910 (no per-row pacing) the halved bytes show, less the
    dequantisation."""
    kw = {"batch": 8, "context_len": 4096, "layers": 2, "phase": "decode"}
    for chip in ("ascend910b", "ascend910"):
        fp16 = asim.simulate(decoder("llama3-8b", **kw), chip=chip)
        int8 = asim.simulate(decoder("llama3-8b", kv_cache_dtype="int8", **kw), chip=chip)
        attn = [t for t in int8.trace.tasks if t.op_type == "IncreFlashAttention"]
        ref = [t for t in fp16.trace.tasks if t.op_type == "IncreFlashAttention"]
        hbm = [sum(t.traffic.get(("DDR", "read"), 0) for t in ts) for ts in (attn, ref)]
        assert attn and hbm[0] == pytest.approx(hbm[1] / 2, rel=0.01)
        assert "int8 KV cache" in int8.explain(attn[0].op_name)
        assert int8.cycles < 1.05 * fp16.cycles
        if chip == "ascend910":
            assert sum(t.duration for t in attn) < 0.95 * sum(t.duration for t in ref)


def test_int8_kv_cache_refuses_latent_attention():
    with pytest.raises(asim.ConfigError, match="kv_cache_dtype='int8'"):
        decoder("deepseek-v2-lite", layers=1, seq_len=2, kv_cache_dtype="int8")


# ----------------------------------------------------------------------------- memory plan
def test_memory_plan_counts_quantised_weights_and_cache_at_their_size():
    from ascendsim.generation import memory_plan

    cfg = decoder_config("llama3-8b", layers=2)
    chip = asim.get_chip("ascend910b")
    base = memory_plan(cfg, chip, 1, 16, 4, "float16")
    w8 = memory_plan(cfg, chip, 1, 16, 4, "float16", quant="w8a16", kv_cache_dtype="int8")
    w4 = memory_plan(cfg, chip, 1, 16, 4, "float16", quant="w4a16")
    emb = 2 * cfg.vocab * cfg.hidden * 2             # embedding + lm_head stay fp16
    proj = base.weights - emb                        # the rest is mostly projections
    assert w8.kv_cache == base.kv_cache // 2
    assert abs(w8.weights - (emb + proj / 2)) < 0.01 * base.weights
    assert abs(w4.weights - (emb + proj / 4)) < 0.02 * base.weights


def test_generate_fits_a_model_only_when_quantised():
    """llama3-8b cut to 2 layers: 3.0 GB of weights in fp16 (the 128k-vocabulary embedding and
    lm_head 2.1 GB of it), 2.35 GB in W4A16; on an HBM of 2.6 GiB (2.79 GB) only the
    quantised model fits."""
    chip = asim.get_chip("ascend910b").replace(hbm_bytes=int(2.6 * 2**30))
    kw = {"prompt_len": 8, "new_tokens": 2, "layers": 2, "decode_samples": 1}
    with pytest.raises(asim.CapacityError):
        asim.llm.generate("llama3-8b", chip, **kw)
    res = asim.llm.generate("llama3-8b", chip, quant="w4a16", **kw)
    assert res.memory.total < chip.hbm_bytes


# ----------------------------------------------------------------------------- MoE decode
def test_moe_decode_reads_only_the_touched_experts():
    g1 = decoder("qwen3-30b-a3b", layers=1, phase="decode", context_len=64, batch=1)
    g8 = decoder("qwen3-30b-a3b", layers=1, phase="decode", context_len=64, batch=16)
    r1, r8 = (asim.simulate(g, chip="ascend910b") for g in (g1, g8))
    name = "layers.0.mlp.experts.gate_up"
    one = next(t for t in r1.trace.tasks if t.op_name == name)
    many = next(t for t in r8.trace.tasks if t.op_name == name)
    # batch 1 at top-8: 8 of 128 experts' weights; batch 16: 128 (all)
    assert _hbm_read(one) < 0.1 * _hbm_read(many)
    assert "touch at most 8 of the 128 experts" in r1.explain(name)
