"""Replay: an identical later task is not simulated again (one stream, sunk).

Tasks run one at a time on the device when the graph is sunk on one stream, so a task whose
phases and met L2 contents equal an earlier one's (`replay_key`, `task_key`) takes the same
time relative to its start: the engine replays the earlier task's duration, rows, busy
cycles, buffer and fabric peaks, L2 transition and GM traffic instead of its events. The
functions here take the running `Engine` (`ascendsim.sim.engine`) and read or update its
public state: `env`, `rows`, `peaks`, `fabric`, `started`, `pipe_busy`, `gm`, `replayed`,
`replays`.
"""

from __future__ import annotations

from typing import Any

from .gm import GmAccount
from .mix import run_phases


class Replay:
    """What an identical later task replays: its duration, the offset of its first core
    grant, its rows (with start/end offsets), per-core busy cycles, buffer and fabric peaks."""

    __slots__ = ("duration", "first", "rows", "busy", "peaks", "fabric", "l2", "gm", "stats",
                 "roomy", "last", "sums", "block_dim", "leases")

    def __init__(self, duration: int, first: int, rows: tuple, busy: dict, peaks: dict,
                 fabric: tuple[float, float], l2: tuple, gm: dict, stats: dict,
                 roomy: bool, block_dim: int = 0, leases: dict | None = None) -> None:
        self.duration, self.first, self.rows = duration, first, rows
        self.busy, self.peaks, self.fabric = busy, peaks, fabric
        self.l2, self.gm, self.stats = l2, gm, stats   # L2 transition, GM traffic, L2 stats
        self.roomy = roomy                             # the transition is an own_transition
        self.last = max((int(b) for _, _, b in rows), default=0)   # the last row's end
        # the L2 byte counts a replay adds (the peak is a maximum, the flush comes later)
        self.sums = [(k, v) for k, v in stats.items()
                     if k not in ("peak_resident", "flush_cycles")]
        # the task's cores (equal keys: equal groups, so equal block dims, as the rows' cores)
        self.block_dim = block_dim
        self.leases = leases or {}     # its phases' AI Core ids (Engine.leased)


def replay_key(task) -> tuple:
    """Everything that decides a task's simulated timing when it runs alone on the device (one
    stream, sunk: the previous task has released every core and the fabric is idle when it
    starts, and every time is an integer cycle, so its timing relative to its start does not
    depend on when it starts): its phases, and the L2 contents it meets. Identical work shares
    its lowering memo template (`CoreGroup.template`: the same instructions, other GM tensor
    names), else its CoreGroup objects, so groups are compared by template or identity (they
    are frozen and the program keeps them alive); the rest of a Phase by value; the task type
    decides whether a split chip's AIC and AIV phases overlap (sim/mix.py). The L2 part
    (added by the engine) is, when the task cannot evict anything (`L2Cache.roomy`: the free
    bytes hold all of its tensors), only its own tensors' residency by role (order of first
    appearance in its moves; `own_state`), else the whole LRU with its tensors by role
    (`state`: any line may be evicted, or overwritten when dead) and which of its tensors
    are intermediates (their writes may overwrite dead lines). Equal states give equal hits,
    misses and write-backs; a replay also replays the cache's transition (with the same float
    increments of its occupancy), the task's GM traffic and the L2 byte counts."""
    return (task.task_type, *((ph.engine, ph.aicpu_cycles, ph.aicpu_cores, ph.vector_cores,
                               ph.aicpu_launch_cycles, ph.aicpu_read_bytes,
                               ph.aicpu_write_bytes,
                               tuple((g.template, 0) if g.template else (0, id(g))
                                     for g in ph.groups))
                              for ph in task.phases))


def task_key(gm: GmAccount, t) -> tuple:
    """The replay key of task `t` with the L2 it meets now (see `replay_key`)."""
    roles = gm.roles.get(t.task_id, {})
    l2 = gm.l2
    # which of its tensors are intermediates decides whether its writes overwrite dead lines
    readers = gm.readers
    inter = tuple(sorted(r for n, r in roles.items() if n in readers))
    if l2.roomy(gm.sizes.get(t.task_id, {})):
        return (replay_key(t), "roomy", inter, l2.own_state(roles, dead_tail(gm, t.task_id)))
    return (replay_key(t), "full", inter, l2.state(roles))


def dead_tail(gm: GmAccount, tid: int) -> list[str]:
    """The dead L2 lines task `tid`'s writes may overwrite (`L2Cache.dead_tail` of the
    sizes of the intermediates it touches)."""
    readers = gm.readers
    return gm.l2.dead_tail(sum(size for n, size in gm.sizes.get(tid, {}).items()
                               if n in readers))


