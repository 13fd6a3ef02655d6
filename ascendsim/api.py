"""The API layer: `simulate`, `compare`, `optimize` and `Result`, and every user-facing default.

One flow, driven from here: the chip is resolved once (a `Chip` object travels, never a name),
the graph is optimised by the passes (which get a typed context: the chip, and a cost model that
runs lowering + engine with the user's mode, detail and streams), lowered to task streams, and
run on the SimPy chip model. `report` derives views from the `Trace` the engine leaves.

`fusion=` says what happens to the graph before it is simulated:

- ``True`` (the default): the Ascend stack's default passes, exactly as the CLI runs them
  (GE optimisations, FE graph fusion, UB fusion, L2 fusion; graph-kernel fusion off, as
  MindSpore's default);
- ``False``: the graph as given;
- a dict with a top-level ``"Switch"`` key, or a path: a fusion-switch file in CANN's format;
- any other dict: options for `optimize()` (e.g. ``{"graph_kernel": True}``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import CapacityError, ConfigError, GraphError, SimulationError
from .gcpause import gc_paused
from .hw import Chip, get_chip
from .hw.chip import KERNEL_BUILDS
from .hw.names import DETAILS, ICACHE_STARTS, MODES
from .hw.precision import PRECISION_MODES, cube_fp32_dtype
from .hw.precision import precision_mode as precision_mode_of
from .ir import Graph
from .ir.tensor import as_storage, storage_dtype
from .sim.trace import Trace

if TYPE_CHECKING:
    from .lower.memory import MemoryPlan
    from .passes import OptimizeResult
    from .report.compare import Comparison

#: The defaults every public entry point (API, CLI, notebooks) shares.
DEFAULT_CHIP = "ascend910"
DEFAULT_DETAIL = "block"
DEFAULT_MODE = "sink"
#: compare() computes values (seeded random inputs; the executor then runs both graphs on the
#: CPU) when the graph's arithmetic is at most this many flops (~10 s a graph on 2 cores)...
COMPARE_FLOP_LIMIT = 2 * 10**10
#: ... and its inputs hold at most this many elements together (memory)
COMPARE_VALUE_LIMIT = 1 << 20
#: compare() prints value progress on stderr (by default) past this many flops
COMPARE_QUIET_FLOPS = 10**9

FusionOption = bool | Mapping[str, Any] | str | os.PathLike


@dataclass
class Result:
    """One simulated run of a graph on a chip."""

    graph: Graph
    chip: Chip
    trace: Trace
    outputs: dict[str, np.ndarray] | None = None
    pass_log: Any = None              # PassLog when the graph was optimised, else None
    detail: str = DEFAULT_DETAIL
    events: int = 0                   # SimPy events processed (for speed benchmarks)
    meta: dict[str, Any] = field(default_factory=dict)
    memory: MemoryPlan | None = None  # peak live device memory by category (lower.memory)

    @property
    def cycles(self) -> int:
        return self.trace.total_cycles

    @property
    def time_us(self) -> float:
        return self.trace.us(self.trace.total_cycles)

    @property
    def batch(self) -> int | None:
        """The batch size: the leading dimension of the graph's first input, when static."""
        return graph_batch(self.graph)

    @property
    def subject(self) -> str:
        """Model, batch and chip ("ResNet50, batch 8 on ascend910")."""
        batch = f", batch {self.batch}" if self.batch is not None else ""
        return f"{self.graph.name}{batch} on {self.chip.name}"

    @property
    def label(self) -> str:
        """Model, batch, chip and fusion state: what every figure title and first line says."""
        return f"{self.subject} ({self.fusion})"

    @property
    def fusion(self) -> str:
        """How the graph was prepared: "as given", or "optimised and fused" (naming graph
        kernels or a fusion switch when they were asked for)."""
        return self.meta.get("fusion", "as given")

    @property
    def dtype(self) -> str:
        """The model's compute dtype: the float dtype most of the graph's values hold."""
        from collections import Counter

        counts = Counter(v.dtype for v in self.graph.values.values()
                         if "float" in v.dtype or v.dtype == "bfloat16")
        return counts.most_common(1)[0][0] if counts else "float16"

    @property
    def flops(self) -> int:
        """The arithmetic of the run: the sum of its tasks' flops."""
        return sum(t.flops for t in self.trace.tasks)

    @property
    def achieved_tflops(self) -> float:
        """flops / simulated time, in TFLOPS."""
        return self.flops / (self.time_us * 1e-6) / 1e12 if self.time_us > 0 else 0.0

    @property
    def precision_mode(self) -> str:
        """CANN's precision mode the run used (`simulate(precision_mode=)`, else the chip's)."""
        return precision_mode_of(self.chip)

    def _peak_flops(self) -> float:
        """The chip's cube peak in the mode `dtype` runs in (float32: the precision mode's)."""
        cube = (cube_fp32_dtype(self.chip) or "float32") if self.dtype == "float32" \
            else self.dtype
        try:
            return self.chip.peak_flops(cube)
        except Exception:      # a dtype the cube has no rate for
            return self.chip.peak_flops("float16")

    @property
    def mfu(self) -> float:
        """Model flops utilisation: achieved flops/s over the chip's cube peak for `dtype`
        (float32 in the cube mode its precision mode picks: fp16 on the 910 by default)."""
        peak = self._peak_flops()
        return self.achieved_tflops * 1e12 / peak if peak else 0.0

    @property
    def throughput(self) -> tuple[float, str] | None:
        """(items per second, unit): images/s for an image batch (a 4-D first input), tokens/s
        for token ids (batch x sequence), samples/s otherwise; None without a static batch."""
        if not self.graph.inputs or self.time_us <= 0:
            return None
        first = self.graph.values[self.graph.inputs[0]]
        shape = first.shape
        if not shape or not all(isinstance(d, int) for d in shape):
            return None
        per_s = 1e6 / self.time_us
        if len(shape) == 4:
            return shape[0] * per_s, "images/s"
        if len(shape) == 2 and first.dtype.startswith(("int", "uint")):
            return shape[0] * shape[1] * per_s, "tokens/s"
        return shape[0] * per_s, "samples/s"

    def headline(self) -> str:
        """Throughput, achieved TFLOPS, MFU and dtype in one line."""
        parts = []
        tp = self.throughput
        if tp is not None:
            parts.append(f"{tp[0]:,.1f} {tp[1]}")
        peak = self._peak_flops() / 1e12
        parts.append(f"{self.achieved_tflops:,.2f} TFLOPS achieved")
        parts.append(f"MFU {100 * self.mfu:.1f}% of {peak:,.0f} TFLOPS {self.dtype}")
        if self.dtype == "float32":
            parts.append(f"precision mode {self.precision_mode}")
        return ", ".join(parts)

    def summary(self):
        """Per-task rows with msprof op_summary columns (see ascendsim.report.summary)."""
        from .report.summary import op_summary

        return op_summary(self.trace)

    def write_summary_csv(self, path: str) -> None:
        from .report.summary import write_op_summary_csv

        write_op_summary_csv(self.trace, path, confidence=self.confidence())

    def confidence(self):
        """What the validation corpus says about this run: per op type its share of the
        time, its family and that family's validation median |error| and bias on this
        chip's generation (or "unvalidated"); for the run, the share of time in validated
        families and the time-weighted expected |error| (`ascendsim.report.confidence`;
        docs/api.md says what it does not promise). `str()` is the line the CLI prints."""
        from .report.confidence import confidence, fused_members

        return confidence(self.trace, fused_members(self.graph.nodes),
                          eager_run=self.meta.get("mode") == "eager")

    def statistic(self):
        """Per-op-type rows (count, total/min/avg/max time, ratio): msprof's op_statistic."""
        from .report.summary import op_statistic

        return op_statistic(self.trace)

    def breakdown(self):
        """Time by cause (launch E, reads R, compute C, writes W, stall on L2/HBM, idle) per op
        and per op type, by the one rule of `ascendsim.report.breakdown`."""
        from .report.breakdown import breakdown

        return breakdown(self.trace)

    def write_statistic_csv(self, path: str) -> None:
        from .report.summary import write_op_statistic_csv

        write_op_statistic_csv(self.trace, path)

    def write_chrome_trace(self, path: str, cores: Iterable[int] | None = None,
                           window: tuple[float, float] | None = None) -> None:
        """Perfetto / chrome://tracing JSON; `cores` keeps only those AI Cores and
        `window=(start_us, end_us)` only that time span (smaller files)."""
        from .report.chrome import write_chrome_trace

        write_chrome_trace(self.trace, path, cores=cores, window=window)

    def plot_timeline(self, path: str | None = None, **kwargs: Any):
        """The timeline figure (see `ascendsim.report.timeline.plot_timeline`), titled with
        `label`."""
        from .report.timeline import plot_timeline

        kwargs.setdefault("title", self.label)
        return plot_timeline(self.trace, path, **kwargs)

    def plot_roofline(self, path: str | None = None, **kwargs: Any):
        from .report.roofline import plot_roofline

        return plot_roofline(self.trace, path, **kwargs)

    def task(self, op_name: str):
        """The TaskRecord of `op_name`: a task's own name, or any of the model's op names a
        fused task carries (`TaskRecord.fused_ops`: 'Softmax_39' finds its
        IncreFlashAttention, 'stem.conv' its ConvRelu)."""
        return self.trace.task(op_name)

    def explain(self, op_name: str) -> str:
        from .report.explain import explain

        return explain(self.trace, op_name)

    def __repr__(self) -> str:
        return (f"Result({self.label}: {self.cycles} cycles, {self.time_us:.2f} us, "
                f"{len(self.trace.tasks)} tasks, detail={self.detail})")


