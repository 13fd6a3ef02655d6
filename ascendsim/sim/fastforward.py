"""Exact steady-state fast-forward of periodic pipe loops in the engine (issue 15).

Note on the model
-----------------
A tile of a big convolution or GEMM runs hundreds to thousands of units on MTE2/MTE1/M, each
a few SimPy events (a flow, a timeout, a flag), and after the first handoffs the pipes settle
into a loop that repeats exactly: the same instructions at the same offsets, the same flows
on the fabric at the same rates. This module watches for that and skips the repetitions.

Checkpoints. Every pipe process of the engine (`pipe.run_pipe`) registers here (`enter`) and
leaves when its queue is done. One live pipe, the *driver* (the one with the fewest queue
entries among those with at least `MIN_ENTRIES`: the outer loop, e.g. MTE2 of a
convolution), takes a checkpoint when it resumes: a signature of everything that decides
what happens next, relative to now:
- every event in SimPy's queue (time - now, priority, order, which pipe it wakes, or a fabric
  wake and whether it is current); any other event (a kernel start, the host lane, an AI CPU,
  a process ending, a coalesced block-detail window) makes the state ineligible;
- every live pipe: the queue entry it is at (instruction, flags, buffer slots, tile, merged
  timeout span), where it waits (a flag and which, a timeout, a flow) with its start relative
  to now, and what decides whether its next instruction joins its open trace interval (in
  tile detail: the same kind and levels, and whether it ends where the next one can start;
  in block detail: the tile, or nothing);
- every live core's flag counters, waiting flags and buffer levels;
- the fabric: time since its last update and every flow in flight, in list order, with its
  remaining bytes, size, cap, HBM fraction, weight, write flag, rate and waiting pipe (floats
  compared bit for bit).
Nothing else runs while only pipes are live: every other process waits on an event that only
a pipe's end (which changes the live set, clearing the checkpoints) or a non-pipe event (which
makes the state ineligible) can trigger.

The jump. When a signature recurs, the state at S2 is the state at S1 shifted by P = t2 - t1
cycles, with pipe p advanced by d_p queue entries. If the entries ahead of every pipe repeat
with its d_p (compared entry by entry, merged spans too), the run from S2 is the run from S1
shifted by P, period after period, for as many periods m as the entries repeat (at most to
the end of the pipe's current tile). So the engine advances by m * P at once: every queued
event and the clock move by m * P (their order is kept; new events get later ids, as they
would), each pipe moves m * d_p entries ahead with its busy cycles, open interval and
counters advanced by m times their change over the period, and the trace rows the period
closed are appended m more times, shifted. Times are integer cycles (checked; any float time
makes the state ineligible), so every shifted time is exact, and every cycle, task record,
interval and peak equals the stepped simulation (tests/sim/test_fastforward.py). Buffer and
bandwidth peaks need no change: the skipped periods repeat levels and rates already seen.

State outside this signature: the L2 cache. A pipe's GM move asks the engine's L2 cache
(`GmAccount.pipe_access`, sim/gm.py) for its HBM fraction and path bandwidth, and the
cache's contents (residency, dirty bytes, LRU order, the running task's fills) and the
per-task byte sums change with every access, so they are not in the signature. Those two
results are all an access gives the timing: a move's flow takes its bytes, HBM fraction and
rate from them, its stall from the bandwidth. The engine logs each pipe access with its
arguments and results (`GmAccount.log`); a checkpoint notes the log's length. A jump over m
periods whose observed period made accesses A then (1) dry-runs A m times, in order, on a
copy of the cache (`L2Cache.copy`, `_l2_periods`); (2) keeps the periods up to the first
access whose result differs, bit for bit, from the one observed (with equal results, the run
from the checkpoint is the observed one shifted, access after access, so those periods are
exactly what stepping would do); (3) makes the kept periods' accesses on the real cache and
byte sums, in order (`_replay`: the same float operations on the same values as stepping).
The pipes' `stalled` cycles (their shared flows' time beyond their own) advance like `busy`.
A GM access by anything else (a coalesced block-detail slice's decision) counts in
`GmAccount.stateful_accesses`; no period holding one is skipped.

Cost control: a checkpoint costs a few tens of microseconds, so the driver takes one on
every `stride`-th resume, the stride doubling after a run of checkpoints without a jump. A
recurring signature is tried first with the observed period's L2 accesses on the cache copy
(while the cache fills, the first period already differs: most tries end there), then with
the entries ahead; the periods kept are the same whichever test comes first.
"""

