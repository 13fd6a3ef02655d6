"""Parallel inference across chips: 70B-class TP8 on an Atlas 800 A2 box and DeepSeek-V3 W8A8
with expert parallel on an Atlas 800 A3 box; step time, tokens/s, per-token latency,
collectives, the simulator's own wall time, and the llama2-70B and Qwen2-72B TP8 validation
rows beside their published figures.

    python bench/parallel.py              # the must-show plans, prefill and decode
    python bench/parallel.py --quick      # the 70B TP8 speed checks only

Shape only, block detail, fusion on, mode sink. Each plan is simulated per pipeline stage
(ranks of a stage share one simulation) with one layer of each kind plus one more, the other
layers extrapolated (`ascendsim/plan.py`). Wall time counts building the stage graphs and
simulating them (CPU seconds of this process beside it: on a shared machine the wall time
also counts waiting for a core); the targets are < 5 s for a 70B TP8 decode step and < 20 s
for an 8k-token prefill on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import ascendsim as asim
from ascendsim.validation.corpus import load_corpus
from ascendsim.validation.validate import validate_rows

A2 = ("ascend910b", 8, "atlas800-a2")
A3 = ("ascend910c", 16, "atlas800-a3")
#: (label, preset, decoder kwargs, plan, box) of the must-show runs
CASES = (
    ("Llama-2-70B TP8 decode b8 ctx1024", "llama2-70b",
     dict(batch=8, phase="decode", context_len=1024), dict(tp=8, mc2=True), A2),
    ("Llama-2-70B TP8 prefill 1 x 8192", "llama2-70b", dict(batch=1, seq_len=8192),
     dict(tp=8, mc2=True), A2),
    ("Qwen2.5-72B TP8 decode b8 ctx1024", "qwen2.5-72b",
     dict(batch=8, phase="decode", context_len=1024, dtype="bfloat16"), dict(tp=8, mc2=True),
     A2),
    ("Qwen2.5-72B TP8 prefill 1 x 8192", "qwen2.5-72b",
     dict(batch=1, seq_len=8192, dtype="bfloat16"), dict(tp=8, mc2=True), A2),
    ("DeepSeek-V3 W8A8 EP16 decode b64 ctx1024", "deepseek-v3",
     dict(batch=64, phase="decode", context_len=1024, quant="w8a8", dtype="bfloat16"),
     dict(ep=16, dp=16), A3),
    ("DeepSeek-V3 W8A8 EP16 prefill 16 x 1024", "deepseek-v3",
     dict(batch=16, seq_len=1024, quant="w8a8", dtype="bfloat16"), dict(ep=16, dp=16), A3),
    # attention TP8 x DP2, MoE EP16: the layout vLLM-Ascend runs DeepSeek in on one A3 box
    ("DeepSeek-V3 W8A8 TP8 DP2 EP16 decode b64 ctx1024", "deepseek-v3",
     dict(batch=64, phase="decode", context_len=1024, quant="w8a8", dtype="bfloat16"),
     dict(tp=8, dp=2, ep=16), A3),
)
QUICK = (0, 1)
ROWS = ("infer-llama2-70b-tp8-0001", "infer-llama2-70b-tp8-0002", "infer-llama2-70b-tp8-0003",
        "infer-llama2-70b-tp8-0004", "infer-qwen2-72b-tp8-0001", "infer-qwen2-72b-tp8-0002",
        "infer-qwen2-72b-tp8-0003", "infer-qwen2-72b-tp8-0004", "infer-qwen2-72b-tp8-0005",
        "infer-qwen2-72b-tp8-0006")


def _tokens_per_s(w: dict, ms: float) -> float:
    """Tokens a step makes per second: the batch's prompt tokens in prefill, one per
    sequence in decode."""
    tokens = w["batch"] * (w["seq_len"] if w["phase"] == "prefill" else 1)
    return tokens / ms * 1e3


def run(case: tuple) -> None:
    label, preset, kw, plan, box = case
    t0, c0 = time.perf_counter(), time.process_time()
    model = asim.models.decoder(preset, parallel=asim.Parallel(**plan), **kw)
    res = asim.simulate(model, asim.Box(*box))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        res.write_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    chips = len({e["pid"] for e in events if e["name"] == "process_name"})
    comm0 = sum(1 for e in events if e.get("cat") == "comm" and e["pid"] == 0)
    per_layer = sorted({c.kind for c in res.collectives if c.layer is not None})
    latency = (f"{res.per_token_ms:.2f} ms/token" if model.phase == "decode"
               else f"TTFT {res.per_token_ms:.1f} ms")
    print(f"| {label} | {res.box.count} x {res.chip.name} | {res.time_us / 1e3:.2f} | "
          f"{latency} | {res.tokens_per_s:,.0f} | {100 * res.comm_us / res.time_us:.1f} % | "
          f"{'+'.join(per_layer)} | {chips} chips, {comm0} collectives on chip 0's link | "
          f"{wall:.1f} s ({cpu:.1f} s CPU) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print("| plan | box | step ms | latency | tokens/s | exposed comm | per-layer collectives "
          "| trace (simulated layers) | simulator wall |")
    print("|---|---|---:|---|---:|---:|---|---|---:|")
    for i, case in enumerate(CASES):
        if args.quick and i not in QUICK:
            continue
        run(case)
    if args.quick:
        return
    print()
    print("Validation rows (torchair on an Atlas 800I A2, 8 x 910B4: llama2-70B fp16 TP8 with "
          "MC2, Qwen2-72B bf16 TP8 by deepspeed's all-reduce; published step times, tokens/s "
          "derived from them; first sight stamped before any tuning):")
    print()
    print("| row | workload | measured ms | simulated ms | measured tokens/s | simulated "
          "tokens/s | error | first-sight ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows = [r for r in load_corpus() if r.id in ROWS]
    for r in validate_rows(rows).rows:
        if r.status != "ok":
            print(f"| {r.id} | {r.status}: {r.reason} | {r.measured:g} | | | |")
            continue
        w = r.row.workload
        what = (f"{w['preset']} b{w['batch']} {w['phase']} "
                + (f"s{w['seq_len']}" if w["phase"] == "prefill" else f"ctx{w['context_len']}"))
        print(f"| {r.id} | {what} | {r.measured:g} | {r.simulated:.1f} | "
              f"{_tokens_per_s(w, r.measured):,.0f} | {_tokens_per_s(w, r.simulated):,.0f} | "
              f"{100 * abs(r.ratio - 1):.0f} % (ratio {r.ratio:.2f}) | {r.row.first_ratio} |")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("parallel", main))
