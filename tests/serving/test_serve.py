"""serve(): the scheduler's behaviour under load, KV pressure and chunking; bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ascendsim.errors import CapacityError, ConfigError
from ascendsim.hw import get_chip
from ascendsim.hw.interconnect import get_interconnect
from ascendsim.llm import Request, SchedulerConfig, load_requests, serve, synthetic, tpot_ms
from ascendsim.models.decoder import decoder_config

SMALL = "qwen2-0.5b"


def test_ttft_rises_with_load_past_saturation():
    """max_num_seqs=16 caps the batch: below capacity (10 req/s) requests start at once; past
    it (40, 160 req/s) they queue, so TTFT grows with the rate while throughput flattens."""
    runs = {rate: serve(SMALL, requests=dict(n=300, rate=rate, seed=1),
                        scheduler=dict(max_num_seqs=16)) for rate in (10, 40, 160)}
    p50 = {r: runs[r].percentiles("ttft_ms")["p50"] for r in runs}
    assert p50[10] < 50 < 10 * p50[10] < p50[40] < p50[160]
    served = {r: runs[r].requests_per_s for r in runs}
    assert served[10] == pytest.approx(10, rel=0.1)
    assert served[160] < 1.1 * served[40]            # saturated: no more throughput


def test_preemptions_appear_when_kv_capacity_is_cut():
    reqs = dict(n=200, rate=40, seed=1)
    full = serve(SMALL, requests=reqs)
    cut = serve(SMALL, requests=reqs, scheduler=dict(num_blocks=60))
    assert full.preemptions == 0 and full.num_blocks > 10_000
    assert cut.preemptions > 10 and cut.num_blocks == 60
    assert cut.percentiles("e2e_ms")["p50"] > full.percentiles("e2e_ms")["p50"]
    assert cut.timeline()["kv_use"].max() <= 1.0
    # every request still finishes with all its tokens
    assert all(s.generated == s.req.output_tokens for s in cut.seqs)


@pytest.mark.slow
def test_chunked_prefill_trades_ttft_for_tpot():
    """llama2-7b, 1024-token prompts: chunks of 512 let decode tokens ride along every step
    (TPOT down at every percentile) but spread each prompt over steps (TTFT up)."""
    reqs = dict(n=100, rate=3, seed=2, prompt_mean=1024, output_mean=64)
    on = serve("llama2-7b", requests=reqs,
               scheduler=dict(chunked_prefill=True, max_num_batched_tokens=512))
    off = serve("llama2-7b", requests=reqs,
                scheduler=dict(chunked_prefill=False, max_num_batched_tokens=4096))
    for p in ("p50", "p90", "p99"):
        assert on.percentiles("ttft_ms")[p] > off.percentiles("ttft_ms")[p]
        assert on.percentiles("tpot_ms")[p] < off.percentiles("tpot_ms")[p]


def test_metrics_follow_their_one_definition():
    reqs = dict(n=50, rate=5, seed=3)
    bound = float(np.median(serve(SMALL, requests=reqs).ttft_ms))
    r = serve(SMALL, requests=reqs, slo={"ttft_ms": bound, "tpot_ms": 1e3})
    s = r.seqs[7]
    e2e = (s.finish_s - s.req.arrival_s) * 1e3
    ttft = (s.first_token_s - s.req.arrival_s) * 1e3
    assert r.ttft_ms[7] == pytest.approx(ttft)
    assert r.tpot_ms[7] == pytest.approx((e2e - ttft) / (s.req.output_tokens - 1))
    assert tpot_ms(e2e, ttft, 1) == 0.0
    met = (r.ttft_ms <= bound) & (r.tpot_ms <= 1e3)
    assert met.sum() == 25                           # the median TTFT as the bound: half meet
    assert r.goodput == pytest.approx(met.sum() / r.duration_s)
    assert r.output_tokens_per_s == pytest.approx(
        sum(q.output_tokens for q in r.requests) / r.duration_s)
    # tokens come one per step per sequence: TPOT is at least the fastest step
    assert r.tpot_ms.min() > 0


def test_prefix_caching_skips_the_shared_prefix(tmp_path):
    rows = ["arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens"]
    rows += [f"{i * 0.05:.2f},1100,16,sys,1024" for i in range(20)]
    path = tmp_path / "req.csv"
    path.write_text("\n".join(rows) + "\n")
    on = serve(SMALL, requests=str(path))
    off = serve(SMALL, requests=str(path), scheduler=dict(prefix_caching=False))
    # 8 full blocks of 128 tokens cached after the first request; 19 requests reuse them
    assert on.prefix_hit_tokens == 19 * 1024 and off.prefix_hit_tokens == 0
    assert on.percentiles("ttft_ms")["p50"] < off.percentiles("ttft_ms")["p50"]


def test_disaggregated_moves_the_kv_cache_and_uses_more_chips():
    reqs = dict(n=100, rate=20, seed=4)
    mixed = serve(SMALL, requests=reqs)
    disagg = serve(SMALL, requests=reqs, disaggregated=(1, 2))
    assert disagg.chips == 3 and mixed.chips == 1
    assert len(disagg.kv_transfer_ms) == sum(1 for q in disagg.requests if q.output_tokens > 1)
    # each prompt's KV over one HCCS link (3 chips: one server): latency + bytes / the link's
    # bandwidth (HCCL's 18.3 GiB/s for a 910B link)
    ic = get_interconnect(None, get_chip("ascend910b"))
    cfg = decoder_config(SMALL)
    want = sorted((ic.hccs_latency_us + cfg.kv_cache_bytes(1, q.prompt_tokens)
                   / ic.hccs_bandwidth_bytes_per_s * 1e6) / 1e3
                  for q in disagg.requests if q.output_tokens > 1)
    assert sorted(disagg.kv_transfer_ms) == pytest.approx(want)
    assert ic.hccs_bandwidth_bytes_per_s == pytest.approx(18.3 * 1024**3, rel=1e-3)
    assert all(s.generated == s.req.output_tokens for s in disagg.seqs)


def test_mindie_policy_never_mixes_prefill_and_decode():
    r = serve(SMALL, requests=dict(n=60, rate=30, seed=5), scheduler=dict(policy="mindie"))
    mixed_steps = [st for _, st in r.steps if 0 < st.prefill_tokens and st.tokens >
                   st.prefill_tokens]
    assert not mixed_steps
    v = serve(SMALL, requests=dict(n=60, rate=30, seed=5))
    assert any(0 < st.prefill_tokens < st.tokens for _, st in v.steps)


def test_vllm_v0_policy_runs_every_prefill_as_a_step_of_its_own():
    """vLLM V0's default scheduler: prompts are admitted whole and first, and running requests
    decode only in steps that admitted none, so no step mixes the two (V1's policy "vllm"
    does mix them); without MindIE's prefill batch cap every waiting prompt that fits the
    token budget starts in one step."""
    fixed = dict(prompt_mean=64, output_mean=16, prompt_cv=0, output_cv=0)
    v0 = dict(policy="vllm-v0", chunked_prefill=False, max_prefill_batch=4)
    staggered = dict(n=8, rate=200.0, seed=5, **fixed)
    for policy, mixes in ((v0, False), (dict(policy="vllm"), True)):
        r = serve(SMALL, requests=staggered, layers=1, scheduler=policy)
        assert any(0 < st.prefill_tokens < st.tokens for _, st in r.steps) is mixes
    at_once = dict(n=8, rate=float("inf"), seed=5, **fixed)
    assert serve(SMALL, requests=at_once, layers=1, scheduler=v0).steps[0][1].prefill_tokens \
        == 8 * 64
    mindie = dict(v0, policy="mindie")
    assert serve(SMALL, requests=at_once, layers=1, scheduler=mindie).steps[0][1] \
        .prefill_tokens == 4 * 64
    with pytest.raises(ConfigError, match="'vllm-v0' is vLLM V0's scheduler without chunked"):
        SchedulerConfig(policy="vllm-v0")


def test_vllm_v0_hands_a_steps_tokens_over_in_the_next_steps_callback():
    """V0 processes a step's outputs in a callback of the next step, after its host work and
    its launches: the first token of a lone request reaches the user that much after its
    prefill ends; a step after which nothing runs hands its tokens over when it ends. V1's
    policy "vllm" hands them over at the step's end."""
    from ascendsim.serving.serve import step_model

    req = [Request(0, 0.0, 64, 3)]
    sched = dict(policy="vllm-v0", chunked_prefill=False, launch="eager",
                 host_overhead_us=500.0)
    v0 = serve(SMALL, requests=req, layers=1, scheduler=sched)
    ends = [st.end_s for _, st in v0.steps]
    chip = get_chip("ascend910b")
    sm = step_model(decoder_config(SMALL, layers=1), chip, None, dtype="float16", quant=None,
                    launch="eager", detail="block")
    launch = sm.launch_us()
    assert launch == pytest.approx(sm.point("decode", 1, 1, 64).tasks * chip.eager_op_launch_us)
    assert launch > 100            # a few tens of kernels at torch_npu's ~12 us per call
    s = v0.seqs[0]
    assert s.first_token_s == pytest.approx(ends[0] + (500.0 + launch) / 1e6)
    assert s.token_times[1] == pytest.approx(ends[1] + (500.0 + launch) / 1e6)
    assert s.finish_s == pytest.approx(ends[2])
    v1 = serve(SMALL, requests=req, layers=1, scheduler=dict(sched, policy="vllm"))
    assert v1.seqs[0].first_token_s == pytest.approx(v1.steps[0][1].end_s)


