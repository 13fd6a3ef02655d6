"""The lowering's state and task builder, which every per-kind lowering module uses.

`Lowering` holds what the lowering of one graph knows so far (value shapes, formats, aliases,
which task produced each value, the streams) and builds tasks (`add_task`: stream, deps,
traffic, roofline). It knows nothing of any kind of op: the dispatcher (lower/lowering.py)
hands it the function that lowers one node (`Lowering.node`).

Note on the model
-----------------
L2. Residency is not decided here: the simulator's L2 cache (`ascendsim.sim.l2cache`) tracks
it while the program runs, shared by every core and stream, and decides when each GM move
starts what part of it hits. The lowering states only each task's own access pattern, the
same whatever ran before: a read's miss fraction when nothing of the tensor is resident
yet (its first read of each byte misses; repeated reads of it within the task, a GEMM
operand re-read by every tile column, hit L2 when the task's operands fit in half of L2,
else only reads shared by the cores of one wave, a gm x gn grid of concurrently running
tiles, hit), and the GM tensor each move touches (`GmFraction`). Writes land in L2 (write
fraction 0); the cache writes dirty data back to HBM on eviction and at the end of the
graph. The miss fraction of a move (decided at run time) drives both its HBM traffic and
the msKPP per-core de-rate. The static `Task.traffic` and roofline are those of a cold L2
with every write kept; the trace's task traffic is the simulated one.

Streams. With `streams=1` every task is on stream 0 in graph order. With more, a task
continues its first producer's stream when that producer is the stream's last task, else it
opens the least-used stream; a task waits for every producer (cross-stream events).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GraphError
from ..hw.names import (
    ENGINE_AICORE,
    GM,
    TASK_AI_CORE,
    TASK_AI_CPU,
    TASK_AI_VECTOR_CORE,
    TASK_MIX_AIV,
)
from ..ir.registry import Unit, get_op
from ..ir.tensor import Value
from .dynamic_tiling import binary_kind, mix_binary
from .formats import NC1HWC0, ND, NZ, padded_bytes
from .program import CoreGroup, GmFraction, Phase, Task


@dataclass
class TaskSpec:
    """What a lowering step hands `add_task`: the task's identity, phases, operands (value
    names and their formats), flops, and the facts worth explaining."""

    name: str
    op_type: str
    task_type: str
    phases: list[Phase]
    ins: list[str]
    outs: list[str]
    in_fmts: list[str]
    out_fmts: list[str]
    flops: int = 0
    notes: list[str] = field(default_factory=list)
    fused: tuple[str, ...] = ()
    cube_dtype: str = "float16"


def miss_fraction(unique: float, reads: float, fits: bool, share: int = 1) -> float:
    """L2 miss fraction of a task's reads of one tensor when none of it is resident yet (see
    the module note; the simulator's L2 cache scales it by what is resident at the time)."""
    if reads <= 0:
        return 1.0
    compulsory = min(1.0, unique / reads)
    if fits:
        return compulsory
    return min(1.0, max(compulsory, 1.0 / max(share, 1)))


#: "no value before" in `Lowering.undo`
UNSET = object()

#: lowers one node: the dispatcher's (lower/lowering.py)
NodeLowering = Callable[["Lowering", Any], None]


