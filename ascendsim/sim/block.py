"""Block detail: a core group's identical tiles coalesced into a measured prefix and a window.

A core group with at least `COALESCE_MIN` tiles (or chunk tiles, `sim/coalesce.py`) runs its
first `PREFIX_TILES` tiles exactly, which measures the pipeline's contended pace, then the
remaining tiles as one interval per pipe spanning (remaining tiles x pace), each pipe's GM
bytes as up to `COALESCED_SLICES` lock-step flows through the shared fabric, the L2 deciding
each slice as it starts (see the note on the model in `ascendsim.sim.engine`, "Detail
levels"). The functions here take the running `Engine`: its `env`, `rows`, `fabric`, `gm`,
`caps_cube`, `peaks` and `note_busy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..hw.names import ENGINE_AICORE, GM
from ..lower.program import Segment, expand_flags
from . import coalesce
from .cores import Core
from .gm import GmAccount
from .pipe import run_pipe
from .rows import Run, level_name

#: block detail coalesces a core group's program when it has at least this many tiles
COALESCE_MIN = 8
#: tiles of a coalesced group run in tile detail first, to measure the contended pace
PREFIX_TILES = 4
#: a coalesced group's remaining tiles run as this many lock-step slices, each meeting the L2
COALESCED_SLICES = 8


@dataclass(frozen=True, slots=True)
class StageTotals:
    """One pipe stage summed over the coalesced tiles of a block-detail core group."""

    fixed: float          # fixed cycles (latencies, compute)
    at_cap: float         # cycles of its shared-fabric bytes at path bandwidth
    shared_bytes: float   # bytes through the shared L2/HBM fabric
    hbm_bytes: float      # ... of which reach HBM
    nbytes: int           # all bytes moved
    count: int            # instructions
    kind: str
    src: str
    dst: str
    writes: bool          # the shared bytes are mostly writes
    #: shared bytes per core by (tensors, cold miss fraction, write, path bandwidth)
    parts: tuple[tuple[tuple, float, bool, float, float], ...] = ()


def block_processes(engine: Any, task, segments: tuple[Segment, ...], core: Core,
                    cores: tuple[int, ...], chunks: bool = False) -> list:
    """Processes for one coalesced core group (its tiles, or with `chunks` the chunk
    tiles of sim/coalesce.py): PREFIX_TILES tiles in tile detail, then the remaining tiles
    as one interval per pipe at the measured pace (see the module note)."""
    env = engine.env
    prefix, rest = split_segments(segments, PREFIX_TILES)
    queues = expand_flags(prefix)
    stages0 = segments[0].stages
    suffix = None
    if chunks:
        # the last chunk tile runs exactly after the window, on a fresh core: the tile's
        # drain after its loop (the last units, the per-tile stages) in order
        rest, last = split_segments(rest, sum(sg.count for sg in rest) - 1)
        suffix = (Core(engine.caps_cube, core.label, task.op_name, engine.peaks),
                  expand_flags(last))
    tot = stage_totals(rest, len(stages0))
    n_rest = sum(sg.count for sg in rest)
    # the pipes with shared bytes run their slices in lock step (`decide_slice`)
    members = [(j, t, len(cores)) for j, t in enumerate(tot) if t.shared_bytes]
    # the pace is the paced stages' (coalesce.pace_profile: chunk tiles' per-tile work
    # is left out)
    barrier = {"left": len(stages0), "busy": [], "event": env.event(), "ends": [],
               "pace": coalesce.pace_profile(segments, prefix, chunks), "suffix": suffix,
               "slices": {"members": members, "left": len(members), "event": env.event(),
                          "flowed": 0, "read": 0, "ahead": 0, "dec": {}}}
    return [env.process(_coalesced_pipe(engine, task, core, cores, st.pipe, queues[st.pipe],
                                        n_rest, tot[j], barrier, j))
            for j, st in enumerate(stages0)]


def _coalesced_pipe(engine: Any, task, core, cores, pipe, queue, n_rest, tot, barrier, j):
    """One pipe `j` of a coalesced core group: its prefix tiles exactly, its pace into the
    group's `barrier` (`_join`), then the remaining `n_rest` tiles as one interval (its
    shared bytes as lock-step slices: `_shared_window`), then a chunked group's last chunk
    tile (`_suffix`)."""
    env = engine.env
    busy, tile_ends, stalled = yield from run_pipe(engine, task, core, cores, pipe, queue,
                                                   note=False, merge="all")
    _join(engine, task, barrier, busy, tile_ends, stalled, tot, n_rest, j)
    period = yield barrier["event"]
    if tot.shared_bytes:
        yield from _shared_window(engine, task, cores, pipe, tot, barrier, j, n_rest, period,
                                  busy, stalled)
        return
    fixed = tot.fixed
    start = env.now
    window = max(n_rest * period, fixed, 1.0)
    end = start + int(round(fixed))
    if end > start:
        engine.rows.append(Run(ENGINE_AICORE, cores, pipe, task.task_id, task.op_name,
                               start, end, tot.kind, tot.nbytes, level_name(tot.src, 0.0),
                               level_name(tot.dst, 0.0),
                               tot.count))
    engine.note_busy(task.task_id, cores[0], pipe, busy + end - start)
    yield env.timeout(int(math.ceil(window)))
    yield from _suffix(engine, task, cores, pipe, barrier)


def _join(engine: Any, task, barrier: dict, busy, tile_ends: list, stalled, tot: StageTotals,
          n_rest: int, j: int) -> None:
    """Pipe `j`'s prefix into the group's `barrier`; the last pipe to join sets the period,
    decides the first slice and fires the barrier's event with the period."""
    # this pipe's pace on the prefix: busy cycles per tile, and the spacing of its tile
    # completions after the first (which includes the pipeline's own stalls); without
    # the fabric's contention (`stalled`): the window's flows cross the fabric and meet
    # their own contention there, which may differ from the prefix's (the L2 writes back
    # a previous op's dirty lines while the prefix runs, its own later)
    paced, once = barrier["pace"]
    free = max(0.0, busy - stalled - once[j]) / PREFIX_TILES
    spacing = 0.0
    if any(once) and len(tile_ends) >= 2:
        # a prefix whose first tile does work the others do not (`coalesce.pace_profile`)
        # delays the tiles after it until the double-buffered pipeline refills: the steady
        # spacing is that of its last two tiles
        spacing = tile_ends[-1] - tile_ends[-2]
    elif len(tile_ends) >= 2:
        spacing = (tile_ends[-1] - tile_ends[0]) / (len(tile_ends) - 1)
    if paced[j]:
        barrier["busy"].append((free, spacing, stalled / PREFIX_TILES))
    if tot.shared_bytes:
        barrier["ends"].append((tot.writes, tile_ends))
    barrier["left"] -= 1
    if barrier["left"] == 0:
        # steady-state period: the slowest pace of any pipe, its own work or the spacing
        # of its tiles less the most contention any pipe met per tile
        paces = barrier["busy"]
        worst = max(p[2] for p in paces)
        period = max(max(p[0], p[1] - worst) for p in paces)
        if barrier["suffix"] is not None:
            # chunk tiles: the loop's own work per chunk. Its stages are a chain of
            # double-buffered handoffs of fixed work, whose pace is its busiest stage's; the
            # spacing of a few short chunks still holds the pipeline's fill
            period = max(p[0] for p in paces)
        sl = barrier["slices"]
        sl["ahead"] = read_ahead(barrier["ends"], period, n_rest)
        if sl["members"]:
            decide_slice(engine.gm, task.task_id, sl)
        barrier["event"].succeed(period)


