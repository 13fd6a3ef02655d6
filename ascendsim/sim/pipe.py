"""The pipe process of one core (or of a symmetric group of cores): its instruction queue
executed in order, with flags, buffer levels, fabric flows and merged plain timeouts (see the
note on the model in `ascendsim.sim.engine`, "Pipes"). The hottest loop of the simulator.
"""

from __future__ import annotations

import math
from heapq import heappush
from typing import Any

from simpy.events import NORMAL, Event, Timeout

from ..hw.names import ENGINE_AICORE, GM
from .cores import Core
from .fastforward import NO_HOOK
from .queues import queue_entries, timeout_spans
from .rows import Run, level_name


def run_pipe(engine: Any, task, core: Core, cores: tuple[int, ...], pipe: str, queue: list,
             note: bool = True, merge: str = "contig"):
    """Execute one pipe's instruction queue in order; returns its busy cycles, the end
    time of each tile and the cycles its shared flows were stretched by contention.

    Intervals: merge="contig" records back-to-back instructions of one kind as one
    interval (tile detail); "tile" one interval per tile and "all" one for the whole
    queue (block detail), starting with the first instruction and lasting the busy
    cycles (the waits in between are left out, so no interval overlaps the next).
    (The fast-forward reads its locals `k`, `busy`, `run_busy`, `start`, `stalled`, `run`,
    `ev`, `key` from `hook.at`, set before each yield; sim/fastforward.py.)

    One function of 150 lines because it is the hot loop (one pass per instruction, most of a
    run's events): SimPy's events are built inline and every field it reads is a local, where
    helper calls would cost a call per instruction; and the fast-forward reads these locals
    from this frame. `engine` is the running `Engine`: its `env`, `rows`, `fabric`, `gm`,
    `ff` and `note_busy`.
    """
    env = engine.env
    # SimPy's events built, triggered and scheduled inline (`env.timeout`, `env.event`,
    # `Event.succeed` do the same through two or three calls): the pipes make most events
    heap, ids, make = env._queue, env._eid, object.__new__
    flags, waiters = core.flags, core.waiters
    levels, caps, peaks = core.levels, core.caps, core.peaks
    weight = len(cores)
    task_id, op = task.task_id, task.op_name
    busy = 0
    tile_ends = []              # when each tile's last instruction on this pipe ended
    last_tile = -1
    rows = engine.rows
    pipe_access = engine.gm.pipe_access
    run: Run | None = None      # the open interval
    run_busy = 0
    stalled = 0                 # cycles its shared flows took beyond their own time
    spans = timeout_spans(queue)
    entries = queue_entries(queue)
    contig, per_tile = merge == "contig", merge == "tile"
    clock = 0                   # the end of the last instruction inside a merged timeout
    k = start = 0
    n = len(queue)
    # the fast-forward's view of this pipe; `hook.hot` after a resume: it may move the
    # pipe ahead by whole periods (its locals shifted: sim/fastforward.py)
    # (before each yield the pipe leaves its locals in `hook.at` for the checkpoints)
    hook = (NO_HOOK if engine.ff is None
            else engine.ff.enter(core, queue, spans, merge))
    while k < n:
        (ins, waits, sets, allocs, frees, tile, flow, own, cycles, cown, kind, src, dst,
         _, _, _) = entries[k]
        span = spans[k]
        if span < 0:
            # inside a run of plain timeouts already waited for as one: no flag, buffer
            # or tile change between them, so each one's times follow by arithmetic
            start = clock
            clock = end = start + cycles
        else:
            if tile != last_tile:
                if last_tile >= 0:
                    tile_ends.append(env._now)
                last_tile = tile
            if waits:
                for key in waits:
                    c = flags.get(key, 0)
                    if c > 0:
                        flags[key] = c - 1
                    else:
                        ev = make(Event)     # (`env.event()`, inline)
                        ev.env, ev.callbacks = env, []
                        waiters[key] = ev
                        hook.at = (k, busy, run_busy, start, stalled, run, ev, key)
                        yield ev
                        if hook.hot:
                            k, busy, run_busy, start, stalled = hook.resume(
                                k, busy, run_busy, start, stalled)
            if allocs:
                for buf, nb in allocs:       # (`Core.alloc`, inline)
                    level = levels[buf] + nb
                    if level > caps[buf]:
                        core.alloc(buf, nb)  # (raises: over capacity)
                    levels[buf] = level
                    if level > peaks.get(buf, 0):
                        peaks[buf] = level
            start = env._now
            if flow:
                # the L2 decides hits now; latency folded into the flow: uncontended it
                # takes cycles + bytes/bw, under contention the other flows use the
                # bandwidth while this one waits
                nbytes, write = ins.nbytes, ins.dst == GM
                hbm, bw = pipe_access(task_id, ins.tensors, nbytes, ins.hbm, write, ins.bw,
                                      weight)
                own = cycles + nbytes / bw
                cown = math.ceil(own)
                src, dst = level_name(ins.src, hbm), level_name(ins.dst, hbm)
                tmo = engine.fabric.transfer(nbytes, nbytes / own, hbm, weight, write=write)
                hook.at = (k, busy, run_busy, start, stalled, run, None, None)
                yield tmo
                if hook.hot:
                    k, busy, run_busy, start, stalled = hook.resume(
                        k, busy, run_busy, start, stalled)
                end = env._now
            else:
                # a merged run of plain timeouts waits its `span` (its first instruction
                # ends at start + cycles), a lone instruction its cycles
                delay = span or cycles
                if delay < 0:
                    raise ValueError(f"Negative delay {delay}")
                tmo = make(Timeout)
                tmo.env, tmo.callbacks, tmo._value, tmo._delay, tmo._ok = \
                    env, [], None, delay, True
                heappush(heap, (start + delay, NORMAL, next(ids), tmo))
                hook.at = (k, busy, run_busy, start, stalled, run, None, None)
                yield tmo
                if hook.hot:
                    k, busy, run_busy, start, stalled = hook.resume(
                        k, busy, run_busy, start, stalled)
                end = start + cycles if span else env._now
            clock = end
        if end > start:
            took = end - start
            stall = took - cown            # (max(0, int(took - cown)))
            stall = int(stall) if stall > 0 else 0
            stalled += stall
            if run is not None and (
                    (contig and run.end == start and run.kind == kind and run.src == src
                     and run.dst == dst)
                    or (per_tile and run.tile == tile) or merge == "all"):
                run_busy += took
                run.end = run.start + run_busy
                run.nbytes += ins.nbytes
                run.count += 1
                run.stall += stall
            else:
                if run is not None:
                    rows.append(run)
                run = Run(ENGINE_AICORE, cores, pipe, task_id, op, start, end, kind,
                          ins.nbytes, src, dst, 1, stall, tile)
                run_busy = took
            busy += took
        if frees:
            for buf, nb in frees:
                levels[buf] -= nb
        if sets:
            for key in sets:
                w = waiters.pop(key, None)
                if w is not None:               # (`w.succeed()`, inline)
                    w._ok, w._value = True, None
                    heappush(heap, (env._now, NORMAL, next(ids), w))
                else:
                    flags[key] = flags.get(key, 0) + 1
        k += 1
    if engine.ff is not None:
        engine.ff.leave(hook)
    if run is not None:
        rows.append(run)
    tile_ends.append(env._now)
    if note:
        engine.note_busy(task_id, cores[0], pipe, busy)
    return busy, tile_ends, stalled


__all__ = ["run_pipe"]