class Lowering:
    """The state of one graph's lowering and the task builder (see the module note)."""

    def __init__(self, graph, chip, streams: int, lower_node: NodeLowering,
                 kernel_build: str = "jit") -> None:
        self.g = graph
        self.chip = chip
        #: how the built-in kernels were built (`api.kernel_build_for`): "binary" (prebuilt
        #: dynamic-shape kernels) or "jit" (compiled for the shapes)
        self.kernel_build = kernel_build
        self.lower_node = lower_node
        self.tasks: list[Task] = []
        self.fmt: dict[str, str] = {}
        self.alias: dict[str, str] = {}
        self.producer: dict[str, int] = {}
        self.converted: dict[tuple[str, str], str] = {}
        #: the keys of `converted` by value (an L2 chain's chunks drop their inputs' ones)
        self.converted_by_root: dict[str, list[tuple[str, str]]] = {}
        #: inside a batch chunk of an L2 chain: each value it sets -> the value before
        #: (`UNSET`: none), restored after the chunk (`set_value`)
        self.undo: dict[str, Any] | None = None
        #: `vector.node_seq` results by node key: [(constants read, by input index; result)]
        self.seq_memo: dict[tuple, list] = {}
        #: add_task's traffic and cube flag by the phases' memo templates (`_phase_facts`)
        self._facts: dict[tuple, tuple[dict, bool, float]] = {}
        #: full-size values of an L2 chain's external inputs and outputs (batch chunks read
        #: and write slices of them: the L2 cache sizes them whole)
        self.chain_full: dict[str, Value] = {}
        #: while a batch chunk of an L2 chain lowers: "#<chunk>", the suffix of the GM names
        #: of the values it writes inside the chain (see `gm_tensor`)
        self.chunk_tag = ""
        #: while a fused node lowers: its (rebound) subgraph, whose values and constants
        #: `sub_value` and `const_value` read first
        self.sub: Any = None
        self.nstreams = streams
        self.stream_last: dict[int, int] = {}
        self.stream_count = [0] * streams
        self.small_consts = {k: v for k, v in graph.constants.items()
                             if isinstance(v, np.ndarray)}
        self.values: dict[str, Value] = dict(graph.values)
        # a graph input declared in a fractal layout sits in GM in that format
        for name in graph.inputs:
            if graph.values[name].layout in (NC1HWC0, NZ):
                self.fmt[name] = graph.values[name].layout
        #: rebound subgraphs by (fused node id, input shapes) (the node is kept alive)
        self.rebound_memo: dict[tuple, tuple[Any, Any]] = {}
        #: `values` whose shape `value` found static (speed only; `set_value` and the undo
        #: of an L2 chunk drop what they change)
        self.checked: dict[str, Value] = {}
        #: whether a shape is static, by shape (`sub_value`)
        self._static_shapes: dict[tuple, bool] = {}
        self.output_values: list[str] = []

    def node(self, node) -> None:
        """Lower one node (the dispatcher's table picks the lowering)."""
        self.lower_node(self, node)

    # -- values ----------------------------------------------------------------------------
    def root(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def is_const(self, name: str) -> bool:
        return self.root(name) in self.g.constants

    def set_value(self, name: str, v: Value) -> None:
        """Set a value's shape; inside a batch chunk of an L2 chain, undone after the chunk
        (`composite.lower_l2_chain`: every chunk starts from the values before the chain)."""
        undo = self.undo
        if undo is not None and name not in undo:
            undo[name] = self.values.get(name, UNSET)
        self.values[name] = v
        self.checked.pop(name, None)

    def value(self, name: str) -> Value:
        v = self.checked.get(name)
        if v is not None:
            return v
        v = self.values.get(name)
        if v is None:
            raise GraphError(f"lowering: no value '{name}' in graph '{self.g.name}'")
        if not all(isinstance(d, int) for d in v.shape):
            raise GraphError(f"value '{name}' has symbolic shape {v.shape}; bind it "
                             f"(Graph.bind) before simulating")
        self.checked[name] = v
        return v

    def format_of(self, name: str) -> str:
        root = self.root(name)
        if root in self.g.constants:
            return "const"
        fmt = self.fmt
        return fmt.get(root, fmt.get(name, ND))

    def const_value(self, name: str) -> Any:
        """The constant data of a value (a fused node's own constants first), or None."""
        sub = self.sub
        if sub is not None and name in sub.constants:
            return sub.constants[name]
        return self.g.constants.get(self.root(name))

    def sub_value(self, node, name: str) -> Value:
        sub = self.sub
        if sub is not None:
            v = sub.values.get(name)
            if v is not None:
                static = self._static_shapes.get(v.shape)
                if static is None:
                    static = self._static_shapes[v.shape] = all(isinstance(d, int)
                                                                for d in v.shape)
                if static:
                    return v
        return self.value(name)

    def unit(self, node) -> Unit:
        return get_op(node.op_type, node.name).unit_for(node, self.small_consts)

    # -- L2 --------------------------------------------------------------------------------
    def gm_tensor(self, name: str, fmt: str | None = None) -> tuple[str, int, int]:
        """(GM name, bytes, bytes this task covers) of a value as the L2 cache tracks it:
        views resolve to the value they alias; a batch chunk's slice of an L2 chain's input
        or output counts whole, the slice being what the chunk covers. A value a batch chunk
        writes inside the chain (an intermediate, a converted slice of an input) is the
        chunk's own (`<name>#<chunk>`): GE's memory assigner hands the next chunk the same
        block, but the cache must see this chunk's copy die after its last reader in the
        chunk, not after the last chunk's (the next chunks would write it back dirty)."""
        root = self.root(name)
        fmt = fmt or self.format_of(name)
        if fmt == "const":
            fmt = ND
        span = padded_bytes(self.value(name), fmt)
        if self.chain_full:
            v = self.chain_full.get(root)
            if v is not None:
                return root, padded_bytes(v, fmt), span
        if self.chunk_tag and root not in self.g.constants:
            root += self.chunk_tag
        return root, span, span

    def miss(self, name: str, reads: float, fits: bool = True, share: int = 1,
             fmt: str | None = None) -> GmFraction:
        """Miss fraction of `reads` bytes of `name` when none of it is resident (module
        note), naming the tensor for the simulator's L2 cache."""
        v = self.value(name)
        fmt = fmt or self.format_of(name)
        unique = padded_bytes(v, fmt)
        fits = fits and unique <= self.chip.l2_resident_bytes
        return GmFraction(miss_fraction(unique, reads, fits, share),
                          (self.gm_tensor(name, fmt),))

    def through(self, names: list[str], fmts: list[str]) -> GmFraction:
        """A write of `names` (in formats `fmts`) into GM: it lands in L2 (fraction 0); the
        simulator's L2 cache writes it back to HBM when it evicts it or at the end."""
        return GmFraction(0.0, tuple(self.gm_tensor(n, f) for n, f in zip(names, fmts)))

    # -- tasks -----------------------------------------------------------------------------
    def pick_stream(self, inputs: list[str]) -> int:
        if self.nstreams == 1:
            return 0
        for i in inputs:
            tid = self.producer.get(self.root(i))
            if tid is None:
                continue
            sid = self.tasks[tid].stream_id
            if self.stream_last.get(sid) == tid:
                return sid
            break
        return min(range(self.nstreams), key=lambda s: (self.stream_count[s], s))

    def add_task(self, spec: TaskSpec) -> Task:
        """Append a task (streams, dependencies, traffic, roofline) and update formats."""
        name, op_type, task_type, phases = spec.name, spec.op_type, spec.task_type, spec.phases
        ins, outs, out_fmts, flops = spec.ins, spec.outs, spec.out_fmts, spec.flops
        tid = len(self.tasks)
        sid = self.pick_stream(ins)
        producer = self.producer
        deps = sorted({producer[r] for i in ins if i and (r := self.root(i)) in producer})
        traffic, cube, memory = self._phase_facts(phases)
        compute = compute_cycles(self.chip, flops if task_type != TASK_AI_CPU else 0, cube,
                                 spec.cube_dtype)
        task = Task(tid, sid, name, op_type, task_type, tuple(phases), tuple(deps),
                    tuple(self.value(i) for i in ins), tuple(self.value(o) for o in outs),
                    tuple(spec.in_fmts), tuple(out_fmts), int(flops), traffic,
                    int(math.floor(max(compute, memory))),
                    tuple(spec.notes), spec.fused, compute_cycles=compute)
        self.tasks.append(task)
        self.stream_last[sid] = tid
        self.stream_count[sid] += 1
        for o, f in zip(outs, out_fmts):
            self.producer[o] = tid
            self.fmt[o] = f
        return task

    def _phase_facts(self, phases) -> tuple[dict, bool, float]:
        """The phases' traffic (`phase_traffic`, a fresh dict), whether they use the cube,
        and the traffic's `memory_cycles`; kept by the groups' memo templates when every
        group has one (equal templates: equal instructions but for GM tensor names, which
        none of these reads)."""
        key: tuple | None = ()
        for p in phases:
            templates = tuple(g.template for g in p.groups)
            if 0 in templates:
                key = None
                break
            key += ((p.engine, templates),)
        if key is not None:
            hit = self._facts.get(key)
            if hit is not None:
                return dict(hit[0]), hit[1], hit[2]
        traffic = phase_traffic(phases)
        cube = any(p for p in phases if p.engine == ENGINE_AICORE and has_pipe(p, "M"))
        memory = memory_cycles(self.chip, traffic)
        if key is not None:
            self._facts[key] = (dict(traffic), cube, memory)
        return traffic, cube, memory

    # -- vector work -----------------------------------------------------------------------
    def vector_cores(self) -> int:
        """Cores a vector task spreads over (the AIV cores on split chips)."""
        return self.chip.vector_cores

    def vector_task_type(self, op_types: Sequence[str] = ()) -> str:
        """The task type of a vector-only kernel on this chip; in a binary build, MIX_AIV for
        the prebuilt kernel of ops `op_types` that is built in mix mode
        (`dynamic_tiling.mix_binary`)."""
        if self.chip.coupled:
            return TASK_AI_CORE
        if self.kernel_build == "binary" and mix_binary(op_types, self.chip.name):
            return TASK_MIX_AIV
        return TASK_AI_VECTOR_CORE

    def vector_phase(self, groups: list[CoreGroup], op_types: Sequence[str] = ()) -> Phase:
        """The phase of vector core groups (on the AIV cores on split chips); in a binary
        build a prebuilt dynamic-shape kernel's, of the kind its ops `op_types` give
        (`Phase.binary`, `dynamic_tiling.binary_kind`)."""
        binary = (binary_kind(op_types, self.chip.name) if self.kernel_build == "binary"
                  else "")
        return Phase(ENGINE_AICORE, tuple(groups), vector_cores=not self.chip.coupled,
                     binary=binary)


def has_pipe(phase: Phase, pipe: str) -> bool:
    return any(pipe in g.pipes for g in phase.groups)


def phase_traffic(phases) -> dict[tuple[str, str], int]:
    """Bytes per (level, read|write) over all cores, from the instructions (exact)."""
    acc: dict[tuple[str, str], float] = {}

    def add(key, b):
        acc[key] = acc.get(key, 0.0) + b

    for ph in phases:
        for g in ph.groups:
            mult = len(g.cores)
            for seg in g.layout:          # (names do not matter: no renamed copy built)
                for st in seg.stages:
                    for ins, times in ((i, st.units) for i in st.instrs):
                        _account(add, ins, mult * seg.count * times)
                    for ins in st.head:
                        _account(add, ins, mult * seg.count)
    return {k: int(round(v)) for k, v in acc.items()}


def _account(add, ins, times: int) -> None:
    if not ins.nbytes:
        return
    b = ins.nbytes * times
    if ins.src == GM:
        add(("DDR", "read"), b * ins.hbm)
        add(("L2", "read"), b * (1 - ins.hbm))
    elif ins.src:
        add((ins.src, "read"), b)
    if ins.dst == GM:
        add(("L2", "write"), b)
        if ins.hbm:
            add(("DDR", "write"), b * ins.hbm)
    elif ins.dst:
        add((ins.dst, "write"), b)


def compute_cycles(chip, flops: int, cube: bool, cube_dtype: str = "float16") -> float:
    """flops / chip peak, cycles (0 off the cube); the peak is the cube's in `cube_dtype`."""
    peak = chip.ai_cores * chip.flops_per_cycle(cube_dtype) if cube else 0
    return flops / peak if peak else 0.0


def memory_cycles(chip, traffic: dict) -> float:
    """max(DDR bytes / HBM bandwidth, GM bytes / L2 bandwidth, GM writes / L2 write
    bandwidth), cycles."""
    ddr = traffic.get(("DDR", "read"), 0) + traffic.get(("DDR", "write"), 0)
    gm = ddr + traffic.get(("L2", "read"), 0) + traffic.get(("L2", "write"), 0) \
        - traffic.get(("DDR", "write"), 0)
    hbm_bw = chip.hbm_bandwidth_bytes_per_s / chip.clock_hz
    l2_bw = chip.l2_bandwidth_bytes_per_s / chip.clock_hz
    l2_wr = chip.l2_write_bandwidth_bytes_per_s / chip.clock_hz
    writes = traffic.get(("L2", "write"), 0)
    return max(ddr / hbm_bw, gm / l2_bw, writes / l2_wr)


__all__ = ["Lowering", "TaskSpec", "UNSET", "NodeLowering", "miss_fraction", "has_pipe",
           "phase_traffic", "compute_cycles", "memory_cycles"]
