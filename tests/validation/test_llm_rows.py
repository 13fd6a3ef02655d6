"""LLM-shape rows of the validation corpus (issue 13): fused-attention op rows, decoder rows
(prefill / decode of `asim.models.decoder`, graph or eager launch), op inputs with exact
values (GroupedMatmul's group_list), and `ascendsim validate --family attention`.

The attention rows and the tiny-decoder checks simulate in well under a second; the llama.cpp
Qwen2-0.5B rows (1- and 2-layer graphs, extrapolated to 24 layers) take ~2 s together.
"""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.cli import main
from ascendsim.errors import ConfigError
from ascendsim.models import decoder
from ascendsim.validation.corpus import check_row, load_corpus
from ascendsim.validation.frozen import load_frozen
from ascendsim.validation.validate import eager_launch_us, validate_rows
from ascendsim.validation.workloads import build_op_graph, decoder_plan

#: the attention rows issue 13 added (910B2 torch_npu FlashAttention / FIA, 24-core A2 FIA)
ATTENTION_IDS = (
    *(f"pub-ptoisa-910b2-fa-s{s}" for s in (1024, 2048, 4096, 8192, 16384, 32768)),
    "pub-ptodsl-a2-fia-3072x8192", "pub-ptodsl-a2-fia-3072x16384",
)
#: the torch_jit FIA rows: every row of their table fits eager_fused_attention_launch_us
FIA_CALIBRATION_IDS = tuple(f"pub-ptojit-910b2-fia-{q}x{k}" for q in (128, 256)
                            for k in (1024, 2048, 4096, 8192))
#: the llama.cpp CANN rows (Ascend910B4) that the decoder preset qwen2-0.5b makes simulable
LLAMACPP_IDS = ("infer-910b4-0001", "infer-910b4-0002")

BASE = {"id": "t-1", "chip": "ascend910b", "family": "model_inference", "role": "validation",
        "timing": "throughput", "data": "unknown", "metric": "throughput", "value": 100.0,
        "unit": "tokens/s", "source": "https://example.org/x"}


def _row(workload: dict, **fields):
    return check_row(BASE | fields | {"workload": workload}, "test row")


def _by_id(ids):
    rows = {r.id: r for r in load_corpus()}
    return [rows[i] for i in ids]


# ----------------------------------------------------------------------------- the rows
def test_attention_rows_parse_with_sources_and_are_new_since_frozen():
    rows = load_corpus(families=["attention"])
    ids = {r.id for r in rows}
    assert set(ATTENTION_IDS) | set(FIA_CALIBRATION_IDS) <= ids
    frozen = set(load_frozen().ids)
    for r in rows:
        if r.id in ATTENTION_IDS or r.id in FIA_CALIBRATION_IDS:
            role = "validation" if r.id in ATTENTION_IDS else "calibration"
            assert r.role == role and r.id not in frozen, r.id
            assert r.source.startswith("https://") and r.source_detail, r.id
            assert r.workload["op"] == "FlashAttentionScore", r.id
            q, k, v = (tuple(i["shape"]) for i in r.workload["inputs"])
            assert q[3] == k[3] == 128 and k == v, r.id    # one head of D = 128, BNSD


def test_attention_rows_simulate_and_small_calls_are_launch_bound():
    report = validate_rows(_by_id(ATTENTION_IDS))
    assert [r.status for r in report.rows] == ["ok"] * len(ATTENTION_IDS), report.table()
    sim = {r.id: r.simulated for r in report.rows}
    # a loop of calls costs at least the host launch per call (10.5 us on the 910B) ...
    floor = asim.get_chip("ascend910b").host_launch_us
    assert all(v >= floor - 1e-9 for v in sim.values())
    # ... and the simulated kernel grows ~S^2 once it dominates (32768 vs 16384: 4x the work)
    big, half = sim["pub-ptoisa-910b2-fa-s32768"], sim["pub-ptoisa-910b2-fa-s16384"]
    assert 3.0 < big / half < 4.5
    assert report.by_family_new["attention"].n == len(ATTENTION_IDS)
    assert "attention" not in report.by_family       # frozen figures stay the frozen rows'


