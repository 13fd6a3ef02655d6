"""Simulator speed: the training-step pipeline against a baseline revision, wall time and
simulated events per second, and block vs tile agreement.

    python bench/sim_speed.py                      # pipeline: baseline vs this tree, one run
    python bench/sim_speed.py --baseline REV       # another baseline revision
    python bench/sim_speed.py --cases bert_step    # some of the pipeline cases
    python bench/sim_speed.py --cases resnet_fwd bert_fwd   # forward passes (issue 11)
    python bench/sim_speed.py --tables             # also the tables below (slow)
    python bench/sim_speed.py --tables --quick     # smaller models, no 4096^3 / 64M tile runs

The pipeline table (issue 15): every case of `pipeline_worker.CASES` (BERT-large and ResNet-50
training steps, shapes only, block detail) is measured in a fresh process for this tree and for
the baseline revision, checked out into a temporary `git worktree` and imported from there
(same Python, same packages, same machine, one run): build + optimise + simulate wall time,
peak resident memory, and the simulated cycles of both (equal unless a change moved them).
The default baseline is the commit the speed work started from (`BASELINE_REV`).

Rows of `--tables`:
- ResNet-50 forward, batch 32, block detail (target < 5 s)
- BERT-large forward (24 layers, seq 512, batch 32), block detail (target < 10 s)
- one ResNet-50 layer (layer1.0.conv2, batch 32) in tile detail
- the 53 ResNet-50 v1.5 conv layers of reference/scalesim (batch 1) run by ascendsim, next to
  SCALE-Sim 3.0.0's measured wall time on the same layer list (reference/scalesim/README.md;
  running scalesim itself needs numpy < 2.4 in another environment, so its figures are read
  from the README, marked "measured elsewhere"); target >= 20x faster
- block vs tile on the full test set: GEMMs 128^3..4096^3, the distinct ResNet-50 conv layers
  (batch 32), Add and ReduceSum of 1K..64M elements (target: within 5%)
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

from scalesim_layers import ConvLayer, conv_graph, resnet50_conv_layers

import ascendsim as asim
from ascendsim.api import simulate

#: the commit before the first speed commit of issue 15 (main when the work started)
BASELINE_REV = "a1ff607"
ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "pipeline_worker.py"

#: SCALE-Sim 3.0.0 wall time on all 53 layers, seconds (reference/scalesim/README.md)
SCALESIM_S = {"16x16": 1890.0, "32x32": 837.0, "64x64": 419.0, "128x128": 272.0}


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _row(name, res, wall, note=""):
    eps = res.events / wall if wall > 0 else 0.0
    return (name, f"{wall:8.2f}", f"{res.events:9d}", f"{eps:10.0f}", f"{res.cycles:12d}",
            f"{res.time_us:11.1f}", note)


def _layers() -> list[ConvLayer]:
    return resnet50_conv_layers()


def _one_conv(layer: ConvLayer, batch: int) -> asim.Graph:
    return conv_graph([layer], batch)


def speed_table(quick: bool) -> list[tuple]:
    rows = []
    batch = 8 if quick else 32
    g = asim.models.resnet50(batch=batch)
    res, wall = _timed(lambda: simulate(g, detail="block", fusion=False))
    rows.append(_row(f"ResNet-50 fwd b{batch} block", res, wall, "target < 5 s (b32)"))
    layers = 4 if quick else 24
    g = asim.models.bert_large(batch=batch, seq_len=512) if not quick else \
        asim.models.bert(batch=batch, seq_len=512, layers=layers, hidden=1024, heads=16,
                         ffn=4096)
    res, wall = _timed(lambda: simulate(g, detail="block", fusion=False))
    rows.append(_row(f"BERT-large fwd L{layers} b{batch} s512 block", res, wall,
                     "target < 10 s (L24 b32)"))
    layer = next(r for r in _layers() if r.name == "layer1.0.conv2")
    g = _one_conv(layer, 32)
    res, wall = _timed(lambda: simulate(g, detail="tile", fusion=False))
    rows.append(_row("ResNet-50 layer1.0.conv2 b32 tile", res, wall))
    g = conv_graph(_layers(), 1)
    res, wall = _timed(lambda: simulate(g, detail="block", fusion=False))
    ratio = SCALESIM_S["128x128"] / wall
    rows.append(_row("53 ResNet-50 conv layers b1 block", res, wall,
                     f"SCALE-Sim 128x128: {SCALESIM_S['128x128']:.0f} s (measured elsewhere) "
                     f"-> {ratio:.0f}x"))
    res, wall = _timed(lambda: simulate(g, detail="tile", fusion=False))
    ratio = SCALESIM_S["128x128"] / wall
    rows.append(_row("53 ResNet-50 conv layers b1 tile", res, wall, f"-> {ratio:.0f}x"))
    return rows


def agreement_table(quick: bool) -> list[tuple]:
    cases = []
    for n in ([128, 512, 2048] if quick else [128, 256, 512, 1024, 2048, 4096]):
        g = asim.Graph(f"gemm{n}")
        g.output(g.matmul(g.input("a", (n, n), "float16"), g.input("b", (n, n), "float16")))
        cases.append((f"GEMM {n}^3", g))
    seen = set()
    for layer in _layers():
        if layer[1:] in seen:
            continue
        seen.add(layer[1:])
        cases.append((f"conv {layer.name} b32", _one_conv(layer, 32)))
        if quick and len(seen) >= 4:
            break
    for e in ([1024, 1 << 20] if quick else [1024, 1 << 16, 1 << 20, 1 << 22, 1 << 26]):
        g = asim.Graph("add")
        g.output(g.add(g.input("a", (e,), "float16"), g.input("b", (e,), "float16")))
        cases.append((f"Add {e}", g))
        g = asim.Graph("reduce")
        g.output(g.reduce_sum(g.input("a", (e // 1024, 1024), "float16"), axes=[1]))
        cases.append((f"ReduceSum {e}", g))
    rows = []
    for name, g in cases:
        b, wb = _timed(lambda g=g: simulate(g, detail="block", fusion=False))
        t, wt = _timed(lambda g=g: simulate(g, detail="tile", fusion=False))
        err = abs(b.cycles - t.cycles) / t.cycles
        rows.append((name, f"{b.cycles:10d}", f"{t.cycles:10d}", f"{100 * err:6.2f}%",
                     f"{wb:6.2f}", f"{wt:6.2f}", "ok" if err <= 0.05 else "OVER 5%"))
    return rows


def _print(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = "  ".join(f"{h:<{w}}" for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(f"{str(x):<{w}}" for x, w in zip(r, widths)))
    print()


def _measure(case: str, root: Path) -> dict:
    """Run `pipeline_worker.py CASE` in a fresh process importing ascendsim from `root`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, str(WORKER), case], cwd=root, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"case {case} failed under {root}:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    where = Path(out["ascendsim"]).resolve()
    if root.resolve() not in where.parents:
        raise SystemExit(f"case {case}: imported ascendsim from {where}, not from {root}")
    return out


