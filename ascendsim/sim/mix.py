"""910B mix kernels in the engine: the AIC and AIV phases overlap through cross-core flags.

Note on the model
-----------------
A split chip's mix kernel (task type MIX_AIC: a cube phase on the AICs whose result the AIV
phase finishes, e.g. MatMul + element-wise epilogue) does not run its phases one after the
other. CANN's kernels hand each tile over through a GM workspace with
CrossCoreSetFlag / CrossCoreWaitFlag: the AIV waits for the flag of tile i before it reads it,
and the AIC waits for the AIV to have consumed tile i - 2 before it overwrites that workspace
slot (two slots: a pipeline of depth 2). The mix kernel then takes about
max(AIC, AIV) + one tile instead of their sum, and the AIV can never run ahead of the AIC.

Here both phases lease their cores at the task's start and pay their kernel start. The AIC
phase runs as usual. The AIV phase waits for the flag of the AIC's first tile, or of its
first `PREFIX_TILES` tiles (the block-detail prefix, sim/block.py) when the AIC has enough tiles
to be coalesced in block detail: the AIC's kernel start plus those tiles' uncontended time
through its stage chain, the same for both detail levels. It then runs all
its tiles; its cores are released, and the kernel ends, no earlier than the AIC's end plus
the AIV's share of one AIC tile (its wait on the flag of the AIC's last tile, then its work
on that tile: its uncontended time per core over the AIC's tiles per core). Between, both
phases' moves share the fabric as they go. Simplifications: the AIV is not paced tile by
tile in between (an AIV much faster than the AIC does its work early, then idles on the last
flag: the same bytes cross the fabric, earlier); the start waits for several AIC tiles, not
one, so that block detail measures the AIC's pace before the AIV's traffic begins (measured
during the AIV's start-up burst, the coalesced AIC would keep that contended pace for all
its remaining tiles: the over-contention of an unthrottled AIV). An AIC that is itself
bandwidth-bound gains little: the AIV's bytes still cross the same fabric.
A MIX_AIV kernel (lower/weight_quant.py: the AIV antiquants weight slices that the AIC then
multiplies) is the same pipeline with the roles swapped: the AIV phase produces, the AIC
phase waits for its first tiles and ends one of its tiles after the AIV's end.
Any other multi-phase task runs its phases in turn.
"""

from __future__ import annotations

import math

from ..errors import SimulationError
from ..hw.names import ENGINE_AICORE, TASK_MIX_AIC, TASK_MIX_AIV
from ..lower.program import CoreGroup, Phase
from .block import COALESCE_MIN, PREFIX_TILES
from .kernelstart import tiling_lines


def is_mix(task) -> bool:
    """A split-chip mix kernel: an AIC phase followed by an AIV phase (MIX_AIC), or an AIV
    phase whose results the AIC phase consumes (MIX_AIV: a weight-quantised matmul's
    antiquant, lower/weight_quant.py); the first phase produces, the second consumes."""
    ph = task.phases
    if len(ph) != 2 or not all(p.engine == ENGINE_AICORE and p.groups for p in ph):
        return False
    if task.task_type == TASK_MIX_AIC:
        return not ph[0].vector_cores and ph[1].vector_cores
    return task.task_type == TASK_MIX_AIV and ph[0].vector_cores and not ph[1].vector_cores


def run_phases(engine, task):
    """SimPy body running the phases of `task`: overlapped for a mix kernel, else in turn.
    `engine` is the running `Engine`: its `env`, `pools`, `started`, `symmetric`, `icache`,
    and its `phase`, `group`, `kernel_start` and `kernel_start_cycles`."""
    if is_mix(task):
        yield from run_mix(engine, task, task.phases[0], task.phases[1])
        return
    for ph in task.phases:
        yield from engine.phase(task, ph)


def chain_cycles(g: CoreGroup) -> float:
    """Uncontended cycles of one tile of `g` through its whole stage chain (fill latency)."""
    return sum(st.tile_cycles() for st in g.layout[0].stages)


