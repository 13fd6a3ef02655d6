"""Task records: a finished task's `TaskRecord`, with its GM traffic as simulated, the
roofline of that traffic and the pipe busy cycles of its busiest core."""

from __future__ import annotations

import math
from typing import Any

from ..lower.lowering import memory_cycles
from .gm import GM_KEYS
from .trace import TaskRecord


class RecordBuilder:
    """Builds the records of a run's tasks from its simulated GM bytes per task (`gm`:
    task id -> (level, direction) -> bytes) and pipe busy cycles per task and core (`busy`:
    task id -> core -> pipe -> cycles), both filled as the run goes."""

    def __init__(self, chip: Any, gm: dict, busy: dict) -> None:
        self.chip, self.gm, self.busy = chip, gm, busy
        self.memory_cycles: dict[tuple, float] = {}    # `record`'s memo of memory_cycles

    def record(self, t, start, end, launch_start, wait, block_dim: int) -> TaskRecord:
        """The record of task `t` (`block_dim`: its cores, a replayed task's as simulated)."""
        traffic = self.traffic(t)
        roofline = t.roofline_cycles
        if t.task_id in self.gm:       # the task's moves as simulated
            # (`memory_cycles` reads these four figures only: one call per distinct four)
            key = (traffic.get(("DDR", "read"), 0), traffic.get(("DDR", "write"), 0),
                   traffic.get(("L2", "read"), 0), traffic.get(("L2", "write"), 0))
            mem = self.memory_cycles.get(key)
            if mem is None:
                mem = self.memory_cycles[key] = memory_cycles(self.chip, traffic)
            roofline = int(math.floor(max(t.compute_cycles, mem)))
        per_core = self.busy.get(t.task_id, {})
        if len(per_core) == 1:
            busiest, = per_core.values()
        else:
            busiest = max(per_core.values(),
                          key=lambda d: (sum(d.values()), sorted(d.items())), default={})
        return TaskRecord(
            task_id=t.task_id, stream_id=t.stream_id, op_name=t.op_name, op_type=t.op_type,
            task_type=t.task_type, start=start, end=end, launch_start=launch_start, wait=wait,
            block_dim=block_dim,
            input_shapes=tuple([_shape(v) for v in t.inputs]),
            input_dtypes=tuple([v.dtype for v in t.inputs]),
            input_formats=t.input_formats,
            output_shapes=tuple([_shape(v) for v in t.outputs]),
            output_dtypes=tuple([v.dtype for v in t.outputs]),
            output_formats=t.output_formats, flops=t.flops, traffic=traffic,
            pipe_cycles=dict(busiest), fused_ops=t.fused_ops,
            roofline_cycles=roofline, notes=t.notes)

    def traffic(self, t) -> dict[tuple[str, str], int]:
        """A task's traffic: the lowered on-chip bytes, and the GM bytes as simulated (hits,
        misses, writes, write-backs it caused); AI CPU tasks keep their lowered DDR bytes."""
        out = dict(t.traffic)
        gm = self.gm.get(t.task_id)
        if gm is not None:
            for key in GM_KEYS:
                out.pop(key, None)
            for k, v in gm.items():
                v = round(v)
                if v:
                    out[k] = int(v)
        return out



#: shape -> its text in a TaskRecord (the shapes of a model recur)
_SHAPES: dict[tuple, str] = {}


def _shape(v) -> str:
    shape = v.shape
    try:
        return _SHAPES[shape]
    except KeyError:
        text = ",".join(str(d) for d in shape)
        if len(_SHAPES) < 65536:
            _SHAPES[shape] = text
        return text
    except TypeError:                # (an unhashable shape)
        return ",".join(str(d) for d in shape)


__all__ = ["RecordBuilder"]
