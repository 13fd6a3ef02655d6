"""The `serving` family of the validation corpus: its rows parse, carry their sources and a
first sight, and simulate through serve(); a bad serving workload names its key."""

from __future__ import annotations

import math

import pytest

from ascendsim.errors import ConfigError
from ascendsim.validation.corpus import check_row, load_corpus
from ascendsim.validation.validate import validate_rows

BASE = {"id": "t-1", "chip": "ascend910b", "family": "serving", "role": "validation",
        "timing": "throughput", "data": "unknown", "metric": "throughput", "value": 100.0,
        "unit": "tokens/s", "source": "https://example.org/x"}
SMALL = {"kind": "serving", "preset": "qwen2-0.5b", "measure": "output_tokens_per_s",
         "requests": {"n": 20, "rate": 10, "seed": 0, "prompt_mean": 128, "output_mean": 16}}


def _row(workload: dict, **fields):
    return check_row(BASE | fields | {"workload": workload}, "test row")


def test_serving_rows_parse_with_sources_and_first_sight():
    rows = load_corpus(families=["serving"])
    assert len(rows) >= 15
    for r in rows:
        assert r.source.startswith(("https://github.com/vllm-project/vllm-ascend/issues/",
                                    "https://github.com/vllm-project/vllm-ascend/pull/",
                                    "https://github.com/vllm-project/vllm-ascend/blob/"))
        assert r.source_detail and (r.role == "validation" or r.calibrates), r.id
        assert r.first_ratio is not None and r.first_commit, r.id


def test_a_serving_row_simulates_as_serve_runs_it():
    tput = _row(SMALL)
    ttft = _row(SMALL | {"measure": "ttft_ms_p50"}, id="t-2", metric="time", unit="ms",
                value=10.0)
    got = {r.id: r for r in validate_rows([tput, ttft]).rows}
    assert got["t-1"].status == "ok" and got["t-2"].status == "ok"
    from ascendsim.llm import serve

    rep = serve("qwen2-0.5b", "ascend910b", requests=SMALL["requests"])
    want = sum(q.output_tokens for q in rep.requests) / rep.duration_s
    assert got["t-1"].simulated == pytest.approx(want)
    assert got["t-2"].simulated == pytest.approx(rep.percentiles("ttft_ms")["p50"])


def test_a_plan_row_reports_why_it_cannot_run():
    row = _row(SMALL | {"tp": 8})          # qwen2-0.5b's 14 heads do not split 8 ways
    res = validate_rows([row]).rows[0]
    assert res.status == "error" and "heads" in res.reason


@pytest.mark.parametrize("change, match", [
    ({"measure": "ttft"}, r"workload\.measure.*'ttft' is not one of output_tokens_per_s"),
    ({"tp": 0}, r"workload\.tp.*must be a positive integer"),
    ({"requests": 5}, r"workload\.requests.*must be a table"),
    ({"rate": 3}, r"workload\.rate.*unknown key for kind 'serving'"),
])
def test_bad_serving_workloads_name_the_key(change, match):
    with pytest.raises(ConfigError, match=match):
        _row(SMALL | change)


def test_rate_inf_sends_everything_at_once():
    from ascendsim.llm import synthetic

    assert {r.arrival_s for r in synthetic(5, math.inf)} == {0.0}
