"""msprof-style op summary and op statistic, derived from a `Trace`.

One `OpSummaryRow` per launched task, with the column names Ascend engineers know from the
profiler's `op_summary_*.csv` (Op Name, OP Type, Task Type, ..., aic_mac_ratio, aiv_vec_ratio, ...;
see reference/ascend-hardware.md section 6), plus what msprof does not show: bytes per memory
level, flops, arithmetic intensity and the bound. `op_statistic` aggregates by op type like
msprof's `op_statistic_*.csv`. Everything is plain Python; `to_pandas()` converts when pandas is
installed.

Definitions (msprof's): `X_ratio` = cycles the pipe X was busy on the task's busiest core divided
by the task's cycles from its first to its last instruction; `memory_bound` = mte2_ratio /
max(mac_ratio, vec_ratio), above 1 means memory bound.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any

from ..hw.names import (
    AICORE_TASK_TYPES,
    ENGINE_AICORE,
    LEVELS,
    TASK_AI_CPU,
    TASK_MIX_AIC,
    TASK_MIX_AIV,
)
from ..sim.trace import TaskRecord, Trace
from .breakdown import intervals_by_task, task_causes
from .table import Table, csv_cell, render_table, require_pandas

#: msprof ratio column for each pipe (cube-side pipes are "aic_", vector-side "aiv_")
PIPE_RATIO_COLUMNS = (
    ("M", "aic_mac_ratio"),
    ("V", "aiv_vec_ratio"),
    ("S", "aic_scalar_ratio"),
    ("MTE1", "aic_mte1_ratio"),
    ("MTE2", "aic_mte2_ratio"),
    ("MTE3", "aiv_mte3_ratio"),
    ("FIX", "aic_fixpipe_ratio"),
)
#: what a task is bound by when a pipe is its busiest one
PIPE_BOUND = {"M": "cube", "V": "vector", "S": "scalar", "MTE1": "memory", "MTE2": "memory",
              "MTE3": "memory", "FIX": "memory", "AICPU": "aicpu", "HOST": "launch"}
#: plain words for each pipe, for explanations and legends
PIPE_WORDS = {"M": "cube (M)", "V": "vector (V)", "S": "scalar (S)",
              "MTE1": "MTE1 (L1 -> L0A/L0B)", "MTE2": "MTE2 (GM -> L1/UB)",
              "MTE3": "MTE3 (UB -> GM)", "FIX": "FixPipe (L0C -> GM/L1)",
              "AICPU": "AI CPU", "HOST": "host launch"}
#: task types that run on the AI Core (msprof's Task Type values)


def _traffic_fields() -> list[tuple[str, str, str]]:
    """(level, direction, column name) for every memory level and direction."""
    return [(lvl, d, f"{lvl.lower()}_{d}_bytes") for lvl in LEVELS for d in ("read", "write")]


@dataclass(frozen=True)
class OpSummaryRow:
    """One op_summary row. Attribute names are Python names; `COLUMNS` holds the msprof names."""

    op_name: str
    op_type: str
    task_type: str
    stream_id: int
    task_id: int
    task_start_us: float
    task_duration_us: float
    task_wait_us: float
    block_dim: int              # a mix kernel: its main cores' count (MIX_AIC: the AICs)
    mix_block_dim: int          # a mix kernel: the other kind's count (MIX_AIC: AIVs); else 0
    input_shapes: str
    input_dtypes: str
    input_formats: str
    output_shapes: str
    output_dtypes: str
    output_formats: str
    aicore_time_us: float | None
    total_cycles: int
    aic_mac_ratio: float | None
    aiv_vec_ratio: float | None
    aic_scalar_ratio: float | None
    aic_mte1_ratio: float | None
    aic_mte2_ratio: float | None
    aiv_mte3_ratio: float | None
    aic_fixpipe_ratio: float | None
    memory_bound: float | None
    l0a_read_bytes: int
    l0a_write_bytes: int
    l0b_read_bytes: int
    l0b_write_bytes: int
    l0c_read_bytes: int
    l0c_write_bytes: int
    ub_read_bytes: int
    ub_write_bytes: int
    l1_read_bytes: int
    l1_write_bytes: int
    l2_read_bytes: int
    l2_write_bytes: int
    ddr_read_bytes: int
    ddr_write_bytes: int
    flops: int
    arithmetic_intensity: float | None
    roofline_us: float
    bound: str
    limiting_pipe: str
    fused_ops: str

    def as_dict(self) -> dict[str, Any]:
        """The row keyed by msprof column names."""
        return dict(zip(COLUMNS, astuple(self), strict=True))

    def __getitem__(self, column: str) -> Any:
        """Look a cell up by its msprof column name: row["Task Duration(us)"]."""
        try:
            return getattr(self, _ATTR_OF[column])
        except KeyError:
            from ..errors import AscendSimError

            raise AscendSimError(f"no column '{column}'; columns: {', '.join(COLUMNS)}") from None


#: CSV header, msprof spelling, in the order of `OpSummaryRow`'s fields
COLUMNS: tuple[str, ...] = (
    "Op Name", "OP Type", "Task Type", "Stream ID", "Task ID", "Task Start Time(us)",
    "Task Duration(us)", "Task Wait Time(us)", "Block Dim", "Mix Block Dim", "Input Shapes",
    "Input Data Types",
    "Input Formats", "Output Shapes", "Output Data Types", "Output Formats", "aicore_time(us)",
    "aic_total_cycles", *(c for _, c in PIPE_RATIO_COLUMNS), "memory_bound",
    *(c for _, _, c in _traffic_fields()),
    "flops", "arithmetic_intensity", "roofline_time(us)", "bound", "limiting_pipe", "fused_ops",
)
_ATTR_OF = dict(zip(COLUMNS, (f.name for f in fields(OpSummaryRow)), strict=True))

#: op_statistic header (msprof op_statistic_*.csv)
STAT_COLUMNS: tuple[str, ...] = ("OP Type", "Core Type", "Count", "Total Time(us)",
                                 "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)")


def _join(items: Iterable[str]) -> str:
    return ";".join(str(i) for i in items)


def core_kind(trace: Trace, core: int) -> tuple[str, int]:
    """("core", i) on coupled chips; ("AIC", i) or ("AIV", i) on split chips, where the trace
    numbers the AIVs after the AICs."""
    chip = trace.chip
    if getattr(chip, "arch", "coupled") != "split":
        return "core", core
    return ("AIC", core) if core < chip.ai_cores else ("AIV", core - chip.ai_cores)


def core_name(trace: Trace, core: int) -> str:
    kind, i = core_kind(trace, core)
    return f"{kind} {i}"


def gm_bytes(task: TaskRecord) -> int:
    """Bytes the task moved to and from global memory, each byte once.

    The trace splits a GM read into the part served by L2 ("L2", "read") and the part that
    missed to HBM ("DDR", "read"); a GM write lands in L2 ("L2", "write") and the part written
    back to HBM is also counted as ("DDR", "write"). AI CPU tasks record DDR only.
    """
    tr = task.traffic
    return (tr.get(("DDR", "read"), 0) + tr.get(("L2", "read"), 0)
            + max(tr.get(("L2", "write"), 0), tr.get(("DDR", "write"), 0)))


def launch_cycles(task: TaskRecord) -> int:
    """Cycles the task's stream sat idle waiting for this task's launch."""
    return max(0, min(task.wait, task.start - task.launch_start))


def limiting_pipe(task: TaskRecord) -> str:
    """The AI Core pipe busiest during the task ("AICPU" for AI CPU tasks, "" if none)."""
    if task.task_type not in AICORE_TASK_TYPES:
        return "AICPU"
    busy = {p: c for p, c in task.pipe_cycles.items() if c > 0 and p in PIPE_BOUND}
    if not busy:
        return ""
    order = [p for p, _ in PIPE_RATIO_COLUMNS]
    return max(busy, key=lambda p: (busy[p], -order.index(p) if p in order else -99))


def task_bound(task: TaskRecord) -> str:
    """cube / vector / memory / scalar / aicpu, or "launch" when waiting for its launch took
    longer than it ran."""
    if task.duration <= 0 or launch_cycles(task) > task.duration:
        return "launch"
    pipe = limiting_pipe(task)
    return PIPE_BOUND.get(pipe, "launch")


def _ratio(task: TaskRecord, pipe: str) -> float | None:
    if task.task_type not in AICORE_TASK_TYPES:
        return None
    return task.pipe_cycles.get(pipe, 0) / task.duration if task.duration > 0 else 0.0


def mix_block_dims(trace: Trace, task: TaskRecord,
                   cores: set[int] | None = None) -> tuple[int, int]:
    """(Block Dim, Mix Block Dim) as msprof reports them: a mix kernel's main cores (MIX_AIC:
    the AI Cube cores; MIX_AIV: the vector cores) and its other cores; (block_dim, 0) for any
    other task. `cores`: the task's cores when known (else read from its intervals)."""
    if task.task_type not in (TASK_MIX_AIC, TASK_MIX_AIV):
        return task.block_dim, 0
    if cores is None:
        cores = {iv.core for iv in trace.intervals_of(task.task_id) if iv.engine == ENGINE_AICORE}
    kinds = [core_kind(trace, c)[0] for c in cores]
    main = "AIC" if task.task_type == TASK_MIX_AIC else "AIV"
    n_main = sum(k == main for k in kinds)
    n_other = sum(k != main for k in kinds)
    return (n_main or task.block_dim), n_other


