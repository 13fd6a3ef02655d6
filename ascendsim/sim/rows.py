"""Trace rows: the intervals being recorded on the pipes (`Run`), expanded per core into the
trace's `Interval`s when first read, and the trace's name for a GM endpoint."""

from __future__ import annotations

from ..gcpause import gc_paused
from ..hw.names import GM
from .trace import Interval


class Run:
    """A trace interval being recorded on one pipe of a core group (rows become Intervals)."""

    __slots__ = ("engine", "cores", "pipe", "task_id", "op", "start", "end", "kind", "nbytes",
                 "src", "dst", "count", "stall", "tile")

    def __init__(self, engine: str, cores: tuple[int, ...], pipe: str, task_id: int, op: str,
                 start: float, end: float, kind: str, nbytes: float = 0, src: str = "",
                 dst: str = "", count: int = 1, stall: int = 0, tile: int = -1) -> None:
        self.engine, self.cores, self.pipe, self.task_id, self.op = engine, cores, pipe, \
            task_id, op
        self.start, self.end, self.kind, self.nbytes = start, end, kind, nbytes
        self.src, self.dst, self.count, self.stall, self.tile = src, dst, count, stall, tile


def expand_with_replays(rows: list[Run], replayed: list[tuple]) -> list[Interval]:
    """`expand_rows` over the simulated rows and those of the replayed tasks (each replay's
    rows shifted to its start and moved to its cores: `moved` maps the core ids that
    differ)."""
    with gc_paused():
        extra = [Run(r.engine, tuple(moved.get(c, c) for c in r.cores) if moved else r.cores,
                     r.pipe, task_id, op, start + a, start + b, r.kind, r.nbytes, r.src, r.dst,
                     r.count, r.stall, r.tile)
                 for seen, start, task_id, op, moved in replayed for r, a, b in seen.rows]
    return expand_rows(rows + extra if extra else rows)


def expand_rows(rows: list[Run]) -> list[Interval]:
    """Intervals per core, in start order (rows of a core group expanded per core)."""
    with gc_paused():            # 10^6 tuples that all live on (ascendsim.gcpause)
        out = []
        for r in sorted(rows, key=lambda r: (r.start, r.engine, r.cores[0], r.pipe)):
            start, end, stall = int(r.start), int(r.end), int(r.stall)
            for c in r.cores:
                out.append(Interval(r.engine, c, r.pipe, r.task_id, r.op, start, end, r.kind,
                                    r.nbytes, r.src, r.dst, r.count, stall))
        return out


def level_name(level: str, hbm: float) -> str:
    """A move's endpoint as the trace shows it: GM as "DDR" when any of its bytes reach HBM,
    else "L2"; any other level as it is."""
    if level != GM:
        return level
    return "DDR" if hbm > 0 else "L2"


__all__ = ["Run", "expand_rows", "expand_with_replays", "level_name"]
