"""ascendsim.report: the trace a simulation leaves, and every view derived from it.

The records it reads (`Trace`, `Interval`, `TaskRecord`) belong to the model
(`ascendsim.sim.trace`); `Result` is the API layer's (`ascendsim.api`). This package only
derives views from them:
- `op_summary` / `op_statistic` and their CSV writers: msprof's op_summary / op_statistic columns.
- `plot_timeline`, `plot_comparison`, `plot_roofline`: matplotlib figures (no window opens).
- `write_chrome_trace` / `chrome_trace_dict`: JSON for Perfetto and chrome://tracing.
- `explain`: why an op took its time. `Comparison`: unfused vs fused side by side.

Matplotlib is imported only when a figure is asked for.
"""

from __future__ import annotations

import importlib
from typing import Any

from .chrome import chrome_trace_dict, write_chrome_trace
from .compare import Comparison
from .explain import explain
from .summary import (
    COLUMNS,
    STAT_COLUMNS,
    OpStatisticRow,
    OpSummaryRow,
    op_statistic,
    op_summary,
    statistic_table,
    summary_table,
    to_pandas,
    totals,
    write_op_statistic_csv,
    write_op_summary_csv,
)
from .table import Table

_LAZY = {"plot_timeline": ".timeline", "plot_comparison": ".timeline",
         "plot_roofline": ".roofline"}

__all__ = [
    "COLUMNS", "STAT_COLUMNS", "Comparison", "OpStatisticRow", "OpSummaryRow", "Table",
    "chrome_trace_dict", "explain", "op_statistic", "op_summary", "statistic_table",
    "summary_table", "to_pandas", "totals", "write_chrome_trace", "write_op_statistic_csv",
    "write_op_summary_csv", *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
