"""The sections of BENCHMARKS.md: which script makes each one, with which arguments, and how a
script's output becomes a section (heading, command, machine and load, commit, table).

Every benchmark script ends with `sections.main_or_markdown(ID, main)`, so

    python bench/kernels.py --quick                # the plain output
    python bench/kernels.py --quick --markdown     # the same run as a BENCHMARKS.md section

`--markdown` runs the script again as a child process without the flag, captures its standard
output and wraps it; `bench/report.py` collects the sections into BENCHMARKS.md. A section's
text is only ever produced here, from a run, so its figures and its words cannot drift apart.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CI_TIMES = BENCH / "ci_times.json"


@dataclass(frozen=True)
class Section:
    """One section of BENCHMARKS.md.

    `args` are the arguments `bench/report.py` runs the script with (bounded: the whole report
    stays under ~25 minutes on an idle 2-core machine); `fmt` is "text" when the script prints a
    plain table (shown as a code block) or "markdown" when it prints markdown tables."""

    id: str
    title: str
    script: str | None
    args: tuple[str, ...] = ()
    fmt: str = "text"
    about: str = ""
    full: str = ""                  # the command of the larger run, when `args` is a reduced one
    minutes: float = 1.0            # rough idle 2-core duration of `args` (its CPU time)


SECTIONS: tuple[Section, ...] = (
    Section("fidelity", "Fidelity: `ascendsim validate` against measured figures",
            "fidelity.py", ("--summary-only",), minutes=0.5,
            about="The simulator against every measured row of the corpus "
                  "(`ascendsim/validation/corpus/`), each row on its own chip; calibration "
                  "rows (the ones a chip figure was fitted to) are reported apart. Error is "
                  "|simulated - measured| / measured; ratio > 1: the model is slow. "
                  "`ascendsim validate` without `--summary-only` lists every row; each model "
                  "change, with the rows it moved before and after, is in docs/corpus.md "
                  "(\"Model changes kept\" and \"... tried against the corpus and not kept\")."),
    Section("regression", "Regression check of simulated figures", "regression.py",
            minutes=1,
            about="Cycles, task records and intervals of 108 cases (3 models x 3 chips x "
                  "fused/as given x block/tile detail x sink/host/eager launch) against the "
                  "golden digests in `tests/data/regression_digests.json`; "
                  "`tests/sim/test_regression_digests.py` runs the same check."),
    Section("sim_speed", "Simulator speed: training-step pipeline against a baseline",
            "sim_speed.py", ("--tables", "--quick"), minutes=2,
            full="python bench/sim_speed.py --tables",
            about="Build + optimise + simulate wall time of the BERT-large and ResNet-50 "
                  "training steps (shapes only, block detail, ascend910), each case in a fresh "
                  "process for this tree and for the baseline revision a1ff607 in the same run; "
                  "then events per second of forward passes and block vs tile detail "
                  "agreement (target: within 5 %). Wall times on a shared machine swing by "
                  "+-40 %: compare rows of one run."),
    Section("engine_cpu", "Simulator speed: lowering and engine CPU time", "engine_cpu.py",
            ("--baseline", "dcf67d5", "--repeat", "3", "--cases", "resnet_step", "bert_step"),
            fmt="markdown", minutes=1,
            full="python bench/engine_cpu.py --baseline dcf67d5 --repeat 3",
            about="CPU seconds (`time.process_time`, steadier than wall time on a shared "
                  "machine) of `lower` and `Engine.run` for training steps, this tree against "
                  "dcf67d5 (the engine and the lowering before their split into one module "
                  "per concept), best of three, each in a fresh process. Cycles may differ "
                  "where a chip figure changed since (kernel_start_us 1.28 -> 1.29 us)."),
    Section("ci_times", "Test suite run time", None, fmt="markdown", minutes=0,
            about="Wall time of the two suite runs, read from `bench/ci_times.json`: `.ci/run` "
                  "records its own run there, and `python bench/ci_times.py run -- pytest -q` "
                  "times and records the other (this section only reads the file)."),
    Section("kernels", "Kernels: numba against numpy", "kernels.py", minutes=1,
            about="The registry's numba kernels against the numpy/BLAS code a user would "
                  "otherwise write; best of 3 after a warm-up, checked against the reference "
                  "first. Ratio < 1: the kernel is faster."),
    Section("fusion", "Fusion: composite kernel against the unfused chain", "fusion.py",
            minutes=0.5,
            about="The composite numba kernel generated from a fused 6-op element-wise chain "
                  "against the numpy expression and the unfused graph run op by op (16M "
                  "elements; target >= 2x over numpy in float32)."),
    Section("training", "Training steps: fusion off against on", "training.py",
            fmt="markdown", minutes=0.5,
            about="Training steps built by the autodiff (shapes only, block detail, "
                  "ascend910): BERT-large with graph-kernel fusion off and on, ResNet-50 with "
                  "UB fusion off and on; simulated step time, tasks, and build / optimise / "
                  "simulate wall time."),
    Section("training_ops", "CANN training kernels", "training_ops.py", fmt="markdown",
            minutes=0.25,
            about="BatchNorm training forward and backward and the optimizer updates, "
                  "simulated against their primitive-op form and the HBM bound, and the numba "
                  "kernels' wall time."),
    Section("llm_training", "Decoder training steps: exported graph against graph-fused",
            "llm_training.py", minutes=0.25,
            about="`training_step` of decoders on the 910B, as exported (primitive ops) and "
                  "with the graph fusions (RmsNorm, RotaryMul, SwiGlu, FlashAttentionScore and "
                  "their gradients)."),
    Section("confidence", "Confidence of three headline runs", "confidence.py", ("--tables",),
            fmt="markdown", minutes=0.5,
            about="`Result.confidence()` for ResNet-50 training on the 910, BERT-large and a 7B "
                  "decode step on the 910B: the share of simulated time in op families with "
                  "validation rows on the chip's generation, and their median |error| "
                  "(docs/api.md says what the figure does not promise)."),
    Section("fuzz", "Fuzzing: the suite's random surfaces", "fuzz.py", ("--heavy",),
            fmt="markdown", minutes=6,
            about="Seeded hypothesis runs (the same examples on every machine): the default "
                  "examples run in every suite run, the heavy ones under `pytest -m fuzz`. "
                  "Strategies in `tests/fuzz/strategies.py`; each test module states its "
                  "properties."),
    Section("llm", "LLMs on the 910B", "llm.py", fmt="markdown", minutes=0.5,
            about="llama2-7b prefill and decode: the simulator's own optimise + simulate time, "
                  "unfused against fused (`asim.compare`), and `asim.llm.generate` serving "
                  "figures (TTFT, TPOT, tokens/s, HBM peak)."),
    Section("serving", "LLM serving: 1,000 requests, the memo, a configuration search",
            "serving.py", minutes=3,
            about="`asim.llm.serve` under 1,000 Poisson requests of llama2-7b on one 910B and "
                  "of llama2-70b on TP8 (an Atlas 800 A2 box): TTFT/TPOT/E2E percentiles, "
                  "throughput, goodput, CPU time, fresh step simulations with their CPU cost "
                  "and the memo hit rate; and `asim.llm.search` of llama2-70b on one box over "
                  "TP4 x 2 and TP8, mixed and disaggregated, fp16 and W8A8: the best "
                  "configuration under its SLO, the runner-up and why it lost."),
    Section("unit_block", "Block detail inside long tiles", "unit_block.py", fmt="markdown",
            minutes=1,
            about="The engine with and without chunk tiles (SimPy events, engine CPU seconds, "
                  "cycles), and block against tile detail on the weight gradients and "
                  "long-K GEMMs it chunks."),
    Section("optimize_speed", "Build and optimise CPU time", "optimize_speed.py", ("--table",),
            fmt="markdown", minutes=0.5,
            about="CPU seconds of building and optimising the training-step cases (least of 3, "
                  "each case in its own process) and a digest of each optimised graph."),
    Section("memory_plan", "Memory plan: peak device memory", "memory_plan.py",
            fmt="markdown", minutes=1,
            about="Peak live device memory of every built-in model at its default sizes (the "
                  "memory plan of `simulate`), fused as the CLI runs it, against each chip's "
                  "HBM. A builder that needs arguments is listed as such."),
    Section("sweep", "Design-space sweep on Dask", "sweep.py", minutes=1.5,
            about="ResNet-50 batch 32 (forward, shapes only, block detail) on the Ascend 910 "
                  "over UB size x HBM bandwidth x fusion on/off, 100 points on a 2-worker "
                  "LocalCluster (target: under 5 minutes)."),
    Section("data_parallel", "Data parallel across chips", "data_parallel.py",
            minutes=0.25,
            about="Step time, communication share and scaling efficiency on 1-64 chips "
                  "(weak scaling: one chip simulated, HCCL's gradient all-reduce added over "
                  "the chip's interconnect)."),
    Section("parallel", "Parallel inference across chips", "parallel.py", fmt="markdown",
            minutes=1.5,
            about="70B-class models with tensor parallel (TP8, MC2) on an Atlas 800 A2 box of "
                  "eight 910B and DeepSeek-V3 in W8A8 (routed experts int8 too) with expert "
                  "parallel (EP16 with attention data parallel, and with attention TP8 x "
                  "DP2) on an Atlas 800 A3 box (16 910C dies): step, per-token latency, "
                  "tokens/s, exposed communication, the collectives of every layer and the "
                  "simulator's wall time (targets: 70B TP8 decode < 5 s, 8k prefill < 20 s); "
                  "then the llama2-70B and Qwen2-72B TP8 rows of the corpus beside their "
                  "published times and tokens/s."),
    Section("interp", "Interp on the 310: divisible against non-divisible sizes", "interp.py",
            minutes=0.1,
            about="A Caffe Interp (bilinear, corners aligned) at the two shapes of a reported "
                  "20 ms -> 1.6 ms change on an Atlas 310. No source names the mechanism, so "
                  "the model runs both on the same vector path."),
    Section("attribution", "Pass attribution and the fusion advisor", "attribution.py",
            minutes=1,
            about="ResNet-50 (910), a BERT-large encoder layer (910) and a llama2-7b decoder "
                  "layer (910B): every pass's leave-one-out and cumulative gain and their "
                  "interaction (`asim.attribute`), then the advisor's top candidate "
                  "re-simulated against its predicted gain, with its values against the "
                  "unfused ops', at full size (ResNet-50 batch 1 at 224 x 224, BERT-large at "
                  "batch 32 x 512, llama2-7b prefill of 1024 tokens); `--quick` runs "
                  "smaller sizes of the same three."),
    Section("scalesim_compare", "Side by side with SCALE-Sim", "scalesim_compare.py",
            fmt="markdown", minutes=0.25,
            about="The ResNet-50 v1.5 conv layers in ascendsim and in SCALE-Sim 3.0.0; when no "
                  "interpreter with scalesim is found, SCALE-Sim's figures are a reference "
                  "measurement, labelled so in the table."),
)
BY_ID = {s.id: s for s in SECTIONS}
BEGIN = "<!-- section: {} -->"
END = "<!-- /section: {} -->"


# ----------------------------------------------------------------------------- facts
def _git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def commit() -> str:
    """The checked-out commit, with a note when the code has uncommitted changes."""
    rev = _git("rev-parse", "--short=7", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--", "ascendsim", "bench", "pyproject.toml")
    return f"`{rev}`" + (" with uncommitted changes" if dirty else "")


def machine() -> str:
    """Cores, CPU model, RAM and the versions that move wall times."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = ""
    try:
        kib = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        ram = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    vers = []
    for pkg in ("numpy", "numba", "simpy"):
        try:
            vers.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            pass
    return (f"{os.cpu_count()} cores, {cpu}{ram}; Python {platform.python_version()}, "
            + ", ".join(vers))


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _markdown_body(text: str) -> str:
    """A script's markdown output inside a section: headings one level below the section's,
    a blank line around every table."""
    out: list[str] = []
    for line in text.rstrip().splitlines():
        heading = re.match(r"#+ (.*)", line)
        if heading:
            line = "### " + heading.group(1).strip()
        kind = "row" if line.startswith("|") else "item" if line.startswith("- ") else "line"
        prev = out[-1] if out else ""
        prev_kind = "row" if prev.startswith("|") else "item" if prev.startswith("- ") else "line"
        if prev and line and (kind != prev_kind or kind == "line"):
            out.append("")          # a table, a list or a paragraph of its own
        if line or (out and out[-1]):
            out.append(line)        # one blank line at most
    return "\n".join(out)