def summary_row(trace: Trace, task: TaskRecord,
                cores: set[int] | None = None) -> OpSummaryRow:
    """The op_summary row of one task (`cores`: its AI Cores, when the caller has them)."""
    block_dim, mix_block_dim = mix_block_dims(trace, task, cores)
    ratios = {col: _ratio(task, pipe) for pipe, col in PIPE_RATIO_COLUMNS}
    aicore = task.task_type in AICORE_TASK_TYPES
    mem_bound = None
    if aicore:
        denom = max(ratios["aic_mac_ratio"] or 0.0, ratios["aiv_vec_ratio"] or 0.0)
        mte2 = ratios["aic_mte2_ratio"] or 0.0
        mem_bound = mte2 / denom if denom > 0 else (float("inf") if mte2 > 0 else 0.0)
    traffic = {col: int(task.traffic.get((lvl, d), 0)) for lvl, d, col in _traffic_fields()}
    gm = gm_bytes(task)
    return OpSummaryRow(
        op_name=task.op_name, op_type=task.op_type, task_type=task.task_type,
        stream_id=task.stream_id, task_id=task.task_id,
        task_start_us=trace.us(task.start), task_duration_us=trace.us(task.duration),
        task_wait_us=trace.us(task.wait), block_dim=block_dim, mix_block_dim=mix_block_dim,
        input_shapes=_join(task.input_shapes), input_dtypes=_join(task.input_dtypes),
        input_formats=_join(task.input_formats), output_shapes=_join(task.output_shapes),
        output_dtypes=_join(task.output_dtypes), output_formats=_join(task.output_formats),
        aicore_time_us=trace.us(task.duration) if aicore else None,
        total_cycles=task.duration,
        **ratios, memory_bound=mem_bound, **traffic,
        flops=task.flops, arithmetic_intensity=(task.flops / gm) if gm else None,
        roofline_us=trace.us(task.roofline_cycles), bound=task_bound(task),
        limiting_pipe=limiting_pipe(task), fused_ops=_join(task.fused_ops),
    )


