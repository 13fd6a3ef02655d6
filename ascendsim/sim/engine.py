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

Kernel start. A phase's blocks start after its dispatch head, outside the blocks and on no
pipe: `task_dispatch_us`, plus `block_dispatch_us` per block beyond the first (the task
scheduler dispatches the blocks one after another and the task's end waits for the completion
response; msprof's Task Duration counts this, its aicore_time / aiv_time, the mean block time,
does not). Every block (a core's share of an AI Core phase) then begins with `kernel_start_us`
on the scalar pipe before any of its pipes issues: the kernel arguments, the scalar prologue
that derives the block's offsets, the end-of-kernel synchronisation folded in. It delays
nothing but the block itself (other tasks' cores run on), shows as one "kernel_start"
interval per core on pipe S and counts as scalar busy time. The start grows with the number
of blocks the kernel starts (Ascend C best practices, "Setting a Proper Number of Cores":
core start-up, TLB misses, same-address conflicts and variable initialisation make "the
header overhead increase with the number of used cores"): `block_start_us` per block beyond
the first, a chip figure (absent: 0), paid by every block of the kernel; and, on a chip that
gives `icache_cold_block_us`, that figure per block of the phase whose core last ran another
kernel (a cold instruction cache: the cores fetch the same binary at once and are served one
after another; `kernelstart.InstructionCaches`, which keeps each core's last kernel, a
shape-compiled kernel being one binary per shape signature, a prebuilt one per dtypes; a run
starts "cold", or "warm": every kernel's code cached, as in a loop of one kernel). The tiling
data is read apart where the chip gives `tiling_line_cycles` (absent: 0, the read folded into
`kernel_start_us`): the host computes it and passes it in GM, and each block copies it to its
stack through the scalar unit's DataCache (Ascend C best practices, "Limit the TilingData
size": a copy of microseconds; "Scalar reads and writes": 64-byte lines), one dependent line
fill after another: `kernelstart.tiling_lines(phase)` lines of `tiling_line_cycles` each,
by kernel kind (a phase with cube work reads the Matmul API's TCubeTiling, 200 bytes, 4
lines; any other kernel at least one line). A prebuilt dynamic-shape vector kernel or TBE
MatMul (a binary build, `Phase.binary`; lower/cube.py `cube_binary`) adds
`binary_block_start_us` to each block's start, where the chip gives it: its generic
prologue (the run-time tiling read, offset and loop setup) that a kernel compiled for its
shapes folds into constants; a prebuilt TIK kernel (`Phase.binary` "tik":
the A2 / A3 Transpose) adds `tik_tiling_start_us` as well: its run-time tiling moved from GM to
UB in dependent DMAs, then set into scalars one by one (lower/dynamic_tiling.py, "Kernel
kinds").

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

Modules. This file is the event loop and the dispatch of tasks, phases and core groups
(`Engine`); the rest of `ascendsim.sim` holds one concept each: `fabric` (shared bandwidth),
`cores` (flags and buffer levels; pools and leases), `pipe` (the pipe process, the hot loop)
with `queues` (its prepared queue entries and merged timeout spans), `block` (block detail:
prefix, window, slices) with `coalesce` (chunk tiles), `gm` (the L2's decision for each GM
move, GM bytes per task) with `l2cache`, `replay` (identical tasks), `fastforward` (steady
state), `aicpu` and `mix` (AI CPU phases, mix kernels), `kernelstart` (the tiling data read
at a block's start, by kernel kind; the cores' instruction caches), `rows` and `records`
(trace rows, task records) with `trace`. None of them imports this file: they receive the
running `Engine`, or its parts, and use its public attributes and methods.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from heapq import heappop
from typing import Any

import simpy
from simpy.events import PENDING

from ..errors import ConfigError, SimulationError
from ..gcpause import gc_paused
from ..hw.names import ENGINE_AICORE, ENGINE_AICPU, ENGINE_HOST, ICACHE_STARTS, MODES
from ..lower.program import CoreGroup, Program, expand_flags
from . import coalesce, fastforward
from .aicpu import run_aicpu
from .block import COALESCE_MIN, block_processes
from .cores import Core, Pool
from .fabric import Fabric
from .gm import GmAccount
from .kernelstart import InstructionCaches, tiling_lines
from .pipe import run_pipe
from .records import RecordBuilder
from .replay import Replay, replay_task, run_recorded, task_key
from .rows import Run, expand_with_replays
from .trace import TaskRecord, Trace

#: the trace kind of the block start interval on the scalar pipe
KERNEL_START_KIND = "kernel_start"
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
                 replay: bool = True, fast_forward: bool | None = None,
                 icache: str = "cold") -> None:
        if mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if icache not in ICACHE_STARTS:
            raise ConfigError(f"icache must be one of {', '.join(ICACHE_STARTS)}, got "
                              f"{icache!r}")
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
        self.pools = {"aicore": Pool(self.env, "AI Core", chip.ai_cores),
                      ENGINE_AICPU: Pool(self.env, "AI CPU", chip.ai_cpus)}
        if not chip.coupled:
            self.pools["aiv"] = Pool(self.env, "AIV", chip.aiv_cores, chip.ai_cores, rotating=True)
        self.rows: list[Run] = []            # raw intervals
        self.replayed: list[tuple] = []      # (replay, start, task id, op): rows made lazily
        self.records: list[TaskRecord] = []
        self.peaks: dict[str, int] = {}
        self.pipe_busy: dict[int, dict[str, int]] = {}
        self.events = 0
        self.started: dict[int, int] = {}     # task id -> when its first phase got cores
        self.progress = progress              # progress(tasks done, tasks in all), optional
        # periodic pipe loops advanced by arithmetic (sim/fastforward.py); None: the default
        if fast_forward is None:
            fast_forward = fastforward.ENABLED
        # the L2 cache and the GM bytes per task (sim/gm.py; `l2` and `gm_traffic` name them)
        self.gm = GmAccount(program, fast_forward)
        self.l2, self.gm_traffic = self.gm.l2, self.gm.traffic
        self.recorder = RecordBuilder(chip, self.gm.traffic, self.pipe_busy)
        self.start_cycles = chip.cycles(chip.kernel_start_us * 1e-6)
        # the start's growth per further block of the kernel (module note, "Kernel start")
        self.block_start_cycles = chip.cycles((chip.block_start_us or 0.0) * 1e-6)
        # a prebuilt dynamic-shape vector kernel's prologue (module note, "Kernel start")
        self.binary_start_cycles = chip.cycles((chip.binary_block_start_us or 0.0) * 1e-6)
        self.tik_start_cycles = chip.cycles((chip.tik_tiling_start_us or 0.0) * 1e-6)
        # one line of the tiling data read (module note, "Kernel start")
        self.tiling_line_cycles = chip.tiling_line_cycles or 0
        # outside the blocks: the dispatch of a phase and its growth per further block
        self.dispatch_cycles = chip.cycles((chip.task_dispatch_us or 0.0) * 1e-6)
        self.block_dispatch_cycles = chip.cycles((chip.block_dispatch_us or 0.0) * 1e-6)
        # the kernel each core last ran (a cold instruction cache: module note)
        self.icache = InstructionCaches(
            chip.cycles((chip.icache_cold_block_us or 0.0) * 1e-6), icache)
        # tasks run one at a time on the device (one stream, sunk): an identical task is
        # replayed, not simulated again (see `replay_key`)
        self.replay = replay and mode == "sink" and program.streams == 1
        self.replays: dict[tuple, Replay] = {}
        self.leases: dict[int, dict[int, tuple[int, ...]]] = {}     # task -> `leased` ids
        self.ff = (fastforward.FastForward(self.env, self.fabric, self.rows, self.gm)
                   if fast_forward else None)

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
        # (end of the graph: L2 write-back)
        env.process(self.gm.flush(env, self.fabric,
                                  [self.done[t.task_id] for t in tasks]))
        # the run allocates 10^5..10^6 small objects that live to the end (ascendsim.gcpause)
        with gc_paused():
            n = run_events(env)
        self.events = n
        missing = [t.op_name for t in tasks if not self.done[t.task_id].processed]
        if missing:
            raise SimulationError(f"deadlock: task(s) {', '.join(missing[:5])} never finished")
        trace = Trace(self.chip, detail=self.detail)
        trace.l2 = self.l2.stats
        trace.tasks = sorted(self.records, key=lambda r: r.task_id)
        # intervals are expanded from the rows when first read (Trace.defer_intervals); the
        # last end is the same from the rows (every row becomes intervals with its end)
        trace.defer_intervals(functools.partial(expand_with_replays, self.rows,
                                                self.replayed))
        trace.total_cycles = max([r.end for r in trace.tasks] + [int(r.end) for r in
                                                                 self.rows]
                                 + [start + seen.last for seen, start, *_ in self.replayed]
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
            self.rows.append(Run(ENGINE_HOST, (0,), "HOST", t.task_id, t.op_name, start,
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
            self.rows.append(Run(ENGINE_HOST, (0,), "HOST", task_id, "synchronize", start,
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
                key = task_key(self.gm, t)
                if self.icache.tracked:      # (all cores free: `Pool.peek`)
                    key = (*key, self.icache_plan(t))
            seen = self.replays.get(key) if key is not None else None
            self.started.pop(t.task_id, None)
            if seen is not None:          # the dispatch and the replay as one timeout
                yield from replay_task(self, t, seen, sink, self.replay_cores(t, seen.leases))
            else:
                self.pipe_busy[t.task_id] = {}
                if sink:                  # device-side dispatch, in every mode
                    yield env.timeout(sink)
                if not self.replay:
                    self.l2.resync()
                yield from run_recorded(self, t, key)
            end = env._now
            start = self.started.get(t.task_id, end)
            self.records.append(self.recorder.record(
                t, start, end, launch_start, max(0, start - prev_end),
                t.block_dim if seen is None else seen.block_dim))
            prev_end = end
            self.gm.task_done(t.task_id)
            self.done[t.task_id].succeed()
            if self.progress is not None:
                self.progress(len(self.records), len(self.p.tasks))

    def phase(self, task, ph):
        """SimPy body of one phase of `task` on its leased cores (AI CPU: sim/aicpu.py)."""
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
            self.leased(task, ph, ids)
            self.started.setdefault(task.task_id, env.now)
            cold = self.icache.touch(task, ph, ids)
            procs = []
            base = 0
            for g in ph.groups:
                cores = tuple(ids[base + i] for i in range(len(g.cores)))
                base += len(g.cores)
                procs.append(env.process(self.group(task, g, cores, blocks=ph.block_dim,
                                                    lines=tiling_lines(ph), cold=cold,
                                                    binary=ph.binary)))
            yield env.all_of(procs)
            yield lease.release()

    def group(self, task, g: CoreGroup, cores: tuple[int, ...], start: bool = True,
              blocks: int = 1, lines: int = 0, cold: int = 0, binary: str = ""):
        """SimPy body of core group `g` of `task` on `cores`: the kernel start (`start`), then
        one set of pipe processes per core (symmetric: one for the group), coalesced in block
        detail (sim/block.py)."""
        if self.symmetric:
            sets = [cores]
        else:
            sets = [(c,) for c in cores]
        if start:
            yield from self.kernel_start(task, cores, sets, blocks, lines, cold, binary)
        procs = []
        for cs in sets:
            label = f"core {cs[0]}" if len(cs) == 1 else f"cores {cs[0]}-{cs[-1]}"
            core = Core(self.caps_cube, label, task.op_name, self.peaks)
            segments, chunks = g.segments, False
            if self.detail == "block":       # (a few tiles of long unit loops: chunk tiles)
                segments, chunks = coalesce.chunked(g, COALESCE_MIN)
            if self.detail == "block" and sum(sg.count for sg in segments) >= COALESCE_MIN:
                procs.extend(block_processes(self, task, segments, core, cs, chunks))
            else:
                queues = expand_flags(segments)
                merge = "tile" if self.detail == "block" else "contig"
                for pipe, q in queues.items():
                    procs.append(self.env.process(run_pipe(self, task, core, cs, pipe, q,
                                                           merge=merge)))
        yield self.env.all_of(procs)

    def dispatch_head_cycles(self, blocks: int) -> int:
        """Cycles from a phase's cores being granted to its blocks' start, outside the blocks
        (module note, "Kernel start"): `task_dispatch_us` plus `block_dispatch_us` per further
        block."""
        return self.dispatch_cycles + max(blocks - 1, 0) * self.block_dispatch_cycles

    def in_block_start_cycles(self, blocks: int, lines: int = 0, cold: int = 0,
                              binary: str = "") -> int:
        """Cycles of each block's own start, before its first instruction, in a kernel of
        `blocks` blocks whose blocks read `lines` lines of tiling data, `cold` of them on cores
        that last ran another kernel; `binary`: the kind of a prebuilt dynamic-shape vector
        kernel ("" for none; module note)."""
        return (self.start_cycles + max(blocks - 1, 0) * self.block_start_cycles
                + lines * self.tiling_line_cycles + cold * self.icache.cycles
                + (self.binary_start_cycles if binary else 0)
                + (self.tik_start_cycles if binary == "tik" else 0))

    def kernel_start_cycles(self, blocks: int, lines: int = 0, cold: int = 0,
                            binary: str = "") -> int:
        """Cycles from a phase's cores being granted to each of its blocks' first instruction:
        the dispatch head, then the block's own start."""
        return self.dispatch_head_cycles(blocks) + self.in_block_start_cycles(blocks, lines,
                                                                              cold, binary)

    def icache_plan(self, task) -> tuple[int, ...]:
        """The cold block count of each AI Core phase of `task` on the cores it gets when all
        are free (one stream, sunk: `Pool.peek`)."""
        return tuple(self.icache.cold(task, ph,
                                      self.pools["aiv" if ph.vector_cores else "aicore"]
                                      .peek(ph.block_dim))
                     for ph in task.phases if ph.engine == ENGINE_AICORE)

    def leased(self, task, ph, ids) -> None:
        """Phase `ph` of `task` runs on `ids` (kept for its replay, `replay_cores`, while the
        engine replays identical tasks)."""
        if not self.replay:
            return
        index = next(i for i, p in enumerate(task.phases) if p is ph)
        self.leases.setdefault(task.task_id, {})[index] = tuple(ids)

    def replay_cores(self, task, leases: dict[int, tuple[int, ...]]) -> dict[int, int]:
        """A replayed task takes its cores as a simulated one would (all free: `Pool.peek`; a
        rotating pool moves on), and its kernels are then in their instruction caches; returns
        the core ids of the task it replays that differ from its own, mapped to its own."""
        moved = {}
        for i, ph in enumerate(task.phases):
            if ph.engine != ENGINE_AICORE:
                continue
            pool = self.pools["aiv" if ph.vector_cores else "aicore"]
            ids = pool.peek(ph.block_dim)
            self.icache.touch(task, ph, ids)
            pool.advance(ids)
            moved.update((a, b) for a, b in zip(leases.get(i, ()), ids) if a != b)
        return moved

    def kernel_start(self, task, cores: tuple[int, ...], sets: list, blocks: int,
                     lines: int = 0, cold: int = 0, binary: str = ""):
        """The phase's dispatch head (no pipe, no core busy), then the block's start on each
        core before its first instruction (module note, "Kernel start"): `kernel_start_us`,
        plus `block_start_us` per further block of the kernel, plus `tiling_line_cycles` per
        line of tiling data, plus `icache_cold_block_us` per block of the phase on a core that
        last ran another kernel, plus `binary_block_start_us` in a prebuilt dynamic-shape
        vector kernel (`binary`) and `tik_tiling_start_us` in a TIK one, on the scalar pipe,
        one interval per core."""
        head = self.dispatch_head_cycles(blocks)
        if head > 0:
            yield self.env.timeout(head)
        cycles = self.in_block_start_cycles(blocks, lines, cold, binary)
        if cycles <= 0:
            return
        start = self.env.now
        yield self.env.timeout(cycles)
        self.rows.append(Run(ENGINE_AICORE, cores, "S", task.task_id, task.op_name, start,
                             self.env.now, KERNEL_START_KIND))
        for cs in sets:
            self.note_busy(task.task_id, cs[0], "S", cycles)

    def note_busy(self, task_id: int, core: int, pipe: str, cycles: int) -> None:
        """Add `cycles` to the busy cycles of `pipe` of `core` in task `task_id`."""
        busy = self.pipe_busy[task_id].setdefault(core, {})
        busy[pipe] = busy.get(pipe, 0) + cycles



def run_events(env: simpy.Environment) -> int:
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


__all__ = ["Engine", "KERNEL_START_KIND", "MAX_CYCLES", "run_events", "user_figures"]
