"""LLMs on the 910B: fused vs unfused prefill and decode of a 7B decoder, serving metrics, and
the simulator's own speed on them.

    python bench/llm.py            # everything (~6 min on 2 cores)
    python bench/llm.py --quick    # skip the unfused compare runs
    python bench/llm.py --speed    # only the optimise + simulate time table

Rows:
- asim.compare on llama2-7b prefill (batch 1, seq_len 2048) and decode (batch 16,
  context_len 4096), ascend910b, shapes only, block detail: time, launches, HBM/L2 traffic;
- asim.llm.generate(llama2-7b, batch 16, prompt 1024, 128 new tokens): TTFT, TPOT, tokens/s,
  HBM peak (decode simulated at 3 contexts, the rest interpolated);
- wall time of optimise + simulate (graph build excluded), shape only, block detail, fused
  (targets: decode step < 5 s, prefill < 10 s);
- the cube in a prefill: the step's MatMuls' rate against the chip's fp16 peak, beside the
  corpus's measured GEMMs at LLM shapes on the 910B2 (docs/corpus.md, "A model's constant
  MatMul weight is an ND parameter").
"""

from __future__ import annotations

import argparse
import time

import ascendsim as asim

CHIP = "ascend910b"
MODEL = "llama2-7b"
CASES = {"prefill (b1, s2048)": dict(batch=1, seq_len=2048),
         "decode (b16, ctx4096)": dict(batch=16, phase="decode", context_len=4096)}


def _mb(res, level: str) -> float:
    return sum(b for t in res.trace.tasks for (lvl, _), b in t.traffic.items()
               if lvl == level) / 1e6


def compare_rows(name: str, kw: dict) -> tuple[list[str], list[str]]:
    """The table rows of one step, and a note per graph of its device memory peak."""
    g = asim.models.decoder(MODEL, **kw)
    # the unfused decode graph needs more device memory than the 910B2's 64 GiB (its
    # repeat_kv copies of the 4096-token cache); both runs are timed anyway and the peak of
    # each is printed below the table
    cmp = asim.compare(g, CHIP, inputs=None, check_capacity=False)
    u, f = cmp.unfused, cmp.fused
    notes = [f"{name} {label}: device memory peak {res.memory.peak_bytes / 2**30:.1f} GiB"
             for label, res in (("unfused", u), ("fused", f))]
    rows = [f"| {name} | unfused | {u.time_us / 1e3:.2f} | {len(u.trace.tasks)} | "
            f"{_mb(u, 'DDR'):,.0f} | {_mb(u, 'L2'):,.0f} | |",
            f"| {name} | fused | {f.time_us / 1e3:.2f} | {len(f.trace.tasks)} | "
            f"{_mb(f, 'DDR'):,.0f} | {_mb(f, 'L2'):,.0f} | {cmp.speedup:.2f}x |"]
    return rows, notes


def speed_row(name: str, kw: dict) -> str:
    """Wall and CPU seconds (the CPU time of this single-threaded process is what a quiet
    machine's wall time would be; on a loaded machine the wall time is longer)."""
    g = asim.models.decoder(MODEL, **kw)
    t0, c0 = time.perf_counter(), time.process_time()
    opt = asim.optimize(g, CHIP)
    c1 = time.process_time()
    res = asim.simulate(opt.graph, CHIP, fusion=False)
    t2, c2 = time.perf_counter(), time.process_time()
    return (f"| {name} | {c1 - c0:.1f} | {c2 - c1:.1f} | {c2 - c0:.1f} | {t2 - t0:.1f} | "
            f"{len(res.trace.tasks)} | {res.events:,} | {res.time_us / 1e3:.2f} |")


#: corpus rows of torch.matmul at LLM shapes on the 910B2, measured in TFLOPS
CUBE_ROWS = ("gpub-910b2c-mm-2304x5120x1536-bf16", "gpub-910b2c-mm-6912x16384x2048-bf16",
             "gpub-910b2c-mm-6144x17920x2816-bf16", "gpub-910b2c-mm-14336x4096x4096-bf16",
             "pub-torchperf-910b2-gemm-fp16-4096", "pub-torchperf-910b2-gemm-fp16-8192")


