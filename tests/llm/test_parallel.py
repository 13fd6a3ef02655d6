"""Parallel inference plans: plan validation, values equal to one chip's, the collectives and
their bytes, shared simulations of identical ranks, the per-chip trace, the capacity hint."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.models.decoder import decoder, decoder_config, empty_cache
from ascendsim.plan import run_parallel


def _logits(preset: str, parallel: asim.Parallel, batch: int = 2, seq: int = 4, **kw):
    g = decoder(preset, batch=batch, seq_len=seq, all_logits=True, dtype="float32", **kw)
    feeds = {"input_ids": np.random.default_rng(0).integers(0, 128, (batch, seq))}
    feeds.update(empty_cache(g))
    ref = asim.execute(g, feeds)[g.outputs[0]]
    m = decoder(preset, batch=batch, seq_len=seq, all_logits=True, dtype="float32",
                parallel=parallel, **kw)
    return ref, run_parallel(m, feeds)["logits"]


@pytest.mark.parametrize("preset,plan,batch", [
    ("tiny-gqa-1m", asim.Parallel(tp=2), 2),
    ("tiny-gqa-1m", asim.Parallel(tp=4), 2),          # tp > kv_heads: KV heads replicated
    ("tiny-gqa-1m", asim.Parallel(pp=2, micro_batches=1), 2),
    ("tiny-gqa-1m", asim.Parallel(tp=2, sequence_parallel=True), 2),
    ("tiny-gqa-1m", asim.Parallel(tp=2, dp=2), 4),
    ("tiny-gqa-1m", asim.Parallel(tp=2, pp=2, micro_batches=1), 2),
    ("tiny-moe-1m", asim.Parallel(tp=2), 2),
    ("tiny-moe-1m", asim.Parallel(ep=4, dp=4), 4),
    ("tiny-moe-1m", asim.Parallel(tp=2, ep=2), 2),    # attention TP + MoE EP
    ("tiny-moe-1m", asim.Parallel(tp=2, dp=2, ep=4), 4),
    ("tiny-moe-1m", asim.Parallel(tp=2, dp=2, ep=4, pp=2, micro_batches=1), 4),
])
def test_plan_logits_equal_single_chip(preset, plan, batch):
    ref, got = _logits(preset, plan, batch)
    assert got.shape == ref.shape
    # float32 throughout; partial sums reassociate: a few ulps of logits of size ~3
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("quant", [dict(quant="w8a16"), dict(kv_cache_dtype="int8")])
def test_quantised_plans_equal_the_quantised_single_chip(quant):
    """A rank's int8 weights and cache scales are slices of the single-chip model's, so a TP
    plan computes the quantised model's logits (only the partial sums reassociate)."""
    ref, got = _logits("tiny-gqa-1m", asim.Parallel(tp=2), **quant)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-3)


def test_w8a8_plan_quantises_each_ranks_activations():
    """W8A8's per-token activation scale is taken over what a rank holds (a row-parallel
    projection sees a slice of each token), so TP logits differ from one chip's by
    quantisation error only: within 3% of the logits' norm (int8 keeps ~1% per matmul)."""
    ref, got = _logits("tiny-gqa-1m", asim.Parallel(tp=2), quant="w8a8")
    rel = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert 0 < rel < 0.03


def test_w4a16_with_a_plan_is_refused_by_name():
    with pytest.raises(asim.ConfigError, match="w4a16.*parallel plan"):
        decoder("tiny-gqa-1m", batch=1, seq_len=4, quant="w4a16", parallel=asim.Parallel(tp=2))


@pytest.mark.parametrize("plan,item", [
    (dict(tp=3), "attention heads"),
    (dict(tp=2, pp=3), "layers"),
    (dict(ep=3, dp=3), "experts"),
    (dict(ep=2, dp=2), "mixture-of-experts"),
])
def test_plan_that_does_not_divide_names_the_item(plan, item):
    preset = "tiny-moe-1m" if plan.get("ep", 1) == 3 else "tiny-gqa-1m"
    with pytest.raises(asim.ConfigError, match=item):
        decoder(preset, batch=6, seq_len=4, parallel=asim.Parallel(**plan))