from __future__ import annotations

import bisect
import sys
from types import MethodType
from typing import Any

from simpy.events import Process, Timeout

from .rows import Run

#: turn the fast-forward off for every Engine made afterwards (tests compare both forms)
ENABLED = True
#: a pipe drives checkpoints only if its queue has at least this many entries
MIN_ENTRIES = 64
#: the driver takes no checkpoint with fewer entries than this left in its tile
MIN_LEFT = 8
#: checkpoints kept per live set of pipes
MAX_SEEN = 64
#: checkpoints without a jump before the stride doubles, and the largest stride
PATIENCE = 16
MAX_STRIDE = 64
#: the most queued events a checkpoint looks at (more: other work is in flight)
MAX_QUEUE = 256

#: the attribute of the engine's GM accounting (sim/gm.py) counting GM accesses with side
#: effects beyond their flow made outside the pipes' logged ones: a period with any is not
#: skipped (see the module note)
STATEFUL_ACCESSES = "stateful_accesses"

_RESUME = Process._resume
_FLAG, _TIMEOUT, _FLOW = 0, 1, 2


class _NoHook:
    """The hook of a pipe when the fast-forward is off: never hot (`at` is never read)."""

    __slots__ = ("at",)
    hot = False


NO_HOOK = _NoHook()


class PipeHook:
    """One live pipe process (`pipe.run_pipe`): its frame (read for its locals), queue and
    pending shift.

    `hot` tells the pipe to call `resume` after a yield: it is the driver, or a jump moved it
    ahead (`pending`: entries, busy cycles, interval busy cycles, cycles, stall cycles to
    add)."""

    __slots__ = ("ff", "frame", "proc", "core", "queue", "spans", "hot", "pending", "index",
                 "tile_end", "merge", "at")

    def __init__(self, ff: FastForward, frame, proc, core, queue: list, spans: list,
                 merge: str | None = None) -> None:
        self.ff, self.frame, self.proc, self.core = ff, frame, proc, core
        # the pipe's interval merge rule, and its locals (k, busy, run_busy, start, stalled,
        # run, ev, key) as it left them at its last yield (None: read from its frame)
        self.merge, self.at = merge, None
        self.queue, self.spans = queue, spans
        self.hot = False
        self.pending: list[int] | None = None
        self.index = 0
        self.tile_end = 0          # (driver) the end of the tile of its entry, cached

    def resume(self, k: int, busy, run_busy, start, stalled):
        """The pipe's locals after a resume: shifted by a jump, then (driver) checkpointed."""
        pend = self.pending
        if pend is not None:
            self.pending = None
            k += pend[0]
            busy += pend[1]
            run_busy += pend[2]
            start += pend[3]
            stalled += pend[4]
            self.hot = self.ff.driver is self
        if self.ff.driver is self:
            out = self.ff.checkpoint(self, k, busy, run_busy, start, stalled)
            if out is not None:
                return out
        return k, busy, run_busy, start, stalled


class _Snap:
    """A checkpoint: its time, per pipe (k, busy, run_busy, run, run fields, start, stalled),
    how many trace rows the engine held, its count of stateful GM accesses outside the pipes
    and the length of the engine's log of the pipes' GM accesses."""

    __slots__ = ("now", "vals", "nrows", "accesses", "nlog")

    def __init__(self, now: int, vals: list, nrows: int, accesses: int, nlog: int) -> None:
        self.now, self.vals, self.nrows, self.accesses = now, vals, nrows, accesses
        self.nlog = nlog