def _shared_window(engine: Any, task, cores, pipe, tot: StageTotals, barrier: dict, j: int,
                   n_rest: int, period, busy, stalled):
    """The remaining tiles of pipe `j`, whose stages move shared bytes, as one interval."""
    env = engine.env
    fixed, sbytes = tot.fixed, tot.shared_bytes
    start = env.now
    # the remaining tiles in slices of `COALESCED_SLICES`, one after the other in lock
    # step (`decide_slice`): each spans its share of the window (the pipeline's pace)
    # and its bytes cross the shared L2/HBM as one flow that stretches under more
    # contention
    n_sl = COALESCED_SLICES
    # its own work at its prefix rate
    own = n_rest * max(0.0, busy - stalled - barrier["pace"][1][j]) / PREFIX_TILES
    work = stall = hbm_all = 0.0
    sl = barrier["slices"]
    while True:
        t0 = env.now
        units, hbm_b, at_cap = sl["dec"][j]
        share = units / n_sl
        part = sbytes * share
        window = max(n_rest * period * share, fixed * share + at_cap, 1.0)
        yield engine.fabric.transfer(part, part / window, hbm_b / part, len(cores),
                                     write=tot.writes)
        elapsed = env.now - t0
        # busy: its own work (not the idle part of the slice), plus any stretch beyond
        # the slice's window
        fixed_at = fixed * share + at_cap
        done = min(elapsed, max(fixed_at, own * share) + max(0.0, elapsed - window))
        work += done
        stall += max(0.0, done - fixed_at)
        hbm_all += hbm_b
        if elapsed < window:       # (times are integers: only differences are floats)
            yield env.timeout(int(math.ceil(window - elapsed)))
        # the next slice starts when every pipe has finished this one (a tile's write
        # follows its read, its read the previous tile's compute)
        last = sl["flowed"] >= n_sl
        sl["left"] -= 1
        if sl["left"] == 0:
            ev = sl["event"]
            sl["left"], sl["event"] = len(sl["members"]), env.event()
            if not last:
                decide_slice(engine.gm, task.task_id, sl)
            ev.succeed()
        else:
            yield sl["event"]
        if last:
            break
    end = start + int(math.ceil(work))
    hbm = hbm_all / sbytes
    if end > start:
        engine.rows.append(Run(ENGINE_AICORE, cores, pipe, task.task_id, task.op_name, start,
                               end, tot.kind, tot.nbytes, level_name(tot.src, hbm),
                               level_name(tot.dst, hbm), tot.count, int(math.ceil(stall))))
    engine.note_busy(task.task_id, cores[0], pipe, busy + end - start)
    yield from _suffix(engine, task, cores, pipe, barrier)