def test_kv_groups_error():
    with pytest.raises(asim.ConfigError, match="KV heads"):
        decoder("tiny-gqa-1m", batch=1, seq_len=4, heads=12, kv_heads=4, hidden=96,
                parallel=asim.Parallel(tp=6))


def test_bad_plan_arguments():
    with pytest.raises(asim.ConfigError, match="tp=0"):
        asim.Parallel(tp=0)
    with pytest.raises(asim.ConfigError, match="sequence_parallel"):
        asim.Parallel(sequence_parallel=True)
    with pytest.raises(asim.ConfigError, match="dp=ep"):
        asim.Parallel(ep=4)


def test_tp_allreduce_bytes_per_layer():
    b, s, layers = 2, 16, 2
    m = decoder("tiny-gqa-1m", batch=b, seq_len=s, parallel=asim.Parallel(tp=2))
    cfg = m.config
    ar = [c for c in m.collectives if c.kind == "AllReduce"]
    assert len(ar) == 2 * layers
    for layer in range(layers):
        per = [c.nbytes for c in ar if c.layer == layer]
        assert sum(per) == 2 * b * s * cfg.hidden * 2          # float16
    ag = [c for c in m.collectives if c.kind == "AllGather"]
    assert [c.nbytes for c in ag] == [b * 1 * cfg.vocab * 2]   # last token's logits


def test_sequence_parallel_and_ep_collectives():
    m = decoder("tiny-gqa-1m", batch=2, seq_len=8,
                parallel=asim.Parallel(tp=2, sequence_parallel=True))
    kinds = [c.kind for c in m.collectives if c.layer == 0]
    assert kinds == ["AllGather", "ReduceScatter", "AllGather", "ReduceScatter"]
    m = decoder("tiny-moe-1m", batch=4, seq_len=8, parallel=asim.Parallel(ep=2, dp=2))
    a2a = [c for c in m.collectives if c.kind == "AllToAll" and c.layer == 0]
    cfg = m.config
    rows = 2 * 8 * cfg.top_k                     # a rank's tokens x top_k, sent out
    assert [c.name.split(".")[-2] for c in a2a] == ["dispatch", "combine"]
    assert a2a[1].nbytes == rows * cfg.hidden * 2


def test_identical_ranks_share_one_graph_and_simulation():
    m = decoder("tiny-gqa-1m", batch=2, seq_len=8, parallel=asim.Parallel(tp=4))
    assert len(m.graphs) == 1
    r = asim.simulate(m, asim.Box("ascend910b", 8, "atlas800-a2"))
    assert len(r.stages) == 1 and set(r.ranks) == {0, 1, 2, 3}
    assert len({id(s) for s in r.ranks.values()}) == 1
    m = decoder("tiny-gqa-1m", batch=2, seq_len=8, parallel=asim.Parallel(tp=2, pp=2))
    assert len(m.graphs) == 2
    r = asim.simulate(m, asim.Box("ascend910b", 8, "atlas800-a2"))
    assert [s.ranks for s in r.stages] == [(0, 1), (2, 3)]
    assert any(c.kind == "SendRecv" for c in r.collectives)