def test_synthetic_workload_is_seeded_and_documented():
    a, b = synthetic(500, 4.0, seed=9), synthetic(500, 4.0, seed=9)
    assert a == b and a != synthetic(500, 4.0, seed=10)
    gaps = np.diff([r.arrival_s for r in a])
    assert np.mean(gaps) == pytest.approx(0.25, rel=0.1)
    assert np.mean([r.prompt_tokens for r in a]) == pytest.approx(512, rel=0.1)
    bursty = np.diff([r.arrival_s for r in synthetic(500, 4.0, arrival="gamma", cv=3.0)])
    assert np.std(bursty) / np.mean(bursty) > 2 * np.std(gaps) / np.mean(gaps)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("body, match", [
    ("0.0,100,10\n0.5,-3,10\n", r"req\.csv: line 3: prompt_tokens must be a non-negative"),
    ("0.0,100,10\n0.5,,10\n", r"req\.csv: line 3: missing prompt_tokens"),
    ("0.0,100,10\n-1,100,10\n", r"req\.csv: line 3: arrival_s must be a non-negative"),
    ("0.0,100,abc\n", r"req\.csv: line 2: output_tokens 'abc' is not a number"),
    ("0.0,100,0\n", r"req\.csv: line 2: output_tokens must be >= 1"),
])
def test_bad_request_csv_names_file_line_and_column(tmp_path, body, match):
    path = tmp_path / "req.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + body)
    with pytest.raises(ConfigError, match=match):
        load_requests(path)