def _suffix(engine: Any, task, cores, pipe, barrier):
    """A chunked group's last chunk tile on `pipe`, exactly, after its window
    (`block_processes`)."""
    if barrier["suffix"] is not None:
        core, queues = barrier["suffix"]
        yield from run_pipe(engine, task, core, cores, pipe, queues[pipe], merge="all")


def decide_slice(gm: GmAccount, tid: int, sl: dict) -> None:
    """The L2 accesses of the next slice of a coalesced group's pipes (`sl["members"]`:
    index, stage totals, cores), decided as it starts: the reads first, and for the
    slices `ahead` further on (they run ahead of the writes by the prefix's pipeline
    depth, double buffering), then the writes. A slice is one `COALESCED_SLICES`-th of
    the remaining tiles, or all that is left once the cache's free bytes hold every byte
    the group still moves (no eviction can follow: deciding it at once changes nothing).
    Sets `sl["dec"]`: per member (slices it covers, HBM bytes per core, cycles of its
    shared bytes at the de-rated path bandwidth)."""
    n_sl = COALESCED_SLICES
    flowed = sl["flowed"]
    rest = n_sl - flowed
    need = sum(t.shared_bytes * w for _, t, w in sl["members"]) * rest / n_sl
    units = rest if need <= gm.l2.capacity - gm.l2.used else 1
    read_to = n_sl if units == rest else min(n_sl, flowed + units + sl["ahead"])
    dec = {}
    eff_of = sl.setdefault("eff", {})
    for writes in (False, True):
        for j, t, weight in sl["members"]:
            if t.writes != writes:
                continue
            new = units if writes else read_to - sl["read"]
            if not t.parts:
                dec[j] = (units, t.hbm_bytes * units / n_sl, t.at_cap * units / n_sl)
                continue
            hbm_b = at_cap = 0.0
            for i, (tensors, cold, write, bw, nbytes) in enumerate(t.parts):
                part = nbytes * new / n_sl
                eff = eff_of.get((j, i), bw)     # (reads decided ahead: the last rate)
                if part > 0:
                    frac, eff = gm.access(tid, tensors, part, cold, write, bw, weight)
                    hbm_b += part * frac
                    eff_of[(j, i)] = eff
                at_cap += nbytes * units / n_sl / eff
            dec[j] = (units, hbm_b, at_cap)
    sl["read"] = read_to
    sl["flowed"] = flowed + units
    sl["dec"] = dec