def test_step_is_compute_plus_exposed_comm_and_trace_per_chip(tmp_path):
    m = decoder("tiny-gqa-1m", batch=2, seq_len=32, parallel=asim.Parallel(tp=2))
    r = asim.simulate(m, asim.Box("ascend910b", 8, "atlas800-a2"))
    st = r.stages[0]
    assert r.time_us == pytest.approx(st.compute_us + st.comm_us)
    assert r.comm_us == pytest.approx(st.comm_us)
    single = asim.simulate(decoder("tiny-gqa-1m", batch=2, seq_len=32), "ascend910b")
    assert r.time_us < 2 * single.time_us
    path = tmp_path / "plan.json"
    r.write_chrome_trace(str(path))
    ev = json.loads(path.read_text())["traceEvents"]
    procs = {e["pid"] for e in ev if e["name"] == "process_name"}
    assert procs == {0, 1}
    comm = [e for e in ev if e.get("cat") == "comm" and e["pid"] == 0]
    assert len(comm) == 5 and {e["args"]["kind"] for e in comm} == {"AllReduce", "AllGather"}
    # the stream waits: the task reading an all-reduce starts after it ends
    ar = sorted((e for e in comm if e["args"]["kind"] == "AllReduce"), key=lambda e: e["ts"])
    after = [e for e in ev if e.get("cat") == "compute" and e["pid"] == 0
             and e["ts"] >= ar[0]["ts"]]
    assert min(e["ts"] for e in after) >= ar[0]["ts"] + ar[0]["dur"] - 1e-3


def test_layers_extrapolated_match_full_build():
    cfg = dict(batch=2, phase="decode", context_len=64)
    m3 = decoder("tiny-gqa-1m", layers=3, parallel=asim.Parallel(tp=2), **cfg)
    r3 = asim.simulate(m3, "ascend910b")
    assert r3.stages[0].layers_simulated == (0, 1)
    counts = {c.name: c.count for c in r3.collectives}
    assert sum(counts.values()) == 2 * 3 + 1


def test_mc2_overlaps_prefill_not_decode_and_chip_files():
    shape = dict(hidden=2048, heads=16, kv_heads=4, ffn=5632, layers=1)
    for kw, gains in ((dict(batch=1, seq_len=2048), True),
                      (dict(batch=4, phase="decode", context_len=128), False)):
        plain = asim.simulate(decoder("tiny-gqa-1m", parallel=asim.Parallel(tp=4), **kw,
                                      **shape), "ascend910b")
        fused = asim.simulate(decoder("tiny-gqa-1m", parallel=asim.Parallel(tp=4, mc2=True),
                                      **kw, **shape), "ascend910b")
        if gains:        # 2048 rows: chunks of the all-reduce hide behind the matmul's
            assert fused.comm_us < plain.comm_us
        else:            # 4 rows: one chunk, the plain sequence
            assert fused.comm_us == pytest.approx(plain.comm_us)
        assert fused.time_us <= plain.time_us
    box = asim.Box("ascend910c", 16, "atlas800-a3")
    assert box.topology.chips_per_server == 16 and box.chip.hbm_bytes == 64 * 2**30
    with pytest.raises(asim.ConfigError, match="world_size=12"):
        asim.Box("ascend910b", 12, "atlas800-a2")


def test_capacity_error_names_smallest_plan_and_generate_runs_it():
    # 128.5 GiB of fp16 weights: 3 chips by bytes, but tp=3 does not divide 64 heads
    with pytest.raises(asim.CapacityError,
                       match=r"at least 3 chips.*smallest plan that fits is Parallel\(tp=4\) on 4"):
        asim.llm.generate("llama2-70b", "ascend910b", batch=1, prompt_len=16, new_tokens=2)
    r = asim.llm.generate("tiny-gqa-1m", "ascend910b", batch=2, prompt_len=16, new_tokens=3,
                          parallel=asim.Parallel(tp=2))
    assert r.ttft_ms > 0 and r.tpot_ms > 0
    assert isinstance(r.prefill, asim.ParallelResult)