def merge_peaks(into: dict[str, int], peaks: dict[str, int]) -> None:
    """Raise the buffer peaks of `into` to those of `peaks`."""
    for buf, level in peaks.items():
        if level > into.get(buf, 0):
            into[buf] = level


def run_recorded(engine: Any, t, key):
    """Simulate a task's phases; with a replay `key`, keep what a later identical task
    needs to replay it (its duration, rows, busy cycles and peaks, relative to its
    start)."""
    env, gm = engine.env, engine.gm
    if key is None:
        yield from run_phases(engine, t)      # in turn; a 910B mix kernel overlapped
        return
    start, first_row = env._now, len(engine.rows)
    l2_before, roles = list(gm.l2.lines), gm.roles.get(t.task_id, {})
    stats = gm.l2.stats
    stats_before = dict(stats.__dict__)    # (L2Stats: plain float and int fields)
    outer_l2_peak, stats.peak_resident = stats.peak_resident, 0.0
    roomy = key[1] == "roomy"
    tail = dead_tail(gm, t.task_id) if roomy else []
    if roomy:
        gm.l2.log = []
    outer_peaks, engine.peaks = engine.peaks, {}
    fabric = engine.fabric
    outer_fabric, (fabric.peak_l2, fabric.peak_hbm) = (fabric.peak_l2, fabric.peak_hbm), \
        (0.0, 0.0)
    try:
        yield from run_phases(engine, t)
    finally:
        task_peaks, engine.peaks = engine.peaks, outer_peaks
        task_fabric = (fabric.peak_l2, fabric.peak_hbm)
        fabric.peak_l2 = max(outer_fabric[0], task_fabric[0])
        fabric.peak_hbm = max(outer_fabric[1], task_fabric[1])
        merge_peaks(engine.peaks, task_peaks)
        task_l2_peak = stats.peak_resident
        stats.peak_resident = max(outer_l2_peak, task_l2_peak)
    leases = engine.leases.pop(t.task_id, None)
    transition = (gm.l2.own_transition(l2_before, roles, tail) if roomy else
                  gm.l2.transition(l2_before, roles))
    gm.l2.log = None
    if transition is None:
        return
    deltas = {k: v - stats_before[k] for k, v in stats.__dict__.items()}
    deltas["peak_resident"] = task_l2_peak
    engine.replays[key] = Replay(
        env._now - start, engine.started.get(t.task_id, env._now) - start,
        tuple((r, r.start - start, r.end - start) for r in engine.rows[first_row:]),
        {c: dict(b) for c, b in engine.pipe_busy[t.task_id].items()}, task_peaks,
        task_fabric, transition, dict(gm.traffic.get(t.task_id, {})), deltas, roomy,
        t.block_dim, leases)


def replay_task(engine: Any, t, seen: Replay, lead: int = 0, moved: dict | None = None):
    """An identical task simulated before (see `replay_key`): the same rows, busy cycles
    and peaks, shifted to `lead` cycles from now (its dispatch) and moved to its own cores
    (`moved`: the earlier task's core ids that differ, to this one's); one timeout instead
    of its events (nothing else runs meanwhile)."""
    env, gm = engine.env, engine.gm
    start = env._now + lead
    engine.started[t.task_id] = start + seen.first
    # its rows are made when the intervals are first read (`rows.expand_with_replays`)
    engine.replayed.append((seen, start, t.task_id, t.op_name, moved or {}))
    # (read-only from here on: `RecordBuilder.record` copies the busiest core's)
    engine.pipe_busy[t.task_id] = ({moved.get(c, c): b for c, b in seen.busy.items()}
                                   if moved else seen.busy)
    merge_peaks(engine.peaks, seen.peaks)
    fabric = engine.fabric
    if seen.fabric[0] > fabric.peak_l2:
        fabric.peak_l2 = seen.fabric[0]
    if seen.fabric[1] > fabric.peak_hbm:
        fabric.peak_hbm = seen.fabric[1]
    roles = gm.roles.get(t.task_id, {})
    by_role = sorted(roles, key=roles.__getitem__)
    l2 = gm.l2
    stats = l2.stats
    if seen.roomy:
        l2.apply_own(seen.l2, by_role, dead_tail(gm, t.task_id))
    else:
        l2.apply(seen.l2, by_role)
        if seen.stats["peak_resident"] > stats.peak_resident:
            stats.peak_resident = seen.stats["peak_resident"]
    if seen.gm:
        gm.traffic[t.task_id] = dict(seen.gm)
    counts = stats.__dict__              # (L2Stats: a plain dataclass)
    for k, v in seen.sums:
        counts[k] = counts[k] + v
    if seen.duration + lead:
        yield env.timeout(seen.duration + lead)


__all__ = ["Replay", "merge_peaks", "replay_key", "replay_task", "run_recorded",
           "task_key"]
