"""Trace views the lowering tests share."""

from __future__ import annotations


def first_core_busy_and_span(res, op: str = "op",
                             pipes: tuple[str, ...] = ("MTE2", "V")) -> tuple[dict, float]:
    """Busy cycles per pipe of task `op` on its first core, and that core's span: a
    single-buffered kernel's span is at least the sum of its pipes' busy time."""
    task = res.trace.task(op)
    ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id]
    first = min(iv.core for iv in ivs)
    ivs = [iv for iv in ivs if iv.core == first]
    busy = {p: sum(iv.duration for iv in ivs if iv.pipe == p) for p in pipes}
    span = max(iv.start + iv.duration for iv in ivs) - min(iv.start for iv in ivs)
    return busy, span
