"""LLM serving: a 1,000-request run, its speed and memo, and a configuration search.

    python bench/serving.py            # llama2-7b on one 910B: 1,000 Poisson requests at
                                       # 4 req/s (prompt mean 512, output mean 128), vLLM V1
                                       # scheduler defaults, graph launch; then a search
    python bench/serving.py --quick    # 200 requests, no search

Prints the run's serving figures (TTFT / TPOT / E2E percentiles, throughput, goodput under
TTFT <= 2 s and TPOT <= 50 ms), the CPU seconds of the run, the fresh step simulations it
needed and the memo hit rate (steps timed from memoised points alone). The search serves
qwen2-0.5b on a 4-chip box over mixed and disaggregated splits and two token budgets at a
load that saturates it, and names the best configuration and the runner-up.
"""

from __future__ import annotations

import argparse
import time

import ascendsim as asim

SLO = {"ttft_ms": 2000, "tpot_ms": 50}


def run(n: int) -> None:
    t0, c0 = time.perf_counter(), time.process_time()
    r = asim.llm.serve("llama2-7b", "ascend910b", requests=dict(n=n, rate=4.0, seed=0), slo=SLO)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"llama2-7b on one ascend910b, {n} requests (Poisson 4 req/s, seed 0), SLO {SLO}")
    print(r.table())
    print(f"run: {cpu:.1f} CPU s ({wall:.1f} s wall); {r.points_simulated} step shapes "
          f"simulated afresh for {r.memo_hits + r.memo_misses} steps; memo hit rate "
          f"{r.memo_hit_rate:.2%} of steps")


def search() -> None:
    t0 = time.process_time()
    res = asim.llm.search("qwen2-0.5b", ("ascend910b", 4), slo={"ttft_ms": 200, "tpot_ms": 10},
                          space={"max_num_seqs": [32], "max_num_batched_tokens": [512, 4096]},
                          requests=dict(n=400, rate=150, seed=0, prompt_mean=1024))
    print("\nsearch: qwen2-0.5b on 4 x ascend910b, 400 requests at 150 req/s (prompt mean "
          "1024), SLO TTFT <= 200 ms, TPOT <= 10 ms; latency axis P90 E2E")
    print(res.table())
    ranked = sorted((p for p in res.points if p.ok),
                    key=lambda p: (-p.summary["goodput_per_chip"], p.summary["e2e_ms_p90"]))
    best, second = ranked[0], ranked[1]
    print(f"best: {best.config['mode']}, {best.config['max_num_batched_tokens']} tokens: "
          f"{best.summary['goodput_per_chip']:.2f} req/s per chip meeting the SLO, P90 TTFT "
          f"{best.summary['ttft_ms_p90']:.0f} ms, P90 TPOT {best.summary['tpot_ms_p90']:.2f} ms")
    print(f"runner-up: {second.config['mode']}, {second.config['max_num_batched_tokens']} "
          f"tokens: {second.summary['goodput_per_chip']:.2f} req/s per chip, P90 TTFT "
          f"{second.summary['ttft_ms_p90']:.0f} ms, P90 TPOT "
          f"{second.summary['tpot_ms_p90']:.2f} ms")
    gap = best.summary["goodput_per_chip"] - second.summary["goodput_per_chip"]
    lat = second.summary["e2e_ms_p90"] - best.summary["e2e_ms_p90"]
    print(f"why the runner-up lost: {gap:.2f} req/s per chip less goodput"
          + (f" and {lat:.0f} ms more P90 E2E" if lat > 0 else
             f" (its P90 E2E is {-lat:.0f} ms lower: it sits on the front's other end)"
             if second in res.front() else f" at {-lat:.0f} ms lower P90 E2E"))
    print(f"search: {len(res.points)} configurations in {time.process_time() - t0:.0f} CPU s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    run(200 if args.quick else 1000)
    if not args.quick:
        search()


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("serving", main))
