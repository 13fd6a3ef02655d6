"""Chrome / Perfetto trace JSON (the "Trace Event Format"), like msprof's trace view.

Processes are the engines: one per AI Core ("AI Core 3"), the AI CPU, the host, and a
"Task Scheduler" whose threads are the streams (one slice per task, args = the op summary
facts: shapes, dtypes, bound, traffic, notes). Threads of an AI Core are its pipes (S, V, M,
MTE1, MTE2, MTE3, FIX). Each trace interval is one complete ("X") event with its op, op type,
instruction kind, bytes, memory levels and stall (the shapes stay on the task's slice, which
keeps whole-model files small); timestamps are microseconds from the start of the run.
Metadata ("M") events name and order the processes and threads. Open the file at
https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..hw.names import ENGINE_AICORE, ENGINE_AICPU, ENGINE_HOST, PIPES
from ..sim.trace import Trace
from .summary import core_kind, limiting_pipe, task_bound

#: process ids: the scheduler, host and AI CPU first, then AI Core i at _CORE_PID + i
_SCHED_PID, _HOST_PID, _AICPU_PID, _CORE_PID = 1, 2, 3, 100
_PIPE_TID = {p: i for i, p in enumerate(PIPES)}


def _pid(engine: str, core: int) -> int:
    if engine == ENGINE_AICORE:
        return _CORE_PID + core
    return {ENGINE_HOST: _HOST_PID, ENGINE_AICPU: _AICPU_PID}.get(engine, _SCHED_PID)


def _meta(name: str, pid: int, tid: int | None, value: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "M", "name": name, "pid": pid, "args": {}}
    if tid is not None:
        ev["tid"] = tid
    ev["args"]["sort_index" if name.endswith("sort_index") else "name"] = value
    return ev


def chrome_trace_dict(trace: Trace, cores: Iterable[int] | None = None,
                      window: tuple[float, float] | None = None) -> dict[str, Any]:
    """The trace as a Trace Event Format dict: {"traceEvents": [...], "otherData": {...}}.

    `cores` keeps only those AI Cores' intervals (whole models on 32 cores make large files);
    AI CPU, host and task events are always kept. `window=(start_us, end_us)` keeps only the
    intervals and tasks that overlap that time span.
    """
    keep = None if cores is None else set(cores)
    lo = hi = None
    if window is not None:
        lo, hi = (w * trace.chip.clock_hz / 1e6 for w in window)
    us = trace.us
    tasks = {t.task_id: t for t in trace.tasks}
    events: list[dict[str, Any]] = []
    threads: set[tuple[int, int]] = set()
    thread_names: dict[tuple[int, int], str] = {}

    scale = 1e6 / trace.chip.clock_hz   # microseconds per cycle
    op_types = {tid: t.op_type for tid, t in tasks.items()}
    for iv in trace.intervals:
        if keep is not None and iv.engine == ENGINE_AICORE and iv.core not in keep:
            continue
        if lo is not None and not (iv.end > lo and iv.start < hi):
            continue
        pid = _pid(iv.engine, iv.core)
        tid = iv.core if iv.engine == ENGINE_AICPU else _PIPE_TID.get(iv.pipe, len(PIPES))
        if (pid, tid) not in threads:
            threads.add((pid, tid))
            thread_names[(pid, tid)] = (f"AI CPU {iv.core}" if iv.engine == ENGINE_AICPU
                                        else iv.pipe)
        args: dict[str, Any] = {"op": iv.op, "task_id": iv.task_id}
        if iv.kind:
            args["kind"] = iv.kind
        if iv.bytes:
            args["bytes"] = iv.bytes
            args["path"] = f"{iv.src} -> {iv.dst}"
        if iv.count != 1:
            args["instructions"] = iv.count
        if iv.stall:
            args["stall_us"] = round(iv.stall * scale, 4)
        if iv.task_id in op_types:
            args["op_type"] = op_types[iv.task_id]
        events.append({"name": iv.op, "cat": iv.kind or iv.pipe, "ph": "X",
                       "ts": round(iv.start * scale, 4),
                       "dur": round((iv.end - iv.start) * scale, 4),
                       "pid": pid, "tid": tid, "args": args})

    for t in trace.tasks:
        if lo is not None and not (max(t.end, t.start + 1) > lo and t.start < hi):
            continue
        threads.add((_SCHED_PID, t.stream_id))
        thread_names[(_SCHED_PID, t.stream_id)] = f"Stream {t.stream_id}"
        args = {"op_type": t.op_type, "task_type": t.task_type, "task_id": t.task_id,
                "block_dim": t.block_dim, "wait_us": round(us(t.wait), 4),
                "input_shapes": ";".join(t.input_shapes),
                "input_dtypes": ";".join(t.input_dtypes),
                "output_shapes": ";".join(t.output_shapes),
                "output_dtypes": ";".join(t.output_dtypes),
                "flops": t.flops, "bound": task_bound(t), "limiting_pipe": limiting_pipe(t),
                "traffic_bytes": {f"{lvl} {d}": b for (lvl, d), b in sorted(t.traffic.items())}}
        if t.fused_ops:
            args["fused_ops"] = list(t.fused_ops)
        if t.notes:
            args["notes"] = list(t.notes)
        events.append({"name": t.op_name, "cat": "task", "ph": "X",
                       "ts": round(us(t.start), 4), "dur": round(us(max(t.duration, 0)), 4),
                       "pid": _SCHED_PID, "tid": t.stream_id, "args": args})

    meta: list[dict[str, Any]] = []
    for pid in sorted({p for p, _ in threads}):
        if pid >= _CORE_PID:
            kind, i = core_kind(trace, pid - _CORE_PID)
            name = f"AI Core {i}" if kind == "core" else f"{kind} {i}"
        else:
            name = {_SCHED_PID: "Task Scheduler", _HOST_PID: "Host",
                    _AICPU_PID: "AI CPU"}.get(pid, f"engine {pid}")
        meta.append(_meta("process_name", pid, None, name))
        meta.append(_meta("process_sort_index", pid, None, pid))
    for pid, tid in sorted(threads):
        meta.append(_meta("thread_name", pid, tid, thread_names[(pid, tid)]))
        meta.append(_meta("thread_sort_index", pid, tid, tid))

    chip = trace.chip
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ns",
        "otherData": {"generator": "ascendsim", "chip": getattr(chip, "name", ""),
                      "clock_hz": getattr(chip, "clock_hz", 0.0), "detail": trace.detail,
                      "total_us": round(us(trace.total_cycles), 4),
                      "total_cycles": trace.total_cycles},
    }


def write_chrome_trace(trace: Trace, path: str, cores: Iterable[int] | None = None,
                       window: tuple[float, float] | None = None) -> None:
    """Write the trace as JSON that Perfetto (ui.perfetto.dev) and chrome://tracing open
    (`cores`, `window`: see `chrome_trace_dict`)."""
    doc = json.dumps(chrome_trace_dict(trace, cores, window), separators=(",", ":"))
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