def test_llama2_70b_tp8_rows_simulate_across_chips():
    from ascendsim.validation.corpus import check_row, load_corpus
    from ascendsim.validation.validate import validate_rows

    rows = {r.id: r for r in load_corpus()}
    row = rows["infer-llama2-70b-tp8-0002"]
    assert row.role == "validation" and row.workload["parallel"] == {"tp": 8, "mc2": True}
    rec = validate_rows([row]).rows[0]
    assert rec.status == "ok", rec.reason
    # decode of 70B fp16 over 8 x 910B4: ~17.5 GB per chip at ~1 TB/s; the row's 35.9 ms
    # within a factor of two (first sight 0.83)
    assert 0.5 < rec.ratio < 2.0
    raw = {k: getattr(row, k) for k in ("id", "chip", "family", "role", "timing", "data",
                                        "metric", "value", "unit", "source")}
    bad = dict(row.workload, parallel={"tp": 8, "zz": 1})
    with pytest.raises(asim.ConfigError, match="workload.parallel"):
        check_row({**raw, "workload": bad}, "test row")


#: DeepSeek-V3's structure (latent attention with q_lora, sigmoid group-limited routing, a
#: leading dense layer, shared experts) at a few thousand parameters
TINY_V3 = dict(hidden=64, layers=3, heads=4, kv_heads=4, ffn=96, vocab=128, kv_lora_rank=32,
               qk_nope_dim=16, qk_rope_dim=8, v_head_dim=12, q_lora_rank=24, expert_ffn=24,
               shared_ffn=24, experts=8, top_k=2, first_dense=1, n_group=4, topk_group=2)


@pytest.mark.parametrize("plan", [asim.Parallel(tp=2), asim.Parallel(tp=4),
                                  asim.Parallel(ep=2, dp=2), asim.Parallel(tp=2, ep=2),
                                  asim.Parallel(tp=2, sequence_parallel=True)])
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_latent_attention_moe_plans_equal_single_chip(plan, phase):
    cfg = decoder_config("deepseek-v3", **TINY_V3)
    kw = (dict(seq_len=4, all_logits=True) if phase == "prefill"
          else dict(phase="decode", context_len=5))
    g = decoder(cfg, batch=2, dtype="float32", **kw)
    rng = np.random.default_rng(1)
    feeds = {"input_ids": rng.integers(0, 128, g.values["input_ids"].shape)}
    for name in g.inputs:
        if name.startswith("past_"):
            feeds[name] = rng.standard_normal(g.values[name].shape).astype(np.float32)
    ref = asim.execute(g, feeds)[g.outputs[0]]
    m = decoder(cfg, batch=2, dtype="float32", parallel=plan, **kw)
    got = run_parallel(m, feeds)["logits"]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)


def test_pipeline_step_is_stages_plus_sends_plus_bubbles():
    m = decoder("tiny-gqa-1m", batch=4, seq_len=16, layers=4,
                parallel=asim.Parallel(pp=2, micro_batches=4))
    r = asim.simulate(m, asim.Box("ascend910b", 8, "atlas800-a2"))
    stages = [s.time_us for s in r.stages]
    sends = sum(c.time_us for c in r.collectives if c.kind == "SendRecv")
    assert sends > 0
    assert r.time_us == pytest.approx(sum(stages) + sends + 3 * max(stages))
    assert [s.layers for s in r.stages] == [(0, 1), (2, 3)]


def test_rank_memory_extrapolates_to_the_whole_stage_graph():
    """The memory of a stage's rank, from its representative layers extrapolated, equals the
    constants and cache inputs of the stage's whole graph (identical layers: exact)."""
    from ascendsim.plan import cache_bytes

    m = decoder("tiny-gqa-1m", batch=2, phase="decode", context_len=7, layers=4,
                parallel=asim.Parallel(tp=2, pp=2))
    r = asim.simulate(m, asim.Box("ascend910b", 4, "atlas800-a2"))
    assert [mem.rank for mem in r.memory] == [0, 2]
    for mem in r.memory:
        g, _ = m.build(mem.stage)
        assert mem.weights == sum(g.values[c].nbytes for c in g.constants)
        # the graph holds one of the 2 micro-batches; the rank keeps both's cache:
        # 2 layers x K and V x (2 sequences, 1 KV head of the rank, 8 positions, head 16) x 2 B
        assert mem.kv_cache == 2 * cache_bytes(g) > 0
        assert mem.kv_cache == 2 * 2 * 2 * 1 * 8 * 16 * 2
        assert 0 < mem.activations < mem.weights


