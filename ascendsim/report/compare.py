"""Unfused vs fused: what a fusion (or any graph change) bought, side by side.

`Comparison` holds two `Result`s of the same model and derives the figures users ask first:
speedup, launches saved, DDR/L2 traffic saved, time per op type, and whether the outputs agree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..hw.names import AICORE_TASK_TYPES, TASK_AI_CPU
from .table import Table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..sim.trace import Trace


class Run(Protocol):
    """What a comparison reads of a simulated run (`ascendsim.api.Result` is one); report
    takes it by shape, so it never imports the API layer above it."""

    trace: Trace
    graph: Any
    outputs: dict[str, np.ndarray] | None

    @property
    def cycles(self) -> int: ...

    @property
    def time_us(self) -> float: ...

    @property
    def fusion(self) -> str: ...

    @property
    def subject(self) -> str: ...

#: Output tolerances per dtype kind: fused kernels may round differently (fp16 accumulates in fp32).
#: float16 and bfloat16 both allow about two machine epsilons (2**-10, 2**-7).
_RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-9}
_ATOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-6, "float64": 1e-12}


def traffic_bytes(trace: Trace, level: str, direction: str | None = None) -> int:
    """Bytes a whole trace moved at one memory level (read, write, or both when None)."""
    total = 0
    for t in trace.tasks:
        for (lvl, d), b in t.traffic.items():
            if lvl == level and (direction is None or d == direction):
                total += b
    return total


def time_by_op_type(trace: Trace) -> dict[str, float]:
    """Sum of task durations per op type, in microseconds."""
    out: dict[str, float] = defaultdict(float)
    for t in trace.tasks:
        out[t.op_type] += trace.us(t.duration)
    return dict(out)


def graph_depth(graph: Any) -> int:
    """The longest chain of ops from an input to an output (a fused node counts its own
    longest chain): how many roundings an output's error can accumulate through."""
    level: dict[str, int] = {}
    deepest = 0
    for node in graph.nodes:
        inner = graph_depth(node.subgraph) if node.subgraph is not None else 1
        d = max((level.get(i, 0) for i in node.inputs if i), default=0) + max(inner, 1)
        for o in node.outputs:
            if o:
                level[o] = d
        deepest = max(deepest, d)
    return max(deepest, 1)


def depth_factor(depth: int) -> float:
    """Tolerance growth with depth: rounding errors of independent ops add like a random walk
    (sqrt of the number of roundings)."""
    return float(np.sqrt(max(depth, 1)))


def tolerance(dtype: str, depth: int = 1) -> tuple[float, float]:
    """(rtol, atol relative to the output's scale) for an output of `dtype` through `depth`
    ops: two machine epsilons of the dtype, grown with the depth (`depth_factor`)."""
    f = depth_factor(depth)
    return _RTOL.get(dtype, 1e-5) * f, _ATOL.get(dtype, 1e-6) * f


def outputs_close(a: dict[str, np.ndarray], b: dict[str, np.ndarray],
                  dtypes: dict[str, str] | None = None, depth: int = 1) -> tuple[bool, float]:
    """Whether two output dicts agree within dtype tolerance, and the largest abs difference.
    `dtypes`: the graph's dtype name per output, for values whose array dtype is only their
    storage (bfloat16 is stored as float32, kernels/bf16.py); `depth`: the graph's longest op
    chain (`graph_depth`), which grows the tolerance (`tolerance`)."""
    if set(a) != set(b):
        return False, float("inf")
    ok, worst = True, 0.0
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape != y.shape:
            return False, float("inf")
        if x.size == 0:
            continue
        if x.dtype.kind in "fc":
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            diff = np.abs(xf - yf)
            finite = np.isfinite(xf) & np.isfinite(yf)
            same_nonfinite = np.all((xf == yf) | finite | (np.isnan(xf) & np.isnan(yf)))
            worst = max(worst, float(diff[finite].max()) if finite.any() else 0.0)
            name = (dtypes or {}).get(k, x.dtype.name)
            # absolute tolerance relative to the output's scale: a fused kernel rounds its
            # intermediates differently, and an error of a few ulps of the largest values
            # reaches small ones through normalisations (LayerNorm, Softmax)
            scale = max(1.0, float(np.abs(yf[finite]).max()) if finite.any() else 1.0)
            rtol, atol = tolerance(name, depth)
            ok &= bool(same_nonfinite) and bool(np.allclose(
                xf[finite], yf[finite], rtol=rtol, atol=atol * scale))
        else:
            eq = np.array_equal(x, y)
            ok &= bool(eq)
            if not eq:
                worst = max(worst, float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()))
    return ok, worst


