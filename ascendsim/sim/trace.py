"""The trace: the record a simulation leaves behind, and the contract between `sim` and `report`.

Every figure a report shows is derived from these records, so each number can be traced back
to the intervals (pipe, core, bytes) that produced it. Times are integer cycles of the chip's
AI Core clock; `Trace.us(cycles)` converts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..hw.names import on_ai_core

if TYPE_CHECKING:
    from ..hw import Chip



class Interval(NamedTuple):
    """One busy interval of one pipe on one core: an instruction, or a coalesced run of them.

    An immutable record (a NamedTuple: a big model's trace holds 10^5..10^6 of them and a
    tuple is built ~7x faster than a frozen dataclass); build it positionally or by keyword.
    """

    engine: str          # "aicore", "aicpu" or "host"
    core: int            # core index within the engine
    pipe: str            # one of PIPES
    task_id: int
    op: str              # name of the (possibly fused) node the task runs
    start: int           # cycles
    end: int             # cycles, > start
    kind: str = ""       # instruction: "mmad", "vec_binary", "copy", "launch", "compute", ...
    bytes: int = 0       # bytes moved (data moves only)
    src: str = ""        # memory level read by a move (one of LEVELS), "" otherwise
    dst: str = ""        # memory level written by a move
    count: int = 1       # instructions this interval stands for (>1 in block detail)
    stall: int = 0       # cycles of this interval spent waiting on shared bandwidth

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One launched task (one op or fused op): the source of an op-summary row."""

    task_id: int
    stream_id: int
    op_name: str
    op_type: str                       # a fused node's type, e.g. "FusedConvRelu"
    task_type: str                     # one of the TASK_* names (msprof's)
    start: int                         # first instruction of the task, cycles
    end: int                           # last instruction ends, cycles
    launch_start: int = 0              # when the scheduler began launching it (E stage)
    wait: int = 0                      # idle cycles on its stream before it started
    block_dim: int = 1                 # cores it ran on
    input_shapes: tuple[str, ...] = ()
    input_dtypes: tuple[str, ...] = ()
    input_formats: tuple[str, ...] = ()
    output_shapes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    output_formats: tuple[str, ...] = ()
    flops: int = 0
    # (level, "read"|"write") -> bytes, summed over cores
    traffic: dict[tuple[str, str], int] = field(default_factory=dict)
    # pipe -> busy cycles, on the busiest core (what msprof's *_ratio divides by total cycles)
    pipe_cycles: dict[str, int] = field(default_factory=dict)
    fused_ops: tuple[str, ...] = ()    # original op names inside a fused node
    roofline_cycles: int = 0           # lower bound: max(flops/peak, bytes/bandwidth)
    notes: tuple[str, ...] = ()        # lowering facts worth explaining (padding, tiling, ...)

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def on_ai_core(self) -> bool:
        return on_ai_core(self.task_type)


@dataclass
class Trace:
    """All intervals and task records of one simulation."""

    chip: Chip
    tasks: list[TaskRecord] = field(default_factory=list)
    intervals: list[Interval] = field(default_factory=list)
    total_cycles: int = 0
    detail: str = "block"
    #: the run's L2 byte totals and end-of-graph flush (`ascendsim.sim.l2cache.L2Stats`)
    l2: Any = None

    def us(self, cycles: float) -> float:
        """Cycles of the AI Core clock in microseconds."""
        return cycles / self.chip.clock_hz * 1e6

    def task(self, op_name: str) -> TaskRecord:
        """The task of `op_name`: a task's own name, else the fused task that carries it among
        its `fused_ops` (any of the model's op names a fusion swallowed: 'Softmax_39' finds
        its IncreFlashAttention, 'stem.bn' its ConvRelu); AscendSimError naming ops else."""
        for t in self.tasks:
            if t.op_name == op_name:
                return t
        for t in self.tasks:
            if op_name in t.fused_ops:
                return t
        from ..errors import AscendSimError

        raise AscendSimError(f"no task for op '{op_name}' in this trace; ops: "
                             f"{', '.join(t.op_name for t in self.tasks[:20])}")

    def intervals_of(self, task_id: int) -> list[Interval]:
        return [iv for iv in self.intervals if iv.task_id == task_id]

    def defer_intervals(self, expand: Callable[[], list[Interval]]) -> None:
        """Build `intervals` with `expand()` on first use, not now: a BERT-large step's trace
        holds ~1.7M intervals (one per core of every coalesced row), which most runs (the
        cycle count, the op summary) never read; the engine hands over its rows instead."""
        self._intervals = None
        self._expand = expand

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_intervals"], state["_expand"] = self.intervals, None
        return state


def _get_intervals(self: Trace) -> list[Interval]:
    if self._expand is not None:
        self._intervals, self._expand = self._expand(), None
    return self._intervals


def _set_intervals(self: Trace, value: list[Interval]) -> None:
    self._intervals, self._expand = value, None


# `intervals` stays a dataclass field (constructor argument, repr, ==); reading it expands
# deferred rows once (`Trace.defer_intervals`)
Trace.intervals = property(_get_intervals, _set_intervals)  # type: ignore[assignment]