def test_rank_over_hbm_raises_naming_the_rank_sizes_and_a_bigger_plan():
    m = decoder("tiny-gqa-1m", batch=2, seq_len=16, layers=4,
                parallel=asim.Parallel(pp=2))
    box = asim.Box("ascend910b", 2, "atlas800-a2")
    mem = asim.simulate(m, box, check_capacity=False).memory
    big = max(mem, key=lambda x: x.total)
    small = min(mem, key=lambda x: x.total)
    assert big.total > small.total          # the last stage holds lm_head and the final norm
    chip = box.chip.replace(hbm_bytes=(big.total + small.total) // 2)
    with pytest.raises(asim.CapacityError) as err:
        asim.simulate(m, asim.Box(chip, 2, "atlas800-a2"))
    msg = str(err.value)
    assert f"rank {big.rank} (stage {big.stage}" in msg
    assert f"KV cache {big.kv_cache / 2**20:.2f} MiB" in msg
    assert f"weights {big.weights / 2**20:.2f} MiB" in msg
    assert "a plan that fits is Parallel(tp=2, pp=2) on 4 chips" in msg


def test_deepseek_v3_bf16_experts_do_not_fit_an_a3_box_and_w8a8_does():
    """DeepSeek-V3 over 16 x 64 GiB with attention data parallel: a rank holds 1/16 of the
    routed experts (~76 GiB in bf16, half in int8) and a whole copy of the rest (latent
    attention, shared experts, embeddings: ~32 GiB in bf16). bf16 does not fit 32 ranks of
    attention data parallel (38 + 32 GiB); the plan named is attention TP2 x DP16 with EP32
    (the rest split over 2 ranks too). W8A8, which quantises the routed experts too, fits
    16."""
    box = asim.Box("ascend910c", 16, "atlas800-a3")
    kw = dict(batch=64, phase="decode", context_len=256, dtype="bfloat16",
              parallel=asim.Parallel(ep=16, dp=16))
    with pytest.raises(asim.CapacityError,
                       match=r"rank 0 .*weights 10\d\.\d\d GiB.*> HBM 64\.00 GiB.*"
                             r"Parallel\(tp=2, ep=32, dp=16\) on 32 chips"):
        asim.simulate(decoder("deepseek-v3", **kw), box)
    r = asim.simulate(decoder("deepseek-v3", quant="w8a8", **kw), box)
    assert 50 * 2**30 < r.memory[0].total < 64 * 2**30


def test_w8a8_routed_experts_are_int8_grouped_matmuls():
    g = decoder("tiny-moe-1m", batch=2, seq_len=4, quant="w8a8")
    experts = [n for n in g.nodes if n.op_type == "GroupedMatmul"]
    assert experts and all(g.values[n.inputs[0]].dtype == "int8" and
                           g.values[n.inputs[1]].dtype == "int8" and
                           g.values[n.outputs[0]].dtype == "float16" for n in experts)


def test_w8a8_moe_logits_within_quantisation_error_and_ep_equal_single_chip():
    """The W8A8 MoE model (projections and routed experts int8) against the float model:
    within 5% of the logits' norm (int8 keeps ~1% per matmul; each of the 2 layers chains
    four: q/k/v, o, gate_up, down, the errors adding about in quadrature, 3.1% seen); an
    expert-parallel plan of it
    computes the same quantised logits (each expert's int8 weight and scales are the
    single-chip model's, its tokens' per-token scales taken over whole rows)."""
    ref, _ = _logits("tiny-moe-1m", asim.Parallel(ep=4, dp=4), batch=4)
    q_ref, q_ep = _logits("tiny-moe-1m", asim.Parallel(ep=4, dp=4), batch=4, quant="w8a8")
    rel = np.linalg.norm(q_ref - ref) / np.linalg.norm(ref)
    assert 0 < rel < 0.05
    np.testing.assert_allclose(q_ep, q_ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("plan,match", [
    (dict(tp=2, ep=2, dp=2), r"ep must be tp \* dp = 4"),
    (dict(tp=2, ep=2, sequence_parallel=True), "without sequence parallel"),
])
def test_expert_parallel_with_tensor_parallel_plan_errors(plan, match):
    with pytest.raises(asim.ConfigError, match=match):
        asim.Parallel(**plan)


def test_expert_parallel_with_tensor_parallel_routes_a_token_slice_per_rank():
    """Attention TP + MoE EP: every rank routes 1/tp of the tokens to the experts of all
    tp * dp ranks and the tp slices are gathered after the layer: per MoE layer one
    AllToAll each way over ep ranks and one AllGather over tp, no MoE AllReduce; a token
    count tp does not divide is named."""
    m = decoder("tiny-moe-1m", batch=4, seq_len=6, parallel=asim.Parallel(tp=2, dp=2, ep=4))
    colls = [c for c in m.collectives if c.layer == 1]
    kinds = sorted((c.kind, c.group) for c in colls)
    assert kinds == [("AllGather", 2), ("AllReduce", 2), ("AllToAll", 4), ("AllToAll", 4)]
    g = m.graphs[0]
    gate = next(n for n in g.nodes if n.name == "layers.1.mlp.gate")
    assert g.values[gate.outputs[0]].shape[0] == 2 * 6 // 2     # 2 sequences x 6 / tp
    r = asim.simulate(m, asim.Box("ascend910b", 4, "atlas800-a2"))
    assert r.time_us > 0 and {c.kind for c in r.collectives} >= {"AllToAll", "AllGather"}
    with pytest.raises(asim.ConfigError, match="routes 1/tp of a micro-batch's 3 tokens"):
        decoder("tiny-moe-1m", batch=2, seq_len=3, parallel=asim.Parallel(tp=2, dp=2, ep=4))


def test_pipeline_trace_shows_every_micro_batch_and_ends_at_the_step(tmp_path):
    """Each stage's micro-batches take slots of the stage's time in the step's schedule:
    the trace's last event ends at the step time, every micro-batch appears on every chip,
    the layers not simulated are one extrapolated block per slot, a stage's slot for a
    micro-batch starts after the previous stage's slot and Send/Recv of it."""
    m = decoder("tiny-gqa-1m", batch=4, seq_len=16, layers=6,
                parallel=asim.Parallel(pp=2, micro_batches=4))
    r = asim.simulate(m, asim.Box("ascend910b", 8, "atlas800-a2"))
    ev = [e for e in r.chrome_trace_dict()["traceEvents"] if e["ph"] == "X"]
    end = max(e["ts"] + e["dur"] for e in ev)
    assert end == pytest.approx(r.time_us, rel=1e-6)
    for pid in (0, 1):
        assert {e["args"]["micro_batch"] for e in ev if e["pid"] == pid} == {0, 1, 2, 3}
        extra = [e for e in ev if e["pid"] == pid and e["args"].get("extrapolated")]
        assert len(extra) == 4 and all(e["name"] == (f"layers {2 + 3 * pid}-{2 + 3 * pid} "
                                                     f"(extrapolated)") for e in extra)
    sends = sorted((e for e in ev if e["pid"] == 0 and e["args"].get("kind") == "SendRecv"),
                   key=lambda e: e["ts"])
    first1 = min(e["ts"] for e in ev if e["pid"] == 1)
    # stage 1's first slot starts as micro-batch 0's Send/Recv ends (its first task after
    # the gap it has in its own simulation)
    gap = r.stages[1].timeline[0][2]
    assert first1 == pytest.approx(sends[0]["ts"] + sends[0]["dur"] + gap, abs=1e-3)