def pace_cycles(g: CoreGroup) -> float:
    """Uncontended cycles per tile of `g` once its pipeline is full (its busiest stage)."""
    return max(st.tile_cycles() for st in g.layout[0].stages)


def first_tiles_cycles(ph: Phase, tiles: int) -> int:
    """When `tiles` tiles of every group of `ph` are done, uncontended, after its start."""
    return math.ceil(max(chain_cycles(g) + (min(tiles, g.tiles) - 1) * pace_cycles(g)
                         for g in ph.groups))


def core_cycles(g: CoreGroup) -> float:
    """Uncontended cycles of one core of `g` for all its tiles (fill, then the pace)."""
    return chain_cycles(g) + (g.tiles - 1) * pace_cycles(g)


def last_tile_cycles(consumer: Phase, producer: Phase) -> int:
    """The consumer's work on the producer's last tile, uncontended: its per-core time over
    the producer's tiles per core (the AIV handles each AIC tile as it comes)."""
    per_core = max(core_cycles(g) for g in consumer.groups)
    return math.ceil(per_core / max(g.tiles for g in producer.groups))


def run_mix(engine, task, producer: Phase, consumer: Phase):
    """Both phases at once: the AIV after the AIC's first tiles, ending after its last one."""
    env = engine.env
    made = env.event()                   # fires with the AIC's end: the last tile's flag
    aic = env.process(_side(engine, task, producer, None, made))
    coalesced = max(g.tiles for g in producer.groups) >= COALESCE_MIN
    # (the producer's cold blocks on the cores it would get now: `Pool.peek`)
    pool = engine.pools["aiv" if producer.vector_cores else "aicore"]
    cold = engine.icache.cold(task, producer, pool.peek(producer.block_dim))
    start = engine.kernel_start_cycles(producer.block_dim, tiling_lines(producer), cold,
                                       producer.binary) + \
        first_tiles_cycles(producer, PREFIX_TILES if coalesced else 1)
    aiv = env.process(_side(engine, task, consumer, (start, made,
                                                       last_tile_cycles(consumer, producer)),
                            None))
    yield env.all_of([aic, aiv])


def _side(engine, task, ph: Phase, gate, made):
    """One phase of a mix kernel on its own cores. Producer: `made` fires with its end time.
    Consumer: `gate` = (cycles after the task's start to wait for the producer's first tiles,
    the producer's `made`, cycles of one tile after the producer's end)."""
    env = engine.env
    pool = engine.pools["aiv" if ph.vector_cores else "aicore"]
    if ph.block_dim > pool.n:
        raise SimulationError(f"op '{task.op_name}' needs {ph.block_dim} cores, the chip has "
                              f"{pool.n} ({pool.name})")
    with pool.lease(ph.block_dim) as lease:
        yield lease.granted
        ids = tuple(lease.take())
        engine.leased(task, ph, ids)
        t0 = env.now
        engine.started.setdefault(task.task_id, t0)
        sets = [ids] if engine.symmetric else [(c,) for c in ids]
        cold = engine.icache.touch(task, ph, ids)
        yield from engine.kernel_start(task, ids, sets, ph.block_dim, tiling_lines(ph), cold,
                                       ph.binary)
        if gate is not None and t0 + gate[0] > env.now:
            yield env.timeout(t0 + gate[0] - env.now)        # the flag of the first tiles
        procs, base = [], 0
        for g in ph.groups:
            cores = ids[base:base + len(g.cores)]
            base += len(g.cores)
            procs.append(env.process(engine.group(task, g, cores, start=False)))
        yield env.all_of(procs)
        if made is not None:
            made.succeed(env.now)
        if gate is not None:
            _, producer_done, tail = gate
            end = (yield producer_done) + tail                 # the last tile's flag, that tile
            if end > env.now:
                yield env.timeout(end - env.now)
        yield lease.release()


__all__ = ["first_tiles_cycles", "is_mix", "last_tile_cycles", "run_mix",
           "run_phases"]