def _wrap(section: Section, lines: list[str], body: str) -> str:
    head = [BEGIN.format(section.id), f"## {section.title}", ""]
    if section.about:
        head += [section.about, ""]
    return "\n".join(head + lines + ["", body.rstrip(), END.format(section.id)])


def render(section: Section, argv: Sequence[str]) -> tuple[str, int]:
    """Run the section's script with `argv` in a child process; the section text and the exit
    status."""
    cmd = " ".join(["python", f"bench/{section.script}", *argv])
    start_load, t0 = load(), time.perf_counter()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, str(BENCH / section.script), *argv], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True)
    wall, end_load = time.perf_counter() - t0, load()
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
    out = proc.stdout
    text = "\n".join(line.rstrip() for line in out.rstrip().splitlines())
    body = _markdown_body(text) if section.fmt == "markdown" else f"```text\n{text}\n```"
    if proc.returncode != 0:
        body += f"\n\nThe script exited with status {proc.returncode} at this commit."
    lines = [f"- Command: `{cmd}`"
             + (f" (larger run: `{section.full}`)" if section.full and argv else ""),
             f"- Commit: {commit()}, measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- Machine: {machine()}",
             f"- Load average (1, 5, 15 min): {start_load} at start, {end_load} at end; "
             f"niceness {os.nice(0)}; wall {wall:.0f} s, CPU {cpu:.0f} s (the run's processes)"]
    return _wrap(section, lines, body), proc.returncode


