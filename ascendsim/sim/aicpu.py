"""An AI CPU phase in the engine: launch, reads through the fabric, compute, writes.

The lowering (`ascendsim.lower.aicpu`) gives the phase its launch and compute cycles and the
bytes it reads and writes; here they run in that order on the leased AI CPU(s). The reads and
writes are flows of the engine's `Fabric`: they share L2 and HBM bandwidth with every AI Core
move in flight (max-min fair), each AI CPU capped at `ai_cpu_memory_bytes_per_s`, all bytes
counted as HBM traffic. Each step with a duration is one interval on the AI CPU's lane
(kinds "launch", "read", "compute", "write"; reads DDR -> AICPU, writes AICPU -> DDR).
"""

from __future__ import annotations

from ..hw.names import ENGINE_AICPU
from .rows import Run

#: the lane of the AI CPU engine in the trace
AICPU_PIPE = "AICPU"


def aicpu_steps(ph) -> tuple[tuple[str, int, int, str, str], ...]:
    """(kind, fixed cycles, bytes, src, dst) of an AI CPU phase, in the order they run."""
    return (("launch", ph.aicpu_launch_cycles, 0, "", ""),
            ("read", 0, ph.aicpu_read_bytes, "DDR", AICPU_PIPE),
            ("compute", ph.aicpu_cycles, 0, "", ""),
            ("write", 0, ph.aicpu_write_bytes, AICPU_PIPE, "DDR"))


def run_aicpu(engine, task, ph):
    """SimPy process body of one AI CPU phase of `task` (see the module note); `engine` is the
    running `Engine`: its `env`, `chip`, `pools`, `started`, `fabric`, `rows`, `note_busy`."""
    env, chip = engine.env, engine.chip
    pool = engine.pools[ENGINE_AICPU]
    with pool.lease(min(ph.aicpu_cores, pool.n)) as lease:
        yield lease.granted
        ids = tuple(lease.take())
        t0 = env.now
        engine.started.setdefault(task.task_id, t0)
        cap = chip.ai_cpu_memory_bytes_per_s / chip.clock_hz     # bytes/cycle per AI CPU
        for kind, cycles, nbytes, src, dst in aicpu_steps(ph):
            start = env.now
            if nbytes:
                per_cpu = nbytes / len(ids)
                yield engine.fabric.transfer(per_cpu, cap, 1.0, len(ids), write=kind == "write")
            elif cycles:
                yield env.timeout(cycles)
            if env.now > start:
                engine.rows.append(Run(ENGINE_AICPU, ids, AICPU_PIPE, task.task_id,
                                       task.op_name, start, env.now, kind, nbytes, src, dst))
        engine.note_busy(task.task_id, ids[0], AICPU_PIPE, env.now - t0)
        yield lease.release()


__all__ = ["AICPU_PIPE", "aicpu_steps", "run_aicpu"]