def graph_batch(graph: Graph) -> int | None:
    """The leading dimension of a graph's first input when it is static (the batch of every
    built-in model), else None."""
    if not graph.inputs:
        return None
    shape = graph.values[graph.inputs[0]].shape
    return shape[0] if shape and isinstance(shape[0], int) else None


# ----------------------------------------------------------------------------- options
def _check_choice(key: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise ConfigError(f"{key}={value!r}: valid values are {', '.join(valid)}")
    return value


def fusion_options(fusion: FusionOption) -> dict[str, Any] | None:
    """`optimize()` keyword options for a `fusion=` value; None means the graph as given."""
    if fusion is True:
        return {}
    if fusion is False or fusion is None:
        return None
    if isinstance(fusion, (str, os.PathLike)):
        return {"fusion_switch": fusion}
    if isinstance(fusion, Mapping):
        if "Switch" in fusion:
            return {"fusion_switch": dict(fusion)}
        from .passes.manager import OPTIMIZE_OPTIONS, check_options

        # a typo ({"graph_kernal": True}) is an error naming the key, not the defaults
        check_options({k: v for k, v in fusion.items()
                       if k not in OPTIMIZE_OPTIONS and k != "chip"})
        return dict(fusion)
    raise ConfigError(f"fusion={fusion!r}: expected True, False, a dict of optimize() options, "
                      f"a fusion-switch dict with a 'Switch' key, or a path to a switch file")


def _describe_fusion(options: dict[str, Any] | None) -> str:
    if options is None:
        return "as given"
    extra = [k for k in ("graph_kernel", "fusion_switch") if options.get(k)]
    return "optimised and fused" + (f" ({', '.join(extra)})" if extra else "")


def _resolve_chip(chip: str | Chip, options: Mapping[str, Any] | None = None) -> Chip:
    """The one Chip of a run; a `chip` in the fusion options must be that chip."""
    resolved = get_chip(chip)
    if options and options.get("chip") is not None:
        other = get_chip(options["chip"])
        if other != resolved:
            raise ConfigError(f"fusion options name chip '{other.name}' but the run simulates "
                              f"'{resolved.name}': pass the chip once, as simulate(chip=...)")
    return resolved


# ----------------------------------------------------------------------------- capacity
def with_precision_mode(chip: Chip, mode: str | None) -> Chip:
    """`chip` running under CANN precision mode `mode` (None: its own default); an unknown
    mode is a ConfigError listing the modes."""
    if mode is None or mode == precision_mode_of(chip):
        return chip
    if mode not in PRECISION_MODES:
        raise ConfigError(f"precision_mode={mode!r}: expected one of "
                          f"{', '.join(PRECISION_MODES)}")
    return chip.replace(precision_mode=mode)


def kernel_build_for(chip: Chip, mode: str, kernel_build: str | None = None) -> str:
    """How the run's built-in kernels are built (`hw.chip.KERNEL_BUILDS`): `kernel_build` when
    given, else, for op-by-op runs (mode "eager" or "host": a framework's eager ops) the
    chip's `eager_kernel_build` (torch_npu's default: 'binary' on the A2, the prebuilt
    dynamic-shape kernels) and 'jit' for a graph sunk on the device (compiled for its
    shapes); an unknown build is a ConfigError listing the builds."""
    if kernel_build is not None:
        if kernel_build not in KERNEL_BUILDS:
            raise ConfigError(f"kernel_build={kernel_build!r}: expected one of "
                              f"{', '.join(KERNEL_BUILDS)}")
        return kernel_build
    if mode in ("eager", "host"):
        return chip.eager_kernel_build or "jit"
    return "jit"


def _nbytes(graph: Graph, name: str) -> int | None:
    """ND bytes of a value with a static shape, else None."""
    v = graph.values.get(name)
    if v is None or not all(isinstance(d, int) for d in v.shape):
        return None
    return v.nbytes


def shape_capacity(graph: Graph) -> tuple[int, dict[str, int], tuple[str, int] | None]:
    """A lower bound of a graph's peak device memory from its shapes alone (no lowering):
    the graph's inputs and outputs, its weights (constants of rank >= 2, identical contents
    once) and its largest activation (a node output, live at least while its producer runs).
    A view (Reshape) or an op writing in place (a KV-cache append) allocates nothing: its
    output is its input's block. Returns (bytes, by category, (largest activation, bytes))."""
    from .ir.registry import Unit, get_op, has_op
    from .lower.memory import const_key

    alias: dict[str, str] = {}
    for node in graph.nodes:
        if not has_op(node.op_type) or not node.outputs:
            continue
        opdef = get_op(node.op_type, node.name)
        pairs = [(node.outputs[o], node.inputs[k]) for o, k in opdef.in_place_pairs()
                 if o < len(node.outputs) and k < len(node.inputs)]
        if not pairs and opdef.unit == Unit.NONE and len(node.outputs) == 1:
            pairs = [(node.outputs[0], next((i for i in node.inputs if i), None))]
        for out, src in pairs:
            if src and _nbytes(graph, src) == _nbytes(graph, out):
                alias[out] = src

    def root(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    io_roots = {root(n) for n in (*graph.inputs, *graph.outputs)}
    io = sum(b for n in io_roots if n not in graph.constants
             and (b := _nbytes(graph, n)) is not None)
    # weights: constants of rank >= 2 (conv and matmul weights, embedding tables), once per
    # content; vectors (biases, norm parameters) are left out, as folding may remove them
    # (BatchNorm folds into the conv weight, which keeps its size); a node reading constants
    # only is left out too (constant folding replaces it: a position table's rows)
    weights, seen, keys = 0, set(), set()
    for node in graph.nodes:
        if all(not n or n in graph.constants for n in node.inputs):
            continue
        for name in node.inputs:
            if name in seen or name not in graph.constants or len(graph.values[name].shape) < 2:
                continue
            seen.add(name)
            key = const_key(name, graph.constants[name])
            if key not in keys:
                keys.add(key)
                weights += _nbytes(graph, name) or 0
    largest: tuple[str, int] | None = None
    for node in graph.nodes:
        for name in node.outputs:
            r = root(name)
            if r in io_roots or r in graph.constants or r != name:
                continue
            b = _nbytes(graph, name)
            if b is not None and (largest is None or b > largest[1]):
                largest = (name, b)
    act = largest[1] if largest else 0
    return io + weights + act, {"weights": weights, "activations": act, "inputs_outputs": io}, \
        largest


def check_shape_capacity(graph: Graph, chip: Chip,
                         options: Mapping[str, Any] | None = None) -> None:
    """CapacityError, before lowering (and before the L2 fusion's costed candidates), when the
    shapes alone need more than the chip's HBM, naming the largest tensors: a huge batch then
    fails in a second, not after minutes. `shape_capacity` of the graph as given is the first
    test; a graph to be fused is then confirmed on its fused form (the graph passes without
    the L2 batch split, fast: a fused intermediate such as attention scores allocates
    nothing)."""
    need, cats, largest = shape_capacity(graph)
    if need <= chip.hbm_bytes:
        return
    if options is not None:
        from .passes import optimize as run_passes

        opts = {k: v for k, v in options.items() if k not in ("dump_dir", "chip")}
        opts["l2_fusion"] = False
        with gc_paused():
            fused = run_passes(graph, chip=chip, cost_model=None, **opts).graph
        need, cats, largest = shape_capacity(fused)
        if need <= chip.hbm_bytes:
            return
        graph = fused

    def _size(nbytes: int) -> str:
        for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                            ("KiB", 2**10)):
            if nbytes >= scale:
                return f"{nbytes / scale:.2f} {unit}"
        return f"{nbytes} B"

    parts = ", ".join(f"{k} {_size(v)}" for k, v in cats.items() if v)
    named = {n: b for n in dict.fromkeys((*graph.inputs, *graph.outputs))
             if n not in graph.constants and (b := _nbytes(graph, n))}
    if largest:
        named[largest[0]] = largest[1]
    producers = graph.producers()

    def label(value: str) -> str:      # a fused node's output names the ops it fuses
        node = producers.get(value)
        if node is None or node.subgraph is None:
            return value
        members = [n.name for n in node.subgraph.nodes]
        more = f" +{len(members) - 3}" if len(members) > 3 else ""
        return f"{value} (fused {', '.join(members[:3])}{more})"

    top = ", ".join(f"{label(n)} {_size(b)}" for n, b in
                    sorted(named.items(), key=lambda t: (-t[1], t[0]))[:3])
    raise CapacityError(
        f"graph '{graph.name}' needs at least {_size(need)} of device memory from its shapes "
        f"alone, which exceeds the {_size(chip.hbm_bytes)} HBM of {chip.name} ({parts}); "
        f"largest tensors: {top}. Use a smaller batch or shapes, or pass check_capacity=False "
        f"to simulate anyway")


# ----------------------------------------------------------------------------- the flow
def cost_model(chip: Chip, detail: str = DEFAULT_DETAIL, mode: str = DEFAULT_MODE,
               streams: int = 1, kernel_build: str | None = None) -> Callable[[Graph], float]:
    """A pass's cost model: the simulated time (us) of a graph as given, lowered and run on
    `chip` with the caller's detail, launch mode, streams and kernel build."""
    from .lower import lower
    from .sim import Engine

    build = kernel_build_for(chip, mode, kernel_build)

    def time_us(graph: Graph) -> float:
        program = lower(graph, chip, detail=detail, streams=streams, kernel_build=build)
        trace = Engine(program, mode=mode).run()
        return trace.us(trace.total_cycles)

    return time_us


def optimize(graph: Graph, chip: str | Chip = DEFAULT_CHIP, *, detail: str = DEFAULT_DETAIL,
             mode: str = DEFAULT_MODE, streams: int = 1, kernel_build: str | None = None,
             **options: Any) -> OptimizeResult:
    """Optimise and fuse `graph` as GE/FE do for `chip`; returns the new graph and the pass log.

    `options` are `ascendsim.passes.optimize`'s (fusion_switch, graph_kernel, dump_dir,
    outputs, gears, ...). The passes that need a cost (the L2 batch split) simulate candidates
    on `chip` with this `detail`, `mode`, `streams` and `kernel_build` (`kernel_build_for`)."""
    from .passes import optimize as run_passes

    resolved = _resolve_chip(chip, options)
    options.pop("chip", None)
    with gc_paused():
        return run_passes(graph, chip=resolved,
                          cost_model=cost_model(resolved, detail, mode, streams, kernel_build),
                          **options)


def simulate(graph: Graph, chip: str | Chip = DEFAULT_CHIP, fusion: FusionOption = True,
             detail: str = DEFAULT_DETAIL, inputs: Mapping[str, np.ndarray] | None = None,
             mode: str = DEFAULT_MODE, streams: int = 1, symmetric: bool = True,
             progress: Callable[[int, int], None] | bool | None = None,
             check_capacity: bool = True, precision_mode: str | None = None,
             kernel_build: str | None = None, icache: str = "cold") -> Result:
    """Simulate `graph` on `chip` and return a `Result` (cycles, time, trace, outputs).

    fusion: see the module docstring (True: the Ascend stack's default passes, as the CLI).
    detail: "block" (coalesced steady state, fast) or "tile" (every tile instruction).
    inputs: arrays to also compute the output values (numba kernels); None = shapes only.
    mode: "sink" (graph sunk on the device), "host" (op-by-op launches from the host, running
    ahead of the device) or "eager" (synchronised single-op calls, as a framework's eager
    mode timed call by call); sink <= host <= eager for any graph.
    streams: how many streams independent branches may use (1 = one in-order stream).
    symmetric: one process set per group of identical cores (False: one per core).
    progress: called as progress(tasks_done, tasks_total) while the engine runs; None or
    False: no progress.
    check_capacity: raise CapacityError when the peak live device memory (`Result.memory`)
    exceeds the chip's `hbm_bytes`; False simulates anyway.
    precision_mode: CANN's precision mode (`hw.precision.PRECISION_MODES`: the dtype a cube op
    reads float32 operands in, for its time and its values); None = the chip's default
    (`Chip.precision_mode`: allow_fp32_to_fp16 on the 910, must_keep_origin_dtype on the 910B,
    force_fp16 on the 310).
    kernel_build: how the built-in kernels are built (`kernel_build_for`): 'binary' (the
    prebuilt dynamic-shape kernels: a TBE NORM-pattern kernel such as Softmax then runs
    single-buffered) or 'jit' (compiled for the shapes); None = 'jit' for a sunk graph, the
    chip's eager default (`Chip.eager_kernel_build`: 'binary' on the 910B) in eager and host
    mode.
    icache: the cores' instruction caches when the run starts, on a chip that gives
    `icache_cold_block_us` (the A2 / A3): 'cold' (they hold no kernel of the graph: each
    core's first block of a kernel fetches its code, and so does every later one whose core
    last ran another kernel) or 'warm' (every kernel's code is cached, as in a benchmark loop
    of one kernel).
    """
    from .lower import lower
    from .lower.memory import memory_plan
    from .sim import Engine

    if not isinstance(graph, Graph):
        raise GraphError(f"simulate() needs a Graph, got {type(graph).__name__}")
    if not graph.outputs:
        raise GraphError(f"graph '{graph.name}' has no outputs: nothing to simulate (mark them "
                         f"with graph.output(...))")
    _check_choice("detail", detail, DETAILS)
    _check_choice("mode", mode, MODES)
    _check_choice("icache", icache, ICACHE_STARTS)
    progress = _progress_callback(progress)
    options = fusion_options(fusion)
    chip = with_precision_mode(_resolve_chip(chip, options), precision_mode)
    build = kernel_build_for(chip, mode, kernel_build)
    if options is not None:
        options.pop("chip", None)          # the same chip (checked): passed once, below
    if check_capacity:                     # before lowering: a huge batch fails at once
        check_shape_capacity(graph, chip, options)
    pass_log = None
    if options is not None:
        opt = optimize(graph, chip, detail=detail, mode=mode, streams=streams,
                       kernel_build=build, **options)
        graph, pass_log = opt.graph, opt.log
    t0 = time.perf_counter()
    try:
        with gc_paused():
            program = lower(graph, chip, detail=detail, streams=streams, kernel_build=build)
            memory = memory_plan(graph, program)
        if check_capacity:
            memory.check(chip.hbm_bytes, chip.name)
        t1 = time.perf_counter()
        with gc_paused():
            engine = Engine(program, mode=mode, symmetric=symmetric, progress=progress,
                            icache=icache)
            trace = engine.run()
        _name_fused_members(trace, graph)
    except OverflowError as exc:     # a time became infinite (a rate of ~0): not a result
        from .sim.engine import user_figures

        raise SimulationError(f"a simulated time of graph '{graph.name}' is not finite "
                              f"({exc}); {user_figures(chip)}") from None
    t2 = time.perf_counter()
    outputs = None
    if inputs is not None:
        from .execute import execute

        outputs = execute(graph, inputs, cube_fp32=cube_fp32_dtype(chip) or "float32")
    meta: dict[str, Any] = {
        "fusion": _describe_fusion(options),
        "mode": mode, "kernel_build": build, "streams": program.streams,
        "tasks": len(program.tasks),
        "buffer_peak": dict(engine.peaks),
        "buffer_capacity": dict(engine.caps_cube),
        "peak_l2_bytes_per_cycle": engine.fabric.peak_l2,
        "peak_hbm_bytes_per_cycle": engine.fabric.peak_hbm,
        "wall_lower_s": t1 - t0, "wall_sim_s": t2 - t1,
    }
    return Result(graph=graph, chip=chip, trace=trace, outputs=outputs, pass_log=pass_log,
                  detail=detail, events=engine.events, meta=meta, memory=memory)


def _name_fused_members(trace: Trace, graph: Graph) -> None:
    """Give every task the model's names of what it fuses (`TaskRecord.fused_ops`): a node a
    graph-fusion pass made (IncreFlashAttention named 'Softmax_39') lists the ops it replaced,
    and a fused node's members are expanded the same way. Names and timings are unchanged."""
    import dataclasses

    if not graph.fused_names:
        return
    for i, t in enumerate(trace.tasks):
        names = t.fused_ops or (t.op_name,)
        expanded = tuple(dict.fromkeys(m for n in names for m in graph.member_names(n)))
        if expanded != names:
            trace.tasks[i] = dataclasses.replace(t, fused_ops=expanded)


def _progress_callback(progress: Any) -> Callable[[int, int], None] | None:
    """`simulate(progress=)`: a callable, None or False (no progress); True is refused (there is
    no default display: pass a callable)."""
    if progress is None or progress is False:
        return None
    if progress is True or not callable(progress):
        raise ConfigError(f"progress={progress!r}: pass a callable progress(tasks_done, "
                          f"tasks_total), or None/False for no progress")
    return progress


def seeded_inputs(graph: Graph, seed: int = 0,
                  limit: int | None = COMPARE_VALUE_LIMIT) -> dict[str, np.ndarray] | None:
    """Seeded random values for every graph input, or None when a shape is symbolic or the
    inputs hold more than `limit` elements together (None: no limit)."""
    rng = np.random.default_rng(seed)
    total, feeds = 0, {}
    for name in graph.inputs:
        v = graph.values[name]
        if not all(isinstance(d, int) for d in v.shape):
            return None
        total += int(np.prod(v.shape, dtype=np.int64))
        if limit is not None and total > limit:
            return None
        dt = storage_dtype(v.dtype)
        if dt.kind == "f":
            feeds[name] = as_storage(rng.uniform(-1.0, 1.0, v.shape), v.dtype)
        elif dt.kind == "b":
            feeds[name] = rng.integers(0, 2, v.shape).astype(dt)
        else:   # indices: small non-negative integers are valid for gathers and one-hots
            feeds[name] = rng.integers(0, 2, v.shape).astype(dt)
    return feeds


def _value_progress(label: str, flops: int | None) -> Callable[[int, int], None]:
    """Progress of a value computation on stderr, with a percentage: one line rewritten in
    place on a terminal, a line per 10 % otherwise (a log, a CI job)."""
    import sys

    tty = sys.stderr.isatty()
    work = f" ({flops / 1e9:,.1f} GFLOP)" if flops else ""
    state = {"last": -1}

    def report(done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        step = pct if tty else pct // 10 * 10
        if step == state["last"]:
            return
        state["last"] = step
        text = f"compare: computing the values of {label}{work}: {pct:3d}%"
        if tty:
            sys.stderr.write("\r" + text + ("\n" if pct >= 100 else ""))
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
    return report


def compare(graph: Graph, chip: str | Chip = DEFAULT_CHIP, fusion: FusionOption = True,
            inputs: Mapping[str, np.ndarray] | None | str = "auto", *,
            values: bool | None = None,
            progress: bool | Callable[[str, int, int], None] | None = None,
            **kw: Any) -> Comparison:
    """The graph as given beside `simulate(graph, fusion=fusion)`.

    Whether output values are computed and compared (on the CPU, by the numba kernels):
    values=None (default) decides by the work: when the graph's arithmetic is at most
    `COMPARE_FLOP_LIMIT` flops (and its inputs at most `COMPARE_VALUE_LIMIT` elements, for
    the memory); values=True always; values=False never. inputs: "auto" draws seeded inputs
    (`seeded_inputs`); a dict gives the arrays (values are then computed unless
    values=False); None runs on shapes only. The verdict (`Comparison.verdict`) says what was
    compared, with a tolerance for the dtype and the depth, or why values were not checked.
    progress: how value computation reports itself: None (default) prints a percentage on
    stderr when the values take over `COMPARE_QUIET_FLOPS` flops, True always, False never,
    or a callable progress(label, work_done, work_total). Other keywords go to both
    `simulate` calls; precision_mode (CANN's, see `simulate`) also sets how the values round
    float32 cube operands."""
    from .execute import execute, graph_flops
    from .report.compare import Comparison

    if fusion is False or fusion is None:
        raise ConfigError("compare(fusion=False) would compare the graph with itself; pass "
                          "True, optimize() options or a fusion-switch file")
    if values not in (None, True, False):
        raise ConfigError(f"values={values!r}: pass None (decide by the work), True or False")
    if isinstance(inputs, str) and inputs != "auto":
        raise ConfigError(f"inputs={inputs!r}: pass 'auto', None or a dict of arrays")
    chip = with_precision_mode(_resolve_chip(chip, fusion_options(fusion)),
                               kw.pop("precision_mode", None))
    flops = graph_flops(graph) if isinstance(graph, Graph) else None
    note = ""
    feeds: Mapping[str, np.ndarray] | None = None
    if values is False:
        note = "values not computed (values=False)"
    elif isinstance(inputs, Mapping):
        feeds = inputs
    elif inputs is None:
        note = "values not computed (inputs=None: shapes only)"
    elif values is None and (flops is None or flops > COMPARE_FLOP_LIMIT):
        work = "work unknown" if flops is None else f"{flops / 1e12:,.2f} TFLOP"
        note = (f"values not computed: {work} of arithmetic, over the "
                f"{COMPARE_FLOP_LIMIT / 1e9:,.0f} GFLOP limit (values=True or --values "
                f"computes them)")
    else:
        feeds = seeded_inputs(graph, limit=None if values else COMPARE_VALUE_LIMIT)
        if feeds is None:
            note = ("values not computed: a symbolic input shape" if values or
                    not all(isinstance(d, int) for n in graph.inputs
                            for d in graph.values[n].shape) else
                    f"values not computed: the inputs hold over {COMPARE_VALUE_LIMIT:,} "
                    f"elements (values=True or --values computes them)")
    unfused = simulate(graph, chip, fusion=False, **kw)
    fused = simulate(graph, chip, fusion=fusion, **kw)
    if feeds is not None:
        loud = progress is True or (progress is None and (flops or 0) > COMPARE_QUIET_FLOPS)
        for res, label in ((unfused, "as given"), (fused, fused.fusion)):
            what = f"'{graph.name}' {label}"
            if callable(progress) and progress is not True:
                def hook(done: int, total: int, _what: str = what) -> None:
                    progress(_what, done, total)  # type: ignore[operator]
            elif loud:
                hook = _value_progress(what, graph_flops(res.graph))
            else:
                hook = None
            res.outputs = execute(res.graph, feeds, progress=hook,
                                  cube_fp32=cube_fp32_dtype(chip) or "float32")
    return Comparison(unfused, fused, values_note=note)


__all__ = ["simulate", "compare", "optimize", "Result", "cost_model", "fusion_options",
           "with_precision_mode", "kernel_build_for",
           "seeded_inputs", "DEFAULT_CHIP", "DEFAULT_DETAIL", "DEFAULT_MODE",
           "COMPARE_VALUE_LIMIT", "COMPARE_FLOP_LIMIT"]
