"""The `ascendsim` command line: run a model or an ONNX file, compare fused vs unfused, list things.

    ascendsim run MODEL_OR_ONNX [--chip ascend910] [--fusion-switch FILE] [--no-fusion]
                  [--graph-kernel] [--detail block|tile] [--mode sink|host|eager]
                  [--timeline PNG] [--trace JSON] [--summary CSV] [--batch N] [--top N]
                  [--seq-len N] [--preset NAME] [--phase prefill|decode] [--context N]
                  [--window START:END] [--cores LIST] [--timeline-color type|op|cause]
    ascendsim compare MODEL_OR_ONNX [--chip ...] [--plot PNG] [--batch N] [--mode ...]
                      [--values | --no-values]
    ascendsim models
    ascendsim chips
    ascendsim validate [--chip C] [--family F ...] [--id ROW ...] [--quick] [--plot PNG]
                       [--csv FILE]
    ascendsim calibrate PROFILE.csv --chip C --params a,b [--holdout 0.3] [--seed 0]
                        [--out CHIP.toml]

Bad input (unknown model or chip, missing file, bad fusion switch, unsupported op) prints one
line `ascendsim: error: ...` on stderr and exits with 2; nothing prints a traceback unless
`--traceback` is given. A progress bar (tqdm, when installed) shows on long work when stderr
is a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .api import DEFAULT_CHIP, DEFAULT_DETAIL, DEFAULT_MODE, with_precision_mode
from .errors import AscendSimError
from .hw.chip import KERNEL_BUILDS
from .hw.names import DETAILS, ICACHE_STARTS, MODES
from .hw.precision import PRECISION_MODES
from .serving import DEFAULT_SERVING_CHIP
from .serving.workload import DEFAULT_OUTPUT_MEAN, DEFAULT_PROMPT_MEAN

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(AscendSimError):
    """A command-line argument that names nothing usable (file, model, option value)."""


# -- progress -------------------------------------------------------------------------------
class Progress:
    """Stage progress on stderr: a tqdm bar when stderr is a terminal and tqdm is installed.

    The simulator reports no progress of its own, so the bar names the stage and a background
    thread refreshes its elapsed time while a long stage runs.
    """

    def __init__(self, stages: Sequence[str], enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._bar: Any = None
        self._stop = threading.Event()
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # tqdm is optional
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=len(stages), file=sys.stderr, leave=False,
                                 bar_format="{desc:<28} {bar} {n_fmt}/{total_fmt} [{elapsed}]")
                threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            bar = self._bar
            if bar is not None:
                bar.refresh()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._bar is not None:
            self._bar.set_description_str(name)
        yield
        if self._bar is not None:
            self._bar.update(1)

    def sim_callback(self) -> Callable[[int, int], None] | None:
        """A (done, total) callback for a simulator that reports progress, or None."""
        if self._bar is None:
            return None
        bar, desc = self._bar, "simulating"

        def update(done: int, total: int) -> None:
            if total:
                bar.set_description_str(f"{desc} {100 * done // total:3d}%")
        return update

    def close(self) -> None:
        self._stop.set()
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.close()


# -- inputs ---------------------------------------------------------------------------------
def model_names() -> list[str]:
    """Names of the built-in models."""
    from . import models

    names = getattr(models, "names", None)
    if names is None:
        raise BadInput("the built-in model list is not available in this build "
                       "(ascendsim.models.names() is missing)")
    return list(names())


def _looks_like_file(spec: str) -> bool:
    return spec.lower().endswith(".onnx") or os.sep in spec or os.path.exists(spec)


#: builder keywords the command line sets: flag -> keyword
SIZE_FLAGS = {"--batch": "batch", "--seq-len": "seq_len", "--preset": "preset",
              "--phase": "phase", "--context": "context_len"}
#: prompt tokens of `ascendsim run decoder` when --seq-len is not given (prefill)
DEFAULT_PROMPT = 128


def load_model(spec: str, batch: int | None = None, **sizes: Any) -> Any:
    """A Graph from a built-in model name or an .onnx path (errors name what was wrong).

    `batch` binds an ONNX file's dynamic batch dim (the symbolic leading dim of its inputs);
    `sizes` (seq_len, preset, phase, context_len) go to a built-in builder that takes them."""
    import ascendsim as asim

    sizes = {k: v for k, v in sizes.items() if v is not None}
    if batch is not None and batch <= 0:
        raise BadInput(f"--batch must be a positive integer, got {batch}")
    for key, least in (("seq_len", 1), ("context_len", 0)):
        if key in sizes and sizes[key] < least:
            kind = "positive" if least else "non-negative"
            raise BadInput(f"{_flag(key)} must be a {kind} integer, got {sizes[key]}")
    if _looks_like_file(spec):
        if not os.path.exists(spec):
            raise BadInput(f"file not found: '{spec}'")
        if os.path.isdir(spec):
            raise BadInput(f"'{spec}' is a directory, not an .onnx file")
        if sizes:
            flags = ", ".join(f for f, k in SIZE_FLAGS.items() if k in sizes)
            raise BadInput(f"{flags} apply to built-in models; an ONNX file takes --batch "
                           f"(its dynamic batch dim) only")
        if batch is None:
            return asim.load_onnx(spec)
        return asim.load_onnx(spec, input_shapes={_onnx_batch_dim(spec): batch})
    names = model_names()
    if spec not in names:
        raise BadInput(f"unknown model '{spec}'; built-in models: {', '.join(names)} "
                       f"(or give the path of an .onnx file)")
    builder = getattr(asim.models, spec)
    params = inspect.signature(builder).parameters
    if batch is not None:
        sizes["batch"] = batch
    for key in sizes:
        if key not in params:
            takers = [n for n in names if key in inspect.signature(getattr(asim.models, n))
                      .parameters]
            raise BadInput(f"model '{spec}' has no {_WHAT[key]}; {_flag(key)} applies to "
                           f"{', '.join(takers)}")
    if spec == "decoder":
        if sizes.get("phase", "prefill") == "prefill":
            sizes.setdefault("seq_len", DEFAULT_PROMPT)
        elif "seq_len" in sizes:
            raise BadInput("--seq-len is the prompt of --phase prefill; a decode step adds one "
                           "token per sequence against --context cached ones")
        else:
            sizes.setdefault("context_len", DEFAULT_PROMPT)
        if "preset" in sizes and sizes["preset"] not in asim.models.decoder_presets():
            raise BadInput(f"unknown --preset '{sizes['preset']}'; presets: "
                           f"{', '.join(asim.models.decoder_presets())}")
    return builder(**sizes)


_WHAT = {"batch": "batch size", "seq_len": "sequence length", "preset": "preset",
         "phase": "phase", "context_len": "context length"}


def _flag(key: str) -> str:
    return next(f for f, k in SIZE_FLAGS.items() if k == key)


def _onnx_batch_dim(path: str) -> str:
    """The dim_param of an ONNX file's dynamic batch: the symbolic leading dim its inputs share
    (BadInput naming the inputs' shapes when there is none, or several)."""
    import ascendsim as asim

    g = asim.load_onnx(path)
    shapes = {n: g.values[n].shape for n in g.inputs}
    leading = {sh[0] for sh in shapes.values() if sh and isinstance(sh[0], str)}
    shown = "; ".join(f"{n} {tuple(sh)}" for n, sh in shapes.items())
    if len(leading) == 1:
        return leading.pop()
    if not leading:
        raise BadInput(f"--batch: '{path}' has a static batch (inputs: {shown}); it keeps its "
                       f"own shapes (bind other dims in Python: asim.load_onnx(path, "
                       f"input_shapes={{...}}))")
    raise BadInput(f"--batch: the inputs of '{path}' lead with several symbolic dims "
                   f"({', '.join(sorted(leading))}; inputs: {shown}); bind them in Python: "
                   f"asim.load_onnx(path, input_shapes={{'{sorted(leading)[0]}': 8, ...}})")


def _sizes(args: argparse.Namespace) -> dict[str, Any]:
    """The builder sizes a command's flags give (None: not given)."""
    return {"seq_len": args.seq_len, "preset": args.preset, "phase": args.phase,
            "context_len": args.context}


def _has_batch(models: Any, name: str) -> bool:
    fn = getattr(models, name, None)
    return fn is not None and "batch" in inspect.signature(fn).parameters


def get_chip(name: str) -> Any:
    import ascendsim as asim

    if name.lower().endswith(".toml"):
        if not os.path.exists(name):
            raise BadInput(f"chip file not found: '{name}'")
        return asim.load_chip(name)
    return asim.get_chip(name)


def _fusion(args: argparse.Namespace) -> Any:
    """The `fusion=` value of `asim.simulate` for the command's flags."""
    if getattr(args, "no_fusion", False):
        if args.fusion_switch or args.graph_kernel:
            raise BadInput("--no-fusion excludes --fusion-switch and --graph-kernel")
        return False
    kw: dict[str, Any] = {"graph_kernel": True} if args.graph_kernel else {}
    if args.fusion_switch:
        if not os.path.exists(args.fusion_switch):
            raise BadInput(f"fusion switch file not found: '{args.fusion_switch}'")
        kw["fusion_switch"] = args.fusion_switch
    return kw or True


def _check_out(path: str | None, flag: str) -> None:
    """Fail before a long simulation if an output file cannot be written."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise BadInput(f"{flag}: folder '{folder}' does not exist")


def _simulate(graph: Any, chip: Any, fusion: Any, detail: str, progress: Progress,
              mode: str, kernel_build: str | None = None, icache: str = "cold") -> Any:
    import ascendsim as asim

    return asim.simulate(graph, chip=chip, fusion=fusion, detail=detail, mode=mode,
                         progress=progress.sim_callback(), kernel_build=kernel_build,
                         icache=icache)


def parse_window(text: str | None) -> tuple[float, float] | None:
    """--window START:END in microseconds (either side may be empty: the run's start/end)."""
    if text is None:
        return None
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        start = float(parts[0]) if parts[0].strip() else 0.0
        end = float(parts[1]) if parts[1].strip() else float("inf")
    except ValueError:
        raise BadInput(f"--window {text!r}: expected START:END in microseconds, e.g. "
                       f"100:250") from None
    if not (0 <= start < end) or start != start:
        raise BadInput(f"--window {text!r}: needs 0 <= START < END (microseconds)")
    return start, end


def parse_cores(text: str | None) -> list[int] | None:
    """--cores 0,1,4-7: AI Core indices (on split chips the AIVs follow the AICs)."""
    if text is None:
        return None
    out: list[int] = []
    try:
        for part in text.split(","):
            a, _, b = part.strip().partition("-")
            lo, hi = int(a), int(b) if b else int(a)
            if lo < 0 or hi < lo:
                raise ValueError
            out += range(lo, hi + 1)
    except ValueError:
        raise BadInput(f"--cores {text!r}: expected core indices like 0,1,4-7") from None
    return sorted(set(out))


def _check_view(res: Any, window: tuple[float, float] | None,
                cores: list[int] | None) -> tuple[tuple[float, float] | None, list[int] | None]:
    """--window inside the run, --cores on the chip (BadInput naming the run's figures)."""
    if cores is not None:
        n = res.chip.ai_cores + getattr(res.chip, "aiv_cores", 0)
        bad = [c for c in cores if c >= n]
        if bad:
            aiv = "; the AIVs follow the AICs" if getattr(res.chip, "aiv_cores", 0) else ""
            raise BadInput(f"--cores: core {bad[0]} does not exist on {res.chip.name} (cores "
                           f"0..{n - 1}{aiv})")
    if window is not None:
        if window[0] >= res.time_us:
            raise BadInput(f"--window {window[0]:g}:{window[1]:g} starts after the run ends "
                           f"({res.time_us:,.2f} us)")
        window = (window[0], min(window[1], res.time_us))
    return window, cores


# -- commands -------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from .report.summary import render_totals, statistic_table, summary_table

    for path, flag in ((args.timeline, "--timeline"), (args.trace, "--trace"),
                       (args.summary, "--summary")):
        _check_out(path, flag)
    chip = with_precision_mode(get_chip(args.chip), args.precision_mode)
    fusion = _fusion(args)
    window, cores = parse_window(args.window), parse_cores(args.cores)
    if (window or cores) and not (args.timeline or args.trace):
        raise BadInput("--window and --cores select what --timeline and --trace draw; give "
                       "one of them")
    if args.timeline_color and not args.timeline:
        raise BadInput("--timeline-color colours the --timeline figure; give --timeline PNG")
    progress = Progress(["load", "simulate", "report"], enabled=None if args.progress else False)
    try:
        t0 = time.perf_counter()
        with progress.stage("loading model"):
            graph = load_model(args.model, args.batch, **_sizes(args))
        with progress.stage("optimising + simulating" if fusion is not False else "simulating"):
            res = _simulate(graph, chip, fusion, args.detail, progress, args.mode,
                            args.kernel_build, args.icache)
        window, cores = _check_view(res, window, cores)
        with progress.stage("writing reports"):
            if args.timeline:
                res.plot_timeline(args.timeline, window=window, cores=cores,
                                  color_by=args.timeline_color)
            if args.trace:
                res.write_chrome_trace(args.trace, cores=cores, window=window)
            if args.summary:
                res.write_summary_csv(args.summary)
        wall = time.perf_counter() - t0
    finally:
        progress.close()
    trace = res.trace
    print(f"{res.subject} ({res.fusion}, {args.mode} mode, detail={args.detail}): "
          f"{res.time_us:,.2f} us, {res.cycles:,} cycles, {len(trace.tasks)} tasks "
          f"[simulated in {wall:.2f} s]")
    print(res.headline())
    print(f"confidence: {res.confidence()}")
    print()
    print(summary_table(trace, top=args.top))
    print()
    stat = statistic_table(trace)
    if len(stat.rows) > args.top:
        stat.rows = stat.rows[: args.top]
        stat.title = f"op statistic (top {args.top} op types)"
    print(stat)
    print()
    print(render_totals(trace))
    for path, what in ((args.timeline, "timeline"), (args.trace, "Perfetto trace"),
                       (args.summary, "op summary CSV")):
        if path:
            print(f"wrote {what}: {path}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    import ascendsim as asim

    _check_out(args.plot, "--plot")
    chip = with_precision_mode(get_chip(args.chip), args.precision_mode)
    progress = Progress(["load", "compare", "plot"], enabled=None if args.progress else False)
    try:
        with progress.stage("loading model"):
            graph = load_model(args.model, args.batch, **_sizes(args))
        with progress.stage("simulating unfused + fused"):
            cmp = asim.compare(graph, chip=chip, fusion=_fusion(args), detail=args.detail,
                               mode=args.mode, values=args.values,
                               progress=None if args.progress else False,
                               kernel_build=args.kernel_build, icache=args.icache)
        with progress.stage("plotting"):
            if args.plot:
                cmp.plot(args.plot)
    finally:
        progress.close()
    print(cmp.table())
    if args.plot:
        print(f"wrote comparison plot: {args.plot}")
    return EXIT_OK


def cmd_attribute(args: argparse.Namespace) -> int:
    from .attribution import attribute

    _check_out(args.plot, "--plot")
    graph = load_model(args.model, args.batch)
    fusion = _fusion(args)
    att = attribute(graph, with_precision_mode(get_chip(args.chip), args.precision_mode),
                    fusion=fusion, passes=args.passes or None,
                    instances=not args.no_instances, detail=args.detail, mode=args.mode,
                    kernel_build=args.kernel_build, icache=args.icache)
    print(att.table())
    if not args.no_instances:
        print()
        print(att.instance_table(limit=args.top))
    if args.plot:
        att.plot_waterfall(args.plot)
        print(f"waterfall written to {args.plot}")
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    import ascendsim as asim

    for name in model_names():
        fn = getattr(asim.models, name)
        doc = (fn.__doc__ or "").strip().splitlines()
        sizes = " ".join(f"{p.name}={p.default}" for p in inspect.signature(fn).parameters.values()
                         if isinstance(p.default, (int, str)) and not isinstance(p.default, bool)
                         and p.name in _SIZE_PARAMS)
        text = doc[0] if doc else ""
        if name == "decoder":   # one line per model: its first word is the name
            text = (f"an LLM step: --preset {{{','.join(asim.models.decoder_presets())}}} "
                    f"--phase prefill|decode --batch N --seq-len N --context N")
        print(f"{name:<28} {sizes:<34} {text}")
    return EXIT_OK


#: builder parameters `ascendsim models` shows as the default sizes
_SIZE_PARAMS = ("batch", "seq_len", "image", "cin", "cout", "h", "w", "m", "k", "n", "layers",
                "hidden", "heads", "context_len", "dtype")


def cmd_chips(args: argparse.Namespace) -> int:
    import ascendsim as asim

    for name in asim.chips():
        c = asim.get_chip(name)
        print(f"{name:<16} {c.ai_cores} AI Cores"
              + (f" + {c.aiv_cores} AIV" if c.aiv_cores else "")
              + f" @ {c.clock_hz / 1e9:.2f} GHz, cube {c.peak_flops('float16') / 1e12:.0f} "
              f"TFLOPS fp16, HBM {c.hbm_bandwidth_bytes_per_s / 1e9:.0f} GB/s, "
              f"UB {c.ub_bytes // 1024} KiB - {c.description}")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from .validation.calibrate import leave_one_source_out
    from .validation.validate import validate

    for path, flag in ((args.plot, "--plot"), (args.csv, "--csv")):
        _check_out(path, flag)
    chip = get_chip(args.chip) if args.chip else None
    as_chip = get_chip(args.as_chip) if args.as_chip else None
    progress = Progress(["validate"], enabled=None if args.progress else False)
    try:
        with progress.stage("simulating corpus rows"):
            report = validate(chip=chip, families=args.family, quick=args.quick,
                              as_chip=as_chip, ids=args.id)
            if args.loso:
                report.loso = leave_one_source_out()
    finally:
        progress.close()
    print(report.table(rows=not args.summary_only))
    write_report_files(report, args.csv, "per-row CSV", args.plot, "ratio plot")
    return EXIT_OK


def write_report_files(report: Any, csv: str | None, csv_what: str, plot: str | None,
                       plot_what: str) -> None:
    """A report's `to_csv` / `plot` files where the command line asked for them."""
    if csv:
        report.to_csv(csv)
        print(f"wrote {csv_what}: {csv}")
    if plot:
        report.plot(plot)
        print(f"wrote {plot_what}: {plot}")


def parse_slo(text: str | None) -> dict[str, float] | None:
    """`--slo ttft_ms=2000,tpot_ms=50` as a dict (the metrics are checked by serve)."""
    if not text:
        return None
    out: dict[str, float] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise BadInput(f"--slo {part.strip()!r}: write METRIC=MS, e.g. ttft_ms=2000") from None
        if not eq:
            raise BadInput(f"--slo {part.strip()!r}: write METRIC=MS, e.g. ttft_ms=2000")
    return out


def parse_disaggregated(text: str | None) -> tuple[int, int] | None:
    """`--disaggregated 1:3` as (prefill instances, decode instances)."""
    if not text:
        return None
    p, colon, d = text.partition(":")
    if not (colon and p.strip().isdigit() and d.strip().isdigit()) or not int(p) or not int(d):
        raise BadInput(f"--disaggregated {text!r}: write PREFILL:DECODE instances, e.g. 1:3")
    return int(p), int(d)


def cmd_serve(args: argparse.Namespace) -> int:
    import ascendsim as asim

    from .serving import serve

    for path, flag in ((args.plot, "--plot"), (args.csv, "--csv")):
        _check_out(path, flag)
    parallel = asim.Parallel(tp=args.tp) if args.tp > 1 else None
    requests: Any = args.requests or dict(
        n=args.num_requests, rate=args.rate, seed=args.seed, arrival=args.arrival, cv=args.cv,
        prompt_mean=args.prompt_mean, output_mean=args.output_mean)
    sched = dict(policy=args.policy, chunked_prefill=not args.no_chunked_prefill,
                 prefix_caching=not args.no_prefix_caching, launch=args.launch)
    for key in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
        if getattr(args, key) is not None:
            sched[key] = getattr(args, key)
    report = serve(args.model, get_chip(args.chip), parallel, requests=requests,
                   scheduler=sched, slo=parse_slo(args.slo), quant=args.quant,
                   disaggregated=parse_disaggregated(args.disaggregated),
                   instances=args.instances)
    print(report.table())
    write_report_files(report, args.csv, "per-request CSV", args.plot, "serving plots")
    return EXIT_OK


def cmd_calibrate(args: argparse.Namespace) -> int:
    from .validation.calibrate import calibrate
    from .validation.msprof import load_msprof

    _check_out(args.out, "--out")
    params = [p.strip() for p in args.params.split(",") if p.strip()]
    chip = get_chip(args.chip)
    profile = load_msprof(args.profile, chip, data=args.data)
    skipped = profile.unmapped
    if skipped:
        n = sum(skipped.values())
        print(f"{n} of {len(profile.rows)} row(s) not used: op types the CANN op table "
              f"cannot map: " + ", ".join(f"{t} ({k})" for t, k in skipped.items()))
    failed = [r for r in profile.rows if r.status == "error" and r.op_type not in skipped]
    if failed:
        print(f"{len(failed)} row(s) not used: they did not simulate (first: "
              f"{failed[0].reason})")
    other = "cold" if args.data == "warm" else "warm"
    print(f"single ops' inputs: {args.data} L2 (--data {other} for the other assumption)")
    result = calibrate(profile, chip, params, holdout=args.holdout, seed=args.seed)
    print(result.summary())
    print()
    print(result.row_table())
    if args.out:
        result.write_toml(args.out, force=args.force)    # refused (exit 2) when worse
        print(f"wrote chip file: {args.out}")
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line plus a hint (still exit code 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ascendsim", description="Simulate neural networks on Huawei Ascend "
                "AI Cores: op summary, timelines, Perfetto traces, fused vs unfused.")
    p.add_argument("--traceback", action="store_true", help="show Python tracebacks on errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("model", metavar="MODEL_OR_ONNX",
                        help="a built-in model (see `ascendsim models`) or an .onnx file")
        sp.add_argument("--chip", default=DEFAULT_CHIP,
                        help=f"built-in chip name or a chip .toml file (default {DEFAULT_CHIP})")
        sp.add_argument("--batch", type=int, default=None,
                        help="batch size of a built-in model, or the dynamic batch dim of an "
                             "ONNX file (its inputs' symbolic leading dim)")
        sp.add_argument("--seq-len", type=int, default=None,
                        help="sequence length (BERT) or prompt tokens (decoder prefill, "
                             f"default {DEFAULT_PROMPT})")
        sp.add_argument("--preset", default=None,
                        help="decoder LLM preset (see `ascendsim models`), e.g. llama2-7b")
        sp.add_argument("--phase", choices=("prefill", "decode"), default=None,
                        help="decoder step: prefill (--seq-len prompt tokens) or decode (one "
                             "token per sequence)")
        sp.add_argument("--context", type=int, default=None,
                        help=f"decoder: cached tokens before the step (decode default "
                             f"{DEFAULT_PROMPT})")
        sp.add_argument("--fusion-switch", metavar="FILE", default=None,
                        help="CANN fusion switch JSON file")
        sp.add_argument("--graph-kernel", action="store_true",
                        help="also run graph-kernel fusion (MindSpore enable_graph_kernel)")
        sp.add_argument("--detail", choices=DETAILS, default=DEFAULT_DETAIL,
                        help="block: coalesced tiles (fast); tile: every tile instruction")
        sp.add_argument("--mode", choices=MODES, default=DEFAULT_MODE,
                        help="sink: graph sunk on the device (default); host: op-by-op "
                             "launches from the host; eager: synchronised single-op calls")
        sp.add_argument("--precision-mode", choices=tuple(PRECISION_MODES), default=None,
                        help="CANN precision mode: the dtype cube ops read float32 operands "
                             "in (default: the chip's, e.g. allow_fp32_to_fp16 on ascend910, "
                             "must_keep_origin_dtype on ascend910b)")
        sp.add_argument("--kernel-build", choices=KERNEL_BUILDS, default=None,
                        help="how the built-in kernels were built: binary (prebuilt "
                             "dynamic-shape kernels) or jit (compiled for the shapes); "
                             "default: jit for --mode sink, else the chip's eager default "
                             "(binary on ascend910b)")
        sp.add_argument("--icache", choices=ICACHE_STARTS, default="cold",
                        help="the cores' instruction caches when the run starts, on chips "
                             "that model them (the A2 / A3): cold (default: a kernel whose "
                             "core last ran another one fetches its code) or warm (every "
                             "kernel's code cached, as in a benchmark loop of one kernel)")
        sp.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar")

    run = sub.add_parser("run", help="simulate a model and print its op summary")
    common(run)
    run.add_argument("--no-fusion", action="store_true", help="simulate the graph as given")
    run.add_argument("--timeline", metavar="PNG", help="write a timeline figure")
    run.add_argument("--trace", metavar="JSON", help="write a Perfetto / chrome://tracing trace")
    run.add_argument("--summary", metavar="CSV", help="write the msprof-style op summary CSV")
    run.add_argument("--window", metavar="START:END",
                     help="only this time span (microseconds) in --timeline and --trace")
    run.add_argument("--cores", metavar="LIST",
                     help="only these AI Cores (e.g. 0,1,4-7) in --timeline and --trace")
    run.add_argument("--timeline-color", choices=("type", "op", "cause"), default=None,
                     help="colour --timeline by op type, op, or cause (compute, read, write, "
                          "stall, launch: the rule of the breakdown table)")
    run.add_argument("--top", type=int, default=15, help="rows of the printed tables")
    run.set_defaults(func=cmd_run)

    cmp = sub.add_parser("compare", help="simulate unfused and fused, side by side")
    common(cmp)
    cmp.add_argument("--plot", metavar="PNG", help="write both timelines on one time axis")
    cmp.add_argument("--values", dest="values", action=argparse.BooleanOptionalAction,
                     default=None,
                     help="compute and compare the output values on the CPU (default: when "
                          "the graph's arithmetic is at most 20 GFLOP); a percentage shows "
                          "on stderr while they are computed")
    cmp.set_defaults(func=cmd_compare)

    att = sub.add_parser("attribute", help="what each fusion pass (and each fusion) buys")
    common(att)
    att.add_argument("--pass", dest="passes", action="append", default=None,
                     help="attribute only this pass (repeatable)")
    att.add_argument("--no-instances", action="store_true",
                     help="passes only, not each fusion instance")
    att.add_argument("--plot", metavar="PNG", help="write the waterfall figure")
    att.add_argument("--top", type=int, default=20, help="instance rows printed")
    att.set_defaults(func=cmd_attribute)

    sub.add_parser("models", help="list the built-in models").set_defaults(func=cmd_models)
    sub.add_parser("chips", help="list the built-in chips").set_defaults(func=cmd_chips)

    val = sub.add_parser("validate", help="simulate the measured corpus; median |error|")
    val.add_argument("--chip", default=None,
                     help="only rows measured on this chip's generation (ascend910b: every "
                          "Atlas A2 row), each on its own chip (default: every row)")
    val.add_argument("--as-chip", default=None, metavar="CHIP",
                     help="what-if: run the rows on this chip (a name or a chip file) "
                          "instead of their own")
    val.add_argument("--family", action="append", default=None,
                     help="only rows of this family (repeatable)")
    val.add_argument("--id", action="append", default=None, metavar="ROW",
                     help="only this row (repeatable)")
    val.add_argument("--quick", action="store_true", help="the fixed quick subset (< 30 s)")
    val.add_argument("--plot", metavar="PNG", help="write each row's ratio, per family")
    val.add_argument("--csv", metavar="FILE", help="write one line per row")
    val.add_argument("--loso", action="store_true", help="leave one source out of each C figure")
    val.add_argument("--summary-only", action="store_true",
                     help="print the family table only, not every row")
    val.add_argument("--no-progress", dest="progress", action="store_false",
                     help="no progress bar")
    val.set_defaults(func=cmd_validate)

    srv = sub.add_parser("serve", help="serve a decoder LLM under a request stream: TTFT, "
                                       "TPOT, throughput, goodput")
    srv.add_argument("model", metavar="MODEL_OR_CONFIG",
                     help="a decoder preset (see `ascendsim models`) or a Hugging Face "
                          "config.json")
    srv.add_argument("--chip", default=DEFAULT_SERVING_CHIP,
                     help=f"default {DEFAULT_SERVING_CHIP}")
    srv.add_argument("--tp", type=int, default=1, help="tensor-parallel chips per instance")
    srv.add_argument("--requests", metavar="CSV", default=None,
                     help="arrival_s,prompt_tokens,output_tokens[,prefix_id,prefix_tokens]")
    srv.add_argument("--rate", type=float, default=1.0, help="synthetic arrivals per second")
    srv.add_argument("--num-requests", type=int, default=200, help="synthetic requests")
    srv.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    srv.add_argument("--cv", type=float, default=1.0, help="gamma arrivals' gap CV")
    srv.add_argument("--prompt-mean", type=float, default=DEFAULT_PROMPT_MEAN,
                     help=f"mean prompt tokens (default {DEFAULT_PROMPT_MEAN})")
    srv.add_argument("--output-mean", type=float, default=DEFAULT_OUTPUT_MEAN,
                     help=f"mean output tokens (default {DEFAULT_OUTPUT_MEAN})")
    srv.add_argument("--seed", type=int, default=0, help="seed of the synthetic workload")
    srv.add_argument("--policy", choices=("vllm", "vllm-v0", "mindie"), default="vllm")
    srv.add_argument("--max-num-seqs", type=int, default=None,
                     help="sequences per step (default: SchedulerConfig's)")
    srv.add_argument("--max-num-batched-tokens", type=int, default=None,
                     help="tokens per step (default: SchedulerConfig's)")
    srv.add_argument("--no-chunked-prefill", action="store_true")
    srv.add_argument("--no-prefix-caching", action="store_true")
    srv.add_argument("--block-size", type=int, default=None,
                     help="KV cache block, tokens (default: SchedulerConfig's)")
    srv.add_argument("--launch", choices=("graph", "eager"), default="graph")
    srv.add_argument("--quant", choices=("w8a8",), default=None)
    srv.add_argument("--instances", type=int, default=1, help="mixed instances (round-robin)")
    srv.add_argument("--disaggregated", metavar="P:D", default=None,
                     help="P prefill and D decode instances, the KV moved between them")
    srv.add_argument("--slo", default=None, help="e.g. ttft_ms=2000,tpot_ms=50 (goodput)")
    srv.add_argument("--csv", metavar="FILE", help="write one line per request")
    srv.add_argument("--plot", metavar="PNG", help="write latency, batch and KV-use plots")
    srv.set_defaults(func=cmd_serve)

    cal = sub.add_parser("calibrate", help="fit chip figures to an msprof op_summary CSV")
    cal.add_argument("profile", metavar="PROFILE.csv", help="msprof op_summary CSV")
    cal.add_argument("--chip", default="ascend910b", help="chip to start from")
    cal.add_argument("--params", required=True,
                     help="comma-separated figure keys, e.g. "
                          "hbm_bandwidth_bytes_per_s,path_bytes_per_cycle.gm_ub")
    cal.add_argument("--holdout", type=float, default=0.3, help="held-out fraction")
    cal.add_argument("--seed", type=int, default=0, help="seed of the split")
    cal.add_argument("--out", metavar="CHIP.toml", help="write the calibrated chip file")
    cal.add_argument("--force", action="store_true",
                     help="write --out even when the held-out error got worse")
    cal.add_argument("--data", choices=("warm", "cold"), default="warm",
                     help="how each single op's inputs meet L2: warm (default: just produced, "
                          "as in a model run) or cold (read from HBM)")
    cal.set_defaults(func=cmd_calibrate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ascendsim` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    if getattr(args, "top", 1) <= 0:
        parser.error(f"--top must be a positive integer, got {args.top}")
    try:
        return int(args.func(args))
    except BrokenPipeError:   # the reader went away (`ascendsim run ... | head`): end quietly
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except AscendSimError as e:
        if args.traceback:
            raise
        print(f"ascendsim: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:  # an output file that cannot be written, an unreadable input
        if args.traceback:
            raise
        where = f" '{e.filename}'" if e.filename else ""
        print(f"ascendsim: error: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("ascendsim: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not bad input: say so, in one line
        if args.traceback:
            raise
        print(f"ascendsim: internal error: {type(e).__name__}: {e} "
              f"(rerun with --traceback and report it)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
