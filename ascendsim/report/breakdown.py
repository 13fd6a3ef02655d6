"""Where an op loses time, by cause: the E/R/C/W stages of an operator (seed 004) per task.

Seed 004 splits every operator into four stages: E (the CPU issues the task), R (read the
inputs from memory), C (compute), W (write the results to memory); fusion removes the E, R and
W of the ops it absorbs and merges their C. In the simulated trace the pipes of a task overlap
(MTE2 loads the next tile while the cube or vector unit computes this one), so the stages are
not a sum of pipe times. The one rule, kept here (`RULE`):

    Each instant of a task's span, from the start of its launch to its last instruction, goes
    to exactly one cause, the first of these that is busy on any core of the task at that
    instant: compute (C), read (R), write (W), stall on L2/HBM bandwidth, launch (E); an instant
    when none is busy is idle (waiting on a flag or a dependency inside the task).

What each cause covers:

- compute: the cube (M), vector (V) and scalar (S) pipes and the AI CPU, including on-chip
  moves (L1 -> L0A/L0B, L0C -> UB: data that never leaves the core); instructions that only
  wait (kind `wait_*`) are not compute;
- read: moves whose source is L2 or HBM (DDR), minus their stall; write: moves whose
  destination is L2 or HBM, minus their stall;
- stall: the cycles a move spent waiting on shared L2/HBM bandwidth (`Interval.stall`, placed
  at the end of the move);
- launch: the span before the task's first instruction (the scheduler launching it), host
  launch intervals and the kernel prologue (`kernel_start`);
- idle: the rest of the span.

The causes of one task add up to its span exactly; totals are sums over tasks (in sink mode
with one stream the spans follow one another, so they add up to the run's time).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..sim.trace import Interval, TaskRecord, Trace
from .table import render_table

#: the causes, in the order of the rule (idle last: nothing busy)
CAUSES = ("compute", "read", "write", "stall", "launch", "idle")
#: the seed's letters for the causes
LETTERS = {"launch": "E", "read": "R", "compute": "C", "write": "W", "stall": "", "idle": ""}
#: column headings of the table
HEADINGS = {"compute": "C compute", "read": "R read", "write": "W write",
            "stall": "stall L2/HBM", "launch": "E launch", "idle": "idle"}
RULE = ("each instant of a task's span (launch start to last instruction) goes to the first "
        "cause busy on any of its cores: compute, then read, then write, then stall on L2/HBM, "
        "then launch; an instant with none busy is idle")
_OFF_CHIP = ("L2", "DDR")


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(sp for sp in spans if sp[1] > sp[0]):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merged spans a minus merged spans b."""
    out: list[tuple[int, int]] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def _length(spans: Sequence[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


def cause_of(iv: Interval) -> list[tuple[str, int, int]]:
    """(cause, start, end) pieces of one interval (a move with a stall gives two)."""
    if iv.pipe == "HOST" or iv.kind == "kernel_start":
        return [("launch", iv.start, iv.end)]
    if iv.kind.startswith("wait"):
        return []
    off_read, off_write = iv.src in _OFF_CHIP, iv.dst in _OFF_CHIP
    if not (off_read or off_write):
        return [("compute", iv.start, iv.end)]
    cause = "read" if off_read else "write"
    split = max(iv.start, iv.end - iv.stall)
    pieces = [(cause, iv.start, split)]
    if iv.stall > 0:
        pieces.append(("stall", split, iv.end))
    return pieces


@dataclass(frozen=True)
class CauseRow:
    """Time by cause (us) of one task, or of an op type (summed over its tasks)."""

    name: str                # op name, or op type
    op_type: str
    count: int
    span_us: float
    compute_us: float
    read_us: float
    write_us: float
    stall_us: float
    launch_us: float
    idle_us: float

    def of(self, cause: str) -> float:
        return getattr(self, f"{cause}_us")


def task_causes(trace: Trace, task: TaskRecord,
                intervals: Iterable[Interval] | None = None) -> dict[str, int]:
    """Cycles of the task's span per cause (they add up to the span), by `RULE`; `intervals`:
    the task's intervals when the caller has them grouped (else they are looked up)."""
    lo = min(task.launch_start, task.start)
    spans: dict[str, list[tuple[int, int]]] = {c: [] for c in CAUSES}
    spans["launch"].append((lo, task.start))
    for iv in trace.intervals_of(task.task_id) if intervals is None else intervals:
        for cause, s, e in cause_of(iv):
            spans[cause].append((max(s, lo), min(e, task.end)))
    taken: list[tuple[int, int]] = []
    out: dict[str, int] = {}
    for cause in CAUSES[:-1]:
        mine = _minus(_union(spans[cause]), taken)
        out[cause] = _length(mine)
        taken = _union(taken + mine)
    out["idle"] = (task.end - lo) - _length(taken)
    return out


def _row(trace: Trace, name: str, op_type: str, count: int, cyc: dict[str, int]) -> CauseRow:
    span = sum(cyc.values())
    return CauseRow(name, op_type, count, trace.us(span),
                    *(trace.us(cyc.get(c, 0)) for c in CAUSES))


@dataclass
class Breakdown:
    """Time by cause per task (`ops`), per op type (`rows`, largest first) and in total."""

    ops: list[CauseRow]
    rows: list[CauseRow]
    total: CauseRow
    rule: str = RULE

    def table(self, top: int | None = None) -> str:
        names = ("op type", "n", "span us", *(HEADINGS[c] for c in CAUSES))
        body = [(r.op_type, r.count, f"{r.span_us:.2f}",
                 *(f"{r.of(c):.2f}" for c in CAUSES)) for r in self.rows[:top]]
        t = self.total
        body.append(("total", t.count, f"{t.span_us:.2f}", *(f"{t.of(c):.2f}" for c in CAUSES)))
        return render_table(names, body) + f"\nrule: {self.rule}"

    def share(self) -> dict[str, float]:
        """Fraction of the total span per cause."""
        t = self.total
        return {c: (t.of(c) / t.span_us if t.span_us else 0.0) for c in CAUSES}


def intervals_by_task(trace: Trace) -> dict[int, list[Interval]]:
    """Every interval of the trace grouped by task, in one pass (a lookup per task would
    scan the whole trace once per task)."""
    out: dict[int, list[Interval]] = {}
    for iv in trace.intervals:
        out.setdefault(iv.task_id, []).append(iv)
    return out


def breakdown(trace: Trace) -> Breakdown:
    """The E/R/C/W split of every task of `trace`, by op type and in total (see `RULE`)."""
    ops: list[CauseRow] = []
    by_type: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    total: dict[str, int] = {c: 0 for c in CAUSES}
    by_task = intervals_by_task(trace)
    for task in trace.tasks:
        cyc = task_causes(trace, task, by_task.get(task.task_id, ()))
        ops.append(_row(trace, task.op_name, task.op_type, 1, cyc))
        acc = by_type.setdefault(task.op_type, {c: 0 for c in CAUSES})
        for c, v in cyc.items():
            acc[c] += v
            total[c] += v
        counts[task.op_type] = counts.get(task.op_type, 0) + 1
    rows = sorted((_row(trace, t, t, counts[t], cyc) for t, cyc in by_type.items()),
                  key=lambda r: -r.span_us)
    return Breakdown(ops, rows, _row(trace, "total", "", len(trace.tasks), total))


__all__ = ["breakdown", "Breakdown", "CauseRow", "CAUSES", "RULE", "task_causes", "cause_of",
           "intervals_by_task"]