def cube_rows() -> list[str]:
    """The prefill's MatMul rate (simulated) and the measured GEMM rows' (measured, simulated),
    each as a share of the chip's fp16 peak."""
    from ascendsim.hw import get_chip
    from ascendsim.validation.corpus import load_corpus
    from ascendsim.validation.validate import RowRunner
    chip = get_chip(CHIP)
    peak = chip.peak_flops("float16") / 1e12
    out = []
    for name, kw in CASES.items():
        if kw.get("phase") == "decode":
            continue
        res = asim.simulate(asim.models.decoder(MODEL, **kw), CHIP)
        mms = [t for t in res.trace.tasks if t.op_type == "MatMul"]
        rate = sum(t.flops for t in mms) / res.chip.seconds(sum(t.duration for t in mms)) / 1e12
        out.append(f"| {MODEL} {name}: its {len(mms)} MatMuls (simulated) | | {rate:.1f} | "
                   f"{100 * rate / peak:.0f}% |")
    rows = {r.id: r for r in load_corpus()}
    runner = RowRunner()
    for rid in CUBE_ROWS:
        row = rows[rid]
        sim = runner.value(row, get_chip(row.chip))
        out.append(f"| {rid} ({row.workload['op']} {row.workload['inputs'][0]['dtype']}) | "
                   f"{row.value:.1f} ({100 * row.value / peak:.0f}%) | {sim:.1f} | "
                   f"{100 * sim / peak:.0f}% |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the unfused compare runs")
    ap.add_argument("--speed", action="store_true", help="only the wall-time table")
    args = ap.parse_args()
    asim.simulate(asim.models.decoder(MODEL, layers=1, seq_len=16), CHIP)   # JIT warm-up
    print(f"## {MODEL} on {CHIP}: optimise + simulate wall time (fused, shapes only, block)\n")
    print("| step | optimise CPU (s) | simulate CPU (s) | total CPU (s) | total wall (s) | tasks "
          "| events | simulated (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, kw in CASES.items():
        print(speed_row(name, kw), flush=True)
    if args.speed:
        return
    print(f"\n## The cube at prefill shapes on {CHIP}: TFLOPS against the fp16 peak\n")
    print("| kernels | measured TFLOPS (of peak) | simulated TFLOPS | simulated, of peak |")
    print("|---|---|---|---|")
    for line in cube_rows():
        print(line, flush=True)
    if not args.quick:
        print(f"\n## {MODEL} on {CHIP}: unfused vs fused (asim.compare, shapes only)\n")
        print("| step | graph | time (ms) | tasks | HBM traffic (MB) | L2 traffic (MB) | "
              "speedup |")
        print("|---|---|---|---|---|---|---|")
        notes = []
        for name, kw in CASES.items():
            rows, peaks = compare_rows(name, kw)
            notes += peaks
            for row in rows:
                print(row, flush=True)
        print()
        for note in notes:
            print(f"- {note}")
    print(f"\n## asim.llm.generate({MODEL!r}, {CHIP!r}, batch=16, prompt_len=1024, "
          f"new_tokens=128)\n")
    t0 = time.perf_counter()
    gen = asim.llm.generate(MODEL, CHIP, batch=16, prompt_len=1024, new_tokens=128)
    wall = time.perf_counter() - t0
    print("| TTFT (ms) | TPOT (ms) | tokens/s | HBM peak (GiB) | weights | KV cache | "
          "activations | wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    m = gen.memory
    print(f"| {gen.ttft_ms:.1f} | {gen.tpot_ms:.2f} | {gen.tokens_per_s:,.0f} | "
          f"{gen.hbm_peak_bytes / 2**30:.2f} | {m.weights / 2**30:.2f} | "
          f"{m.kv_cache / 2**30:.2f} | {m.activations / 2**30:.2f} | {wall:.0f} |")
    print(f"\n{gen.notes[0]}")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("llm", main))
