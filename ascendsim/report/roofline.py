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
    for p in sorted(pts, key=lambda p: -p["duration_us"])[:label_top]:
        ax.annotate(p["op"], (p["intensity"], p["flops_per_s"]), fontsize="x-small",
                    xytext=(4, 4), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flops per L2/HBM byte)")
    ax.set_ylabel("attained flops/s")
    skipped = len(trace.tasks) - len(pts)
    ax.set_title(f"{trace.chip.name} roofline: {len(pts)} tasks"
                 + (f" ({skipped} without flops or GM traffic not shown)" if skipped else ""),
                 fontsize="medium")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize="x-small", loc="lower right")
    if path:
        fig.savefig(path)
    return fig
