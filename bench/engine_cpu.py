"""Simulate's two parts, lowering and the engine, in CPU seconds: this tree against a baseline
revision, for the training steps of `pipeline_worker.CASES` (issue 15).

    python bench/engine_cpu.py                          # baseline d123969, every case
    python bench/engine_cpu.py --baseline REV --cases resnet_step bert_step --repeat 3

Wall time on a shared machine moves 1.5-2x between runs (other jobs take the CPUs); the CPU
time of the process is steadier, so this measures `time.process_time()` around `lower` and
`Engine.run` (after the same build and optimise, not timed, and a small warm-up of the same
kind for numba), each case in a fresh process per tree, the baseline checked out into a
temporary `git worktree` and put first on the import path. It also checks that both trees
simulate the same cycles and reports the SimPy events. Reported: the best of `--repeat`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
BASELINE_REV = "d123969"


def _measure(case: str) -> dict:
    """In the worker process: lower and run the engine once, CPU and wall seconds."""
    sys.path.insert(0, str(HERE))
    from pipeline_worker import CASES, CHIP

    import ascendsim as asim
    from ascendsim.lower import lower
    from ascendsim.sim import Engine

    _, build, options = CASES[case]
    warm = asim.optimize(build(True), CHIP, **options)
    asim.simulate(warm.graph, CHIP, fusion=False, detail="block", check_capacity=False)
    graph = asim.optimize(build(False), CHIP, **options).graph
    chip = asim.get_chip(CHIP)
    c0, w0 = time.process_time(), time.perf_counter()
    program = lower(graph, chip, detail="block")
    c1, w1 = time.process_time(), time.perf_counter()
    engine = Engine(program)
    trace = engine.run()
    c2, w2 = time.process_time(), time.perf_counter()
    return {"lower_cpu": c1 - c0, "engine_cpu": c2 - c1, "lower_wall": w1 - w0,
            "engine_wall": w2 - w1, "cycles": trace.total_cycles, "events": engine.events,
            "ascendsim": asim.__file__}


def _run(tree: Path, case: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", case],
                         env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", default=BASELINE_REV)
    ap.add_argument("--cases", nargs="*")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_measure(args.worker)))
        return
    sys.path.insert(0, str(HERE))
    from pipeline_worker import CASES

    cases = args.cases or list(CASES)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    with tempfile.TemporaryDirectory(prefix="asim-baseline-") as tmp:
        from timing import add_baseline_tree

        base = add_baseline_tree(ROOT, args.baseline, Path(tmp) / "baseline")
        try:
            print("| case | revision | lower CPU s | engine CPU s | simulate CPU s | "
                  "SimPy events | cycles |")
            print("|---|---|---:|---:|---:|---:|---:|")
            for case in cases:
                res = {}
                for name, tree in ((args.baseline, base), ("this tree", ROOT)):
                    runs = [_run(tree, case) for _ in range(args.repeat)]
                    best = min(runs, key=lambda r: r["lower_cpu"] + r["engine_cpu"])
                    res[name] = best
                    print(f"| {case} | {name} | {best['lower_cpu']:.2f} | "
                          f"{best['engine_cpu']:.2f} | "
                          f"{best['lower_cpu'] + best['engine_cpu']:.2f} | "
                          f"{best['events']:,} | {best['cycles']:,} |", flush=True)
                a, b = res[args.baseline], res["this tree"]
                if Path(a["ascendsim"]).resolve().is_relative_to(ROOT):
                    raise SystemExit("the baseline run imported this tree's ascendsim")
                same = "same cycles" if a["cycles"] == b["cycles"] else "CYCLES DIFFER"
                sim_a = a["lower_cpu"] + a["engine_cpu"]
                sim_b = b["lower_cpu"] + b["engine_cpu"]
                print(f"|  | speed-up | | {a['engine_cpu'] / b['engine_cpu']:.1f}x | "
                      f"{sim_a / sim_b:.1f}x | | {same} |", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           check=False)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("engine_cpu", main))
