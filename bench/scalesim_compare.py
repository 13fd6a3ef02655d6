"""ascendsim vs SCALE-Sim, side by side in one run, on the same ResNet-50 conv layers.

    python bench/scalesim_compare.py                      # first 5 and all 53 layers, 128x128
    python bench/scalesim_compare.py --layers first5 --arrays 128,64
    python bench/scalesim_compare.py --quick              # first 5 layers, 128x128, block only
    python bench/scalesim_compare.py --scalesim-python /path/to/venv/bin/python

Both simulators get the same work: the 53 conv layers of ResNet-50 v1.5 (batch 1, 224x224,
padding folded into the IFMAP size because SCALE-Sim has none; `scalesim_layers`), or the
first 5 of them. SCALE-Sim (PyPI `scalesim` 3.0.0, weight-stationary array of the chosen size,
64/64/256 KB SRAMs, bandwidth CALC) runs as a separate process through its CLI, in a temporary
directory that is deleted afterwards (its CLI always writes per-cycle trace CSVs: hundreds of MB
even for 5 layers); its whole-process wall and CPU time are measured. scalesim 3.0.0 crashes
with NumPy >= 2.4, so it usually lives in its own environment: `--scalesim-python`. When no
interpreter with scalesim is found, or for the 53-layer set on a loaded machine, the table shows
SCALE-Sim's figures measured earlier on a 2-core machine, labelled "reference measurement, not run".

ascendsim simulates the same layers as one graph of independent fp16 convs on a 32-core Ascend
910 (`simulate(graph, chip="ascend910", detail=..., fusion=False)`), in block and tile
detail, in this process (after a one-layer warm-up; graph build included) and once as a
whole fresh process.

The two simulators model different machines (SCALE-Sim: one systolic array with its SRAMs and
a DRAM interface; ascendsim: 32 AI Cores with a 16x16x16 cube each, L2/HBM, format
conversions), so their cycle counts are not expected to agree. The meaningful fidelity check
is the cube work of ONE core against the ideal: ascendsim's M-pipe cycles on a one-core 910
(4096 fp16 MACs/cycle, like a 64x64 array) next to SCALE-Sim's compute cycles, each with its
utilisation (ideal MAC-bound cycles / simulated cycles).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from scalesim_layers import (
    ConvLayer,
    conv_graph,
    read_topology,
    resnet50_conv_layers,
    total_macs,
    write_topology,
)

from ascendsim.api import simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip

CHIP = "ascend910"
SETS = ("first5", "all")

#: SCALE-Sim 3.0.0 measured earlier with its CLI (traces written) on a 2-core machine, on these
#: same layer lists and array configs: (set, array side) -> (whole-process wall s, total cycles
#: or None when not recorded, note). Shown only when SCALE-Sim is not run here.
REFERENCE = {
    ("first5", 16): (151.0, None, ""),
    ("first5", 32): (57.0, None, ""),
    ("first5", 64): (26.0, None, ""),
    ("first5", 128): (23.0, None, ""),
    ("all", 16): (1890.0, 20_220_795, "did not finish: wall projected, memory ~26 GiB"),
    ("all", 32): (837.0, 6_154_647, ""),
    ("all", 64): (419.0, 2_094_733, ""),
    ("all", 128): (272.0, 867_467, ""),
}

#: SCALE-Sim architecture config, sized after one Ascend 910 cube's buffers (ws dataflow).
CFG = """[general]
run_name = {name}

[architecture_presets]
ArrayHeight:    {side}
ArrayWidth:     {side}
IfmapSramSzkB:   64
FilterSramSzkB:  64
OfmapSramSzkB:   256
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : ws
MemoryBanks:   1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""

#: SCALE-Sim's layout file (custom layouts off: the header is enough).
LAYOUT = ("Layer name, IFMAP Height Intraline Factor, IFMAP Width Intraline Factor, Filter Height "
          "Intraline Factor, Filter Width Intraline Factor, Channel Intraline Factor, Num Filter "
          "Intraline Factor, IFMAP Height Intraline Order, IFMAP Width Intraline Order, Channel "
          "Intraline Order, IFMAP Height Interline Order, IFMAP Width Interline Order, Channel "
          "Interline Order, Num Filter Intraline Order, Channel Intraline Order, Filter Height "
          "Intraline Order, Filter Width Intraline Order, Num Filter Interline Order, Channel "
          "Interline Order, Filter Height Interline Order, Filter Width Interline Order,\n")

