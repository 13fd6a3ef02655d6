"""Timeline figures (matplotlib): one lane per pipe per core, AI CPU and host lanes.

Figures are built as `matplotlib.figure.Figure` objects, not through pyplot: saving renders
with Agg, no window ever opens, and Jupyter still shows a returned figure inline.

Note on readability at whole-model scale
----------------------------------------
A 32-core chip has 32 x 7 pipe lanes; drawn one by one they are unreadable. When more cores
are busy than `max_cores`, the cores are aggregated: each pipe gets one *occupancy* lane whose
height at time t is the fraction of cores on which that pipe is busy, coloured by the op that
runs there. Selected cores (`cores=[0, 5]`) can still be drawn one lane per pipe below. `op=`
or `window=` zooms to one op's tiles or a time span. Lanes are y ticks of the first axes, so the
lane list is `[t.get_text() for t in fig.axes[0].get_yticklabels()]`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..errors import AscendSimError
from ..hw.names import (
    AICORE_TASK_TYPES,
    ENGINE_AICORE,
    ENGINE_AICPU,
    ENGINE_HOST,
    PIPES,
)
from ..sim.trace import Interval, Trace
from .breakdown import CAUSES, HEADINGS, RULE, breakdown, cause_of
from .summary import core_kind, core_name, fused_label

_LANE_HEIGHT = 0.8
_MAX_LEGEND = 16


@dataclass
class Lane:
    """One horizontal lane of a timeline: a label and the intervals drawn in it."""

    label: str
    intervals: list[Interval] = field(default_factory=list)
    cores: int = 1            # > 1: an occupancy lane over that many cores


#: what the lanes mean, printed under every timeline
LANE_KEY = ("lanes: S scalar, V vector, M cube (matrix), MTE1 L1->L0A/L0B, MTE2 GM->L1/UB, "
            "MTE3 UB->GM, FIX L0C->GM/L1; an aggregated lane's height is the fraction of cores "
            "busy on that pipe; dark base = waiting on shared L2/HBM bandwidth; grey = ops not "
            "in the legend")
#: each pipe's entry in the key (only the pipes a figure draws are explained)
PIPE_KEY = {"S": "S scalar", "V": "V vector", "M": "M cube (matrix)",
            "MTE1": "MTE1 L1->L0A/L0B", "MTE2": "MTE2 GM->L1/UB", "MTE3": "MTE3 UB->GM",
            "FIX": "FIX L0C->GM/L1"}
#: lane label of an AIC's vector pipes: a mix kernel's vector half, which the lowering folds
#: into the AIC's chain in place of its paired AIV cores (an AIC has no vector unit)
MIX_VECTOR = "AIV-via-AIC"


def lane_key(lanes: Sequence[Lane]) -> str:
    """The footer text for `lanes`: only the pipes drawn (no FIX on a 910), and what an
    AIV-via-AIC lane is when there is one."""
    drawn = set()
    for lane in lanes:
        words = lane.label.replace("(", " ").split()
        drawn.update(w for w in words if w in PIPE_KEY)
    pipes = ", ".join(PIPE_KEY[p] for p in PIPE_KEY if p in drawn)
    mix = any(MIX_VECTOR in lane.label for lane in lanes)
    return ((f"lanes: {pipes}; " if pipes else "lanes: ")
            + (f"{MIX_VECTOR}: a mix kernel's vector half (its paired AIV cores' work, modelled "
               f"on the AIC); " if mix else "")
            + "an aggregated lane's height is the fraction of cores busy on that pipe; dark "
              "base = waiting on shared L2/HBM bandwidth; grey = ops not in the legend")
#: distinct colours (tab10 then the paired tab20 shades); ops beyond them are drawn grey
_PALETTE = (*matplotlib.colormaps["tab10"].colors,
            *matplotlib.colormaps["tab20"].colors[1::2])
OTHER = "lightgrey"


@dataclass
class OpColors:
    """Colours of a figure's intervals: keyed by op type (default: the legend fits and an op
    type has one colour in every panel) or by op instance (zoomed views). The keys that take
    longest get the distinct colours, in that order; the rest are grey and left out of the
    legend."""

    by: str                                    # "type" or "op"
    keys: dict[int, str]                       # (trace index, task id) key via key_of()
    colors: dict[str, Any]
    totals: dict[str, int]

    def key_of(self, iv_or_task: Any, trace_index: int = 0) -> str:
        tid = iv_or_task.task_id
        return self.keys.get((trace_index, tid), getattr(iv_or_task, "op", ""))

    def color(self, key: str) -> Any:
        return self.colors.get(key, OTHER)


#: what `color_by` takes
COLOR_BY = ("type", "op", "cause")
#: one colour per cause of `report.breakdown` (compute, read, write, stall, launch, idle)
CAUSE_COLORS = {"compute": "tab:green", "read": "tab:blue", "write": "tab:orange",
                "stall": "tab:red", "launch": "tab:purple", "idle": "0.8"}


def cause_colors(trace: Trace) -> OpColors:
    """Colours by cause (`color_by="cause"`): the intervals are cut into their causes by
    `report.breakdown.cause_of` (the breakdown's rule, one place), each cause one colour;
    the legend ranks the causes by their total in `Result.breakdown()`."""
    totals = {c: round(sum(r.of(c) for r in breakdown(trace).rows) * 1000) for c in CAUSES}
    return OpColors("cause", {}, dict(CAUSE_COLORS), totals)


def cause_lanes(lanes: Sequence[Lane]) -> list[Lane]:
    """`lanes` with every interval cut into its causes (`cause_of`): each piece's `op` is its
    cause; an instruction that only waits (no cause) is drawn as idle."""
    out = []
    for lane in lanes:
        pieces = []
        for iv in lane.intervals:
            parts = cause_of(iv) or [("idle", iv.start, iv.end)]
            pieces += [iv._replace(op=c, start=a, end=b, stall=0) for c, a, b in parts if b > a]
        out.append(Lane(lane.label, pieces, lane.cores))
    return out


def _majority_cause(ivs: Sequence[Interval], at: np.ndarray) -> list[str]:
    """The cause with most intervals of `ivs` (cause pieces) busy at each time of `at`."""
    counts = []
    for cause in CAUSES:
        mine = [iv for iv in ivs if iv.op == cause]
        st = np.sort(np.fromiter((iv.start for iv in mine), float, len(mine)))
        en = np.sort(np.fromiter((iv.end for iv in mine), float, len(mine)))
        counts.append(np.searchsorted(st, at, "right") - np.searchsorted(en, at, "right"))
    best = np.argmax(np.vstack(counts), axis=0)
    return [CAUSES[i] for i in best.tolist()]


def op_colors(*traces: Trace, by: str = "type") -> OpColors:
    """Colours for one or several traces drawn together (see `OpColors`)."""
    if by not in ("type", "op"):
        raise AscendSimError(f"colour by {by!r}: use 'type' or 'op' (or 'cause' in "
                             f"plot_timeline)")
    keys: dict = {}
    totals: dict[str, int] = {}
    for k, trace in enumerate(traces):
        for t in trace.tasks:
            key = t.op_type if by == "type" else t.op_name
            keys[(k, t.task_id)] = key
            totals[key] = totals.get(key, 0) + t.duration
    ranked = sorted(totals, key=lambda n: (-totals[n], n))
    colors = {n: _PALETTE[i] for i, n in enumerate(ranked[:len(_PALETTE)])}
    return OpColors(by, keys, colors, totals)


#: pipes of each kind of core on split (910B-style) chips; coupled cores use `chip.pipes`
SPLIT_CORE_PIPES = {"AIC": ("S", "M", "MTE1", "MTE2", "FIX"), "AIV": ("S", "V", "MTE2", "MTE3")}


def _aic_vector(kind: str, pipe: str) -> str:
    """The lane prefix of a pipe an AIC does not have (V, MTE3: a mix kernel's vector half
    folded into the AIC's chain), else ""."""
    return f"{MIX_VECTOR} " if kind == "AIC" and pipe not in SPLIT_CORE_PIPES["AIC"] else ""


def _pipe_order(trace: Trace, kind: str, ivs: Sequence[Interval]) -> list[str]:
    default = SPLIT_CORE_PIPES.get(kind, getattr(trace.chip, "pipes", ()))
    present = set(default) | {iv.pipe for iv in ivs}
    return [p for p in PIPES if p in present and p not in ("AICPU", "HOST")]


def _window(trace: Trace, op: str | None,
            window: tuple[float, float] | None) -> tuple[int, int] | None:
    """The zoom window in cycles, from an op name or a (start_us, end_us) pair."""
    if op is not None:
        task = trace.task(op)            # a fused task's member names work too
        margin = max(1, task.duration // 50)
        return task.start - margin, task.end + margin
    if window is not None:
        t0, t1 = window
        if not t1 > t0:
            raise AscendSimError(f"window must be (start_us, end_us) with end > start, "
                                 f"got {window!r}")
        return int(t0 * trace.chip.clock_hz / 1e6), int(np.ceil(t1 * trace.chip.clock_hz / 1e6))
    return None


def timeline_lanes(trace: Trace, cores: Sequence[int] | None = None, op: str | None = None,
                   window: tuple[float, float] | None = None, aggregate: bool | None = None,
                   max_cores: int = 4) -> list[Lane]:
    """The lanes a timeline draws, top to bottom (see the module note for the rules)."""
    win = _window(trace, op, window)
    ivs = trace.intervals
    if op is not None:
        task_id = trace.task(op).task_id
        ivs = [iv for iv in ivs if iv.task_id == task_id]
    if win is not None:
        ivs = [iv for iv in ivs if iv.end > win[0] and iv.start < win[1]]
    core_ivs = [iv for iv in ivs if iv.engine == ENGINE_AICORE]
    used = sorted({iv.core for iv in core_ivs})
    n_cores = trace.chip.ai_cores + getattr(trace.chip, "aiv_cores", 0)
    if cores is not None:
        bad = [c for c in cores if not 0 <= c < n_cores]
        if bad:
            raise AscendSimError(f"core {bad[0]} does not exist on {trace.chip.name} "
                                 f"(cores 0..{n_cores - 1})")
    if aggregate is None:
        aggregate = len(used) > max_cores
    kinds: dict[str, list[Interval]] = {k: [] for k in ("core", "AIC", "AIV")}
    for iv in core_ivs:
        kinds[core_kind(trace, iv.core)[0]].append(iv)
    kinds = {k: v for k, v in kinds.items() if v}
    pipes = {k: _pipe_order(trace, k, v) for k, v in kinds.items()}
    lanes: list[Lane] = []
    if aggregate:
        for kind, k_ivs in kinds.items():
            n = len({iv.core for iv in k_ivs})
            prefix = "" if kind == "core" else f"{kind} "
            by_pipe: dict[str, list[Interval]] = {}
            for iv in k_ivs:
                by_pipe.setdefault(iv.pipe, []).append(iv)
            what = f"{n} core{'s' if n != 1 else ''}"
            lanes += [Lane(f"{_aic_vector(kind, p) or prefix}{p} ({what})", by_pipe.get(p, []),
                           cores=n) for p in pipes[kind]]
    shown = list(cores) if cores is not None else ([] if aggregate else used)
    by_core_pipe: dict[tuple[int, str], list[Interval]] = {}
    wanted = set(shown)
    for iv in core_ivs:
        if iv.core in wanted:
            by_core_pipe.setdefault((iv.core, iv.pipe), []).append(iv)
    for c in shown:
        kind = core_kind(trace, c)[0]
        for p in pipes.get(kind) or _pipe_order(trace, kind, []):
            mix = _aic_vector(kind, p)
            lanes.append(Lane(f"{mix}{core_name(trace, c)} {p}" if not mix else
                              f"{mix}{p} ({core_name(trace, c)})", by_core_pipe.get((c, p), [])))
    for engine, name in ((ENGINE_AICPU, "AI CPU"), (ENGINE_HOST, "HOST")):
        eng_ivs = [iv for iv in ivs if iv.engine == engine]
        eng_cores = sorted({iv.core for iv in eng_ivs})
        if len(eng_cores) > max_cores:
            lanes.append(Lane(f"{name} ({len(eng_cores)} cores)", eng_ivs, cores=len(eng_cores)))
        elif len(eng_cores) > 1:
            lanes += [Lane(f"{name} {c}", [iv for iv in eng_ivs if iv.core == c])
                      for c in eng_cores]
        else:
            lanes.append(Lane(name, eng_ivs))
    return lanes


def _occupancy(ivs: Sequence[Interval], ncores: int) -> tuple[np.ndarray, np.ndarray]:
    """Step function (times, fraction of cores busy from times[i] to times[i+1])."""
    starts = np.fromiter((iv.start for iv in ivs), dtype=np.int64, count=len(ivs))
    ends = np.fromiter((iv.end for iv in ivs), dtype=np.int64, count=len(ivs))
    times = np.concatenate([starts, ends])
    delta = np.concatenate([np.ones_like(starts), -np.ones_like(ends)])
    order = np.argsort(times, kind="stable")
    times, delta = times[order], delta[order]
    uniq, first = np.unique(times, return_index=True)
    level = np.cumsum(delta)
    last = np.r_[first[1:] - 1, len(times) - 1]
    return uniq, np.clip(level[last] / ncores, 0.0, 1.0)


def _draw_lane(ax: Any, y: float, lane: Lane, trace: Trace, colors: OpColors, tix: int,
               scale: float) -> None:
    if not lane.intervals:
        return
    if lane.cores <= 1:
        ivs = lane.intervals
        x0 = np.array([iv.start for iv in ivs], dtype=float) * scale
        x1 = np.array([iv.end for iv in ivs], dtype=float) * scale
        n = len(ivs)
        verts = np.empty((n, 4, 2))
        verts[:, 0, 0] = verts[:, 1, 0] = x0
        verts[:, 2, 0] = verts[:, 3, 0] = x1
        verts[:, (0, 3), 1] = y - _LANE_HEIGHT / 2
        verts[:, (1, 2), 1] = y + _LANE_HEIGHT / 2
        faces = [colors.color(colors.key_of(iv, tix)) for iv in ivs]
        ax.add_collection(PolyCollection(verts, facecolors=faces, edgecolors="none"))
        stalled = [iv for iv in ivs if iv.stall > 0]
        if stalled:  # hatch the part of each interval spent waiting on shared bandwidth
            sv = np.empty((len(stalled), 4, 2))
            s1 = np.array([iv.end for iv in stalled], dtype=float) * scale
            s0 = s1 - np.array([min(iv.stall, iv.duration) for iv in stalled]) * scale
            sv[:, 0, 0] = sv[:, 1, 0] = s0
            sv[:, 2, 0] = sv[:, 3, 0] = s1
            sv[:, (0, 3), 1] = y - _LANE_HEIGHT / 2
            sv[:, (1, 2), 1] = y - _LANE_HEIGHT / 2 + _LANE_HEIGHT * 0.25
            ax.add_collection(PolyCollection(sv, facecolors="black", alpha=0.35,
                                             edgecolors="none"))
        return
    # occupancy lane: rectangles of the step function (binned when finer than the figure),
    # each coloured by the task running at its midpoint (by cause: the most common cause)
    x0, x1, h = _occupancy_rects(lane.intervals, lane.cores)
    if not len(h):
        return
    if colors.by == "cause":
        faces = [colors.color(c) for c in _majority_cause(lane.intervals, (x0 + x1) / 2)]
        _draw_rects(ax, y, x0, x1, h, faces, scale)
        return
    tids = sorted({iv.task_id for iv in lane.intervals})
    spans = {t.task_id: (t.start, t.end, colors.key_of(t, tix)) for t in trace.tasks
             if t.task_id in tids}
    order = sorted(spans.values())
    t_start = np.array([o[0] for o in order], dtype=float)
    t_end = np.array([o[1] for o in order], dtype=float)
    mid = (x0 + x1) / 2
    idx = np.searchsorted(t_start, mid, side="right") - 1
    faces = [colors.color(order[i][2]) if i >= 0 and t_end[i] >= m else OTHER
             for i, m in zip(idx.tolist(), mid.tolist(), strict=True)]
    _draw_rects(ax, y, x0, x1, h, faces, scale)


def _draw_rects(ax: Any, y: float, x0: np.ndarray, x1: np.ndarray, h: np.ndarray,
                faces: list, scale: float) -> None:
    """The occupancy rectangles of a lane at `y` (heights `h` as fractions of the lane)."""
    base = y - _LANE_HEIGHT / 2
    verts = np.empty((len(h), 4, 2))
    verts[:, 0, 0] = verts[:, 1, 0] = x0 * scale
    verts[:, 2, 0] = verts[:, 3, 0] = x1 * scale
    verts[:, (0, 3), 1] = base
    verts[:, 1, 1] = verts[:, 2, 1] = base + h * _LANE_HEIGHT
    ax.add_collection(PolyCollection(verts, facecolors=faces, edgecolors="none"))


def _occupancy_rects(ivs: Sequence[Interval], ncores: int,
                     max_bins: int = 2000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x0, x1, height) of the occupancy step function in cycles, averaged over at most
    `max_bins` equal bins when it has more steps than a figure can show."""
    times, frac = _occupancy(ivs, ncores)
    if len(times) < 2:
        return np.empty(0), np.empty(0), np.empty(0)
    if len(times) > 2 * max_bins:
        area = np.r_[0.0, np.cumsum(frac[:-1] * np.diff(times))]
        edges = np.linspace(times[0], times[-1], max_bins + 1)
        x0, x1 = edges[:-1], edges[1:]
        h = np.diff(np.interp(edges, times, area)) / np.diff(edges)
    else:
        x0, x1, h = times[:-1].astype(float), times[1:].astype(float), frac[:-1]
    keep = h > 0
    return x0[keep], x1[keep], h[keep]


def _time_scale(trace: Trace) -> float:
    """Microseconds per cycle."""
    return 1e6 / trace.chip.clock_hz


def _lane_key(fig: Figure, lanes: Sequence[Lane] = (), rule: str = "") -> None:
    """What the lanes mean, under the axes (a figure-level label the layout makes room for);
    `rule`: the colouring rule when it needs saying (by cause)."""
    text = lane_key(lanes) if lanes else LANE_KEY
    if rule:
        text = text.replace("dark base = waiting on shared L2/HBM bandwidth; ", "")
        text += f"; colour by cause: {rule}"
    fig.supxlabel(textwrap.fill(text, 170), fontsize="x-small", color="0.35", x=0.01,
                  ha="left")


def _legend(ax: Any, colors: OpColors, shown: set[str],
            traces: Sequence[Trace] = ()) -> None:
    """The coloured keys drawn in the figure, longest first, outside the axes (never over the
    data); grey keys are summed as "other". Coloured by op, a fused task's key names the
    model's ops it carries ("Softmax_46 = Softmax_46, MatMul_50, Mul_45 +8")."""
    keys = sorted((k for k in shown if k in colors.colors),
                  key=lambda k: (-colors.totals.get(k, 0), k))[:_MAX_LEGEND]
    members: dict[str, str] = {}
    if colors.by == "op":
        for tr in traces:
            for t in tr.tasks:
                label = fused_label(t.fused_ops, t.op_name)
                if label:
                    members.setdefault(t.op_name, label)
    handles = [Patch(color=colors.colors[k],
                     label=f"{k} = {members[k]}" if k in members else k) for k in keys]
    others = len(shown) - len(keys)
    if others > 0:
        handles.append(Patch(color=OTHER, label=f"{others} other"))
    if not handles:
        return
    if colors.by == "cause":
        handles = [Patch(color=colors.colors[c], label=HEADINGS[c]) for c in CAUSES
                   if c in shown]
    what = {"type": "op type", "op": "op", "cause": "cause"}[colors.by]
    ax.legend(handles=handles, title=what, loc="upper left", bbox_to_anchor=(1.005, 1.0),
              fontsize="small", frameon=False)


def draw_timeline(ax: Any, trace: Trace, lanes: list[Lane], colors: OpColors,
                  xlim: tuple[float, float] | None = None, trace_index: int = 0) -> None:
    """Draw `lanes` on `ax` (lane 0 at the top), time in microseconds; `trace_index` is the
    trace's position among those `colors` was made for."""
    scale = _time_scale(trace)
    n = len(lanes)
    for i, lane in enumerate(lanes):
        _draw_lane(ax, n - 1 - i, lane, trace, colors, trace_index, scale)
    ax.set_yticks(range(n - 1, -1, -1), [lane.label for lane in lanes], fontsize="small")
    ax.set_ylim(-0.6, n - 0.4)
    if xlim is None:
        xlim = (0.0, max(trace.total_cycles, 1) * scale)
    ax.set_xlim(*xlim)
    ax.grid(axis="x", alpha=0.3)
    for y in range(n):
        ax.axhline(y - 0.5, color="0.9", linewidth=0.5, zorder=0)


def plot_timeline(trace: Trace, path: str | None = None, *, cores: Sequence[int] | None = None,
                  op: str | None = None, window: tuple[float, float] | None = None,
                  aggregate: bool | None = None, max_cores: int = 4,
                  title: str | None = None, color_by: str | None = None, width: float = 12.0,
                  dpi: int = 110) -> Figure:
    """A timeline of a trace: one lane per pipe per core (or per pipe across cores), AI CPU, host.

    `op` zooms to one op's tiles; `window=(start_us, end_us)` to a time span; `cores` picks the
    cores drawn lane by lane (in addition to the aggregated lanes when cores are aggregated);
    `aggregate` forces (True) or forbids (False) the per-pipe occupancy lanes. `color_by`:
    "type" (op type; the default), "op" (op instance; the default when the view holds at most
    as many ops as the legend shows) or "cause" (each interval cut into compute, read, write,
    stall on L2/HBM, launch by the rule of `Result.breakdown()`; an aggregated lane takes the
    most common cause of its cores). `title`: the figure's title (`Result.plot_timeline`
    names model, batch, chip and fusion). Saved to `path` (PNG, SVG, PDF by extension) when
    given; the Figure is returned either way.
    """
    lanes = timeline_lanes(trace, cores=cores, op=op, window=window, aggregate=aggregate,
                           max_cores=max_cores)
    shown_ops = {iv.op for lane in lanes for iv in lane.intervals}
    if color_by is None:
        color_by = "op" if (op or window) and len(shown_ops) <= _MAX_LEGEND else "type"
    if color_by not in COLOR_BY:
        raise AscendSimError(f"color_by={color_by!r}: one of {', '.join(COLOR_BY)}")
    if color_by == "cause":
        colors, lanes = cause_colors(trace), cause_lanes(lanes)
    else:
        colors = op_colors(trace, by=color_by)
    win = _window(trace, op, window)
    scale = _time_scale(trace)
    n_ops = len({iv.op for lane in lanes for iv in lane.intervals})
    height = max(1.2 + 0.26 * max(len(lanes), 3), 0.9 + 0.2 * min(n_ops, _MAX_LEGEND))
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    xlim = None if win is None else (win[0] * scale, win[1] * scale)
    draw_timeline(ax, trace, lanes, colors, xlim)
    ax.set_xlabel("time (us)")
    _lane_key(fig, lanes, RULE if color_by == "cause" else "")
    shown = {colors.key_of(iv) for lane in lanes for iv in lane.intervals}
    _legend(ax, colors, shown, (trace,))
    name = getattr(trace.chip, "name", "chip")
    what = f" - op {op}" if op else ""
    ax.set_title(f"{title or name}: {trace.us(trace.total_cycles):.2f} us, "
                 f"{len(trace.tasks)} tasks{what}", fontsize="medium")
    if path:
        fig.savefig(path)
    return fig


def _task_lane(trace: Trace) -> Lane:
    """A lane of whole tasks (first to last instruction), as pseudo-intervals."""
    ivs = [Interval(engine="task", core=0, pipe="HOST", task_id=t.task_id, op=t.op_name,
                    start=t.start, end=t.end) for t in trace.tasks if t.end > t.start]
    return Lane("tasks", ivs)


def plot_comparison(a: Trace, b: Trace, path: str | None = None,
                    labels: tuple[str, str] = ("unfused", "fused"), width: float = 12.0,
                    dpi: int = 110, top_types: int = 12, title: str | None = None) -> Figure:
    """Two traces on one time axis (task lane + per-pipe occupancy), and time per op type;
    an op type has the same colour in both panels."""
    colors = op_colors(a, b)
    lanes_a = [_task_lane(a)] + timeline_lanes(a, aggregate=True)
    lanes_b = [_task_lane(b)] + timeline_lanes(b, aggregate=True)
    heights = [len(lanes_a), len(lanes_b), max(3, min(top_types, 12)) * 0.7]
    fig = Figure(figsize=(width, 2.0 + 0.26 * sum(heights)), dpi=dpi, layout="constrained")
    gs = fig.add_gridspec(3, 1, height_ratios=heights)
    ax_a = fig.add_subplot(gs[0])
    ax_b = fig.add_subplot(gs[1], sharex=ax_a)
    end = max(a.us(a.total_cycles), b.us(b.total_cycles), 1e-9)
    for k, (ax, tr, lanes, lab) in enumerate(((ax_a, a, lanes_a, labels[0]),
                                               (ax_b, b, lanes_b, labels[1]))):
        draw_timeline(ax, tr, lanes, colors, (0.0, end), trace_index=k)
        ax.set_title(f"{lab}: {tr.us(tr.total_cycles):.2f} us, {len(tr.tasks)} tasks",
                     fontsize="medium", loc="left")
    ax_b.set_xlabel("time (us)")
    ax_c = fig.add_subplot(gs[2])
    ta: dict[str, float] = {}
    tb: dict[str, float] = {}
    for tr, acc in ((a, ta), (b, tb)):
        for t in tr.tasks:
            acc[t.op_type] = acc.get(t.op_type, 0.0) + tr.us(t.duration)
    types = sorted(set(ta) | set(tb), key=lambda k: -(ta.get(k, 0) + tb.get(k, 0)))[:top_types]
    y = np.arange(len(types))
    ax_c.barh(y - 0.2, [ta.get(k, 0.0) for k in types], height=0.4, label=labels[0],
              color="tab:gray")
    ax_c.barh(y + 0.2, [tb.get(k, 0.0) for k in types], height=0.4, label=labels[1],
              color="tab:blue")
    ax_c.set_yticks(y, types, fontsize="small")
    ax_c.invert_yaxis()
    ax_c.set_xlabel("time per op type (us, summed over tasks)")
    ax_c.legend(fontsize="small", frameon=False, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    shown = {colors.key_of(iv, k) for k, lanes in enumerate((lanes_a, lanes_b))
             for lane in lanes for iv in lane.intervals}
    _legend(ax_a, colors, shown, (a, b))
    _lane_key(fig, [*lanes_a, *lanes_b])
    speed = a.total_cycles / max(b.total_cycles, 1)
    fig.suptitle(f"{title or getattr(a.chip, 'name', 'chip')}: {labels[1]} is {speed:.2f}x "
                 f"faster", fontsize="medium")
    if path:
        fig.savefig(path)
    return fig


def aicore_tasks(trace: Trace) -> list[str]:
    """Names of the AI Core tasks, slowest first (handy for choosing `op=`)."""
    ts = [t for t in trace.tasks if t.task_type in AICORE_TASK_TYPES]
    return [t.op_name for t in sorted(ts, key=lambda t: -t.duration)]
