"""The SimPy chip model that runs a lowered `Program` and records a `Trace`.

Note on the model
-----------------
Time is integer cycles of the AI Core clock; SimPy orders same-time events by priority and
then by a global sequence number, so a run repeats bit for bit.

Pipes. Every AI Core pipe (S, V, M, MTE1, MTE2, MTE3, FIX) of a running core is one SimPy
process that executes its instruction queue strictly in order. Cross-pipe ordering uses
set_flag/wait_flag: a flag is a counter per (src pipe, dst pipe, event id) of one core; a
wait blocks the pipe until the counter is positive and decrements it (the hardware bit is
0/1; with the ping-pong event ids a counter never exceeds 1 here). Buffers (L0A, L0B, L0C,
L1, UB) are capacity-checked levels per core: an allocation over capacity raises
SimulationError naming the buffer, the core and the op, and the peak level of each buffer is
kept for the invariant checks.

Shared bandwidth (`Fabric`). A move that touches GM is a fluid flow: all its bytes cross L2
and its miss/write-through fraction also crosses HBM/DDR; moves into GM (writes) also share
the chip's L2 write bandwidth, lower than its read bandwidth. Whenever a flow starts or ends,
the rates of all flows in flight are recomputed by max-min fair sharing (progressive
filling) of L2, L2-write and HBM bandwidth, each flow also capped by its per-core path
bandwidth; so 32 cores streaming at once share HBM instead of each getting the full figure.
A move's fixed DMA latency is folded into its flow as a lower rate cap, bytes / (latency +
bytes / path bandwidth): uncontended it takes exactly latency + bytes/bw; under contention
the bandwidth it leaves idle while "in latency" goes to the other flows (requests overlap in
the memory system), so a memory-bound op reaches the shared bandwidth.

L2 as a cache (`l2cache.L2Cache`, one per run). When a GM move that names its tensors starts,
the cache decides its miss bytes (HBM bytes of the flow, and the msKPP per-core de-rate
`bw x (1 - miss + miss / l2_miss_slowdown)` at that fraction) and what it evicts: the dirty
bytes it evicts must reach HBM before their lines take the new data, so they are HBM bytes
of the same flow (its HBM fraction may exceed 1), counted in the task's ("DDR", "write")
traffic. When every task is done, what is still dirty is flushed to HBM as one more flow:
its bytes and cycles are in `Trace.l2` (`L2Stats`), not in the graph's time (the last
kernel has finished; the data is already visible in L2). A task's recorded GM
traffic is the simulated one. A write-back rides in the flow whose fill evicts it: a line is
written back when a fill needs it, so write-backs are paced by the fills (the evicting core's
path cap limits them no more than it limits the fills), and they take HBM bandwidth only.

Symmetric cores. Cores of one `CoreGroup` run the same program from the same instant and get
the same share of bandwidth, so one set of pipe processes stands for the whole group: its
flows weigh `len(cores)` in the sharing, and its intervals are replicated for every core of
the group in the trace. `symmetric=False` runs one set of processes per core instead (the
literal model; same cycles, slower).

Detail levels over the one model. detail="tile": every tile instruction is an event, and
back-to-back instructions of one kind on a pipe form one trace interval. detail="block": a
core group whose program has at least `COALESCE_MIN` tiles runs its first `PREFIX_TILES` tiles
exactly as in tile detail (flags, buffers, flows), which measures the pipeline's contended
pace: the largest, over its pipes, of busy cycles per tile and of the spacing of tile
completions, less the fabric contention the prefix met (the window's flows meet their own,
which differs from the prefix's when the prefix evicts a previous op's dirty lines). The
remaining identical tiles then run as ONE interval per pipe that spans (remaining tiles x
pace): fixed cycles as such, and each pipe's GM bytes as up to `COALESCED_SLICES` flows in
lock step (every pipe's slice k ends before any slice k + 1 starts), each capped to spread over
its share of the window, through the same Fabric, so that contention with everything else in
flight still stretches it. The L2 decides each slice's hits and write-backs when it starts
(the cache's state changes during the window: a single flow would average the write-backs of
a cache that fills up), the reads ahead of the writes by the prefix's pipeline depth; once
the free L2 holds everything the group still moves, the rest is one slice.
A group with fewer tiles runs in tile detail (its trace shows one
interval per pipe per tile), unless its tiles hold long unit loops (a weight gradient's or a
long-K GEMM's K loop of hundreds to thousands of k-steps): `sim/coalesce.py` then splits each
tile into identical chunk tiles of a few dozen units (the per-tile setup in the first chunk,
the L0C drain and the store in the last), coalesced as above, except that the pace is the
busiest loop stage's own work per chunk (the per-tile stages and the once-per-tile heads left
out) and the last chunk runs exactly after the window, so the last tile's drain follows its
loop in order (its note). The prefix of each pipe is shown as one interval of its busy
cycles, starting at its first instruction, the rest as one more (a chunked group's last chunk
as a third).

Steady state. A tile of thousands of units settles into an exact loop; `sim/fastforward.py`
notices when the whole state repeats with a time shift and advances the remaining periods by
arithmetic (same cycles, records and intervals as stepping them; see its note). The L2
accesses of the skipped periods are made on the cache, after a copy has shown they give the
results the observed period's did.

Kernel start. Every block (a core's share of an AI Core phase) begins with
`kernel_start_us` on the scalar pipe before any of its pipes issues: instruction fetch
into the cold icache, the kernel arguments and tiling data read from GM by the scalar unit,
the scalar prologue that derives the block's offsets, and the end-of-kernel synchronisation
folded in. It delays nothing but the block itself (other tasks' cores run on), shows as one
"kernel_start" interval per core on pipe S and counts as scalar busy time. It is why a tiny
kernel costs a few microseconds in msprof however little it moves. The start grows with
the number of blocks the kernel starts (Ascend C best practices, "Setting a Proper Number of
Cores": core start-up, TLB misses, same-address conflicts and variable initialisation make "the
header overhead increase with the number of used cores"): `block_start_us` per block beyond
the first, a chip figure (absent: 0), paid by every block of the kernel.

Scheduler. Streams run their tasks in order; a task also waits for its producers on other
streams (events). Every task, in every mode, pays the device-side dispatch `sink_launch_us`
(the task scheduler handing the task to the cores) once its producers are done. The launch
modes differ in what comes before: mode="sink": nothing (the graph is sunk on the device);
mode="host": a HOST lane launches the tasks one by one, `host_launch_us` each (the E of
E/R/C/W), running ahead of the device, and a task cannot start before its launch is done;
mode="eager": synchronised single-op calls (a framework's eager mode timed call by call): the
host launches a task only after the previous one finished and the host synchronised
(`host_sync_us`), so nothing overlaps. Hence sink <= host <= eager for any graph.
A task takes `block_dim` cores from its engine's pool (AI Cores, the AIVs of split chips, AI
CPUs) and gives them back when it ends. An AI CPU phase (`ascendsim.sim.aicpu`) runs its
launch, its reads of GM, its compute and its writes in turn, the reads and writes as flows of
the same Fabric as the AI Cores' moves. A task's phases run in turn, except a 910B mix
kernel's AIC and AIV phases, which overlap as their cross-core flags allow
(`ascendsim.sim.mix`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

import numpy as np
import simpy
from simpy.events import NORMAL, PENDING, Event, Timeout

from ..errors import ConfigError, SimulationError
from ..gcpause import gc_paused
from ..hw.names import ENGINE_AICORE, ENGINE_AICPU, ENGINE_HOST, GM, MODES
from ..lower.lowering import memory_cycles
from ..lower.program import CoreGroup, Program, Segment, expand_flags
from . import coalesce, fastforward
from .aicpu import run_aicpu
from .l2cache import L2Cache
from .mix import run_phases
from .trace import Interval, TaskRecord, Trace

#: block detail coalesces a core group's program when it has at least this many tiles
COALESCE_MIN = 8
#: tiles of a coalesced group run in tile detail first, to measure the contended pace
PREFIX_TILES = 4
#: the trace kind of the block start interval on the scalar pipe
KERNEL_START_KIND = "kernel_start"
_EPS = 1e-9
#: a coalesced group's remaining tiles run as this many lock-step slices, each meeting the L2
COALESCED_SLICES = 8


# ----------------------------------------------------------------------------- fabric
class _Flow:
    __slots__ = ("remaining", "cap", "hbm", "weight", "rate", "event", "size", "write")

    def __init__(self, nbytes: float, cap: float, hbm: float, weight: int, event,
                 write: bool = False) -> None:
        self.remaining = float(nbytes)
        self.size = float(nbytes)
        self.cap = cap
        self.hbm = hbm
        self.weight = weight
        self.write = write
        self.rate = 0.0
        self.event = event


class Fabric:
    """L2, L2-write and HBM bandwidth shared by every GM flow in flight (max-min fair, fluid).

    Bandwidths are bytes/cycle; `l2_write_bw` (default: no separate limit) caps the flows
    that write GM, which also count against `l2_bw`.
    """

    def __init__(self, env: simpy.Environment, l2_bw: float, hbm_bw: float,
                 l2_write_bw: float | None = None) -> None:
        self.env = env
        self.l2_bw = l2_bw
        self.hbm_bw = hbm_bw
        self.l2_write_bw = l2_write_bw if l2_write_bw is not None else math.inf
        self.flows: list[_Flow] = []
        self.last = 0
        self.token = 0
        self.peak_l2 = 0.0
        self.peak_hbm = 0.0

    def transfer(self, nbytes: float, cap: float, hbm: float, weight: int = 1,
                 write: bool = False):
        """An event that fires when `nbytes` have moved (per core; `weight` identical cores);
        `write` marks a move into GM (shares the L2 write bandwidth)."""
        env = self.env
        ev = object.__new__(Event)          # (`env.event()`, inline)
        ev.env, ev.callbacks = env, []
        if nbytes <= 0:
            ev.succeed()
            return ev
        self._advance()
        self.flows.append(_Flow(nbytes, cap, hbm, weight, ev, write))
        self._reschedule()
        return ev

    def _advance(self) -> None:
        now = self.env._now
        dt = now - self.last
        if dt:
            for f in self.flows:
                f.remaining -= f.rate * dt
        self.last = now

    def _rates(self) -> None:
        """Progressive filling: raise every unfrozen rate together until a cap or a resource
        binds, freeze what is bound, repeat. (Each pass sums in flow order, as `sum` would:
        the same floats bit for bit.)"""
        flows = self.flows
        if len(flows) == 1:
            self._rate_one(flows[0])
            return
        for f in flows:
            f.rate = 0.0
        active = flows
        l2_bw, hbm_bw, wr_bw = self.l2_bw, self.hbm_bw, self.l2_write_bw
        res_l2, res_hbm, res_wr = l2_bw, hbm_bw, wr_bw
        while active:
            s_l2 = s_hbm = s_wr = 0
            d = None
            for f in active:
                w = f.weight
                s_l2 += w
                s_hbm += w * f.hbm
                if f.write:
                    s_wr += w
                g = f.cap - f.rate
                if d is None or g < d:          # (`min`: the first of the least)
                    d = g
            d = _fill_step(d, res_l2, s_l2, res_hbm, s_hbm, res_wr, s_wr)
            for f in active:
                f.rate += d
            res_l2 -= d * s_l2
            res_hbm -= d * s_hbm
            res_wr -= d * s_wr
            if res_l2 <= _EPS * l2_bw:          # L2 saturated: every flow is bound
                break
            sat_hbm = res_hbm <= _EPS * hbm_bw
            sat_wr = math.isfinite(res_wr) and res_wr <= _EPS * wr_bw
            active = [f for f in active if f.cap - f.rate > _EPS * f.cap
                      and not (sat_hbm and f.hbm > 0) and not (sat_wr and f.write)]
        use_l2 = use_hbm = 0
        for f in flows:
            wr = f.weight * f.rate
            use_l2 += wr
            use_hbm += wr * f.hbm
        if use_l2 > self.peak_l2:
            self.peak_l2 = use_l2
        if use_hbm > self.peak_hbm:
            self.peak_hbm = use_hbm

    def _rate_one(self, f: _Flow) -> None:
        """`_rates` of a single flow in flight (the common case): the same passes and the
        same float operations on scalars."""
        f.rate = 0.0
        w, hbm, write, cap = f.weight, f.hbm, f.write, f.cap
        l2_bw, hbm_bw, wr_bw = self.l2_bw, self.hbm_bw, self.l2_write_bw
        res_l2, res_hbm, res_wr = l2_bw, hbm_bw, wr_bw
        s_l2 = 0 + w                   # (the sums of one term, as `_rates` makes them)
        s_hbm = 0 + w * hbm
        s_wr = 0 + w if write else 0
        rate = 0.0
        while True:
            d = _fill_step(cap - rate, res_l2, s_l2, res_hbm, s_hbm, res_wr, s_wr)
            rate += d
            res_l2 -= d * s_l2
            res_hbm -= d * s_hbm
            res_wr -= d * s_wr
            if res_l2 <= _EPS * l2_bw:
                break
            sat_hbm = res_hbm <= _EPS * hbm_bw
            sat_wr = math.isfinite(res_wr) and res_wr <= _EPS * wr_bw
            if not (cap - rate > _EPS * cap and not (sat_hbm and hbm > 0)
                    and not (sat_wr and write)):
                break
        f.rate = rate
        wr = w * rate
        use_l2 = 0 + wr
        use_hbm = 0 + wr * hbm
        if use_l2 > self.peak_l2:
            self.peak_l2 = use_l2
        if use_hbm > self.peak_hbm:
            self.peak_hbm = use_hbm

    def _reschedule(self) -> None:
        self._rates()
        self.token += 1
        if not self.flows:
            return
        delay = None
        for f in self.flows:
            rate = f.rate
            if rate > 0:
                left = f.remaining
                if left < 0.0:
                    left = 0.0
                t = math.ceil(left / rate - _EPS)
            else:
                t = 1
            if delay is None or t < delay:
                delay = t
        # (SimPy's Timeout with the wake as its callback, built and scheduled inline)
        env = self.env
        delay = delay if delay > 0 else 0
        tmo = Timeout.__new__(Timeout)
        tmo.env, tmo.callbacks, tmo._value, tmo._delay, tmo._ok = \
            env, [_Wake(self, self.token)], None, delay, True
        heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), tmo))

    def _wake(self, tok: int) -> None:
        if tok != self.token:
            return
        self._advance()
        flows = self.flows
        done = [f for f in flows if f.remaining <= _EPS * max(f.size, 1.0)
                or f.remaining <= f.rate * 1e-6]
        if not done and flows:
            # the earliest flow ends within this cycle (integer rounding): finish it
            first = min(flows, key=lambda f: f.remaining / f.rate if f.rate else math.inf)
            done = [first]
        env = self.env
        for f in done:
            flows.remove(f)
            ev = f.event                    # (`succeed()`, inline)
            ev._ok, ev._value = True, None
            heappush(env._queue, (env._now, NORMAL, next(env._eid), ev))
        self._reschedule()


def _fill_step(d: float, res_l2: float, s_l2: float, res_hbm: float, s_hbm: float,
               res_wr: float, s_wr: float) -> float:
    """One pass of progressive filling: the rise `d` (the least headroom under a cap) bounded
    by each resource's remaining bandwidth over its weight, at least 0 (the comparisons of
    `max(min(d, x, ...), 0.0)`, the same floats)."""
    if s_l2 > 0:
        x = res_l2 / s_l2
        if x < d:
            d = x
    if s_hbm > 0:
        x = res_hbm / s_hbm
        if x < d:
            d = x
    if s_wr > 0:
        x = res_wr / s_wr
        if x < d:
            d = x
    if 0.0 > d:
        d = 0.0
    return d


class _Wake:
    """The callback of a fabric timeout: wakes the fabric if no flow started or ended since
    (`tok`); an object, not a closure, so the fast-forward can read it (sim/fastforward.py)."""

    __slots__ = ("fabric", "tok")

    def __init__(self, fabric: Fabric, tok: int) -> None:
        self.fabric, self.tok = fabric, tok

    def __call__(self, _ev) -> None:
        self.fabric._wake(self.tok)


# ----------------------------------------------------------------------------- core state
class _Core:
    """Flags and buffer levels of one core (or of a symmetric group of cores)."""

    __slots__ = ("flags", "waiters", "levels", "caps", "label", "op", "peaks")

    def __init__(self, caps: dict[str, int], label: str, op: str, peaks: dict) -> None:
        self.flags: dict[tuple, int] = {}
        self.waiters: dict[tuple, Any] = {}
        self.levels = dict.fromkeys(caps, 0)
        self.caps = caps
        self.label = label
        self.op = op
        self.peaks = peaks

    def alloc(self, buf: str, nbytes: int) -> None:
        level = self.levels[buf] + nbytes
        if level > self.caps[buf]:
            raise SimulationError(f"buffer {buf} of {self.label} over capacity in op "
                                  f"'{self.op}': {level} B > {self.caps[buf]} B")
        self.levels[buf] = level
        if level > self.peaks.get(buf, 0):
            self.peaks[buf] = level

    def free(self, buf: str, nbytes: int) -> None:
        self.levels[buf] -= nbytes


class _Pool:
    """Cores of one engine: a SimPy Container counts free ones; the lowest ids are used."""

    def __init__(self, env: simpy.Environment, name: str, n: int, offset: int = 0) -> None:
        self.name = name
        self.n = n
        self.container = simpy.Container(env, capacity=n, init=n)
        self.free = list(range(offset, offset + n))

    def lease(self, k: int) -> _Lease:
        """Ask for `k` cores: `with pool.lease(k) as lease: yield lease.granted; ...`."""
        return _Lease(self, k)


class _Lease:
    """`k` cores of a pool for one phase. As a context manager it gives them back if the phase
    ends early (an error); the normal path yields `release()`, which keeps SimPy's event order."""

    __slots__ = ("pool", "k", "granted", "ids")

    def __init__(self, pool: _Pool, k: int) -> None:
        self.pool, self.k = pool, k
        self.granted = pool.container.get(k)    # the event to wait for
        self.ids: list[int] | None = None

    def __enter__(self) -> _Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ids is not None:
            self.release()

    def take(self) -> list[int]:
        """The core ids, once `granted` has fired (the lowest free ids)."""
        pool = self.pool
        self.ids, pool.free = pool.free[:self.k], pool.free[self.k:]
        return self.ids

    def release(self):
        """Give the cores back; returns the Container put event (yield it)."""
        pool, ids, self.ids = self.pool, self.ids or [], None
        pool.free = sorted(pool.free + ids)
        return pool.container.put(self.k)