#: Runs SCALE-Sim through its API with trace saving off (`--scalesim-no-traces`).
NO_TRACE_DRIVER = """import sys
from scalesim.scale_sim import scalesim
s = scalesim(save_disk_space=True, verbose=False, config=sys.argv[1], topology=sys.argv[2],
             layout=sys.argv[3], input_type_gemm=False)
s.run_scale(top_path=sys.argv[4])
"""


# ----------------------------------------------------------------------------- SCALE-Sim
@dataclass
class ScaleSimRun:
    """One SCALE-Sim figure: measured here (source "run") or from REFERENCE."""

    source: str                    # "run" or "reference measurement, not run (<why>)"
    wall_s: float
    cpu_s: float | None = None
    cycles: int | None = None      # sum over layers of "Total Cycles" (compute + stall)
    cycles_prefetch: int | None = None   # sum of "Total Cycles (incl. prefetch)"
    stall: int | None = None
    disk_mb: float | None = None   # what its output directory held before deletion
    note: str = ""

    @property
    def compute(self) -> int | None:
        return None if self.cycles is None else self.cycles - (self.stall or 0)


def scalesim_version(python: str) -> str | None:
    """scalesim's version importable by `python` (with numpy's), or None."""
    code = ("import importlib.metadata as m, numpy, scalesim.scale_sim; "
            "print(m.version('scalesim'), numpy.__version__)")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    ver, np_ver = out.stdout.split()
    return f"scalesim {ver} (numpy {np_ver}, {python})"


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def _compute_report(outdir: Path) -> tuple[int, int, int]:
    reports = list(outdir.rglob("COMPUTE_REPORT.csv"))
    if len(reports) != 1:
        raise RuntimeError(f"SCALE-Sim wrote {len(reports)} COMPUTE_REPORT.csv under {outdir}")
    with reports[0].open() as f:
        rows = [[c.strip() for c in r] for r in csv.reader(f)]
    head = rows[0]
    col = {name: head.index(name) for name in
           ("Total Cycles (incl. prefetch)", "Total Cycles", "Stall Cycles")}
    body = [r for r in rows[1:] if r and r[0]]
    return tuple(sum(int(float(r[col[k]])) for r in body) for k in
                 ("Total Cycles", "Total Cycles (incl. prefetch)", "Stall Cycles"))


