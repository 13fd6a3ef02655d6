"""What lowering produces and the simulator runs: `Program` -> streams of `Task`s -> tiles.

Note on the model
-----------------
A `Task` is one launched kernel (one graph node, a fused node, or an inserted TransData). It
runs on one engine: the AI Cores (`ENGINE_AICORE`; on split chips the vector work runs on the
AIV cores, which the simulator numbers after the AICs), the AI CPU (`ENGINE_AICPU`), in one or
more `Phase`s executed one after the other, except a split-chip mix kernel's cube phase and
vector phase, which the simulator overlaps tile by tile (`ascendsim.sim.mix`).

A phase splits its work over cores (the block dim) as `CoreGroup`s: cores that run the same
program. A program is a chain of `Stage`s (one per pipe, in data-flow order, e.g.
S -> MTE2 -> MTE1 -> M -> V -> MTE3) repeated for a number of tiles; each stage executes its
`Instr`s once per *unit* (a tile may hold several units on a stage, e.g. the k-steps of a
GEMM on MTE1/M) and hands data to the next stage through a double-buffered slot of an on-chip
buffer. The flags (set_flag/wait_flag with ping-pong event ids 0/1) and buffer allocations
are derived from this chain in one place, `expand_flags`, exactly as an Ascend C TQue with two
buffers compiles: stage j waits for the data flag of stage j-1 and for the slot-free flag of
stage j+1 from two handoffs earlier.

`Instr` is a single instruction on one pipe: fixed `cycles` (compute, or the on-chip part of
a move), or a move of `nbytes` from `src` to `dst` at `bw` bytes/cycle after `cycles` of
fixed latency. Moves that touch global memory (src or dst "GM") pass through the chip's
shared L2 and HBM bandwidth in the simulator; `hbm` is the fraction of their bytes that also
go to HBM when nothing of the tensor is in L2 yet: on a read, the misses of the task's own
access pattern (its first read of each byte, and re-reads the lowering's reuse rule says
miss); on a write, 0 (GM writes land in L2). `tensors` names the GM tensors the move
touches, each with its size in bytes and the bytes of it the task covers (a batch chunk
covers a slice); the simulator's L2 cache (`ascendsim.sim.l2cache`) uses them to decide,
when the move starts, which part of a read is already resident (a hit) and what a write
evicts. A move without `tensors` (a GM workspace, a bias) keeps its lowered `hbm` as is. The
lowering hands the names to the tiling code inside the miss fraction itself (`GmFraction`),
so the tiling specs stay plain numbers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from ..hw.names import ENGINE_AICORE, ENGINE_AICPU, GM


class GmFraction(float):
    """A miss (read) or write-through (write) fraction that also names the GM tensors the move
    touches, as (name, bytes, span) triples: `gm_read`/`gm_write` copy them into
    `Instr.tensors`.
    Arithmetic on it gives a plain float (the names do not survive a mix of operands)."""

    tensors: tuple[tuple[str, int, int], ...]

    def __new__(cls, value: float, tensors: tuple[tuple[str, int, int], ...]) -> GmFraction:
        obj = super().__new__(cls, value)
        obj.tensors = tensors
        return obj

    def __reduce__(self):
        return (GmFraction, (float(self), self.tensors))


def gm_tensors(fraction: float) -> tuple[tuple[str, int, int], ...]:
    """The tensors a `GmFraction` names; () for a plain float."""
    return getattr(fraction, "tensors", ())


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction on one pipe (flags are attached when the tile chain is expanded)."""

    pipe: str
    kind: str                 # "copy", "img2col", "mmad", "vec_binary", "scalar", ...
    cycles: int               # fixed cycles: compute, or the latency of a move
    nbytes: int = 0           # bytes moved (0 for compute)
    src: str = ""             # "GM", "L1", "L0A", "L0B", "L0C", "UB"
    dst: str = ""
    bw: float = 0.0           # bytes/cycle of the move's path on one core (0: not a move)
    hbm: float = 0.0          # fraction of the bytes that also cross HBM/DDR (GM moves)
    tensors: tuple[tuple[str, int, int], ...] = ()   # GM tensors: (name, bytes, task's span)

    @property
    def shared(self) -> bool:
        """True when the move crosses L2/HBM (shared by all cores) and is simulated as a flow."""
        return self.bw > 0 and (self.src == GM or self.dst == GM)

    def busy(self) -> float:
        """Uncontended cycles: fixed part plus bytes at the path bandwidth."""
        return self.cycles + (self.nbytes / self.bw if self.bw > 0 else 0.0)


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipe's part of a tile: `units` repetitions of `instrs` (+ `head` once per tile).

    `out_bufs` are the on-chip buffers this stage writes for the next stage, bytes per handoff
    slot; the next stage frees them when it has consumed them. `slots`: handoff slots of the
    link to the next stage (2: double buffering, an Ascend C TQue of depth 2; 1: a kernel
    whose queues have BUFFER_NUM = 1, so the producer waits for the consumer to free the one
    slot before it writes the next handoff).
    """

    pipe: str
    instrs: tuple[Instr, ...]
    units: int = 1
    head: tuple[Instr, ...] = ()
    out_bufs: tuple[tuple[str, int], ...] = ()
    slots: int = 2

    def tile_cycles(self) -> float:
        """Uncontended busy cycles of this stage for one tile."""
        return (sum(i.busy() for i in self.head)
                + self.units * sum(i.busy() for i in self.instrs))


@dataclass(frozen=True, slots=True)
class Segment:
    """`count` consecutive tiles with the same stages."""

    stages: tuple[Stage, ...]
    count: int


class CoreGroup:
    """Cores (indices within the phase's engine) that run the same program of segments.

    Frozen: treat every attribute as read-only. A group the lowering memo reuses under other
    GM tensor names (`renamed`) keeps its template's group and the new names and builds its
    segments (the same instructions with the names substituted) only when something reads
    `segments`: most reused tasks are replayed by the engine, which reads their tensor names
    (`gm_tensors`) and their template, never their instructions. Equality is by cores and
    segments, as for any group.
    """

    __slots__ = ("cores", "_segments", "template", "_base", "_rename", "_gm")

    def __init__(self, cores: tuple[int, ...], segments: tuple[Segment, ...],
                 template: int = 0) -> None:
        self.cores = cores
        self._segments = segments
        #: the lowering memo's work this group is a copy of, with other GM tensor names (0:
        #: none); groups of one template differ only in the names (the engine's replay key
        #: uses it)
        self.template = template
        self._base: CoreGroup | None = None
        self._rename: dict[str, str] | None = None
        self._gm: tuple | None = None

    @classmethod
    def renamed(cls, base: CoreGroup, rename: dict[str, str]) -> CoreGroup:
        """`base` with the GM tensor names of its moves substituted (lazily): `rename` maps
        old names to new ones (a plain dict of strings: nothing for the garbage collector to
        track, one per reused task)."""
        g = cls.__new__(cls)
        g.cores, g._segments, g.template = base.cores, None, base.template
        g._base, g._rename, g._gm = base, rename, None
        return g

    def with_template(self, template: int) -> CoreGroup:
        """This group marked as the memo's template `template`."""
        if self._base is not None:
            return CoreGroup.renamed(self._base.with_template(template), self._rename)
        return CoreGroup(self.cores, self._segments, template)

    @property
    def segments(self) -> tuple[Segment, ...]:
        segs = self._segments
        if segs is None:
            segs = self._segments = Renaming(self._rename).segments(self._base.segments)
        return segs

    @property
    def layout(self) -> tuple[Segment, ...]:
        """The segments up to GM tensor names (a renamed group's template's, built no copy):
        for whatever does not read the names (traffic, pipes, tile counts, cycles)."""
        return self._base.layout if self._base is not None else self._segments

    @property
    def gm_tensors(self) -> tuple[tuple[str, int, bool], ...]:
        """The distinct (GM tensor name, size, written) triples the group's moves name
        (`Instr.tensors`; written: the move's dst is GM), in order of first appearance over
        segments, stages, and each stage's head then instructions."""
        got = self._gm
        if got is None:
            if self._base is not None:
                to = self._rename
                got = tuple((to.get(n, n), b, w) for n, b, w in self._base.gm_tensors)
            else:
                seen: dict = {}
                for sg in self._segments:
                    for st in sg.stages:
                        for ins in st.head + st.instrs:
                            if ins.tensors:
                                w = ins.dst == GM
                                for n, b, _ in ins.tensors:
                                    seen.setdefault((n, b, w), None)
                got = tuple(seen)
            self._gm = got
        return got

    @property
    def tiles(self) -> int:
        return sum(s.count for s in self.layout)

    @property
    def pipes(self) -> tuple[str, ...]:
        return tuple(st.pipe for st in self.layout[0].stages)

    def _same(self, other: CoreGroup) -> bool:
        return (self._base is not None and self._base is other._base
                and self._rename == other._rename)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not CoreGroup:
            return NotImplemented
        return self is other or (self.cores == other.cores
                                 and (self._same(other) or self.segments == other.segments))

    def __hash__(self) -> int:
        return hash((self.cores, self.segments))

    def __repr__(self) -> str:
        return (f"CoreGroup(cores={self.cores!r}, segments={self.segments!r}, "
                f"template={self.template!r})")

    def __reduce__(self):
        if self._base is not None and self._segments is None:
            return (CoreGroup.renamed, (self._base, self._rename))
        return (CoreGroup, (self.cores, self.segments, self.template))


class Renaming:
    """GM tensor names to substitute in the instructions of a group (`to`: old name -> new
    name); each instruction is rebuilt once however many stages share it."""

    __slots__ = ("to", "_done")

    def __init__(self, to: dict[str, str]) -> None:
        self.to = to
        self._done: dict[int, Instr] = {}

    def instr(self, ins: Instr) -> Instr:
        if not ins.tensors:
            return ins
        out = self._done.get(id(ins))
        if out is None:
            to = self.to
            out = self._done[id(ins)] = Instr(
                ins.pipe, ins.kind, ins.cycles, ins.nbytes, ins.src, ins.dst, ins.bw, ins.hbm,
                tuple((to.get(n, n), b, s) for n, b, s in ins.tensors))
        return out

    def stage(self, st: Stage) -> Stage:
        ins_ = self.instr
        return Stage(st.pipe, tuple(map(ins_, st.instrs)), st.units, tuple(map(ins_, st.head)),
                     st.out_bufs, st.slots)

    def segments(self, segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
        stage = self.stage
        return tuple(Segment(tuple(map(stage, sg.stages)), sg.count) for sg in segments)


@dataclass(frozen=True)
class Phase:
    """Work on one engine: AI Core groups, or AI CPU work on `block_dim` AI CPUs (its launch,
    its reads of GM, `aicpu_cycles` of compute, its writes of GM; `ascendsim.lower.aicpu`)."""

    engine: str
    groups: tuple[CoreGroup, ...] = ()
    aicpu_cycles: int = 0        # AI Core clock cycles of AI CPU compute (per AI CPU)
    aicpu_cores: int = 0
    vector_cores: bool = False   # split chips: runs on the AIV cores
    aicpu_launch_cycles: int = 0     # AI CPU task launch (framework dispatch), AI Core cycles
    aicpu_read_bytes: int = 0        # bytes the AI CPU reads from GM (L2/HBM)
    aicpu_write_bytes: int = 0       # bytes the AI CPU writes to GM
    #: "" or, for a prebuilt dynamic-shape vector kernel or TBE MatMul (`kernel_build`
    #: "binary"; `lower.cube.cube_binary`), its kind
    #: (`lower.dynamic_tiling.binary_kind`): each block runs the binary's generic prologue
    #: before its first instruction (chip `binary_block_start_us`), a "tik" kernel also its
    #: run-time tiling read into UB (chip `tik_tiling_start_us`)
    binary: str = ""

    @property
    def block_dim(self) -> int:
        if self.engine == ENGINE_AICPU:
            return self.aicpu_cores
        return sum(len(g.cores) for g in self.groups)


@dataclass
class Task:
    """One launched kernel."""

    task_id: int
    stream_id: int
    op_name: str
    op_type: str
    task_type: str                       # "AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_CPU"
    phases: tuple[Phase, ...]
    deps: tuple[int, ...] = ()           # task ids this task waits for (any stream)
    inputs: tuple[Any, ...] = ()         # Values read (with formats in `input_formats`)
    outputs: tuple[Any, ...] = ()
    input_formats: tuple[str, ...] = ()
    output_formats: tuple[str, ...] = ()
    flops: int = 0
    traffic: dict[tuple[str, str], int] = field(default_factory=dict)
    roofline_cycles: int = 0
    notes: tuple[str, ...] = ()
    fused_ops: tuple[str, ...] = ()
    workspace_bytes: int = 0             # GM scratch the kernel needs while it runs
    compute_cycles: float = 0.0          # flops / chip peak (the roofline's compute side)

    @property
    def block_dim(self) -> int:
        return max((p.block_dim for p in self.phases), default=0)

    @property
    def engine(self) -> str:
        return self.phases[0].engine if self.phases else ENGINE_AICORE


@dataclass
class Program:
    """The tasks of a graph in launch order; each names its stream and its cross-stream deps."""

    graph_name: str
    chip: Any
    tasks: list[Task]
    streams: int = 1
    detail: str = "block"
    #: a view's output -> the value it aliases (views launch no task)
    aliases: dict[str, str] = field(default_factory=dict)
    #: the values holding the graph's outputs (after any conversion back to ND), in order
    output_values: tuple[str, ...] = ()

    def stream(self, sid: int) -> list[Task]:
        return [t for t in self.tasks if t.stream_id == sid]


# --------------------------------------------------------------------------- flag expansion

#: a queue entry of one pipe: (instr, waits, sets, allocs, frees, tile index)
#: waits/sets: tuples of (src_pipe, dst_pipe, event_id); allocs/frees: ((buffer, bytes), ...)
QueueEntry = tuple


def _handoffs(u_prod: int, u_cons: int) -> tuple[int, int, int]:
    """Handoffs per tile between two stages and the units per handoff on each side."""
    h = min(u_prod, u_cons)
    if u_prod % h or u_cons % h:
        h = 1
    return h, u_prod // h, u_cons // h


@functools.lru_cache(maxsize=1024)
def expand_flags(segments: tuple[Segment, ...]) -> dict[str, list[QueueEntry]]:
    """Per-pipe instruction queues with their set_flag/wait_flag and buffer slot events.

    Stage j, unit u of a tile: before the first unit of a handoff group it waits the data flag
    (pipe[j-1] -> pipe[j], event h % slots) and, from handoff `slots` + 1 on, the slot-free
    flag (pipe[j+1] -> pipe[j]) of the slot it is about to overwrite, then allocates that
    slot; after the last unit of a group it sets its data flag / frees the slot it read and
    sets the slot-free flag back to its producer. Two slots per link (double buffering)
    unless the producing stage says one (`Stage.slots`).
    Cached (the same tiles recur in every layer of a model): treat the queues as read-only.

    A unit's entries depend on u only through u == 0, u modulo the handoff groups of its
    two links, the parity of both handoff counts and whether two slots have been produced,
    so from its third slot on a stage's units repeat with the period 2 x lcm of its group
    sizes, and inside one input handoff group (no input flag but at its ends) with twice its
    output group: one period is built and repeated (the same entry objects; a big tile has
    10^4 units). The queues equal the unit-by-unit construction
    (tests/lower/test_expand_flags.py). Over 60 lines only with this note.
    """
    stages0 = segments[0].stages
    n = len(stages0)
    pipes = [s.pipe for s in stages0]
    queues: dict[str, list[QueueEntry]] = {p: [] for p in pipes}
    h_out = [0] * n     # handoffs produced by stage j so far
    h_in = [0] * n      # handoffs consumed by stage j so far
    tile = 0
    for seg in segments:
        st = seg.stages
        links = [_handoffs(st[j].units, st[j + 1].units) for j in range(n - 1)]
        for _ in range(seg.count):
            for j in range(n):
                stage = st[j]
                units = stage.units
                g_in = links[j - 1][2] if j > 0 else 0        # units per consumed handoff
                g_out = links[j][1] if j < n - 1 else 0       # units per produced handoff
                s_in = st[j - 1].slots if j else 2
                s_out = stage.slots
                unit = functools.partial(_unit_entries, stage, pipes, j, g_in, g_out,
                                         h_in[j], h_out[j], st[j - 1].out_bufs if j else (),
                                         tile, s_in)
                q = queues[pipes[j]]
                # from u0 on (past unit 0 and the first produced slots) the units repeat
                # with `period`; inside one handoff group of a link, with the other link's
                p_in = s_in * g_in if g_in else 1
                p_out = s_out * g_out if g_out else 1
                u0 = min(max(1, (s_out - h_out[j]) * g_out if g_out else 1), units)
                period = math.lcm(p_in, p_out)
                if units - u0 >= 3 * period or (g_in <= p_out and g_out <= p_in):
                    for u in range(u0):
                        q.extend(unit(u))
                    _extend_units(q, unit, u0, units, period)
                else:
                    # long input groups: inside, no input flag and the output's pattern;
                    # long output groups: inside, no output flag or slot and the input's
                    g, inner, first = ((g_in, p_out, u0) if g_in > p_out else (g_out, p_in, 1))
                    for a in range(0, units, g):
                        b = min(a + g, units)
                        lo = min(max(a + 1, first), b)
                        for u in range(a, lo):
                            q.extend(unit(u))
                        if lo < b - 1:
                            _extend_units(q, unit, lo, b - 1, inner)
                        if lo <= b - 1:
                            q.extend(unit(b - 1))
                if g_out:
                    h_out[j] += units // g_out
                if g_in:
                    h_in[j] += units // g_in
            tile += 1
    return queues


def _extend_units(q: list, unit, lo: int, hi: int, period: int) -> None:
    """Append the entries of units lo .. hi - 1, which repeat with `period` from lo on: one
    period built, then repeated."""
    if hi - lo < 3 * period:
        for u in range(lo, hi):
            q.extend(unit(u))
        return
    block: list = []
    for u in range(lo, lo + period):
        block.extend(unit(u))
    reps = (hi - lo) // period
    q.extend(block * reps)
    for u in range(lo + reps * period, hi):
        q.extend(unit(u))


def _unit_entries(stage: Stage, pipes: list, j: int, g_in: int, g_out: int, h_in0: int,
                  h_out0: int, in_bufs: tuple, tile: int, s_in: int, u: int
                  ) -> list[QueueEntry]:
    """The queue entries of unit `u` of stage `j` in one tile (see `expand_flags`); `h_in0`,
    `h_out0`: the stage's handoff counts at the tile's start; g_in/g_out: units per handoff
    of its input/output link (0: no such link); `s_in`: slots of its input link (its own
    `slots` for the output link)."""
    s_out = stage.slots
    waits: list = []
    sets: list = []
    allocs: tuple = ()
    frees: tuple = ()
    if g_in and u % g_in == 0:
        waits.append((pipes[j - 1], pipes[j], (h_in0 + u // g_in) % s_in))
    if g_out and u % g_out == 0:
        h = h_out0 + u // g_out
        if h >= s_out:
            waits.append((pipes[j + 1], pipes[j], h % s_out))
        allocs = stage.out_bufs
    instrs = (stage.head + stage.instrs) if u == 0 else stage.instrs
    if g_out and (u + 1) % g_out == 0:
        sets.append((pipes[j], pipes[j + 1], (h_out0 + u // g_out) % s_out))
    if g_in and (u + 1) % g_in == 0:
        sets.append((pipes[j], pipes[j - 1], (h_in0 + u // g_in) % s_in))
        frees = in_bufs
    last = len(instrs) - 1
    waits_t, sets_t = tuple(waits), tuple(sets)
    return [(ins, waits_t if k == 0 else (), sets_t if k == last else (),
             allocs if k == 0 else (), frees if k == last else (), tile)
            for k, ins in enumerate(instrs)]