class _Run:
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


@dataclass(frozen=True, slots=True)
class _StageTotals:
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


# ----------------------------------------------------------------------------- replay
class _Replay:
    """What an identical later task replays: its duration, the offset of its first core
    grant, its rows (with start/end offsets), per-core busy cycles, buffer and fabric peaks."""

    __slots__ = ("duration", "first", "rows", "busy", "peaks", "fabric", "l2", "gm", "stats",
                 "roomy", "last", "sums", "block_dim")

    def __init__(self, duration: int, first: int, rows: tuple, busy: dict, peaks: dict,
                 fabric: tuple[float, float], l2: tuple, gm: dict, stats: dict,
                 roomy: bool, block_dim: int = 0) -> None:
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
    (`state`: any line may be evicted). Equal states give equal hits, misses and write-backs;
    a replay also replays the cache's transition (with the same float increments of its
    occupancy), the task's GM traffic and the L2 byte counts."""
    return (task.task_type, *((ph.engine, ph.aicpu_cycles, ph.aicpu_cores, ph.vector_cores,
                               ph.aicpu_launch_cycles, ph.aicpu_read_bytes,
                               ph.aicpu_write_bytes,
                               tuple((g.template, 0) if g.template else (0, id(g))
                                     for g in ph.groups))
                              for ph in task.phases))