def run_scalesim(python: str, layers: list[ConvLayer], side: int, traces: bool = True,
                 timeout: float = 7200.0) -> ScaleSimRun:
    """Run SCALE-Sim on `layers` with a side x side ws array as a separate process in a temporary
    directory (deleted afterwards); whole-process wall and CPU time, summed COMPUTE_REPORT."""
    tmp = Path(tempfile.mkdtemp(prefix="scalesim_"))
    try:
        name = f"ascend910_cube_{side}x{side}_ws"
        cfg = tmp / f"{name}.cfg"
        cfg.write_text(CFG.format(name=name, side=side))
        topo = write_topology(layers, tmp / "topology.csv")
        layout = tmp / "layout.csv"
        layout.write_text(LAYOUT)
        out = tmp / "out"
        if traces:
            cmd = [python, "-m", "scalesim.scale", "-c", str(cfg), "-t", str(topo),
                   "-l", str(layout), "-p", str(out)]
        else:
            cmd = [python, "-c", NO_TRACE_DRIVER, str(cfg), str(topo), str(layout), str(out)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with (tmp / "stdout.txt").open("w") as log:
            proc = subprocess.run(cmd, cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            tail = (tmp / "stdout.txt").read_text()[-2000:]
            raise RuntimeError(f"SCALE-Sim failed (exit {proc.returncode}):\n{tail}")
        cycles, prefetch, stall = _compute_report(out)
        return ScaleSimRun("run" if traces else "run, traces off", wall, cpu, cycles, prefetch,
                           stall, _dir_mb(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def reference_scalesim(set_name: str, side: int, why: str) -> ScaleSimRun | None:
    ref = REFERENCE.get((set_name, side))
    if ref is None:
        return None
    wall, cycles, note = ref
    return ScaleSimRun(f"reference measurement, not run ({why})", wall, cycles=cycles, note=note)


# ----------------------------------------------------------------------------- ascendsim
@dataclass
class AscendRun:
    """ascendsim on one layer set at one detail level."""

    detail: str
    wall_s: float          # graph build + simulate, in this process
    cpu_s: float
    cycles: int            # whole graph (convs + the TransData of the ND inputs/outputs)
    time_us: float
    conv_cycles: int       # sum of the conv tasks' durations
    events: int


def run_ascendsim(layers: list[ConvLayer], detail: str, chip=CHIP) -> AscendRun:
    t0, c0 = time.perf_counter(), time.process_time()
    g = conv_graph(layers)
    res = simulate(g, chip=chip, detail=detail, fusion=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    names = {layer.name for layer in layers}
    conv = sum(t.duration for t in res.trace.tasks if t.op_name in names)
    return AscendRun(detail, wall, cpu, res.cycles, res.time_us, conv, res.events)


def run_ascendsim_process(layers: list[ConvLayer], detail: str = "block") -> float:
    """Whole-process wall time of ascendsim on `layers` (a fresh interpreter: imports, graph
    build, simulate), as SCALE-Sim's is measured."""
    with tempfile.TemporaryDirectory(prefix="ascendsim_") as tmp:
        topo = write_topology(layers, Path(tmp) / "topology.csv")
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--child", str(topo), "--detail",
                              detail], capture_output=True, text=True, timeout=3600)
        wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"ascendsim child process failed:\n{out.stderr[-2000:]}")
    json.loads(out.stdout)            # the child really simulated
    return wall


def one_core_cube(layers: list[ConvLayer]) -> tuple[int, int, int]:
    """M-pipe (cube) cycles of the conv tasks on a ONE-core Ascend 910, the MAC-bound ideal, and
    the ideal once every GEMM dimension is padded to the cube's fractal (C0 = 16: conv1's 3
    input channels cost like 16)."""
    chip = get_chip(CHIP).replace(ai_cores=1)
    res = simulate(conv_graph(layers), chip=chip, detail="block", fusion=False)
    names = {layer.name for layer in layers}
    m = sum(t.pipe_cycles.get("M", 0) for t in res.trace.tasks if t.op_name in names)
    macs_per_cycle = chip.flops_per_cycle("float16") // 2
    fm, fk, fn = chip.cube_shape("float16")

    def up(x: int, q: int) -> int:
        return -(-x // q)

    padded = sum(up(la.out_h * la.out_w, fm) * up(la.channels, fk) * la.filter_h * la.filter_w
                 * up(la.num_filters, fn) for la in layers)
    return m, up(total_macs(layers), macs_per_cycle), padded


# ----------------------------------------------------------------------------- table
def _f(x, fmt: str = ",.0f", none: str = "n/a") -> str:
    return none if x is None else format(x, fmt)


def _md(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def _child(topology: str, detail: str) -> None:
    layers = read_topology(topology)
    res = simulate(conv_graph(layers), chip=CHIP, detail=detail, fusion=False)
    print(json.dumps({"cycles": res.cycles, "events": res.events}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default="first5,all",
                    help="layer sets, comma separated: first5, all (default both)")
    ap.add_argument("--arrays", default="128",
                    help="SCALE-Sim array sides, comma separated (default 128)")
    ap.add_argument("--quick", action="store_true",
                    help="first 5 layers, 128x128, block detail only, no whole-process run")
    ap.add_argument("--topology", help="a SCALE-Sim conv topology CSV instead of ResNet-50's")
    ap.add_argument("--scalesim-python", metavar="PATH",
                    help="python with scalesim installed (default: this one, if it has it)")
    ap.add_argument("--scalesim-all", choices=("auto", "run", "reference"), default="auto",
                    help="run SCALE-Sim on all layers (minutes) or show the reference figure; "
                         "auto runs it when the load average is below the CPU count")
    ap.add_argument("--scalesim-no-traces", action="store_true",
                    help="run SCALE-Sim through its API without writing traces (faster) "
                         "instead of its CLI")
    ap.add_argument("--timeout", type=float, default=7200.0,
                    help="seconds allowed per SCALE-Sim run")
    ap.add_argument("--child", metavar="TOPOLOGY", help=argparse.SUPPRESS)
    ap.add_argument("--detail", default="block", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.detail)
        return 0

    sets = ["first5"] if args.quick else [s.strip() for s in args.layers.split(",") if s.strip()]
    for s in sets:
        if s not in SETS:
            raise ConfigError(f"--layers: unknown set '{s}'; use {', '.join(SETS)}")
    try:
        sides = [128] if args.quick else [int(a) for a in args.arrays.split(",") if a.strip()]
    except ValueError:
        raise ConfigError(f"--arrays must be integers like 128,64; got {args.arrays!r}") from None
    details = ["block"] if args.quick else ["block", "tile"]

    all_layers = read_topology(args.topology) if args.topology else resnet50_conv_layers()
    by_set = {"first5": all_layers[:5], "all": all_layers}
    is_resnet = all_layers == resnet50_conv_layers()
    label = "ResNet-50 v1.5 conv layers" if is_resnet else f"layers of {args.topology}"

    python = args.scalesim_python or sys.executable
    version = scalesim_version(python)
    if args.scalesim_python and version is None:
        raise ConfigError(f"--scalesim-python {python}: cannot import scalesim there")
    print(f"# ascendsim vs SCALE-Sim on the {label} (batch 1)")
    print(f"machine: {_load()} at start")
    if version is None:
        how = "not importable here: its figures are reference measurements"
    elif args.scalesim_no_traces:
        how = f"{version} via its API, traces off"
    else:
        how = f"{version} via its CLI, traces written to a deleted temp dir"
    print(f"SCALE-Sim: {how}")

    # ascendsim first (fast), then SCALE-Sim.
    run_ascendsim(all_layers[:1], "block")          # warm-up: lazy imports, registry
    asc = {(s, d): run_ascendsim(by_set[s], d) for s in sets for d in details}
    proc = {} if args.quick else {s: run_ascendsim_process(by_set[s]) for s in sets}
    cube = {s: one_core_cube(by_set[s]) for s in sets}

    ss: dict[tuple[str, int], ScaleSimRun | None] = {}
    for s in sets:
        for side in sides:
            if version is None:
                why = "scalesim not importable"
            elif s == "all" and args.scalesim_all == "reference":
                why = "--scalesim-all reference"
            elif s == "all" and args.scalesim_all == "auto" and \
                    os.getloadavg()[0] >= (os.cpu_count() or 1):
                why = f"machine loaded: {_load()}"
            else:
                print(f"running SCALE-Sim {side}x{side} on {s} ({len(by_set[s])} layers)...",
                      flush=True)
                ss[s, side] = run_scalesim(python, by_set[s], side,
                                           traces=not args.scalesim_no_traces,
                                           timeout=args.timeout)
                continue
            ss[s, side] = reference_scalesim(s, side, why) if is_resnet else None

    print()
    print("## Wall time: SCALE-Sim vs ascendsim (same layers, same run)")
    head = ["layers", "SCALE-Sim array", "SCALE-Sim wall s", "SCALE-Sim CPU s",
            "SCALE-Sim cycles", "SCALE-Sim source"]
    head += [f"ascendsim {d} wall s" for d in details]
    if proc:
        head.append("ascendsim process wall s")
    head += ["ascendsim cycles (32 cores)", "ascendsim us", "ascendsim conv-only cycles",
             "speed-up (block)"]
    if proc:
        head.append("speed-up (whole process)")
    rows = []
    for s in sets:
        for side in sides:
            r = ss.get((s, side))
            blk = asc[s, "block"]
            row = [f"{s} ({len(by_set[s])})", f"{side}x{side}",
                   _f(r and r.wall_s, ",.1f"), _f(r and r.cpu_s, ",.1f"), _f(r and r.cycles),
                   (r.source + (f"; {r.note}" if r.note else "")) if r else "n/a"]
            row += [_f(asc[s, d].wall_s, ".3f") for d in details]
            if proc:
                row.append(_f(proc[s], ".2f"))
            row += [_f(blk.cycles), _f(blk.time_us, ",.1f"), _f(blk.conv_cycles)]
            row.append(_f(r and r.wall_s / blk.wall_s, ",.0f") + "x" if r else "n/a")
            if proc:
                row.append(_f(r and r.wall_s / proc[s], ",.0f") + "x" if r else "n/a")
            rows.append(row)
    print(_md(head, rows))
    for s in sets:
        b = asc[s, "block"]
        line = (f"- ascendsim {s}: {b.events:,} SimPy events in block detail, CPU "
                f"{b.cpu_s:.2f} s")
        if "tile" in details:
            t = asc[s, "tile"]
            line += (f"; tile detail {t.cycles:,} cycles ({t.events:,} events, "
                     f"{100 * (t.cycles - b.cycles) / b.cycles:+.2f}% vs block)")
        print(line)
    for (s, side), r in ss.items():
        if r and r.source.startswith("run"):
            print(f"- SCALE-Sim {side}x{side} {s}: {r.cycles:,} cycles (compute + stall; "
                  f"{r.cycles_prefetch:,} incl. prefetch, {r.stall:,} stall), wrote "
                  f"{r.disk_mb:,.0f} MB of output (deleted), CPU {r.cpu_s:.1f} s of "
                  f"{r.wall_s:.1f} s wall")
    print("\nThe cycle counts are NOT expected to agree: SCALE-Sim models one systolic array "
          "with its SRAMs and DRAM interface; ascendsim models a 32-core Ascend 910 (cube, "
          "vector and MTE pipes per core, L2/HBM, TransData of the ND inputs and outputs, "
          "launches). The ascendsim conv-only column sums the conv tasks alone.")

    print()
    print("## Cube work on one core (a meaningful cross-check)")
    print("ascendsim: M-pipe cycles of the conv tasks on a one-core 910 "
          "(`get_chip('ascend910').replace(ai_cores=1)`), 16x16x16 fp16 cube = 4096 MACs/cycle. "
          "SCALE-Sim: compute cycles of a side x side ws array (side^2 MACs/cycle). "
          "Utilisation = MAC-bound ideal / simulated cycles.")
    head = ["layers", "simulator", "MACs/cycle", "ideal cycles", "simulated cycles",
            "utilisation", "padded ideal (util.)", "source"]
    rows = []
    for s in sets:
        m, ideal, padded = cube[s]
        macs = total_macs(by_set[s])
        rows.append([f"{s} ({len(by_set[s])})", "ascendsim 1-core cube (M pipe)", "4096",
                     _f(ideal), _f(m), f"{100 * ideal / m:.1f}%",
                     f"{padded:,} ({100 * padded / m:.1f}%)", "run"])
        shown = dict.fromkeys(sides)
        if s == "all" and is_resnet:
            shown.setdefault(16)
            shown.setdefault(64)
        for side in shown:
            r = ss.get((s, side))
            if r is None or r.compute is None:
                r = reference_scalesim(s, side, "cycles from the reference run") \
                    if is_resnet else None
            if r is None or r.compute is None:
                continue
            ideal_ss = -(-macs // (side * side))
            rows.append([f"{s} ({len(by_set[s])})", f"SCALE-Sim {side}x{side} ws",
                         f"{side * side}", _f(ideal_ss), _f(r.compute),
                         f"{100 * ideal_ss / r.compute:.1f}%", "-", r.source])
    print(_md(head, rows))
    print("SCALE-Sim cycles are its COMPUTE_REPORT 'Total Cycles' summed over layers (compute "
          "+ stall; stall is 0 with bandwidth CALC; the reference totals are the same column). "
          "A 64x64 array has the cube's 4096 MACs/cycle; 16x16 is the cube's face without its "
          "K depth. 'Padded ideal' pads M, K (input channels) and N to the 16x16x16 fractal, "
          "as the cube's NC1HWC0/fractal formats do (SCALE-Sim pads nothing).")
    print(f"\nmachine: {_load()} at end")
    return 0


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("scalesim_compare", main))