def read_ahead(ends: list, period: float, n_rest: int) -> float:
    """Slices of `COALESCED_SLICES` (a fraction of one too) the reads of a coalesced group
    run ahead of its writes: the mean lag of the writing pipes' tile completions behind the
    reading pipes' in the prefix (`ends`: (writes, tile end times) per pipe with shared
    bytes), in tiles, scaled to the remaining tiles."""
    reads = [e for w, e in ends if not w]
    writes = [e for w, e in ends if w]
    if not reads or not writes or period <= 0 or n_rest <= 0:
        return 0
    lag = max(sum(b - a for a, b in zip(min(reads, key=lambda e: e[0]), w)) / len(w)
              for w in writes) / period
    return max(0.0, min(COALESCED_SLICES - 1.0, lag * COALESCED_SLICES / n_rest))


def split_segments(segments, k: int) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
    """The first `k` tiles of a segment list, and the rest."""
    head: list[Segment] = []
    tail: list[Segment] = []
    left = k
    for sg in segments:
        if left >= sg.count:
            head.append(sg)
            left -= sg.count
        elif left > 0:
            head.append(Segment(sg.stages, left))
            tail.append(Segment(sg.stages, sg.count - left))
            left = 0
        else:
            tail.append(sg)
    return tuple(head), tuple(tail)


def stage_totals(segments, n: int) -> list[StageTotals]:
    """Per stage, the totals over all tiles of `segments` (see `StageTotals`)."""
    out = []
    for j in range(n):
        fixed = at_cap = sbytes = hbytes = wbytes = 0.0
        nbytes = count = 0
        kind = src = dst = ""
        parts: dict[tuple, float] = {}
        for sg in segments:
            st = sg.stages[j]
            for ins, times in [(i, st.units) for i in st.instrs] + [(i, 1) for i in st.head]:
                if ins.kind == coalesce.HANDOFF_KIND:      # a chunk's handoff: no work
                    continue
                k = times * sg.count
                count += k
                nbytes += ins.nbytes * k
                if not kind:
                    kind, src, dst = ins.kind, ins.src, ins.dst
                fixed += ins.cycles * k
                if ins.shared and ins.nbytes:
                    at_cap += ins.nbytes / ins.bw * k
                    sbytes += ins.nbytes * k
                    hbytes += ins.nbytes * ins.hbm * k
                    wbytes += ins.nbytes * k if ins.dst == GM else 0.0
                    key = (ins.tensors, ins.hbm, ins.dst == GM, ins.bw)
                    parts[key] = parts.get(key, 0.0) + ins.nbytes * k
        out.append(StageTotals(fixed, at_cap, sbytes, hbytes, nbytes, count, kind, src, dst,
                                wbytes > sbytes / 2,
                                tuple((*key, b) for key, b in parts.items())))
    return out


__all__ = ["COALESCED_SLICES", "COALESCE_MIN", "PREFIX_TILES", "StageTotals",
           "block_processes", "decide_slice", "read_ahead", "split_segments", "stage_totals"]