def test_a_loop_row_is_its_steady_state_not_a_synchronised_call():
    row = _by_id(["pub-ptoisa-910b2-fa-s8192"])[0]
    single = check_row({**_raw(row), "workload": {k: v for k, v in _raw(row)["workload"].items()
                                                   if k != "loop"}}, "single call")
    loop_us, call_us = (validate_rows([r]).rows[0].simulated for r in (row, single))
    chip = asim.get_chip("ascend910b")
    # the synchronised call adds the host launch and sync the loop overlaps with the kernel
    # (an eager op row's launch is the chip's figure for its call where the file gives one:
    # a FlashAttentionScore call's is the fused attention call's)
    launch = eager_launch_us(chip, row.workload["cann_op"]) or chip.host_launch_us
    assert call_us > loop_us
    # (each figure is rounded to whole cycles: at most one cycle each)
    assert call_us - loop_us <= launch + chip.host_sync_us + 2e6 / chip.clock_hz


def _raw(row) -> dict:
    """A corpus row as the plain dict check_row takes."""
    def thaw(v):
        if hasattr(v, "items"):
            return {k: thaw(x) for k, x in v.items()}
        return [thaw(x) for x in v] if isinstance(v, tuple) else v
    keys = ("id", "chip", "family", "role", "timing", "data", "metric", "value", "unit",
            "source", "source_detail")
    return {k: getattr(row, k) for k in keys} | {"workload": thaw(row.workload)}


def test_llamacpp_qwen2_rows_simulate_as_eager_decoder_steps():
    rows = _by_id(LLAMACPP_IDS)
    assert [r.workload["kind"] for r in rows] == ["decoder", "decoder"]
    assert [r.workload["phase"] for r in rows] == ["prefill", "decode"]
    report = validate_rows(rows)
    assert [r.status for r in report.rows] == ["ok", "ok"], report.table()
    prefill, decode = (r.simulated for r in report.rows)
    # 20 prompt tokens per prefill step, one token per decode step: prefill rate >> decode rate
    assert prefill > 3 * decode > 0


def test_llamacpp_rows_stay_pending_with_what_their_sources_leave_unstated():
    """The models build now (DeepSeek-V2-Lite, Qwen3-30B-A3B from their configs); the rows wait
    on the GGUF quantisation and on where a 61 GB model ran on a 32 GB chip."""
    rows = _by_id(("infer-910b4-0003", "infer-910b4-0004", "infer-910b4-0005",
                   "infer-910b4-0006"))
    assert all(r.role == "pending" for r in rows)
    assert all("GGUF quantisation" in r.pending_reason for r in rows[:2])
    assert all("HBM" in r.pending_reason and "not state" in r.pending_reason for r in rows[2:])
    asim.models.decoder("deepseek-v2-lite", batch=1, seq_len=4)
    asim.models.decoder("qwen3-30b-a3b", batch=1, seq_len=4)


# ----------------------------------------------------------------------------- decoder rows
@pytest.mark.parametrize("launch, mode", [("graph", "sink"), ("eager", "host")])
def test_decoder_row_equals_simulating_the_decoder_directly(launch, mode):
    w = {"kind": "decoder", "preset": "tiny-gqa-1m", "batch": 2, "phase": "prefill",
         "seq_len": 16, "launch": launch}
    rec = validate_rows([_row(w)]).rows[0]
    res = asim.simulate(decoder("tiny-gqa-1m", batch=2, seq_len=16), "ascend910b", fusion=True,
                        mode=mode)
    assert rec.status == "ok", rec.reason
    assert rec.simulated == pytest.approx(2 * 16 / (res.time_us * 1e-6), rel=1e-9)


def test_deep_decoders_are_extrapolated_from_one_and_two_layers():
    """Every decoder layer is the same graph, so 4 layers from the 1- and 2-layer steps equal
    the 4-layer step simulated whole (the constant part: embedding, final norm, LM head), up
    to the cold starts of kernels that take other AIVs in another layer (the AIVs rotate;
    bounded by icache_cold_block_us per block: within 1 %)."""
    w = {"kind": "decoder", "preset": "tiny-gqa-1m", "batch": 1, "phase": "decode",
         "context_len": 40, "layers": 4}
    plan = decoder_plan(_row(w))
    assert [n for n, _ in plan.graphs] == [1, 2] and plan.layers == 4
    rec = validate_rows([_row(w, unit="ms", metric="time", value=1.0)]).rows[0]
    whole = asim.simulate(decoder("tiny-gqa-1m", phase="decode", context_len=40, layers=4),
                          "ascend910b")
    assert rec.simulated == pytest.approx(whole.time_us / 1e3, rel=1e-2)


def test_decoder_overrides_build_a_model_from_its_config():
    w = {"kind": "decoder", "preset": "tiny-gqa-1m", "batch": 1, "seq_len": 8,
         "overrides": {"hidden": 128, "heads": 8, "kv_heads": 2}}
    (_, g), = decoder_plan(_row(w)).graphs
    assert g.values["past_key.0"].shape == (1, 2, 8, 16)     # kv_heads 2, head_dim 128 / 8