def _merge_peaks(into: dict[str, int], peaks: dict[str, int]) -> None:
    for buf, level in peaks.items():
        if level > into.get(buf, 0):
            into[buf] = level


# ----------------------------------------------------------------------------- engine
#: the longest run a trace represents (int64 timestamps of the reports, with headroom)
MAX_CYCLES = 2**62


def user_figures(chip: Any) -> str:
    """The figures of `chip` set by the user (source tag U), for an error message."""
    keys = [k for k in chip.figure_keys() if chip.confidence(k) == "U"]
    if not keys:
        return f"check the figures of chip '{chip.name}'"
    shown = ", ".join(f"{k} = {chip.figure(k)!r}" for k in keys[:6])
    return f"chip '{chip.name}' has user-set figures {shown}"


class Engine:
    """Runs one Program on its chip; `run()` returns the Trace."""

    def __init__(self, program: Program, mode: str = "sink", symmetric: bool = True,
                 progress: Callable[[int, int], None] | None = None,
                 replay: bool = True, fast_forward: bool | None = None) -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.p = program
        self.chip = chip = program.chip
        self.detail = program.detail
        self.mode = mode
        self.symmetric = symmetric
        self.env = simpy.Environment()
        self.fabric = Fabric(self.env, chip.l2_bandwidth_bytes_per_s / chip.clock_hz,
                             chip.hbm_bandwidth_bytes_per_s / chip.clock_hz,
                             chip.l2_write_bandwidth_bytes_per_s / chip.clock_hz)
        self.caps_cube = {"L0A": chip.l0a_bytes, "L0B": chip.l0b_bytes, "L0C": chip.l0c_bytes,
                          "L1": chip.l1_bytes, "UB": chip.ub_bytes}
        self.pools = {"aicore": _Pool(self.env, "AI Core", chip.ai_cores),
                      ENGINE_AICPU: _Pool(self.env, "AI CPU", chip.ai_cpus)}
        if not chip.coupled:
            self.pools["aiv"] = _Pool(self.env, "AIV", chip.aiv_cores, chip.ai_cores)
        self.rows: list[_Run] = []           # raw intervals
        self.replayed: list[tuple] = []      # (replay, start, task id, op): rows made lazily
        self.records: list[TaskRecord] = []
        self.peaks: dict[str, int] = {}
        self.pipe_busy: dict[int, dict[str, int]] = {}
        self.events = 0
        self.started: dict[int, int] = {}     # task id -> when its first phase got cores
        self.progress = progress              # progress(tasks done, tasks in all), optional
        self.l2 = L2Cache(chip.l2_bytes)
        self._l2_reads, self._l2_writes, self._l2_readers, self._l2_roles, \
            self._l2_sizes = _gm_tensors(program)
        self._memory_cycles: dict[tuple, float] = {}    # `_record`'s memo of memory_cycles
        self._l2_miss_slowdown = chip.l2_miss_slowdown
        self.gm_traffic: dict[int, dict[tuple[str, str], float]] = {}   # simulated GM bytes
        self.start_cycles = chip.cycles(chip.kernel_start_us * 1e-6)
        # the start's growth per further block of the kernel (module note, "Kernel start")
        self.block_start_cycles = chip.cycles((chip.block_start_us or 0.0) * 1e-6)
        # tasks run one at a time on the device (one stream, sunk): an identical task is
        # replayed, not simulated again (see `replay_key`)
        self.replay = replay and mode == "sink" and program.streams == 1
        self._replays: dict[tuple, _Replay] = {}
        # periodic pipe loops advanced by arithmetic (sim/fastforward.py); None: the default
        if fast_forward is None:
            fast_forward = fastforward.ENABLED
        # GM accesses outside the pipes that changed the L2 (the fast-forward skips no period
        # holding one); the pipes' own are logged for it (`_pipe_gm_access`)
        self.stateful_accesses = 0
        self.gm_log: list[tuple] | None = [] if fast_forward else None
        self.ff = fastforward.FastForward(self) if fast_forward else None

    # -- running -------------------------------------------------------------------------
    def run(self) -> Trace:
        env = self.env
        tasks = self.p.tasks
        self.done = {t.task_id: env.event() for t in tasks}
        self.launched = {t.task_id: env.event() for t in tasks}
        if self.mode in ("host", "eager"):
            env.process(self._host(tasks))
        for sid in range(self.p.streams):
            mine = [t for t in tasks if t.stream_id == sid]
            if mine:
                env.process(self._stream(mine))
        env.process(self._flush(tasks))
        # the run allocates 10^5..10^6 small objects that live to the end (ascendsim.gcpause)
        with gc_paused():
            n = _run_events(env)
        self.events = n
        missing = [t.op_name for t in tasks if not self.done[t.task_id].processed]
        if missing:
            raise SimulationError(f"deadlock: task(s) {', '.join(missing[:5])} never finished")
        trace = Trace(self.chip, detail=self.detail)
        trace.l2 = self.l2.stats
        trace.tasks = sorted(self.records, key=lambda r: r.task_id)
        # intervals are expanded from the rows when first read (Trace.defer_intervals); the
        # last end is the same from the rows (every row becomes intervals with its end)
        trace.defer_intervals(functools.partial(_expand_with_replays, self.rows,
                                                self.replayed))
        trace.total_cycles = max([r.end for r in trace.tasks] + [int(r.end) for r in
                                                                 self.rows]
                                 + [start + seen.last for seen, start, _, _ in self.replayed]
                                 + [0])
        self._check_finite(trace)
        return trace

    def _check_finite(self, trace: Trace) -> None:
        """SimulationError when a time is not finite or beyond `MAX_CYCLES` (a figure such as
        clock_hz = 1e-300 or a vanishing rate makes it so): a result never reads "inf us"."""
        bad = next((r for r in trace.tasks
                    if not (math.isfinite(r.start) and math.isfinite(r.end))
                    or r.end > MAX_CYCLES), None)
        if bad is not None:
            raise SimulationError(f"task '{bad.op_name}' ({bad.op_type}) has a time of "
                                  f"{bad.end:.4g} cycles, not finite or beyond {MAX_CYCLES:.3g};"
                                  f" {user_figures(self.chip)}")
        total = trace.total_cycles
        us = trace.us(total) if math.isfinite(total) else math.inf
        if not (math.isfinite(total) and math.isfinite(us)) or total > MAX_CYCLES:
            raise SimulationError(f"the run's time is not finite ({total:.4g} cycles at clock_hz "
                                  f"= {self.chip.clock_hz:g} Hz = {us:.4g} us); "
                                  f"{user_figures(self.chip)}")

    def _host(self, tasks):
        cyc = self.chip.cycles(self.chip.host_launch_us * 1e-6)
        sync = self.chip.cycles(self.chip.host_sync_us * 1e-6)
        prev = None
        for t in tasks:
            if self.mode == "eager" and prev is not None:
                yield from self._sync(prev, sync)
            prev = t.task_id
            start = self.env.now
            yield self.env.timeout(cyc)
            self.rows.append(_Run(ENGINE_HOST, (0,), "HOST", t.task_id, t.op_name, start,
                                  self.env.now, "launch"))
            self.launched[t.task_id].succeed(start)
        if self.mode == "eager" and prev is not None:
            yield from self._sync(prev, sync)

    def _sync(self, task_id: int, cycles: int):
        """The host waits for a task, then synchronises (eager calls are timed to here)."""
        yield self.done[task_id]
        start = self.env.now
        if cycles:
            yield self.env.timeout(cycles)
            self.rows.append(_Run(ENGINE_HOST, (0,), "HOST", task_id, "synchronize", start,
                                  self.env.now, "sync"))

    def _stream(self, tasks):
        env = self.env
        prev_end = 0
        sink = self.chip.cycles(self.chip.sink_launch_us * 1e-6)
        for t in tasks:
            launch_start = env._now
            if self.mode != "sink":
                launch_start = yield self.launched[t.task_id]
            for d in t.deps:
                done = self.done[d]
                # replaying (one stream, sunk: nothing else runs), an ended task's done event
                # being handled changes nothing: go on without waiting for that step
                # (`done.triggered`, inline)
                if not (self.replay and done._value is not PENDING):
                    yield done
            if self.mode == "sink":
                launch_start = env._now
            key = None
            if self.replay:
                # (one stream, sunk: nothing runs during the dispatch, so the L2 met after it
                # is the L2 now)
                self.l2.resync()
                roles = self._l2_roles.get(t.task_id, {})
                if self.l2.roomy(self._l2_sizes.get(t.task_id, {})):
                    key = (replay_key(t), "roomy", self.l2.own_state(roles))
                else:
                    key = (replay_key(t), "full", self.l2.state(roles))
            seen = self._replays.get(key) if key is not None else None
            self.started.pop(t.task_id, None)
            if seen is not None:          # the dispatch and the replay as one timeout
                yield from self._replay(t, seen, sink)
            else:
                self.pipe_busy[t.task_id] = {}
                if sink:                  # device-side dispatch, in every mode
                    yield env.timeout(sink)
                if not self.replay:
                    self.l2.resync()
                yield from self._run_phases(t, key)
            end = env._now
            start = self.started.get(t.task_id, end)
            self.records.append(self._record(t, start, end, launch_start,
                                             max(0, start - prev_end), seen))
            prev_end = end
            self._l2_task_done(t.task_id)
            self.done[t.task_id].succeed()
            if self.progress is not None:
                self.progress(len(self.records), len(self.p.tasks))

    def _run_phases(self, t, key):
        """Simulate a task's phases; with a replay `key`, keep what a later identical task
        needs to replay it (its duration, rows, busy cycles and peaks, relative to its
        start)."""
        env = self.env
        if key is None:
            yield from run_phases(self, t)      # in turn; a 910B mix kernel overlapped
            return
        start, first_row = env._now, len(self.rows)
        l2_before, roles = list(self.l2.lines), self._l2_roles.get(t.task_id, {})
        stats = self.l2.stats
        stats_before = dict(stats.__dict__)    # (L2Stats: plain float and int fields)
        outer_l2_peak, stats.peak_resident = stats.peak_resident, 0.0
        roomy = key[1] == "roomy"
        if roomy:
            self.l2.log = []
        outer_peaks, self.peaks = self.peaks, {}
        fabric = self.fabric
        outer_fabric, (fabric.peak_l2, fabric.peak_hbm) = (fabric.peak_l2, fabric.peak_hbm), \
            (0.0, 0.0)
        try:
            yield from run_phases(self, t)
        finally:
            task_peaks, self.peaks = self.peaks, outer_peaks
            task_fabric = (fabric.peak_l2, fabric.peak_hbm)
            fabric.peak_l2 = max(outer_fabric[0], task_fabric[0])
            fabric.peak_hbm = max(outer_fabric[1], task_fabric[1])
            _merge_peaks(self.peaks, task_peaks)
            task_l2_peak = stats.peak_resident
            stats.peak_resident = max(outer_l2_peak, task_l2_peak)
        transition = (self.l2.own_transition(l2_before, roles) if roomy else
                      self.l2.transition(l2_before, roles))
        self.l2.log = None
        if transition is None:
            return
        deltas = {k: v - stats_before[k] for k, v in stats.__dict__.items()}
        deltas["peak_resident"] = task_l2_peak
        self._replays[key] = _Replay(
            env._now - start, self.started.get(t.task_id, env._now) - start,
            tuple((r, r.start - start, r.end - start) for r in self.rows[first_row:]),
            {c: dict(b) for c, b in self.pipe_busy[t.task_id].items()}, task_peaks,
            task_fabric, transition, dict(self.gm_traffic.get(t.task_id, {})), deltas, roomy,
            t.block_dim)

    def _replay(self, t, seen: _Replay, lead: int = 0):
        """An identical task simulated before (see `replay_key`): the same rows, busy cycles
        and peaks, shifted to `lead` cycles from now (its dispatch); one timeout instead of its
        events (nothing else runs meanwhile)."""
        env = self.env
        start = env._now + lead
        self.started[t.task_id] = start + seen.first
        # its rows are made when the intervals are first read (`_replayed_rows`)
        self.replayed.append((seen, start, t.task_id, t.op_name))
        # (read-only from here on: `_record` copies the busiest core's)
        self.pipe_busy[t.task_id] = seen.busy
        _merge_peaks(self.peaks, seen.peaks)
        fabric = self.fabric
        if seen.fabric[0] > fabric.peak_l2:
            fabric.peak_l2 = seen.fabric[0]
        if seen.fabric[1] > fabric.peak_hbm:
            fabric.peak_hbm = seen.fabric[1]
        roles = self._l2_roles.get(t.task_id, {})
        by_role = sorted(roles, key=roles.__getitem__)
        l2 = self.l2
        stats = l2.stats
        if seen.roomy:
            l2.apply_own(seen.l2, by_role)
        else:
            l2.apply(seen.l2, by_role)
            if seen.stats["peak_resident"] > stats.peak_resident:
                stats.peak_resident = seen.stats["peak_resident"]
        if seen.gm:
            self.gm_traffic[t.task_id] = dict(seen.gm)
        counts = stats.__dict__              # (L2Stats: a plain dataclass)
        for k, v in seen.sums:
            counts[k] = counts[k] + v
        if seen.duration + lead:
            yield env.timeout(seen.duration + lead)

    def _phase(self, task, ph):
        env = self.env
        if ph.engine == ENGINE_AICPU:        # launch, reads, compute, writes (sim.aicpu)
            yield from run_aicpu(self, task, ph)
            return
        pool = self.pools["aiv" if ph.vector_cores else "aicore"]
        need = ph.block_dim
        if need > pool.n:
            raise SimulationError(f"op '{task.op_name}' needs {need} cores, the chip has "
                                  f"{pool.n} ({pool.name})")
        with pool.lease(need) as lease:
            yield lease.granted
            ids = lease.take()
            self.started.setdefault(task.task_id, env.now)
            procs = []
            base = 0
            for g in ph.groups:
                cores = tuple(ids[base + i] for i in range(len(g.cores)))
                base += len(g.cores)
                procs.append(env.process(self._group(task, g, cores, blocks=ph.block_dim)))
            yield env.all_of(procs)
            yield lease.release()

    def _group(self, task, g: CoreGroup, cores: tuple[int, ...], start: bool = True,
               blocks: int = 1):
        if self.symmetric:
            sets = [cores]
        else:
            sets = [(c,) for c in cores]
        if start:
            yield from self._kernel_start(task, cores, sets, blocks)
        procs = []
        for cs in sets:
            label = f"core {cs[0]}" if len(cs) == 1 else f"cores {cs[0]}-{cs[-1]}"
            core = _Core(self.caps_cube, label, task.op_name, self.peaks)
            segments, chunks = g.segments, False
            if self.detail == "block":       # (a few tiles of long unit loops: chunk tiles)
                segments, chunks = coalesce.chunked(g, COALESCE_MIN)
            if self.detail == "block" and sum(sg.count for sg in segments) >= COALESCE_MIN:
                procs.extend(self._block(task, segments, core, cs, chunks))
            else:
                queues = expand_flags(segments)
                merge = "tile" if self.detail == "block" else "contig"
                for pipe, q in queues.items():
                    procs.append(self.env.process(self._pipe(task, core, cs, pipe, q,
                                                             merge=merge)))
        yield self.env.all_of(procs)

    def kernel_start_cycles(self, blocks: int) -> int:
        """Cycles of each block's start in a kernel of `blocks` blocks (module note)."""
        return self.start_cycles + max(blocks - 1, 0) * self.block_start_cycles

    def _kernel_start(self, task, cores: tuple[int, ...], sets: list, blocks: int):
        """The block's start on each core before its first instruction (module note, "Kernel
        start"): `kernel_start_us`, plus `block_start_us` per further block of the kernel, on
        the scalar pipe, one interval per core."""
        cycles = self.kernel_start_cycles(blocks)
        if cycles <= 0:
            return
        start = self.env.now
        yield self.env.timeout(cycles)
        self.rows.append(_Run(ENGINE_AICORE, cores, "S", task.task_id, task.op_name, start,
                              self.env.now, KERNEL_START_KIND))
        for cs in sets:
            self._note_busy(task.task_id, cs[0], "S", cycles)

    def _note_busy(self, task_id: int, core: int, pipe: str, cycles: int) -> None:
        busy = self.pipe_busy[task_id].setdefault(core, {})
        busy[pipe] = busy.get(pipe, 0) + cycles

    # -- tile detail -----------------------------------------------------------------------
    def _pipe(self, task, core: _Core, cores: tuple[int, ...], pipe: str, queue: list,
              note: bool = True, merge: str = "contig"):
        """Execute one pipe's instruction queue in order; returns its busy cycles, the end
        time of each tile and the cycles its shared flows were stretched by contention.

        Intervals: merge="contig" records back-to-back instructions of one kind as one
        interval (tile detail); "tile" one interval per tile and "all" one for the whole
        queue (block detail), starting with the first instruction and lasting the busy
        cycles (the waits in between are left out, so no interval overlaps the next).
        (The fast-forward reads its locals `k`, `busy`, `run_busy`, `start`, `stalled`, `run`,
        `ev`, `key` from `hook.at`, set before each yield; sim/fastforward.py.)
        """
        env = self.env
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
        rows = self.rows
        run: _Run | None = None     # the open interval
        run_busy = 0
        stalled = 0                 # cycles its shared flows took beyond their own time
        spans = _timeout_spans(queue)
        entries = _entries(queue)
        contig, per_tile = merge == "contig", merge == "tile"
        clock = 0                   # the end of the last instruction inside a merged timeout
        k = start = 0
        n = len(queue)
        # the fast-forward's view of this pipe; `hook.hot` after a resume: it may move the
        # pipe ahead by whole periods (its locals shifted: sim/fastforward.py)
        # (before each yield the pipe leaves its locals in `hook.at` for the checkpoints)
        hook = (fastforward.NO_HOOK if self.ff is None
                else self.ff.enter(core, queue, spans, merge))
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
                    for buf, nb in allocs:       # (`_Core.alloc`, inline)
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
                    hbm, bw = self._pipe_gm_access(task_id, ins.tensors, nbytes, ins.hbm,
                                                   write, ins.bw, weight)
                    own = cycles + nbytes / bw
                    cown = math.ceil(own)
                    src, dst = _lvl(ins.src, hbm), _lvl(ins.dst, hbm)
                    tmo = self.fabric.transfer(nbytes, nbytes / own, hbm, weight, write=write)
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
                    run = _Run(ENGINE_AICORE, cores, pipe, task_id, op, start, end, kind,
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
        if self.ff is not None:
            self.ff.leave(hook)
        if run is not None:
            rows.append(run)
        tile_ends.append(env._now)
        if note:
            self._note_busy(task_id, cores[0], pipe, busy)
        return busy, tile_ends, stalled

    # -- block detail ----------------------------------------------------------------------
    def _block(self, task, segments: tuple[Segment, ...], core: _Core,
               cores: tuple[int, ...], chunks: bool = False) -> list:
        """Processes for one coalesced core group (its tiles, or with `chunks` the chunk
        tiles of sim/coalesce.py): PREFIX_TILES tiles in tile detail, then the remaining tiles
        as one interval per pipe at the measured pace (see the module note)."""
        env = self.env
        prefix, rest = split_segments(segments, PREFIX_TILES)
        queues = expand_flags(prefix)
        stages0 = segments[0].stages
        suffix = None
        if chunks:
            # the last chunk tile runs exactly after the window, on a fresh core: the tile's
            # drain after its loop (the last units, the per-tile stages) in order
            rest, last = split_segments(rest, sum(sg.count for sg in rest) - 1)
            suffix = (_Core(self.caps_cube, core.label, task.op_name, self.peaks),
                      expand_flags(last))
        tot = _stage_totals(rest, len(stages0))
        n_rest = sum(sg.count for sg in rest)
        # the pipes with shared bytes run their slices in lock step (`_decide_slice`)
        members = [(j, t, len(cores)) for j, t in enumerate(tot) if t.shared_bytes]
        # the pace is the paced stages' (coalesce.pace_profile: chunk tiles' per-tile work
        # is left out)
        barrier = {"left": len(stages0), "busy": [], "event": env.event(), "ends": [],
                   "pace": coalesce.pace_profile(segments, prefix, chunks), "suffix": suffix,
                   "slices": {"members": members, "left": len(members), "event": env.event(),
                              "flowed": 0, "read": 0, "ahead": 0, "dec": {}}}
        return [env.process(self._coalesced_pipe(task, core, cores, st.pipe,
                                                 queues[st.pipe], n_rest, tot[j], barrier, j))
                for j, st in enumerate(stages0)]

    def _coalesced_pipe(self, task, core, cores, pipe, queue, n_rest, tot, barrier, j):
        env = self.env
        busy, tile_ends, stalled = yield from self._pipe(task, core, cores, pipe, queue,
                                                         note=False, merge="all")
        # this pipe's pace on the prefix: busy cycles per tile, and the spacing of its tile
        # completions after the first (which includes the pipeline's own stalls); without
        # the fabric's contention (`stalled`): the window's flows cross the fabric and meet
        # their own contention there, which may differ from the prefix's (the L2 writes back
        # a previous op's dirty lines while the prefix runs, its own later)
        paced, once = barrier["pace"]
        free = max(0.0, busy - stalled - once[j]) / PREFIX_TILES
        spacing = 0.0
        if len(tile_ends) >= 2:
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
            sl["ahead"] = _read_ahead(barrier["ends"], period, n_rest)
            if sl["members"]:
                self._decide_slice(task.task_id, sl)
            barrier["event"].succeed(period)
        period = yield barrier["event"]
        fixed, sbytes = tot.fixed, tot.shared_bytes
        start = env.now
        if not sbytes:
            window = max(n_rest * period, fixed, 1.0)
            end = start + int(round(fixed))
            if end > start:
                self.rows.append(_Run(ENGINE_AICORE, cores, pipe, task.task_id, task.op_name,
                                      start, end, tot.kind, tot.nbytes, _lvl(tot.src, 0.0),
                                      _lvl(tot.dst, 0.0),
                                      tot.count))
            self._note_busy(task.task_id, cores[0], pipe, busy + end - start)
            yield env.timeout(int(math.ceil(window)))
            yield from self._suffix(task, cores, pipe, barrier)
            return
        # the remaining tiles in slices of `COALESCED_SLICES`, one after the other in lock
        # step (`_decide_slice`): each spans its share of the window (the pipeline's pace)
        # and its bytes cross the shared L2/HBM as one flow that stretches under more
        # contention
        n_sl = COALESCED_SLICES
        # its own work at its prefix rate
        own = n_rest * max(0.0, busy - stalled - once[j]) / PREFIX_TILES
        work = stall = hbm_all = 0.0
        sl = barrier["slices"]
        while True:
            t0 = env.now
            units, hbm_b, at_cap = sl["dec"][j]
            share = units / n_sl
            part = sbytes * share
            window = max(n_rest * period * share, fixed * share + at_cap, 1.0)
            yield self.fabric.transfer(part, part / window, hbm_b / part, len(cores),
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
                    self._decide_slice(task.task_id, sl)
                ev.succeed()
            else:
                yield sl["event"]
            if last:
                break
        end = start + int(math.ceil(work))
        hbm = hbm_all / sbytes
        if end > start:
            self.rows.append(_Run(ENGINE_AICORE, cores, pipe, task.task_id, task.op_name, start,
                                  end, tot.kind, tot.nbytes, _lvl(tot.src, hbm),
                                  _lvl(tot.dst, hbm), tot.count, int(math.ceil(stall))))
        self._note_busy(task.task_id, cores[0], pipe, busy + end - start)
        yield from self._suffix(task, cores, pipe, barrier)

    def _suffix(self, task, cores, pipe, barrier):
        """A chunked group's last chunk tile on `pipe`, exactly, after its window (`_block`)."""
        if barrier["suffix"] is not None:
            core, queues = barrier["suffix"]
            yield from self._pipe(task, core, cores, pipe, queues[pipe], merge="all")

    # -- L2 ------------------------------------------------------------------------------
    def _gm_access(self, tid: int, tensors: tuple, nbytes: float, cold: float, write: bool,
                   bw: float, weight: int) -> tuple[float, float]:
        """A GM move of `nbytes` per core on `weight` cores, starting now: the L2 decides its
        HBM fraction (misses, and the dirty bytes it evicts) and the per-core path bandwidth
        at its miss fraction (the lowering's `bw` is de-rated for `cold`). Returns
        (HBM fraction, bandwidth)."""
        self.stateful_accesses += 1      # (the fast-forward skips no period holding one)
        return self.l2_access(self.l2, self.gm_traffic.setdefault(tid, {}), tid, tensors,
                              nbytes, cold, write, bw, weight)

    def _pipe_gm_access(self, tid: int, tensors: tuple, nbytes: float, cold: float,
                        write: bool, bw: float, weight: int) -> tuple[float, float]:
        """`_gm_access` of a pipe's move, logged with its result: the fast-forward replays a
        period's log on the cache when it skips the period (sim/fastforward.py)."""
        out = self.l2_access(self.l2, self.gm_traffic.setdefault(tid, {}), tid, tensors,
                             nbytes, cold, write, bw, weight)
        log = self.gm_log
        if log is not None:
            log.append((tid, tensors, nbytes, cold, write, bw, weight, out))
        return out

    def l2_access(self, l2: L2Cache, tr: dict, tid: int, tensors: tuple, nbytes: float,
                  cold: float, write: bool, bw: float, weight: int) -> tuple[float, float]:
        """The body of `_gm_access` on cache `l2`, adding the task's bytes to `tr` (the
        fast-forward runs it on a copy of the cache to check a period before skipping it)."""
        total = nbytes * weight
        if not tensors:                       # a workspace or a bias: as lowered
            if write:
                _add(tr, ("L2", "write"), total)
                _add(tr, ("DDR", "write"), total * cold)
            else:
                _add(tr, ("L2", "read"), total * (1 - cold))
                _add(tr, ("DDR", "read"), total * cold)
            return cold, bw
        whole = sum(t[1] for t in tensors) if len(tensors) > 1 else tensors[0][1]
        whole = whole or 1
        evicted = 0.0
        if write:
            for name, size, _ in tensors:
                evicted += l2.write(tid, name, size, total * size / whole)
            _add(tr, ("L2", "write"), total)
            _add(tr, ("DDR", "write"), evicted)
            return evicted / total, bw
        miss = 0.0
        for name, size, span in tensors:
            m, wb = l2.read(tid, name, size, total * size / whole, cold, span)
            miss += m
            evicted += wb
        # (`_add`, inline)
        hit = total - miss
        if hit:
            tr[_L2_READ] = tr.get(_L2_READ, 0.0) + hit
        if miss:
            tr[_DDR_READ] = tr.get(_DDR_READ, 0.0) + miss
        if evicted:
            tr[_DDR_WRITE] = tr.get(_DDR_WRITE, 0.0) + evicted
        frac = miss / total
        slow = self._l2_miss_slowdown
        base = bw / (1.0 - cold + cold / slow)
        return (miss + evicted) / total, base * (1.0 - frac + frac / slow)

    def _decide_slice(self, tid: int, sl: dict) -> None:
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
        units = rest if need <= self.l2.capacity - self.l2.used else 1
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
                        frac, eff = self._gm_access(tid, tensors, part, cold, write, bw,
                                                    weight)
                        hbm_b += part * frac
                        eff_of[(j, i)] = eff
                    at_cap += nbytes * units / n_sl / eff
                dec[j] = (units, hbm_b, at_cap)
        sl["read"] = read_to
        sl["flowed"] = flowed + units
        sl["dec"] = dec

    def _l2_task_done(self, tid: int) -> None:
        """A task ended: its fills become ordinary residency; an intermediate whose last
        reader this was (or that nobody reads) is dead and leaves L2 (`L2Cache.drop`)."""
        self.l2.end_task(tid)
        readers = self._l2_readers
        for name in self._l2_reads.get(tid, ()):
            readers[name] -= 1
            if readers[name] == 0:
                self.l2.drop(name)
        for name in self._l2_writes.get(tid, ()):
            if readers.get(name) == 0:
                self.l2.drop(name)

    def _flush(self, tasks):
        """End of the graph: write back what is still dirty, as one flow L2 -> HBM."""
        if tasks:
            yield self.env.all_of([self.done[t.task_id] for t in tasks])
        last = self.env.now
        nbytes = self.l2.flush()
        if nbytes > 0:
            yield self.fabric.transfer(nbytes, self.fabric.hbm_bw, 1.0)
        self.l2.stats.flush_cycles = int(self.env.now - last)

    # -- results ---------------------------------------------------------------------------
    def _record(self, t, start, end, launch_start, wait,
                seen: _Replay | None = None) -> TaskRecord:
        traffic = self._traffic(t)
        roofline = t.roofline_cycles
        if t.task_id in self.gm_traffic:       # the task's moves as simulated
            # (`memory_cycles` reads these four figures only: one call per distinct four)
            key = (traffic.get(("DDR", "read"), 0), traffic.get(("DDR", "write"), 0),
                   traffic.get(("L2", "read"), 0), traffic.get(("L2", "write"), 0))
            mem = self._memory_cycles.get(key)
            if mem is None:
                mem = self._memory_cycles[key] = memory_cycles(self.chip, traffic)
            roofline = int(math.floor(max(t.compute_cycles, mem)))
        per_core = self.pipe_busy.get(t.task_id, {})
        if len(per_core) == 1:
            busiest, = per_core.values()
        else:
            busiest = max(per_core.values(),
                          key=lambda d: (sum(d.values()), sorted(d.items())), default={})
        return TaskRecord(
            task_id=t.task_id, stream_id=t.stream_id, op_name=t.op_name, op_type=t.op_type,
            task_type=t.task_type, start=start, end=end, launch_start=launch_start, wait=wait,
            block_dim=t.block_dim if seen is None else seen.block_dim,
            input_shapes=tuple([_shape(v) for v in t.inputs]),
            input_dtypes=tuple([v.dtype for v in t.inputs]),
            input_formats=t.input_formats,
            output_shapes=tuple([_shape(v) for v in t.outputs]),
            output_dtypes=tuple([v.dtype for v in t.outputs]),
            output_formats=t.output_formats, flops=t.flops, traffic=traffic,
            pipe_cycles=dict(busiest), fused_ops=t.fused_ops,
            roofline_cycles=roofline, notes=t.notes)

    def _traffic(self, t) -> dict[tuple[str, str], int]:
        """A task's traffic: the lowered on-chip bytes, and the GM bytes as simulated (hits,
        misses, writes, write-backs it caused); AI CPU tasks keep their lowered DDR bytes."""
        out = dict(t.traffic)
        gm = self.gm_traffic.get(t.task_id)
        if gm is not None:
            for key in _GM_KEYS:
                out.pop(key, None)
            for k, v in gm.items():
                v = round(v)
                if v:
                    out[k] = int(v)
        return out


def _run_events(env: simpy.Environment) -> int:
    """`env.step()` until no event is left (SimPy's loop, inline: the same order, the same
    callbacks, a failed event not defused raised as SimPy raises it); returns the events."""
    queue = env._queue              # (the fast-forward edits it in place: the same list)
    pop = heappop
    n = 0
    while queue:
        env._now, _, _, event = pop(queue)
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks:
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc
        n += 1
    return n


def _expand_with_replays(rows: list[_Run], replayed: list[tuple]) -> list[Interval]:
    """`expand_rows` over the simulated rows and those of the replayed tasks (each replay's
    rows shifted to its start)."""
    with gc_paused():
        extra = [_Run(r.engine, r.cores, r.pipe, task_id, op, start + a, start + b, r.kind,
                      r.nbytes, r.src, r.dst, r.count, r.stall, r.tile)
                 for seen, start, task_id, op in replayed for r, a, b in seen.rows]
    return expand_rows(rows + extra if extra else rows)


def expand_rows(rows: list[_Run]) -> list[Interval]:
    """Intervals per core, in start order (rows of a core group expanded per core)."""
    with gc_paused():            # 10^6 tuples that all live on (ascendsim.gcpause)
        out = []
        for r in sorted(rows, key=lambda r: (r.start, r.engine, r.cores[0], r.pipe)):
            start, end, stall = int(r.start), int(r.end), int(r.stall)
            for c in r.cores:
                out.append(Interval(r.engine, c, r.pipe, r.task_id, r.op, start, end, r.kind,
                                    r.nbytes, r.src, r.dst, r.count, stall))
        return out


def _read_ahead(ends: list, period: float, n_rest: int) -> float:
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


def _stage_totals(segments, n: int) -> list[_StageTotals]:
    """Per stage, the totals over all tiles of `segments` (see `_StageTotals`)."""
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
        out.append(_StageTotals(fixed, at_cap, sbytes, hbytes, nbytes, count, kind, src, dst,
                                wbytes > sbytes / 2,
                                tuple((*key, b) for key, b in parts.items())))
    return out


def _gm_tensors(program: Program) -> tuple[dict, dict, dict, dict, dict]:
    """Per task the GM tensors its moves read and write (`Instr.tensors`), per
    intermediate (a tensor some task writes, not a graph output) how many tasks read it, and
    per task its tensors' roles (name -> order of first appearance in its moves: replay) and
    sizes (name -> the largest size its moves give)."""
    reads: dict[int, set[str]] = {}
    writes: dict[int, set[str]] = {}
    roles: dict[int, dict[str, int]] = {}
    sizes: dict[int, dict[str, int]] = {}
    for t in program.tasks:
        mine: dict[str, int] = {}
        big: dict[str, int] = {}
        for ph in t.phases:
            for g in ph.groups:
                # (the group's distinct tensors in order of first appearance in its moves)
                for name, size, write in g.gm_tensors:
                    (writes if write else reads).setdefault(t.task_id, set()).add(name)
                    mine.setdefault(name, len(mine))
                    if size > big.get(name, -1):
                        big[name] = size
        if mine:
            roles[t.task_id] = mine
            sizes[t.task_id] = big
    outputs = set()
    for name in program.output_values:
        while name in program.aliases:
            name = program.aliases[name]
        outputs.add(name)
    written = set().union(*writes.values()) - outputs
    readers = dict.fromkeys(written, 0)
    for names in reads.values():
        for n in names & written:
            readers[n] += 1
    return ({tid: sorted(n for n in names if n in written) for tid, names in reads.items()},
            {tid: sorted(names & written) for tid, names in writes.items()}, readers, roles,
            sizes)


_GM_KEYS = (("L2", "read"), ("DDR", "read"), ("L2", "write"), ("DDR", "write"))
_L2_READ, _DDR_READ, _L2_WRITE, _DDR_WRITE = _GM_KEYS


def _add(acc: dict, key: tuple[str, str], nbytes: float) -> None:
    if nbytes:
        acc[key] = acc.get(key, 0.0) + nbytes


#: expanded queue (by identity; kept alive beside its spans) -> `_timeout_spans`
_SPANS: dict[int, tuple[list, list[int]]] = {}
#: expanded queue (by identity; kept alive beside them) -> `_entries`, distinct entry indices
_ENTRIES: dict[int, tuple[list, list[tuple], np.ndarray, list[tuple]]] = {}


#: Instr (by identity; kept alive beside it) -> what `_pipe` derives from it (`_derive`)
_INSTRS: dict[int, tuple] = {}
#: a queue shorter than this is prepared in plain Python (numpy's per-call cost dominates)
_SHORT_QUEUE = 64


def _derive(e: tuple) -> tuple:
    """One queue entry's six fields, then what `_pipe` derives from its instruction (see
    `_entries`) and what `_timeout_spans` needs of it."""
    ins = e[0]
    hit = _INSTRS.get(id(ins))
    if hit is None or hit[0] is not ins:
        flow = bool(ins.shared and ins.nbytes)
        own = ins.busy()
        # a plain timeout: not a flow over the shared fabric, integer cycles
        plain = type(ins.cycles) is int and not flow
        if len(_INSTRS) >= 65536:
            _INSTRS.clear()
        hit = _INSTRS[id(ins)] = (ins, (flow, own, ins.cycles, math.ceil(own), ins.kind,
                                        _lvl(ins.src, ins.hbm), _lvl(ins.dst, ins.hbm)),
                                  plain, ins.cycles if plain else 0)
    plain = hit[2]
    return (*e, *hit[1], plain and not e[2] and not e[4], plain and not e[1] and not e[3],
            hit[3])


def _prepared(queue: list) -> tuple[list[tuple], np.ndarray | None, list[tuple]]:
    """`_entries` of `queue`; for a long queue also the index of each entry among its distinct
    entry objects and those distinct entries' derived tuples (else None and the entries).
    Cached by queue identity."""
    hit = _ENTRIES.get(id(queue))
    if hit is not None and hit[0] is queue:
        return hit[1], hit[2], hit[3]
    if len(queue) < _SHORT_QUEUE:
        entries = [_derive(e) for e in queue]
        index, infos = None, entries
    else:
        # entries recur (expand_flags repeats the same objects): each distinct one is
        # derived once, and the queue maps to them by index (C loops: map, dict lookups)
        ids = list(map(id, queue))
        distinct = dict(zip(ids, queue))            # (in order of first appearance)
        at = dict(zip(distinct, range(len(distinct))))
        idx = list(map(at.__getitem__, ids))
        infos = [_derive(e) for e in distinct.values()]
        entries = list(map(infos.__getitem__, idx))
        index = np.array(idx, dtype=np.int64)
    if len(_ENTRIES) >= 1024:        # as many as expand_flags keeps
        _ENTRIES.clear()
    _ENTRIES[id(queue)] = (queue, entries, index, infos)
    return entries, index, infos


def _entries(queue: list) -> list[tuple]:
    """Per entry of an expanded pipe queue (`expand_flags`: cached, read-only): its six
    fields followed by what `_pipe` derives from its instruction, the same every time it
    runs: whether it is a flow over the shared fabric, its uncontended cycles (`Instr.busy`),
    its fixed cycles and the ceiling of the uncontended ones, its kind, and the trace levels
    of its source and destination (a flow's are decided by the L2 when it starts); then
    whether a merged timeout may go on after it / include it after an earlier one and its
    plain cycles (`_timeout_spans`)."""
    return _prepared(queue)[0]


def _timeout_spans(queue: list) -> list[int]:
    """Per entry of an expanded pipe queue (`expand_flags`: cached, read-only): the cycles of
    one timeout covering a run of plain-timeout instructions that starts here (0: no run),
    or -1 inside such a run. A run never waits, allocates, frees, sets a flag or changes tile
    between its instructions, so one timeout ends it at the very cycle the instruction-by-
    instruction timeouts would, and every instruction's start and end follow from the run's
    start (integer cycles: the sums are exact)."""
    hit = _SPANS.get(id(queue))
    if hit is not None and hit[0] is queue:
        return hit[1]
    n = len(queue)
    # per entry (`_entries`): whether a run may go on after it / may include it after an
    # earlier one (a plain timeout (not a flow over the shared fabric) of integer cycles
    # that sets or frees nothing / waits for or allocates nothing), its tile and its cycles
    # if plain
    entries, index, infos = _prepared(queue)
    spans = [0] * n
    if index is None:               # a short queue: the runs in plain Python
        k = 0
        while k < n:
            j = k
            while j < n - 1 and entries[j][13] and entries[j + 1][14] \
                    and entries[j][5] == entries[j + 1][5]:
                j += 1
            if j > k:
                spans[k] = sum(e[15] for e in entries[k:j + 1])
                spans[k + 1:j + 1] = [-1] * (j - k)
            k = j + 1
    else:
        goes_on = np.array([x[13] for x in infos], dtype=bool)[index]
        joins_in = np.array([x[14] for x in infos], dtype=bool)[index]
        tiles = np.array([x[5] for x in infos], dtype=np.int64)[index]
        # whether entry j and entry j + 1 can be waited for as one timeout
        joins = goes_on[:-1] & joins_in[1:] & (tiles[:-1] == tiles[1:])
        if joins.any():             # (else no two entries join: every span stays 0)
            cycles = [x[15] for x in infos]
            counts = np.bincount(index, minlength=len(infos)).tolist()
            if sum(c * m for c, m in zip(cycles, counts)) < 2**62:   # (int64 sums are exact)
                inside = np.zeros(n, dtype=bool)   # continues the run of the entry before
                inside[1:] = joins
                first = np.zeros(n, dtype=bool)
                first[:-1] = joins
                first &= ~inside
                last = inside.copy()
                last[:-1] &= ~joins
                total = np.concatenate(([0], np.cumsum(np.array(cycles, dtype=np.int64)[index])))
                starts, ends = np.flatnonzero(first), np.flatnonzero(last)
                out = np.zeros(n, dtype=np.int64)
                out[inside] = -1
                out[starts] = total[ends + 1] - total[starts]
                spans = out.tolist()
            else:
                cycles = [cycles[i] for i in index.tolist()]
                joins = joins.tolist()
                k = 0
                while k < n:
                    j = k
                    while j < n - 1 and joins[j]:
                        j += 1
                    if j > k:
                        spans[k] = sum(cycles[k:j + 1])
                        spans[k + 1:j + 1] = [-1] * (j - k)
                    k = j + 1
    if len(_SPANS) >= 1024:          # as many as expand_flags keeps
        _SPANS.clear()
    _SPANS[id(queue)] = (queue, spans)
    return spans


def _lvl(level: str, hbm: float) -> str:
    if level != GM:
        return level
    return "DDR" if hbm > 0 else "L2"


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