def _baseline_tree(rev: str, tmp: Path) -> Path:
    from timing import add_baseline_tree

    return add_baseline_tree(ROOT, rev, tmp / "baseline")


def _total(r: dict) -> float:
    return r["build_s"] + r["optimize_s"] + r["simulate_s"]


def pipeline_table(cases: list[str], rev: str) -> list[tuple]:
    """Baseline and this tree, case by case (each in a fresh process)."""
    from pipeline_worker import CASES

    rows = []
    with tempfile.TemporaryDirectory(prefix="asim-baseline-") as tmp:
        tree = _baseline_tree(rev, Path(tmp))
        try:
            for case in cases:
                base, now = _measure(case, tree), _measure(case, ROOT)
                same = "same" if base["cycles"] == now["cycles"] else \
                    f"MOVED {now['cycles'] / base['cycles'] - 1:+.4%}"
                for label, r in ((f"{rev}", base), ("this tree", now)):
                    rows.append((CASES[case][0] if r is base else "", label,
                                 f"{r['build_s']:.1f}", f"{r['optimize_s']:.1f}",
                                 f"{r['simulate_s']:.1f}", f"{_total(r):.1f}",
                                 f"{r['peak_rss_mb']:.0f}", f"{r['events']:,}",
                                 f"{r['cycles']:,}",
                                 f"{_total(base) / _total(r):.1f}x" if r is now else "",
                                 same if r is now else ""))
                print(f"  measured {case}", file=sys.stderr)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False)
    return rows


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def main() -> None:
    from pipeline_worker import CASES

    # the default pipeline table is issue 15's training steps; the forward cases (issue 11's
    # wall-time check) are asked for by name
    step_cases = [c for c in CASES if "_step" in c]

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE_REV, metavar="REV",
                    help=f"git revision to compare with (default {BASELINE_REV})")
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=step_cases,
                    help="pipeline cases to run (default: the training steps)")
    ap.add_argument("--no-pipeline", action="store_true", help="skip the pipeline table")
    ap.add_argument("--tables", action="store_true",
                    help="also the events/s and block-vs-tile tables")
    ap.add_argument("--quick", action="store_true", help="smaller models and test set")
    args = ap.parse_args()
    if not args.no_pipeline:
        print(f"pipeline (build + optimise + simulate, shapes only, block detail, ascend910); "
              f"{_load()} at start")
        rows = pipeline_table(args.cases, args.baseline)
        _print(("case", "revision", "build s", "optimise s", "simulate s", "total s",
                "peak MB", "SimPy events", "cycles", "speed-up", "cycles"), rows)
        print(f"{_load()} at end; {os.cpu_count()} CPUs")
    if args.tables:
        _print(("case", "wall s", "events", "events/s", "cycles", "sim us", "note"),
               speed_table(args.quick))
        _print(("block vs tile", "block cyc", "tile cyc", "error", "wall b", "wall t", ""),
               agreement_table(args.quick))


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("sim_speed", main))