def test_request_csv_missing_column(tmp_path):
    path = tmp_path / "req.csv"
    path.write_text("arrival_s,prompt_tokens\n0,10\n")
    with pytest.raises(ConfigError, match=r"line 1: missing column\(s\) output_tokens"):
        load_requests(path)


def test_slo_on_an_unknown_metric():
    with pytest.raises(ConfigError, match="slo: unknown metric 'itl_ms'; metrics are ttft_ms"):
        serve(SMALL, requests=dict(n=5, rate=1), slo={"itl_ms": 30})


def test_unknown_scheduler_option():
    with pytest.raises(ConfigError, match="unknown option.*max_num_seq;"):
        serve(SMALL, requests=dict(n=5, rate=1), scheduler={"max_num_seq": 8})
    with pytest.raises(ConfigError, match="policy 'sglang' unknown"):
        SchedulerConfig(policy="sglang")


def test_a_model_that_does_not_fit_names_the_sizes():
    with pytest.raises(CapacityError, match=r"llama2-70b does not fit ascend910b x 1: weights "
                                            r"128\.\d+ GiB"):
        serve("llama2-70b", requests=dict(n=5, rate=1))


def test_a_request_longer_than_the_cache():
    reqs = [Request(0, 0.0, 2000, 100)]
    with pytest.raises(CapacityError, match=r"holds 4 blocks of 128 tokens \(512 tokens\), the "
                                            r"longest request needs 17"):
        serve(SMALL, requests=reqs, scheduler=dict(num_blocks=4))


