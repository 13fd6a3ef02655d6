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

from .errors import ConfigError, GraphError, SimulationError
from .gcpause import gc_paused
from .hw import Chip, get_chip
from .hw.names import DETAILS, MODES
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
#: compare() checks values when the graph's inputs hold at most this many elements together
#: (seeded random inputs; the executor then runs both graphs).
COMPARE_VALUE_LIMIT = 1 << 20

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

        return confidence(self.trace, fused_members(self.graph.nodes))

    def statistic(self):
        """Per-op-type rows (count, total/min/avg/max time, ratio): msprof's op_statistic."""
        from .report.summary import op_statistic

        return op_statistic(self.trace)

    def write_statistic_csv(self, path: str) -> None:
        from .report.summary import write_op_statistic_csv

        write_op_statistic_csv(self.trace, path)

    def write_chrome_trace(self, path: str, cores: Iterable[int] | None = None) -> None:
        """Perfetto / chrome://tracing JSON; `cores` keeps only those AI Cores (smaller file)."""
        from .report.chrome import write_chrome_trace

        write_chrome_trace(self.trace, path, cores=cores)

    def plot_timeline(self, path: str | None = None, **kwargs: Any):
        """The timeline figure (see `ascendsim.report.timeline.plot_timeline`), titled with
        `label`."""
        from .report.timeline import plot_timeline

        kwargs.setdefault("title", self.label)
        return plot_timeline(self.trace, path, **kwargs)

    def plot_roofline(self, path: str | None = None, **kwargs: Any):
        from .report.roofline import plot_roofline

        return plot_roofline(self.trace, path, **kwargs)

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


# ----------------------------------------------------------------------------- the flow
def cost_model(chip: Chip, detail: str = DEFAULT_DETAIL, mode: str = DEFAULT_MODE,
               streams: int = 1) -> Callable[[Graph], float]:
    """A pass's cost model: the simulated time (us) of a graph as given, lowered and run on
    `chip` with the caller's detail, launch mode and streams."""
    from .lower import lower
    from .sim import Engine

    def time_us(graph: Graph) -> float:
        program = lower(graph, chip, detail=detail, streams=streams)
        trace = Engine(program, mode=mode).run()
        return trace.us(trace.total_cycles)

    return time_us


def optimize(graph: Graph, chip: str | Chip = DEFAULT_CHIP, *, detail: str = DEFAULT_DETAIL,
             mode: str = DEFAULT_MODE, streams: int = 1, **options: Any) -> OptimizeResult:
    """Optimise and fuse `graph` as GE/FE do for `chip`; returns the new graph and the pass log.

    `options` are `ascendsim.passes.optimize`'s (fusion_switch, graph_kernel, dump_dir,
    outputs, gears, ...). The passes that need a cost (the L2 batch split) simulate candidates
    on `chip` with this `detail`, `mode` and `streams`."""
    from .passes import optimize as run_passes

    resolved = _resolve_chip(chip, options)
    options.pop("chip", None)
    with gc_paused():
        return run_passes(graph, chip=resolved,
                          cost_model=cost_model(resolved, detail, mode, streams), **options)


