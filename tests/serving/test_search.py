"""search(): every configuration served, the Pareto front, each point one serve() call."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ascendsim.errors import ConfigError
from ascendsim.llm import search, serve

REQS = dict(n=120, rate=120, seed=0)


@pytest.mark.slow
def test_front_points_reproduce_with_one_serve_call_on_any_executor():
    space = {"tp": [1, 2], "mode": ["mixed", "disaggregated"], "ratios": [(1, 1)],
             "max_num_seqs": [8, 64], "max_num_batched_tokens": [4096]}
    res = search("qwen2-0.5b", ("ascend910b", 2), slo={"ttft_ms": 300, "tpot_ms": 20},
                 space=space, requests=REQS)
    # tp 1: 2 mixed (8, 64 seqs) + 2 disaggregated 1:1; tp 2: one instance of 2 chips, so 2
    # mixed and no disaggregated split; every point runs
    assert len(res.points) == 6
    assert all(p.ok for p in res.points), [p.error for p in res.points if not p.ok]
    assert {p.config["tp"] for p in res.points} == {1, 2}
    front = res.front()
    assert front and all(p.ok for p in front)
    for p in res.points:
        if p.ok and p not in front:       # dominated by some front point on both axes
            assert any(q.summary["goodput_per_chip"] >= p.summary["goodput_per_chip"]
                       and q.summary["e2e_ms_p90"] <= p.summary["e2e_ms_p90"] for q in front)
    best = res.best
    again = serve(**best.serve_kwargs)
    assert again.summary() == best.summary
    # a thread pool gives the same points
    with ThreadPoolExecutor(2) as ex:
        other = search("qwen2-0.5b", ("ascend910b", 2), slo={"ttft_ms": 300, "tpot_ms": 20},
                       space=space, requests=REQS, executor=ex)
    assert [p.summary for p in other.points] == [p.summary for p in res.points]
    # 8 sequences at a time queue the requests: 64 beats it on goodput per chip
    mixed = {p.config["max_num_seqs"]: p for p in res.points if p.ok
             and p.config["mode"] == "mixed"}
    assert mixed[64].summary["goodput_per_chip"] > mixed[8].summary["goodput_per_chip"]


def test_bad_search_input():
    with pytest.raises(ConfigError, match="search space: unknown key 'pp'"):
        search("qwen2-0.5b", ("ascend910b", 2), space={"pp": [2]}, requests=REQS)
    with pytest.raises(ConfigError, match="tp 3 must divide the box's 2 chips"):
        search("qwen2-0.5b", ("ascend910b", 2), space={"tp": [3]}, requests=REQS)
    with pytest.raises(ConfigError, match="slo: unknown metric 'goodput'"):
        search("qwen2-0.5b", ("ascend910b", 2), slo={"goodput": 3}, requests=REQS)