@pytest.mark.parametrize("workload, key", [
    ({"phase": "decode", "context_len": 8, "seq_len": 4}, "workload.seq_len"),
    ({"phase": "decode"}, "workload.context_len"),
    ({"phase": "training", "seq_len": 4}, "workload.phase"),
    ({"seq_len": 4, "launch": "jit"}, "workload.launch"),
    ({"seq_len": 4, "overrides": 3}, "workload.overrides"),
    ({"seq_len": 4, "context_len": -1}, "workload.context_len"),
    ({"seq_len": 4, "rope": True}, "workload.rope"),
])
def test_bad_decoder_rows_name_the_key(workload, key):
    w = {"kind": "decoder", "preset": "tiny-gqa-1m", "batch": 1} | workload
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        _row(w)


def test_unknown_preset_or_field_is_a_row_error_naming_it():
    bad = [_row({"kind": "decoder", "preset": "gpt-5", "batch": 1, "seq_len": 4}, id="p"),
           _row({"kind": "decoder", "preset": "tiny-gqa-1m", "batch": 1, "seq_len": 4,
                 "overrides": {"hiden": 64}}, id="f")]
    recs = validate_rows(bad).rows
    assert [r.status for r in recs] == ["error", "error"]
    assert "gpt-5" in recs[0].reason and "hiden" in recs[1].reason


# ----------------------------------------------------------------------------- op inputs
def test_values_input_gives_grouped_matmul_its_group_list():
    counts = [0, 5, 5, 12]                    # cumulative rows per expert (group_list_type 0)
    w = {"kind": "op", "op": "GroupedMatmul", "inputs": [
        {"shape": [12, 64], "dtype": "float16"}, {"shape": [4, 64, 32], "dtype": "float16"},
        {"shape": [4], "dtype": "int64", "values": counts}]}
    row = _row(w, family="gemm", timing="msprof_kernel", metric="time", unit="us")
    g = build_op_graph(row)
    const = g.node("op").inputs[2]
    assert list(g.constants[const].ravel()) == counts
    rec = validate_rows([row]).rows[0]
    assert rec.status == "ok" and rec.simulated > 0, rec.reason


@pytest.mark.parametrize("spec, msg", [
    ({"shape": [4], "dtype": "int64", "values": [1, 2, 3]}, "flat list of 4 numbers"),
    ({"shape": [2], "dtype": "int64", "values": [1, True]}, "flat list of 2 numbers"),
])
def test_bad_values_input_names_the_input(spec, msg):
    w = {"kind": "op", "op": "GroupedMatmul", "inputs": [{"shape": [4, 8]}, spec]}
    with pytest.raises(ConfigError, match=r"inputs\[1\]\.values.*" + msg):
        _row(w)


def test_loop_must_be_a_boolean():
    w = {"kind": "op", "op": "Relu", "inputs": [{"shape": [4]}], "loop": "yes"}
    with pytest.raises(ConfigError, match=r"workload\.loop"):
        _row(w)


# ----------------------------------------------------------------------------- the CLI
def test_cli_validate_family_attention_reports_the_rows(capsys):
    assert main(["validate", "--family", "attention", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for i in ATTENTION_IDS:
        assert i in out
    assert "added since the freeze, by family" in out
    block = out.split("added since the freeze, by family")[1].split("\n\n")[0]
    line = next(x for x in block.splitlines() if x.startswith("attention "))
    frozen = set(load_frozen().ids)
    added = [r for r in load_corpus() if r.family == "attention" and r.role == "validation"
             and r.id not in frozen]
    assert set(ATTENTION_IDS) <= {r.id for r in added}
    assert line.split()[1] == str(len(added))


def test_pending_llm_op_rows_are_ready_to_simulate_once_their_chip_is_known():
    """The GroupedMatmul and SwiGlu rows wait only for their chip variant: as given they
    build and simulate (on the 910B2 here)."""
    pending = [r for r in load_corpus() if r.file.endswith("llm_ops.toml")
               and r.role == "pending"]
    assert {r.workload["op"] for r in pending} == {"GroupedMatmul", "SwiGlu"}
    assert all("variant" in r.pending_reason for r in pending)
    ready = [check_row(_raw(r) | {"role": "validation"}, r.id) for r in pending]
    recs = validate_rows(ready).rows
    assert all(r.status == "ok" and r.simulated > 0 for r in recs), [r.reason for r in recs]
