"""Roofline figure: every AI Core task placed by arithmetic intensity against the chip's roofs.

x = flops per byte moved to/from global memory (L2 + HBM/DDR traffic of the task), y = attained
flops/s (task flops / task duration). Roofs: the cube peak (fp16), the vector peak (fp16
elements per cycle on every vector core), and the HBM and L2 bandwidth slopes. A point far
below its roof has room; its colour is the bound `op_summary` gives, its size its time.
Tasks without flops (pure data movement) or without GM traffic cannot be placed and are
counted in the title.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..hw.names import AICORE_TASK_TYPES
from ..sim.trace import Trace
from .summary import gm_bytes, task_bound

BOUND_COLORS = {"cube": "tab:red", "vector": "tab:blue", "memory": "tab:green",
                "scalar": "tab:purple", "launch": "tab:gray", "aicpu": "tab:brown"}


def roofs(trace: Trace) -> dict[str, float]:
    """The roofs of the trace's chip: peak flops/s (cube, vector) and bandwidths (bytes/s)."""
    chip = trace.chip
    vec_elems = chip.vector_bytes_per_cycle / 2  # fp16 elements per cycle per vector core
    return {"cube fp16": chip.peak_flops("float16"),
            "vector fp16": chip.vector_cores * chip.clock_hz * vec_elems,
            "HBM": chip.hbm_bandwidth_bytes_per_s,
            "L2": chip.l2_bandwidth_bytes_per_s}


def roofline_points(trace: Trace) -> list[dict[str, Any]]:
    """(op, op_type, intensity, flops/s, duration_us, bound) for every placeable AI Core task."""
    pts = []
    for t in trace.tasks:
        gm = gm_bytes(t)
        if t.task_type not in AICORE_TASK_TYPES or t.flops <= 0 or gm <= 0 or t.duration <= 0:
            continue
        pts.append({"op": t.op_name, "op_type": t.op_type, "intensity": t.flops / gm,
                    "flops_per_s": t.flops / (trace.us(t.duration) * 1e-6),
                    "duration_us": trace.us(t.duration), "bound": task_bound(t)})
    return pts


#: offsets (points) tried in turn for a label, right of its point first
_OFFSETS = ((4, 4), (4, -10), (4, 14), (4, -20), (-4, 4), (-4, -10), (4, 24), (4, -30))


def _annotate(ax: Any, pts: list[dict[str, Any]], dpi: float) -> None:
    """Label the points without overlaps: points at the same spot share one label ("op +2"),
    and each label takes the first offset whose box is free of the labels placed before
    (a label with no free offset is left out)."""
    groups: list[list[dict[str, Any]]] = []
    for p in pts:
        x, y = np.log10(p["intensity"]), np.log10(p["flops_per_s"])
        for g in groups:
            gx, gy = np.log10(g[0]["intensity"]), np.log10(g[0]["flops_per_s"])
            if abs(gx - x) < 0.03 and abs(gy - y) < 0.03:
                g.append(p)
                break
        else:
            groups.append([p])
    ax.autoscale_view()
    to_px = ax.transData.transform
    px_per_pt = dpi / 72.0
    char_w, line_h = 4.2 * px_per_pt, 7.5 * px_per_pt    # x-small text, a conservative box
    placed: list[tuple[float, float, float, float]] = []
    for g in groups:
        text = g[0]["op"] + (f" +{len(g) - 1}" if len(g) > 1 else "")
        px, py = to_px((g[0]["intensity"], g[0]["flops_per_s"]))
        w, h = char_w * len(text), line_h
        for dx, dy in _OFFSETS:
            x0 = px + dx * px_per_pt - (w if dx < 0 else 0)
            y0 = py + dy * px_per_pt
            box = (x0, y0, x0 + w, y0 + h)
            if all(box[2] <= b[0] or box[0] >= b[2] or box[3] <= b[1] or box[1] >= b[3]
                   for b in placed):
                placed.append(box)
                ax.annotate(text, (g[0]["intensity"], g[0]["flops_per_s"]),
                            fontsize="x-small", xytext=(dx, dy), textcoords="offset points",
                            ha="right" if dx < 0 else "left")
                break


def plot_roofline(trace: Trace, path: str | None = None, label_top: int = 6,
                  width: float = 8.0, dpi: int = 110) -> Figure:
    """The roofline figure (log-log); saved to `path` when given."""
    pts = roofline_points(trace)
    rf = roofs(trace)
    fig = Figure(figsize=(width, width * 0.65), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    xs = [p["intensity"] for p in pts] or [1.0]
    lo = min(min(xs) / 4, 0.05)
    hi = max(max(xs) * 4, 4 * rf["cube fp16"] / rf["HBM"])
    x = np.geomspace(lo, hi, 200)
    for bw_name, style in (("HBM", "-"), ("L2", "--")):
        ax.plot(x, np.minimum(rf["cube fp16"], x * rf[bw_name]), style, color="black",
                linewidth=1.2, label=f"{bw_name} {rf[bw_name] / 1e9:.0f} GB/s + cube "
                f"{rf['cube fp16'] / 1e12:.0f} TFLOPS")
    ax.axhline(rf["vector fp16"], color="tab:blue", linestyle=":", linewidth=1,
               label=f"vector fp16 {rf['vector fp16'] / 1e12:.1f} TFLOPS")
    total = sum(p["duration_us"] for p in pts) or 1.0
    for bound, color in BOUND_COLORS.items():
        sel = [p for p in pts if p["bound"] == bound]
        if sel:
            ax.scatter([p["intensity"] for p in sel], [p["flops_per_s"] for p in sel],
                       s=[20 + 400 * p["duration_us"] / total for p in sel], color=color,
                       alpha=0.7, edgecolors="black", linewidths=0.4, label=f"{bound}-bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _annotate(ax, sorted(pts, key=lambda p: -p["duration_us"])[:label_top], dpi)
    ax.set_xlabel("arithmetic intensity (flops per L2/HBM byte)")
    ax.set_ylabel("attained flops/s")
    skipped = len(trace.tasks) - len(pts)
    ax.set_title(f"{trace.chip.name} roofline: {len(pts)} tasks"
                 + (f" ({skipped} without flops or GM traffic not shown)" if skipped else ""),
                 fontsize="medium")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize="x-small", loc="lower right")
    _drop_overlaps(fig, ax)
    if path:
        fig.savefig(path)
    return fig


def _drop_overlaps(fig: Figure, ax: Any) -> None:
    """Remove the labels that overlap one placed before them, measured on the laid-out
    figure: `_annotate` places labels with estimated text boxes before the constrained
    layout moves the axes, and a real box can come out larger than its estimate."""
    fig.draw_without_rendering()
    kept = []
    for text in list(ax.texts):
        box = text.get_window_extent()
        if any(box.overlaps(k) for k in kept):
            text.remove()
        else:
            kept.append(box)