def render_ci_times(path: Path = CI_TIMES) -> str:
    """The CI run-time section from `bench/ci_times.json` (no run of its own)."""
    section = BY_ID["ci_times"]
    data = json.loads(path.read_text()) if path.exists() else {"runs": []}
    rows = ["| run | command | wall | commit | measured | machine | load average |",
            "|---|---|---:|---|---|---|---|"]
    for run in data.get("runs", []):
        if run.get("seconds") is None:
            rows.append(f"| {run['name']} | `{run['command']}` | not measured yet | | | | |")
            continue
        rows.append(f"| {run['name']} | `{run['command']}` | {run['seconds'] / 60:.1f} min | "
                    f"`{run.get('commit', '?')}` | {run.get('date', '?')} | "
                    f"{run.get('machine', '?')} | {run.get('load', '?')} |")
    lines = ["- Source: `bench/ci_times.json` (each run states its own commit and machine)"]
    return _wrap(section, lines, "\n".join(rows))


def main_or_markdown(section_id: str, main: Callable[[], object]) -> object:
    """Run `main()`, or with `--markdown` among the arguments, print this run as a section."""
    argv = sys.argv[1:]
    if "--markdown" not in argv:
        return main()
    text, status = render(BY_ID[section_id], [a for a in argv if a != "--markdown"])
    print(text)
    return status