def op_summary(trace: Trace) -> list[OpSummaryRow]:
    """One row per task, in launch order (task id)."""
    mix = {t.task_id for t in trace.tasks if t.task_type in (TASK_MIX_AIC, TASK_MIX_AIV)}
    cores: dict[int, set[int]] = {i: set() for i in mix}
    if mix:
        for iv in trace.intervals:
            if iv.task_id in mix and iv.engine == ENGINE_AICORE:
                cores[iv.task_id].add(iv.core)
    return [summary_row(trace, t, cores.get(t.task_id))
            for t in sorted(trace.tasks, key=lambda t: (t.start, t.task_id))]


@dataclass(frozen=True)
class OpStatisticRow:
    """One op_statistic row: all tasks of one op type on one core type."""

    op_type: str
    core_type: str
    count: int
    total_us: float
    min_us: float
    avg_us: float
    max_us: float
    ratio_pct: float

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(STAT_COLUMNS, astuple(self), strict=True))


def op_statistic(trace: Trace) -> list[OpStatisticRow]:
    """Task durations aggregated per (op type, core type), largest total first.

    Ratio(%) is each group's share of the summed task time, so the ratios add up to 100.
    """
    groups: dict[tuple[str, str], list[float]] = {}
    for t in trace.tasks:
        groups.setdefault((t.op_type, t.task_type), []).append(trace.us(t.duration))
    grand = sum(sum(v) for v in groups.values())
    rows = [OpStatisticRow(op_type=k[0], core_type=k[1], count=len(v), total_us=sum(v),
                           min_us=min(v), avg_us=sum(v) / len(v), max_us=max(v),
                           ratio_pct=100.0 * sum(v) / grand if grand > 0 else 0.0)
            for k, v in groups.items()]
    rows.sort(key=lambda r: (-r.total_us, r.op_type, r.core_type))
    return rows


