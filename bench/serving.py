"""LLM serving: 1,000-request runs, their speed and memo, and a configuration search.

    python bench/serving.py            # llama2-7b on one 910B, then llama2-70b on TP8 (an
                                       # Atlas 800 A2 box of 910Bs): 1,000 Poisson requests
                                       # at 4 req/s each (prompt mean 512, output mean 128),
                                       # vLLM V1 scheduler defaults, graph launch; then a
                                       # search over TP plans for llama2-70b on one box
    python bench/serving.py --quick    # 200 requests each, no search

Prints each run's serving figures (TTFT / TPOT / E2E percentiles, throughput, goodput under
TTFT <= 2 s and TPOT <= 50 ms), the CPU seconds of the run, the fresh step simulations it
needed, their mean CPU cost, and the memo hit rate (steps timed from memoised points alone).
The search serves llama2-70b on one Atlas 800 A2 box (8 x 910B) over TP4 x 2 and TP8, mixed
and disaggregated, fp16 and W8A8, at a load past TP4 fp16's saturation, and names the best
configuration, the runner-up and why the runner-up lost.
"""

from __future__ import annotations

import argparse
import time

import ascendsim as asim

SLO = {"ttft_ms": 2000, "tpot_ms": 50}
#: the search's workload: 400 requests at a rate that loads TP4 x 2 fp16 past its TPOT bound
SEARCH_REQUESTS = dict(n=400, rate=12.0, seed=0)


def run(model: str, parallel, n: int) -> None:
    where = "one ascend910b" if parallel is None else \
        f"TP{parallel.tp} on an Atlas 800 A2 box of ascend910b"
    t0, c0 = time.perf_counter(), time.process_time()
    r = asim.llm.serve(model, "ascend910b", parallel=parallel,
                       requests=dict(n=n, rate=4.0, seed=0), slo=SLO)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{model} on {where}, {n} requests (Poisson 4 req/s, seed 0), SLO {SLO}")
    print(r.table())
    per = r.points_cpu_s / r.points_simulated if r.points_simulated else 0.0
    print(f"run: {cpu:.1f} CPU s ({wall:.1f} s wall); {r.points_simulated} step shapes "
          f"simulated afresh ({r.points_cpu_s:.1f} CPU s, {per:.2f} s each) for "
          f"{r.memo_hits + r.memo_misses} steps; memo hit rate {r.memo_hit_rate:.2%} of steps\n")


def _describe(p) -> str:
    c, s = p.config, p.summary
    return (f"TP{c['tp']} x {8 // c['tp']} {c['mode']}, {c['quant'] or 'fp16'}: "
            f"{s['goodput_per_chip']:.2f} req/s per chip meeting the SLO "
            f"({s['goodput'] / s['requests_per_s']:.0%} of the served requests within it), "
            f"P90 TTFT "
            f"{s['ttft_ms_p90']:.0f} ms, P90 TPOT {s['tpot_ms_p90']:.1f} ms, P90 E2E "
            f"{s['e2e_ms_p90']:.0f} ms")


def search() -> None:
    t0 = time.process_time()
    box = asim.Box("ascend910b", 8, "atlas800-a2")
    res = asim.llm.search("llama2-70b", box, slo=SLO,
                          space={"tp": [4, 8], "quant": [None, "w8a8"],
                                 "max_num_batched_tokens": [8192]},
                          requests=SEARCH_REQUESTS)
    print(f"search: llama2-70b on one Atlas 800 A2 box (8 x ascend910b), "
          f"{SEARCH_REQUESTS['n']} Poisson requests at {SEARCH_REQUESTS['rate']:g} req/s "
          f"(prompt mean 512, output mean 128), SLO TTFT <= 2 s, TPOT <= 50 ms; latency axis "
          f"P90 E2E; TP4 x 2 / TP8, mixed / disaggregated 1:1, fp16 / W8A8")
    print(res.table())
    ranked = sorted((p for p in res.points if p.ok),
                    key=lambda p: (-p.summary["goodput_per_chip"], p.summary["e2e_ms_p90"]))
    best, second = ranked[0], ranked[1]
    print(f"best: {_describe(best)}")
    print(f"runner-up: {_describe(second)}")
    b, s = best.summary, second.summary
    reasons = []
    if s["goodput_per_chip"] < b["goodput_per_chip"]:
        reasons.append(f"{b['goodput_per_chip'] - s['goodput_per_chip']:.2f} req/s per chip "
                       f"less goodput")
    if s["duration_s"] > b["duration_s"]:
        reasons.append(f"the same requests took {s['duration_s']:.1f} s against "
                       f"{b['duration_s']:.1f} s to serve")
    for key, label in (("tpot_ms_p90", "P90 TPOT"), ("ttft_ms_p90", "P90 TTFT"),
                       ("e2e_ms_p90", "P90 E2E")):
        if s[key] > b[key]:
            reasons.append(f"{label} {s[key]:.1f} ms against {b[key]:.1f} ms "
                           f"(+{s[key] / b[key] - 1:.0%})")
    print("why the runner-up lost: " + ("; ".join(reasons) or "a tie broken by order"))
    print(f"search: {len(res.points)} configurations in {time.process_time() - t0:.0f} CPU s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 200 if args.quick else 1000
    run("llama2-7b", None, n)
    run("llama2-70b", asim.Parallel(tp=8), n)
    if not args.quick:
        search()


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("serving", main))