@dataclass
class Comparison:
    """Two simulations of one model: before (`unfused`) and after (`fused`) optimisation."""

    unfused: Run
    fused: Run
    values_note: str = ""     # why values were not computed ("" when they were, or not asked)

    @property
    def labels(self) -> tuple[str, str]:
        """How the two runs' graphs were prepared ("as given", "optimised and fused"), or
        "unfused" / "fused" when both were simulated as given (a Comparison of a graph and
        its already optimised copy)."""
        a, b = self.unfused.fusion, self.fused.fusion
        return (a, b) if a != b else ("unfused", "fused")

    @property
    def speedup(self) -> float:
        """unfused time / fused time (> 1 when fusion helped)."""
        return self.unfused.cycles / max(self.fused.cycles, 1)

    def _dtypes(self) -> dict[str, str]:
        """The graph's dtype name of each output (bfloat16 values are float32 arrays)."""
        values = self.unfused.graph.values
        return {k: values[k].dtype for k in self.unfused.outputs or {} if k in values}

    @property
    def cube_rounding(self) -> str | None:
        """The dtype both runs rounded float32 cube operands to (the chip's precision mode,
        e.g. float16 under allow_fp32_to_fp16), when the graph has such operands; None else.
        The tolerance of float32 outputs is then that dtype's: a fusion that folds a
        BatchNorm into conv weights rounds other numbers than the unfused graph."""
        from ..hw.precision import cube_fp32_dtype
        from ..ir.registry import Category, get_op

        chip = getattr(self.unfused, "chip", None)
        cdt = cube_fp32_dtype(chip) if chip is not None else None
        if cdt in (None, "float32"):
            return None
        g = self.unfused.graph
        for n in g.nodes:
            if get_op(n.op_type, n.name).category == Category.CUBE and n.inputs and \
                    g.values[n.inputs[0]].dtype == "float32":
                return cdt
        return None

    def _tolerance_dtypes(self) -> dict[str, str]:
        """`_dtypes`, float32 outputs taking the cube rounding's dtype (`cube_rounding`)."""
        cdt = self.cube_rounding
        return {k: (cdt if cdt and d == "float32" else d) for k, d in self._dtypes().items()}

    @property
    def depth(self) -> int:
        """The longest op chain of the graph as given (`graph_depth`)."""
        return graph_depth(self.unfused.graph)

    @property
    def outputs_equal(self) -> bool | None:
        """True/False when both runs computed values, None when they ran on shapes only.
        Equal means within the dtype's tolerance grown with the depth (`tolerance`)."""
        if self.unfused.outputs is None or self.fused.outputs is None:
            return None
        return outputs_close(self.unfused.outputs, self.fused.outputs,
                             self._tolerance_dtypes(), self.depth)[0]

    @property
    def max_abs_diff(self) -> float | None:
        if self.unfused.outputs is None or self.fused.outputs is None:
            return None
        return outputs_close(self.unfused.outputs, self.fused.outputs,
                             self._tolerance_dtypes(), self.depth)[1]

    @property
    def verdict(self) -> str:
        """What was compared and the outcome, in one line: the outputs and elements compared,
        the dtype, the depth and the tolerance it allows, the largest difference; or why
        values were not computed."""
        eq = self.outputs_equal
        if eq is None:
            return self.values_note or ("values not computed (shapes only): pass inputs= "
                                        "(arrays) or values=True to compare() to check them")
        outs = self.unfused.outputs or {}
        n = sum(int(np.asarray(v).size) for v in outs.values())
        dts = sorted(set(self._dtypes().values())) or ["?"]
        tol = sorted(set(self._tolerance_dtypes().values())) or ["?"]
        rtol, atol = tolerance(tol[0], self.depth)
        how = "agree" if eq else "DIFFER"
        cdt = self.cube_rounding
        rounding = (f"; float32 cube operands rounded to {cdt} by the precision mode, so "
                    f"the tolerance is {cdt}'s") if cdt else ""
        return (f"outputs {how}: {len(outs)} output(s), {n:,} elements of {'/'.join(dts)} "
                f"compared on seeded inputs; max |diff| {self.max_abs_diff:.3g}, tolerance "
                f"rtol {rtol:.2g} + atol {atol:.2g} x the output's scale (two {tol[0]} "
                f"epsilons x sqrt(depth {self.depth})){rounding}")

    def table(self) -> Table:
        """Rows: launches, DDR/L2 bytes, time, time per op type, outputs equal (when computed)."""
        a, b = self.unfused.trace, self.fused.trace
        rows: list[list[Any]] = []

        def add(metric: str, x: float, y: float) -> None:
            rows.append([metric, x, y, (x / y) if x and y else None])

        add("time (us)", self.unfused.time_us, self.fused.time_us)
        add("cycles", self.unfused.cycles, self.fused.cycles)
        add("launches", len(a.tasks), len(b.tasks))
        add("AI Core tasks", sum(t.task_type in AICORE_TASK_TYPES for t in a.tasks),
            sum(t.task_type in AICORE_TASK_TYPES for t in b.tasks))
        add("AI CPU tasks", sum(t.task_type == TASK_AI_CPU for t in a.tasks),
            sum(t.task_type == TASK_AI_CPU for t in b.tasks))
        moved = {(lvl, d): (traffic_bytes(a, lvl, d), traffic_bytes(b, lvl, d))
                 for lvl in ("DDR", "L2") for d in ("read", "write")}
        big = max((max(v) for v in moved.values()), default=0) >= 1e6
        unit, div = ("MB", 1e6) if big else ("KB", 1e3)
        for (lvl, d), (x, y) in moved.items():
            add(f"{lvl} {d} ({unit})", x / div, y / div)
        ta, tb = time_by_op_type(a), time_by_op_type(b)
        for op_type in sorted(set(ta) | set(tb), key=lambda k: -(ta.get(k, 0) + tb.get(k, 0))):
            add(f"  {op_type} (us)", ta.get(op_type, 0.0), tb.get(op_type, 0.0))
        eq = self.outputs_equal
        if eq is not None:
            rows.append(["outputs equal", eq, eq, f"max |diff| {self.max_abs_diff:.3g}"])
        else:
            rows.append(["outputs equal", "not checked", "not checked", "why: see below"])
        before, after = self.labels
        title = f"{self.unfused.subject}: {after} is {self.speedup:.2f}x faster than {before}"
        return Table(["metric", "unfused", "fused", "unfused/fused"], rows, title=title,
                     footer=self.verdict)

    def plot(self, path: str | None = None, **kwargs: Any) -> Figure:
        """Both timelines on one time axis, with a per-op-type time bar chart; saved if `path`."""
        from .timeline import plot_comparison

        kwargs.setdefault("title", self.unfused.subject)
        return plot_comparison(self.unfused.trace, self.fused.trace, path,
                               labels=self.labels, **kwargs)

    def __str__(self) -> str:
        return str(self.table())

    def __repr__(self) -> str:
        return (f"Comparison({self.unfused.graph.name!r}: unfused {self.unfused.time_us:.2f} us, "
                f"fused {self.fused.time_us:.2f} us, speedup {self.speedup:.2f}x)")
