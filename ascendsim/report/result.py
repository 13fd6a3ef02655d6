"""`Result`: what `asim.simulate` returns, a record with derived views (summary, CSV, plots)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .trace import Trace

if TYPE_CHECKING:
    from ..hw import Chip
    from ..ir import Graph


@dataclass
class Result:
    """One simulated run of a graph on a chip."""

    graph: Graph
    chip: Chip
    trace: Trace
    outputs: dict[str, np.ndarray] | None = None
    pass_log: Any = None              # PassLog when the graph was optimised, else None
    detail: str = "block"
    events: int = 0                   # SimPy events processed (for speed benchmarks)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        return self.trace.total_cycles

    @property
    def time_us(self) -> float:
        return self.trace.us(self.trace.total_cycles)

    def summary(self):
        """Per-task rows with msprof op_summary columns (see ascendsim.report.summary)."""
        from .summary import op_summary

        return op_summary(self.trace)

    def write_summary_csv(self, path: str) -> None:
        from .summary import write_op_summary_csv

        write_op_summary_csv(self.trace, path)

    def statistic(self):
        """Per-op-type rows (count, total/min/avg/max time, ratio): msprof's op_statistic."""
        from .summary import op_statistic

        return op_statistic(self.trace)

    def write_statistic_csv(self, path: str) -> None:
        from .summary import write_op_statistic_csv

        write_op_statistic_csv(self.trace, path)

    def write_chrome_trace(self, path: str, cores: Iterable[int] | None = None) -> None:
        """Perfetto / chrome://tracing JSON; `cores` keeps only those AI Cores (smaller file)."""
        from .chrome import write_chrome_trace

        write_chrome_trace(self.trace, path, cores=cores)

    def plot_timeline(self, path: str | None = None, **kwargs: Any):
        from .timeline import plot_timeline

        return plot_timeline(self.trace, path, **kwargs)

    def plot_roofline(self, path: str | None = None, **kwargs: Any):
        from .roofline import plot_roofline

        return plot_roofline(self.trace, path, **kwargs)

    def explain(self, op_name: str) -> str:
        from .explain import explain

        return explain(self.trace, op_name)

    def __repr__(self) -> str:
        return (f"Result({self.graph.name!r} on {self.chip.name}: {self.cycles} cycles, "
                f"{self.time_us:.2f} us, {len(self.trace.tasks)} tasks, detail={self.detail})")