class FastForward:
    """The engine's fast-forward controller (see the module note)."""

    def __init__(self, env, fabric, rows: list, gm: Any) -> None:
        # the engine's parts it reads and shifts: its SimPy environment, fabric, trace rows
        # and GM accounting (sim/gm.py: its L2 cache, `traffic`, `log`, `l2_access`)
        self.env = env
        self.fabric = fabric
        self.rows = rows
        self.gm = gm
        self.pipes: list[PipeHook] = []
        self.by_proc: dict[Any, PipeHook] = {}
        self.driver: PipeHook | None = None
        self.seen: dict[tuple, _Snap] = {}
        self.light: set[tuple] = set()
        self.stride = 1
        self.tick = 0
        self.misses = 0
        self.jumps = 0            # jumps made (tests check the fast path ran)
        self.skipped = 0          # cycles skipped by them
        self.replayed = 0         # GM accesses replayed on the L2 by them
        # the engine's log of its pipes' GM accesses with their results (None: it has none)
        self.engine_log: list | None = getattr(gm, "log", None)

    # -- the live set ----------------------------------------------------------------------
    def enter(self, core, queue: list, spans: list, merge: str | None = None) -> PipeHook:
        """Register the calling `run_pipe` generator (its frame and process); with `merge`, it
        leaves its locals in `hook.at` before each yield (cheaper than its frame's)."""
        hook = PipeHook(self, sys._getframe(1), self.env.active_process, core, queue, spans,
                        merge)
        self.pipes.append(hook)
        self.by_proc[hook.proc] = hook
        self._forget()
        drv = self.driver
        if len(queue) >= MIN_ENTRIES and (drv is None or len(queue) < len(drv.queue)):
            self._drive(hook)
        return hook

    def leave(self, hook: PipeHook) -> None:
        self.pipes.remove(hook)
        del self.by_proc[hook.proc]
        hook.hot = False
        hook.frame = hook.proc = hook.at = None     # (the frame refers back to the hook)
        self._forget()
        if hook is self.driver:
            best = None
            for h in self.pipes:
                if len(h.queue) >= MIN_ENTRIES and (best is None
                                                    or len(h.queue) < len(best.queue)):
                    best = h
            self._drive(best)

    def _forget(self) -> None:
        """The live set changed: the checkpoints no longer compare."""
        self._clear_seen()
        self.light.clear()
        self.stride, self.tick, self.misses = 1, 0, 0

    def _clear_seen(self) -> None:
        """Drop the checkpoints, and with them the log of GM accesses they index."""
        if self.seen:
            self.seen.clear()
        log = self.engine_log
        if log:
            log.clear()

    def _drive(self, hook: PipeHook | None) -> None:
        """Make `hook` the driver (the fewest queue entries of at least `MIN_ENTRIES`: the
        outer loop, whose resumes come once or twice per period)."""
        old, self.driver = self.driver, hook
        if old is not None and old is not hook:
            old.hot = old.pending is not None
        if hook is not None:
            hook.hot = True
            hook.tile_end = 0

    # -- checkpoints -----------------------------------------------------------------------
    def checkpoint(self, drv: PipeHook, k: int, busy, run_busy, start, stalled):
        """At a resume of the driver: record the state; jump if it repeats a recorded one.
        Returns the driver's shifted locals after a jump, else None."""
        self.tick += 1
        if self.tick % self.stride:
            return None
        if k >= drv.tile_end:
            drv.tile_end = _tile_end(drv.queue, k)
        if drv.tile_end - k < MIN_LEFT:     # too few entries left to repeat
            return None
        # a cheap first filter: the driver's entry and wait seen before in this live set
        entry = drv.queue[k]
        light = (id(entry[0]), entry[1], entry[2], entry[5], drv.spans[k],
                 type(drv.proc._target))
        if light not in self.light:
            self.light.add(light)
            return None
        got = self._snapshot(drv, k, busy, run_busy, start, stalled)
        if got is None:
            return self._missed()
        sig, snap = got
        prev = self.seen.get(sig)
        if prev is None:
            if len(self.seen) >= MAX_SEEN:
                self._clear_seen()
                snap.nlog = 0
            self.seen[sig] = snap
            return self._missed()
        plan = self._plan(prev, snap)
        if plan is None:
            self.seen[sig] = snap
            return self._missed()
        return self._jump(drv, prev, snap, *plan)

    def _missed(self) -> None:
        self.misses += 1
        if self.misses >= PATIENCE and self.stride < MAX_STRIDE:
            self.stride *= 2
            self.misses = 0
        return None

    def _snapshot(self, drv: PipeHook, k: int, busy, run_busy, start, stalled):
        """(signature, snapshot) of the engine's state now, or None if it is not eligible.

        One function of about 100 lines because the signature is one record read in one
        pass (SimPy's queue, the fabric's flows, every live pipe's locals and flags), each
        part refusing early; split, the parts would pass half-built tuples around, on a
        path the driver takes every few resumes."""
        env = self.env
        now = env._now
        heap = env._queue
        if type(now) is not int or len(heap) > MAX_QUEUE:
            return None
        fabric = self.fabric
        by_proc = self.by_proc
        for i, h in enumerate(self.pipes):
            h.index = i
        # queued events, in the order SimPy will process them
        events = []
        for t, prio, _eid, ev in sorted(heap):     # (ids are unique: as by (t, prio, id))
            cbs = ev.callbacks
            if type(t) is not int or cbs is None or len(cbs) != 1:
                return None
            cb = cbs[0]
            if type(cb) is MethodType and cb.__func__ is _RESUME:
                h = by_proc.get(cb.__self__)
                if h is None:
                    return None
                events.append((t - now, prio, h.index, type(ev) is Timeout))
            elif getattr(cb, "fabric", None) is fabric and hasattr(cb, "tok"):
                events.append((t - now, prio, -1, cb.tok == fabric.token))
            else:
                return None
        # the fabric
        last = fabric.last
        if type(last) is not int:
            return None
        flows = []
        for f in fabric.flows:
            cbs = f.event.callbacks
            if not cbs or len(cbs) != 1:
                return None
            cb = cbs[0]
            if type(cb) is not MethodType or cb.__func__ is not _RESUME:
                return None
            h = by_proc.get(cb.__self__)
            if h is None:
                return None
            flows.append((f.remaining, f.size, f.cap, f.hbm, f.weight, f.write, f.rate, h.index))
        # the pipes
        pipes, vals, cores = [], [], []
        for h in self.pipes:
            at, merge = h.at, h.merge
            if at is None or merge is None:
                loc = h.frame.f_locals
                at = (loc["k"], loc["busy"], loc["run_busy"], loc["start"], loc["stalled"],
                      loc["run"], loc.get("ev"), loc.get("key"))
                merge = loc["merge"]
            if h is drv:                 # running: just resumed from its target
                kh, bh, rbh, sh, st = k, busy, run_busy, start, stalled
            else:                         # suspended on its target
                kh, bh, rbh, sh, st = at[:5]
                pend = h.pending
                if pend is not None:
                    kh += pend[0]
                    bh += pend[1]
                    rbh += pend[2]
                    sh += pend[3]
                    st += pend[4]
            target = h.proc._target
            if target is at[6]:
                site = _FLAG
            elif type(target) is Timeout:
                site = _TIMEOUT
            else:
                site = _FLOW
            if (type(sh) is not int or type(bh) is not int or type(rbh) is not int
                    or type(st) is not int):
                return None
            ins, waits, sets, allocs, frees, tile = h.queue[kh]
            run = at[5]
            if run is None:
                rsig = rvals = None
            else:
                # what decides whether the next instruction joins the open interval
                if merge == "contig":   # back to back, same kind and levels
                    rsig = (run.kind, run.src, run.dst,
                            run.end == (now if site == _FLAG else sh))
                elif merge == "tile":
                    rsig = run.tile
                else:
                    rsig = ()
                rvals = (run.start, run.end, run.count, run.nbytes, run.stall)
            pipes.append((id(ins), waits, sets, allocs, frees, tile, h.spans[kh], site,
                          at[7] if site == _FLAG else None,
                          sh - now if site != _FLAG else None, rsig))
            vals.append((kh, bh, rbh, run, rvals, sh, st))
            if h.core not in cores:
                cores.append(h.core)
        state = []
        for c in cores:
            state.append((tuple(sorted(kv for kv in c.flags.items() if kv[1])),
                          tuple(sorted(c.waiters)), tuple(c.levels.values())))
        sig = (tuple(events), last - now, tuple(flows), tuple(pipes), tuple(state))
        log = self.engine_log
        return sig, _Snap(now, vals, len(self.rows),
                          getattr(self.gm, STATEFUL_ACCESSES, 0),
                          len(log) if log is not None else 0)

    # -- the jump --------------------------------------------------------------------------
    def _plan(self, prev: _Snap, cur: _Snap):
        """(periods m, period P, per-pipe entry advance d, the period's trace rows and GM
        accesses) for a jump from `cur`, or None."""
        period = cur.now - prev.now
        if period <= 0 or cur.accesses != prev.accesses:
            return None
        adv = []
        m = None
        for h, v1, v2 in zip(self.pipes, prev.vals, cur.vals):
            (k1, b1), (k2, b2) = v1[:2], v2[:2]
            d = k2 - k1
            if d < 0 or (d == 0 and (b2 != b1 or v1[6] != v2[6])):
                return None
            adv.append(d)
            if d:
                mp = (_tile_end(h.queue, k2) - 1 - k2) // d
                m = mp if m is None else min(m, mp)
        if not m or m < 1:
            return None
        # open intervals: the same one (advancing), or one that looks the same (closed and
        # reopened once per period)
        for (_, _, rb1, run1, rv1, *_), (_, _, rb2, run2, rv2, *_) in zip(prev.vals, cur.vals):
            if run1 is None:
                continue
            if run1 is run2:
                if any(type(v) is not int for v in rv2) or type(rv1[3]) is not int:
                    return None
            elif (rv1[0] - prev.now != rv2[0] - cur.now or rv1[2:] != rv2[2:] or rb1 != rb2
                  or any(type(v) is not int for v in rv2)):
                return None
        rows = self.rows[prev.nrows:cur.nrows]
        if any(type(r.start) is not int or type(r.end) is not int for r in rows):
            return None
        # the L2 (`_l2_periods`): the first period's accesses before the entries are compared
        # (the cheaper test, and the one that fails most often while the cache fills up)
        accesses = self.engine_log[prev.nlog:cur.nlog] if cur.nlog > prev.nlog else []
        l2 = None
        if accesses:
            l2 = self.gm.l2.copy()
            if self._l2_run(l2, accesses, 0, 1) < 1:
                return None
        # the entries ahead must repeat with each pipe's advance for m periods
        for h, d, (k2, *_) in zip(self.pipes, adv, cur.vals):
            if d:
                m = min(m, _repeats(h.queue, h.spans, k2, d, m))
                if m < 1:
                    return None
        if accesses:
            m = self._l2_run(l2, accesses, 1, m)
        return m, period, adv, rows, accesses

    def _l2_periods(self, accesses: list, m: int) -> int:
        """How many of the next `m` periods make the observed period's GM accesses with the
        same results (HBM fraction, bandwidth: all an access gives the timing), tried in
        order on a copy of the L2 cache; the periods up to the first difference."""
        return self._l2_run(self.gm.l2.copy(), accesses, 0, m)

    def _l2_run(self, l2, accesses: list, lo: int, hi: int) -> int:
        """Periods `lo` .. `hi` - 1 of `_l2_periods` on the cache copy `l2` (which has made
        the periods before `lo`): `hi`, or the first whose results differ."""
        access = self.gm.l2_access
        scratch: dict = {}          # (the per-task byte sums: they shape no timing)
        for i in range(lo, hi):
            for tid, tensors, nbytes, cold, write, bw, weight, out in accesses:
                if access(l2, scratch, tid, tensors, nbytes, cold, write, bw, weight) != out:
                    return i
        return hi

    def _replay(self, accesses: list, m: int) -> None:
        """Make the accesses of `m` skipped periods on the real cache, in order: the same
        operations, on the same values, as stepping through them (checked by `_l2_periods`
        to give the observed results)."""
        gm = self.gm
        access, l2, traffic = gm.l2_access, gm.l2, gm.traffic
        for _ in range(m):
            for tid, tensors, nbytes, cold, write, bw, weight, out in accesses:
                got = access(l2, traffic.setdefault(tid, {}), tid, tensors, nbytes, cold,
                             write, bw, weight)
                if got != out:   # (cannot happen: the copy gave these results)
                    raise RuntimeError("fast-forward: an L2 replay differs from its dry run")
        self.replayed += m * len(accesses)

    def _jump(self, drv: PipeHook, prev: _Snap, cur: _Snap, m: int, period: int, adv: list,
              rows: list, accesses: list):
        """Advance the engine by `m` periods (see the module note); the driver's locals."""
        env = self.env
        shift = m * period
        if accesses:
            self._replay(accesses, m)
        env._queue[:] = [(t + shift, p, e, ev) for t, p, e, ev in env._queue]
        env._now += shift
        self.fabric.last += shift
        out = self.rows
        for i in range(1, m + 1):
            s = i * period
            out.extend(Run(r.engine, r.cores, r.pipe, r.task_id, r.op, r.start + s,
                           r.end + s, r.kind, r.nbytes, r.src, r.dst, r.count, r.stall,
                           r.tile) for r in rows)
        result = None
        for h, d, v1, v2 in zip(self.pipes, adv, prev.vals, cur.vals):
            k1, b1, rb1, run1, rv1, *_ = v1
            k2, b2, rb2, run2, rv2, *_ = v2
            drb = 0
            if run2 is not None:
                if run1 is run2:
                    drb = m * (rb2 - rb1)
                    run2.end += m * (rv2[1] - rv1[1])
                    run2.count += m * (rv2[2] - rv1[2])
                    run2.nbytes += m * (rv2[3] - rv1[3])
                    run2.stall += m * (rv2[4] - rv1[4])
                else:
                    run2.start += shift
                    run2.end += shift
            delta = (m * d, m * (b2 - b1), drb, shift, m * (v2[6] - v1[6]))
            if h is drv:
                result = (k2 + delta[0], b2 + delta[1], rb2 + delta[2], v2[5] + shift,
                          v2[6] + delta[4])
            elif h.pending is None:
                h.pending = list(delta)
                h.hot = True
            else:
                h.pending = [a + b for a, b in zip(h.pending, delta)]
        self._clear_seen()
        self.jumps += 1
        self.skipped += shift
        return result


def _order(item: tuple) -> tuple:
    return item[:3]


def _tile_end(queue: list, k: int) -> int:
    """The index after the last entry of `queue` in the tile of entry `k`."""
    return bisect.bisect_right(queue, queue[k][5], lo=k, key=_tile_of)


def _tile_of(entry: tuple) -> int:
    return entry[5]


def _repeats(queue: list, spans: list, k: int, d: int, m: int) -> int:
    """The most periods (<= m) for which entries k .. k + m*d equal the ones d before."""
    hi = k + m * d + 1
    if queue[k:hi] == queue[k - d:hi - d] and spans[k:hi] == spans[k - d:hi - d]:
        return m
    # the first entry that breaks the repetition
    j = k
    while j < hi and queue[j] == queue[j - d] and spans[j] == spans[j - d]:
        j += 1
    return (j - 1 - k) // d


__all__ = ["ENABLED", "FastForward", "NO_HOOK", "PipeHook"]