def simulate(graph: Graph, chip: str | Chip = DEFAULT_CHIP, fusion: FusionOption = True,
             detail: str = DEFAULT_DETAIL, inputs: Mapping[str, np.ndarray] | None = None,
             mode: str = DEFAULT_MODE, streams: int = 1, symmetric: bool = True,
             progress: Callable[[int, int], None] | None = None,
             check_capacity: bool = True) -> Result:
    """Simulate `graph` on `chip` and return a `Result` (cycles, time, trace, outputs).

    fusion: see the module docstring (True: the Ascend stack's default passes, as the CLI).
    detail: "block" (coalesced steady state, fast) or "tile" (every tile instruction).
    inputs: arrays to also compute the output values (numba kernels); None = shapes only.
    mode: "sink" (graph sunk on the device), "host" (op-by-op launches from the host, running
    ahead of the device) or "eager" (synchronised single-op calls, as a framework's eager
    mode timed call by call); sink <= host <= eager for any graph.
    streams: how many streams independent branches may use (1 = one in-order stream).
    symmetric: one process set per group of identical cores (False: one per core).
    progress: called as progress(tasks_done, tasks_total) while the engine runs.
    check_capacity: raise CapacityError when the peak live device memory (`Result.memory`)
    exceeds the chip's `hbm_bytes`; False simulates anyway.
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
    options = fusion_options(fusion)
    chip = _resolve_chip(chip, options)
    if options is not None:
        options.pop("chip", None)          # the same chip (checked): passed once, below
    pass_log = None
    if options is not None:
        opt = optimize(graph, chip, detail=detail, mode=mode, streams=streams, **options)
        graph, pass_log = opt.graph, opt.log
    t0 = time.perf_counter()
    try:
        with gc_paused():
            program = lower(graph, chip, detail=detail, streams=streams)
            memory = memory_plan(graph, program)
        if check_capacity:
            memory.check(chip.hbm_bytes, chip.name)
        t1 = time.perf_counter()
        with gc_paused():
            engine = Engine(program, mode=mode, symmetric=symmetric, progress=progress)
            trace = engine.run()
    except OverflowError as exc:     # a time became infinite (a rate of ~0): not a result
        from .sim.engine import user_figures

        raise SimulationError(f"a simulated time of graph '{graph.name}' is not finite "
                              f"({exc}); {user_figures(chip)}") from None
    t2 = time.perf_counter()
    outputs = None
    if inputs is not None:
        from .execute import execute

        outputs = execute(graph, inputs)
    meta: dict[str, Any] = {
        "fusion": _describe_fusion(options),
        "mode": mode, "streams": program.streams, "tasks": len(program.tasks),
        "buffer_peak": dict(engine.peaks),
        "buffer_capacity": dict(engine.caps_cube),
        "peak_l2_bytes_per_cycle": engine.fabric.peak_l2,
        "peak_hbm_bytes_per_cycle": engine.fabric.peak_hbm,
        "wall_lower_s": t1 - t0, "wall_sim_s": t2 - t1,
    }
    return Result(graph=graph, chip=chip, trace=trace, outputs=outputs, pass_log=pass_log,
                  detail=detail, events=engine.events, meta=meta, memory=memory)


def seeded_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray] | None:
    """Seeded random values for every graph input, or None when a shape is symbolic or the
    inputs hold more than `COMPARE_VALUE_LIMIT` elements together (values then cost too much)."""
    rng = np.random.default_rng(seed)
    total, feeds = 0, {}
    for name in graph.inputs:
        v = graph.values[name]
        if not all(isinstance(d, int) for d in v.shape):
            return None
        total += int(np.prod(v.shape, dtype=np.int64))
        if total > COMPARE_VALUE_LIMIT:
            return None
        dt = storage_dtype(v.dtype)
        if dt.kind == "f":
            feeds[name] = as_storage(rng.uniform(-1.0, 1.0, v.shape), v.dtype)
        elif dt.kind == "b":
            feeds[name] = rng.integers(0, 2, v.shape).astype(dt)
        else:   # indices: small non-negative integers are valid for gathers and one-hots
            feeds[name] = rng.integers(0, 2, v.shape).astype(dt)
    return feeds


def compare(graph: Graph, chip: str | Chip = DEFAULT_CHIP, fusion: FusionOption = True,
            inputs: Mapping[str, np.ndarray] | None | str = "auto", **kw: Any) -> Comparison:
    """The graph as given beside `simulate(graph, fusion=fusion)`.

    inputs: arrays for both runs; "auto" (default) draws seeded inputs when the graph's inputs
    are small enough (`COMPARE_VALUE_LIMIT` elements; see `seeded_inputs`), so the table says
    whether fused values equal unfused values; None runs on shapes only (the table then says
    that values were not checked). Other keywords go to both `simulate` calls."""
    from .report.compare import Comparison

    if fusion is False or fusion is None:
        raise ConfigError("compare(fusion=False) would compare the graph with itself; pass "
                          "True, optimize() options or a fusion-switch file")
    chip = _resolve_chip(chip, fusion_options(fusion))
    feeds = seeded_inputs(graph) if isinstance(inputs, str) and inputs == "auto" else inputs
    if isinstance(feeds, str):
        raise ConfigError(f"inputs={inputs!r}: pass 'auto', None or a dict of arrays")
    unfused = simulate(graph, chip, fusion=False, inputs=feeds, **kw)
    fused = simulate(graph, chip, fusion=fusion, inputs=feeds, **kw)
    return Comparison(unfused, fused)


__all__ = ["simulate", "compare", "optimize", "Result", "cost_model", "fusion_options",
           "seeded_inputs", "DEFAULT_CHIP", "DEFAULT_DETAIL", "DEFAULT_MODE",
           "COMPARE_VALUE_LIMIT"]