def _write_rows(path: str, header: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow(["N/A" if v is None else csv_cell(v) for v in r])


#: the CSV's last column: the task's validation family's median |error| on the chip's
#: generation, or "unvalidated" (`ascendsim.report.confidence`; not an msprof column)
CONFIDENCE_COLUMN = "validation_median_abs_error"


#: the task's span by cause (us), the E/R/C/W split of `ascendsim.report.breakdown` (its
#: `RULE` gives each instant of the span to one cause); not msprof columns
CAUSE_COLUMNS = ("launch_us (E)", "read_us (R)", "compute_us (C)", "write_us (W)",
                 "stall_us", "idle_us")
_CAUSE_ORDER = ("launch", "read", "compute", "write", "stall", "idle")


def write_op_summary_csv(trace: Trace, path: str, confidence: Any = None) -> None:
    """Write op_summary rows as CSV with msprof's column names ("N/A" where msprof has none),
    then the task's span by cause (`CAUSE_COLUMNS`) and `CONFIDENCE_COLUMN` (from
    `confidence`, a `Confidence` record; by default the one read off the trace alone)."""
    if confidence is None:
        from .confidence import confidence as of_trace

        confidence = of_trace(trace)
    by_id = {t.task_id: t for t in trace.tasks}
    grouped = intervals_by_task(trace)

    def causes(task: TaskRecord) -> tuple[float, ...]:
        cyc = task_causes(trace, task, grouped.get(task.task_id, ()))
        return tuple(round(trace.us(cyc[c]), 3) for c in _CAUSE_ORDER)

    _write_rows(path, (*COLUMNS, *CAUSE_COLUMNS, CONFIDENCE_COLUMN),
                ((*astuple(r), *causes(by_id[r.task_id]), confidence.cell(by_id[r.task_id]))
                 for r in op_summary(trace)))


def write_op_statistic_csv(trace: Trace, path: str) -> None:
    """Write op_statistic rows as CSV with msprof's column names."""
    _write_rows(path, STAT_COLUMNS, (astuple(r) for r in op_statistic(trace)))


def to_pandas(rows: Sequence[OpSummaryRow] | Sequence[OpStatisticRow]) -> Any:
    """Rows of `op_summary` or `op_statistic` as a pandas DataFrame with msprof column names."""
    pd = require_pandas()
    if not rows:
        return pd.DataFrame(columns=list(COLUMNS))
    header = STAT_COLUMNS if isinstance(rows[0], OpStatisticRow) else COLUMNS
    return pd.DataFrame([astuple(r) for r in rows], columns=list(header))


#: columns of the terminal summary: (header, row attribute)
_TERMINAL = (("Op Name", "op_name"), ("OP Type", "op_type"), ("Task Type", "task_type"),
             ("Block Dim", "block_dim"), ("Duration(us)", "task_duration_us"),
             ("Wait(us)", "task_wait_us"), ("mac", "aic_mac_ratio"), ("vec", "aiv_vec_ratio"),
             ("mte2", "aic_mte2_ratio"), ("mte3", "aiv_mte3_ratio"), ("bound", "bound"))


def fused_label(names: Sequence[str], op_name: str = "", first: int = 3) -> str:
    """A short list of the model's ops a task fuses ("stem.conv, stem.bn, Relu_0"; "a, b, c
    +8" past `first`); "" for a task of one op (its own name)."""
    names = [n for n in names if n]
    if not names or list(names) == [op_name]:
        return ""
    more = f" +{len(names) - first}" if len(names) > first else ""
    return ", ".join(names[:first]) + more


def summary_table(trace: Trace, top: int | None = 15) -> Table:
    """The slowest `top` tasks (all when None) as a terminal table, slowest first; the last
    column names the model's ops a fused task carries."""
    rows = sorted(op_summary(trace), key=lambda r: -r.task_duration_us)
    shown = rows if top is None else rows[:top]
    total_us = sum(r.task_duration_us for r in rows) or 1.0
    body = [[getattr(r, a) for _, a in _TERMINAL] + [100.0 * r.task_duration_us / total_us,
                                                     fused_label(_split_ops(r.fused_ops),
                                                                 r.op_name)]
            for r in shown]
    title = f"op summary: {len(shown)} of {len(rows)} tasks, slowest first"
    return Table([h for h, _ in _TERMINAL] + ["% time", "fused ops"], body, title=title)


def _split_ops(joined: str) -> list[str]:
    return joined.split(";") if joined else []


def statistic_table(trace: Trace) -> Table:
    """op_statistic as a terminal table."""
    return Table(list(STAT_COLUMNS), [list(astuple(r)) for r in op_statistic(trace)],
                 title="op statistic")


def totals(trace: Trace) -> dict[str, Any]:
    """Whole-run figures: time, tasks, launches per engine, bytes per memory level, busiest pipe."""
    out: dict[str, Any] = {
        "total time (us)": trace.us(trace.total_cycles),
        "total cycles": trace.total_cycles,
        "tasks": len(trace.tasks),
        "AI Core tasks": sum(t.task_type in AICORE_TASK_TYPES for t in trace.tasks),
        "AI CPU tasks": sum(t.task_type == TASK_AI_CPU for t in trace.tasks),
        "flops": sum(t.flops for t in trace.tasks),
    }
    for lvl in ("DDR", "L2"):
        for d in ("read", "write"):
            out[f"{lvl} {d} (MB)"] = sum(t.traffic.get((lvl, d), 0) for t in trace.tasks) / 1e6
    bounds: dict[str, float] = {}
    for t in trace.tasks:
        b = task_bound(t)
        bounds[b] = bounds.get(b, 0.0) + trace.us(t.duration)
    for b, v in sorted(bounds.items(), key=lambda kv: -kv[1]):
        out[f"{b}-bound tasks (us)"] = v
    return out


def render_totals(trace: Trace) -> str:
    """`totals` as aligned `key: value` lines."""
    tot = totals(trace)
    return render_table(["total", "value"], [[k, v] for k, v in tot.items()])