def test_a_tp2_run_reports_its_collectives_and_pays_for_them():
    """TP2 splits each layer's compute over two chips and adds two all-reduces per layer: the
    run reports them (collectives_us), and its device time per step stays above half of the
    one-chip step's (the split compute alone), because the all-reduces are exposed."""
    import ascendsim as asim
    reqs = dict(n=60, rate=4, seed=2, prompt_mean=256, output_mean=32)
    one = serve(SMALL, requests=reqs)
    two = serve(SMALL, parallel=asim.Parallel(tp=2), requests=reqs)
    assert two.chips == 2 and one.chips == 1
    assert set(two.collectives_us) >= {"AllReduce"} and two.collectives_us["AllReduce"] > 0
    assert not one.collectives_us
    assert "collective AllReduce" in two.table()

    def per_step(r):
        return (sum(r.families_us.values()) + sum(r.collectives_us.values())) / len(r.steps)
    # same requests at a light load: the steps are alike (one or a few sequences each)
    assert len(two.steps) == pytest.approx(len(one.steps), rel=0.1)
    assert per_step(two) > 0.5 * per_step(one)
    # the split compute alone (the step less its exposed collectives) is below one chip's
    coll = sum(two.collectives_us.values()) / len(two.steps)
    assert 0 < coll and per_step(two) - coll < per_step(one)
    # TPOT carries the exposed all-reduces: above the split compute's share of the one-chip
    # TPOT (its device part halved, its per-step host part whole)
    host_ms = one.scheduler.overhead_us / 1e3
    tpot1, tpot2 = (r.percentiles("tpot_ms")["p50"] for r in (one, two))
    assert tpot2 > (tpot1 - host_ms) / 2 + host_ms
    # the fresh step simulations are counted with their CPU time; a rerun needs none
    assert two.points_simulated > 0 and two.points_cpu_s > 0
    again = serve(SMALL, parallel=asim.Parallel(tp=2), requests=reqs)
    assert again.points_simulated == 0 and again.points_cpu_s == 0
    assert again.summary() == two.summary()


def test_weight_quantisation_with_a_plan():
    """W8A16 serves on a TP2 plan with int8 projection weights (the weights per chip shrink
    by the projections' half); W4A16 with a plan and an unknown mode are refused by name."""
    import ascendsim as asim
    from ascendsim.serving.serve import weight_bytes
    cfg = decoder_config(SMALL)
    emb = cfg.vocab * cfg.hidden * (1 if cfg.tie_embeddings else 2)
    assert weight_bytes(cfg, "float16", "w8a16") == emb * 2 + (cfg.params() - emb)
    assert weight_bytes(cfg, "float16", "w4a16") == emb * 2 + (cfg.params() - emb) // 2
    plan, reqs = asim.Parallel(tp=2), dict(n=20, rate=4, seed=0)
    r = serve(SMALL, parallel=plan, quant="w8a16", requests=reqs)
    assert r.memory.weights == weight_bytes(cfg, "float16", "w8a16") // 2
    assert r.collectives_us["AllReduce"] > 0
    with pytest.raises(ConfigError, match="w4a16.*parallel plan"):
        serve(SMALL, parallel=plan, quant="w4a16", requests=reqs)
    with pytest.raises(ConfigError, match="quant 'int3' unknown"):
        serve(SMALL, quant="int3", requests=reqs)
