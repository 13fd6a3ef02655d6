"""Parallel inference plans across chips: `simulate_parallel` times a `ParallelModel`
(`models.decoder(..., parallel=asim.Parallel(...))`) on a `Box`, `run_parallel` computes its
values rank by rank with the collectives applied, and `simulate` is `asim.simulate`: a
Graph goes to `api.simulate`, a ParallelModel here.

Note on the model
-----------------
*Ranks.* The ranks of a pipeline stage run the same graph shapes (their weight slices
differ, not their shapes), so each stage is simulated once on the chip (the engine, as
`api.simulate`), with the caller's fusion, detail and mode; the result stands for every rank
of the stage.

*Layers.* The layers of a stage are identical graphs (a dense layer, or a MoE layer: two
kinds), so a stage is simulated with one layer of each kind it has (its base) and with one
more layer of each kind in turn; a kind's per-layer time is the difference, and the stage's
time is the base plus (count - 1) x per-layer time of each kind. What carries over between
layers (the L2 contents) is in the difference; the trace shows the simulated layers' tasks
and one extrapolated block for the rest, per micro-batch (`ParallelResult.chrome_trace_dict`).

*Collectives.* A collective starts when the task that makes its input ends (HCCL's task on
the same stream as the compute, GE cuts the graph there: no fusion across it) and the stream
waits for it: every later task of the stage starts that much later. Its time is
`hw.collectives.collective_phases` on the Box's interconnect (alpha-beta steps, links idle;
on the A2 boxes each mesh stage also pays HCCL's chain of stream tasks on its main stream;
reduction compute not modelled). With `mc2`, an AllReduce right after a matmul is fused with
it (CANN's MatmulAllReduce, `torch_npu.npu_mm_all_reduce_base`: "computation and
communication pipelined inside the fused operator", hiascend torch_npu API reference):
the matmul's M rows are cut into k chunks (of at least `MC2_CHUNK_ROWS` rows) and chunk i's
all-reduce runs while chunk i + 1 is computed, so the pair takes c + (k - 1) max(c, a) + a
for chunks of compute c and communication a each (a includes every step's latency, so small
chunks cost more latency); k is the count that minimises it (the fused operator's tiling
chooses its split; k = 1 is the unfused sequence). A decode step's few rows make one chunk:
nothing to overlap.

*Pipeline.* Stage s takes T_s for one micro-batch and sends its hidden state (Send/Recv,
c_s); with m micro-batches the step is sum_s (T_s + c_s) + (m - 1) max_s T_s (the slowest
stage paces the rest).

*Memory.* Before timing, every stage's rank is checked against the chip's HBM with the rules
of `generation.check_capacity`: its weight share (the constants of its graph: its slices,
the replicated embedding, int8 weights at their stored size), its KV cache after the step
(the cache tensors of its graph, times the pipeline's micro-batches: the graph holds one
micro-batch, the rank the cache of all) and the peak of its live activations (`activation_peak`
of the simulated graph as the passes leave it), the layers extrapolated as the timing is.
A rank over the HBM raises `CapacityError` naming the rank, the sizes and a bigger plan
(`bigger_plan`: each candidate's shares from its own graphs); `check_capacity=False` times
it anyway.

Not modelled: contention between concurrent collectives, HCCL's own kernel launch, the
reduction arithmetic, load imbalance of routed experts (tokens spread evenly over the experts,
as the single-chip MoE timing assumes), collectives spanning servers (except the pipeline's
Send/Recv and the AllReduce's hierarchical algorithm).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import DEFAULT_CHIP, DEFAULT_DETAIL, DEFAULT_MODE, Result
from .api import simulate as simulate_graph
from .errors import CapacityError, ConfigError, GraphError
from .hw import Chip
from .hw.box import Box
from .hw.collectives import LANE_INTRA, collective_phases
from .ir.graph import Graph
from .ir.registry import Unit, get_op
from .ir.tensor import storage_dtype
from .models.parallel import Collective, Parallel, ParallelModel, split_ranges

#: MC2 (MatmulAllReduce) communication chunk: fewest rows of M per chunk. G: CANN's default
#: split (comm_turn=0) is not documented; 256 rows is two base blocks of a 910B matmul tiling
MC2_CHUNK_ROWS = 256


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class CollectiveTime:
    """One collective of the plan, timed: `count` times per step (layers it stands for)."""

    name: str
    kind: str
    group: int
    nbytes: int
    stage: int
    layer: int | None
    time_us: float                 # alone on idle links
    exposed_us: float              # what the stream waits for it (MC2: beyond the matmul)
    count: int = 1
    phases: tuple[str, ...] = ()


@dataclass
class StageTiming:
    """A pipeline stage: the simulated graphs of its representative layers, its time for one
    micro-batch extrapolated to all its layers."""

    stage: int
    ranks: tuple[int, ...]
    time_us: float                 # one micro-batch through every layer of the stage
    compute_us: float
    comm_us: float                 # exposed communication
    result: Result                 # the largest representative graph simulated
    layers_simulated: tuple[int, ...]
    layers: tuple[int, ...]
    timeline: list[tuple[str, str, float, float, dict]] = field(default_factory=list)


@dataclass
class ParallelResult:
    """A parallel plan's step on a Box (times in us). `time_us` is the step of the whole
    batch; `stages` the per-rank results (ranks of a stage share one); `collectives` every
    collective with its time."""

    model: ParallelModel
    box: Box
    time_us: float
    stages: list[StageTiming]
    collectives: list[CollectiveTime]
    notes: list[str] = field(default_factory=list)
    memory: list[RankMemory] = field(default_factory=list)   # one per stage (its ranks')

    @property
    def chip(self) -> Chip:
        return self.box.chip

    @property
    def ranks(self) -> dict[int, StageTiming]:
        """Per-rank results: the StageTiming each rank runs."""
        return {r: s for s in self.stages for r in s.ranks}

    @property
    def comm_us(self) -> float:
        return sum(c.exposed_us * c.count for c in self.collectives)

    @property
    def tokens(self) -> int:
        m = self.model
        return m.batch * (1 if m.phase == "decode" else m.seq_len)

    @property
    def tokens_per_s(self) -> float:
        """Tokens processed per second by the whole box (decode: generated tokens)."""
        return self.tokens / (self.time_us / 1e6) if self.time_us > 0 else 0.0

    @property
    def per_token_ms(self) -> float:
        """Latency of one step in ms (decode: per-token latency of every sequence)."""
        return self.time_us / 1e3

    def table(self) -> str:
        m = self.model
        head = (f"{m.name} {m.phase} batch {m.batch} x {m.seq_len} (context {m.context_len}) "
                f"{m.parallel} on {self.box}: step {self.time_us / 1e3:.3f} ms, "
                f"{self.tokens_per_s:.1f} tokens/s, exposed comm "
                f"{self.comm_us / 1e3:.3f} ms")
        rows = [head]
        for s in self.stages:
            rows.append(f"  stage {s.stage} (ranks {s.ranks[0]}..{s.ranks[-1]}, "
                        f"{len(s.layers)} layers, simulated {list(s.layers_simulated)}): "
                        f"{s.time_us / 1e3:.3f} ms per micro-batch, compute "
                        f"{s.compute_us / 1e3:.3f} ms, comm {s.comm_us / 1e3:.3f} ms")
        kinds: dict[str, list[CollectiveTime]] = {}
        for c in self.collectives:
            kinds.setdefault(c.kind, []).append(c)
        for kind, cs in kinds.items():
            n = sum(c.count for c in cs)
            rows.append(f"  {kind}: {n} per step, {sum(c.time_us * c.count for c in cs) / 1e3:.3f}"
                        f" ms ({sum(c.exposed_us * c.count for c in cs) / 1e3:.3f} ms exposed)")
        rows += [f"  note: {n}" for n in self.notes]
        return "\n".join(rows)

    def __repr__(self) -> str:
        return (f"ParallelResult({self.model.name} {self.model.phase}, {self.model.parallel} on "
                f"{self.box}: {self.time_us / 1e3:.3f} ms, {self.tokens_per_s:.1f} tokens/s)")

    def chrome_trace_dict(self) -> dict[str, Any]:
        """Perfetto JSON: one process per chip (rank), its stage's tasks on an "AI Core
        stream" thread and its collectives on an "HCCS link" thread. Each micro-batch of a
        stage takes a slot of the stage's time (the step's schedule: a slot starts when the
        stage's previous one ends and the previous stage's slot and Send/Recv of the same
        micro-batch are done); a slot shows the simulated (representative) layers' tasks and
        collectives, then one "extrapolated" block for the other layers, then the Send/Recv
        to the next stage. The last slot ends at the step time."""
        events: list[dict[str, Any]] = []
        m = self.model.parallel.micro()
        sends = {s.stage: sum(c.time_us for c in self.collectives
                              if c.kind == "SendRecv" and c.stage == s.stage)
                 for s in self.stages}
        start: dict[tuple[int, int], float] = {}
        for s in self.stages:
            for mb in range(m):
                prev_mb = start[(s.stage, mb - 1)] + s.time_us if mb else 0.0
                prev_st = 0.0
                if s.stage:
                    before = self.stages[s.stage - 1]
                    prev_st = start[(before.stage, mb)] + before.time_us + sends[before.stage]
                start[(s.stage, mb)] = max(prev_mb, prev_st)
        for s in self.stages:
            shown = s.timeline[-1][3] if s.timeline else 0.0
            rest = [layer for layer in s.layers if layer not in s.layers_simulated]
            for rank in s.ranks:
                events.append({"name": "process_name", "ph": "M", "pid": rank,
                               "args": {"name": f"chip {rank} ({self.chip.name}, stage "
                                                f"{s.stage})"}})
                for tid, tname in ((0, "AI Core stream"), (1, f"{LANE_INTRA} link")):
                    events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                                   "args": {"name": tname}})
                for mb in range(m):
                    t_mb = start[(s.stage, mb)]
                    for lane, name, t0, t1, args in s.timeline:
                        events.append({"name": name, "cat": lane, "ph": "X", "pid": rank,
                                       "tid": 0 if lane == "compute" else 1,
                                       "ts": round(t_mb + t0, 4),
                                       "dur": round(max(t1 - t0, 0.0), 4),
                                       "args": {**args, "micro_batch": mb}})
                    if rest and s.time_us > shown:
                        events.append({"name": f"layers {rest[0]}-{rest[-1]} (extrapolated)",
                                       "cat": "compute", "ph": "X", "pid": rank, "tid": 0,
                                       "ts": round(t_mb + shown, 4),
                                       "dur": round(s.time_us - shown, 4),
                                       "args": {"extrapolated": True, "layers": len(rest),
                                                "micro_batch": mb}})
                    if sends[s.stage]:
                        events.append({"name": f"stage {s.stage} -> {s.stage + 1} Send/Recv",
                                       "cat": "comm", "ph": "X", "pid": rank, "tid": 1,
                                       "ts": round(t_mb + s.time_us, 4),
                                       "dur": round(sends[s.stage], 4),
                                       "args": {"kind": "SendRecv", "micro_batch": mb}})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"generator": "ascendsim", "plan": str(self.model.parallel),
                              "box": repr(self.box), "step_us": round(self.time_us, 4),
                              "notes": list(self.notes)}}

    def write_chrome_trace(self, path: str) -> None:
        """The trace as Perfetto / chrome://tracing JSON (`chrome_trace_dict`)."""
        import json

        with open(path, "w") as f:
            json.dump(self.chrome_trace_dict(), f, separators=(",", ":"))


# ----------------------------------------------------------------------------- memory
#: names of the KV cache tensors of a decoder graph (inputs: the cache read; outputs: written)
CACHE_PREFIXES = ("past_key.", "past_value.", "present_key.", "present_value.")


def activation_peak(graph: Graph) -> int:
    """Peak bytes of live intermediates in graph order (freed after their last reader); views
    (ops on no unit) alias their input, the KV cache and constants are not counted."""
    last_use: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        for v in n.inputs:
            if v:
                last_use[v] = i
    for o in graph.outputs:
        last_use[o] = len(graph.nodes)
    live: dict[str, int] = {}
    peak = cur = 0
    for i, n in enumerate(graph.nodes):
        view = get_op(n.op_type, n.name).unit == Unit.NONE
        for o in n.outputs:
            if view or o.startswith(CACHE_PREFIXES):
                continue
            live[o] = graph.values[o].nbytes
            cur += live[o]
        peak = max(peak, cur)
        for v in set(n.inputs):
            if v in live and last_use.get(v, -1) <= i:
                cur -= live.pop(v)
    return peak


def cache_bytes(graph: Graph) -> int:
    """KV cache bytes a decoder step's graph holds: its cache inputs (past_*), sized to the
    context after the step (the step writes its tokens into them in place)."""
    return sum(graph.values[n].nbytes for n in graph.inputs
               if n.startswith(("past_key.", "past_value.")))


@dataclass
class MemoryPlan:
    """Device memory of a serving run or of one chip's share of it, bytes."""

    weights: int
    kv_cache: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations


@dataclass
class RankMemory(MemoryPlan):
    """HBM of one rank of a plan (bytes): weights share, KV cache after the step, live
    activations at their peak."""

    rank: int = 0
    stage: int = 0


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.2f} MiB"


#: the largest plan `bigger_plan` names (chips)
MAX_BIGGER_CHIPS = 256


def _held(model: ParallelModel, stage: int, built: dict, base: tuple, extra: list
          ) -> tuple[int, int]:
    """(weights, KV cache) bytes a rank of `stage` holds: the base layers' graph plus
    (count - 1) times each added layer's difference (as the timing extrapolates), the cache
    times the micro-batches (a graph holds one micro-batch, the rank the cache of all)."""
    def sizes(g: Graph) -> tuple[int, int]:
        return sum(g.values[c].nbytes for c in g.constants), cache_bytes(g)
    w0, kv0 = sizes(built[base])
    w, kv = w0, kv0
    for _kind, layers, n in extra:
        w1, kv1 = sizes(built[layers])
        w += (n - 1) * (w1 - w0)
        kv += (n - 1) * (kv1 - kv0)
    return w, kv * model.parallel.micro()


def _stage_graphs(model: ParallelModel, stage: int) -> tuple[tuple, list, dict]:
    base, extra = _representatives(model, stage)
    return base, extra, {layers: model.build(stage, layers)[0]
                         for layers in [base, *(e[1] for e in extra)]}


def bigger_plan(model: ParallelModel, activations: int, hbm: int) -> Parallel | None:
    """The plan with the fewest chips (the plan's sizes times 2, 4, ...) whose every rank
    holds its weights, KV cache and `activations` (the current plan's, an upper bound) within
    `hbm`, each candidate's shares computed from its own graphs: expert parallel grown first
    (an EP plan: over more data-parallel ranks, then over more tensor-parallel ones), then
    tensor, then pipeline parallel, among the plans that divide the model and its batch;
    None when none of up to MAX_BIGGER_CHIPS chips does."""
    p = model.parallel
    keep = {f: getattr(p, f) for f in ("tp", "pp", "ep", "dp", "sequence_parallel", "mc2")}
    for k in (2, 4, 8, 16, 32, 64, 128):
        if p.world * k > MAX_BIGGER_CHIPS:
            break
        changes = ([{"ep": p.ep * k, "dp": p.dp * k}, {"ep": p.ep * k, "tp": p.tp * k}]
                   if p.ep > 1 else []) + [{"tp": p.tp * k}, {"pp": p.pp * k}]
        for change in changes:
            try:
                cand = model.with_plan(Parallel(**{**keep, **change}))
            except ConfigError:
                continue
            fits = True
            for s in range(cand.parallel.pp):
                base, extra, built = _stage_graphs(cand, s)
                w, kv = _held(cand, s, built, base, extra)
                if w + kv + activations > hbm:
                    fits = False
                    break
            if fits:
                return cand.parallel
    return None


def check_rank_capacity(model: ParallelModel, memory: list[RankMemory], chip: Chip) -> None:
    """CapacityError naming the first rank over the chip's HBM (module note, *Memory*)."""
    hbm = chip.hbm_bytes
    over = [m for m in memory if m.total > hbm]
    if not over:
        return
    m = max(over, key=lambda r: r.total)
    ranks = model.stage_ranks(m.stage)
    best = bigger_plan(model, m.activations, hbm)
    need = (f"; a plan that fits is {best} on {best.world} chips" if best is not None else
            f"; no larger plan of up to {MAX_BIGGER_CHIPS} chips (the sizes of {model.parallel} "
            f"times 2, 4, ... that divide the model and its batch of {model.batch}) fits")
    raise CapacityError(
        f"{model!r}: rank {m.rank} (stage {m.stage}: ranks {ranks[0]}-{ranks[-1]} hold the same "
        f"sizes) does not fit one {chip.name}: weights "
        f"{_gib(m.weights)} + KV cache {_gib(m.kv_cache)} + activations "
        f"{_gib(m.activations)} = {_gib(m.total)} > HBM {_gib(hbm)} (over by "
        f"{_gib(m.total - hbm)}){need}")


# ----------------------------------------------------------------------------- timing
def _resolve_box(model: ParallelModel, chip: Any, box: Box | None) -> Box:
    if box is None:
        if isinstance(chip, Box):
            box = chip
        else:
            from .hw.interconnect import interconnects

            c = chip if chip is not None else DEFAULT_CHIP
            name = c.name if isinstance(c, Chip) else str(c)
            topo = "atlas800-a3" if name.lower().startswith("ascend910c") else "atlas800-a2"
            if name.lower() in interconnects():
                topo = name.lower()
            box = Box(c, model.world if model.world > 1 else 1, topo)
    if model.world > box.count:
        raise ConfigError(f"{model.parallel} takes {model.world} chips; {box} has "
                          f"{box.count}")
    return box


def _collective_time(c: Collective, box: Box, cross_server: bool = False) -> tuple[float, tuple]:
    phases = collective_phases(c.kind, c.nbytes, c.group, box.topology, cross_server)
    return sum(p.seconds for p in phases) * 1e6, tuple(p.what for p in phases)


def _producers(res: Result) -> tuple[dict[str, str], dict[str, tuple[float, float]], dict]:
    """(value -> producing node, node -> (first start, last end) us, node -> op_type) of a
    simulated graph."""
    made = {o: n.name for n in res.graph.nodes for o in n.outputs if o}
    spans: dict[str, tuple[float, float]] = {}
    types: dict[str, str] = {}
    for t in res.trace.tasks:
        op = t.op_name.split("#", 1)[0]
        s, e = res.trace.us(t.start), res.trace.us(t.end)
        if op in spans:
            s, e = min(s, spans[op][0]), max(e, spans[op][1])
        spans[op] = (s, e)
        types[op] = t.op_type
    return made, spans, types


def _levels(graph: Graph, colls: list[Collective]) -> dict[str, int]:
    """node -> how many of the graph's collectives (in build order, a chain through the
    layers) it waits for: the largest index + 1 of a collective whose result it reads,
    directly or through its inputs (the graph's node order is only a topological order)."""
    of_value = {v: i + 1 for i, c in enumerate(colls) for v in c.out_values}
    level_of_value: dict[str, int] = dict(of_value)
    out: dict[str, int] = {}
    for n in graph.nodes:
        lv = max([level_of_value.get(i, 0) for i in n.inputs if i] or [0])
        out[n.name] = lv
        for o in n.outputs:
            if o:
                level_of_value[o] = lv
    return out


def _timeline(res: Result, colls: list[Collective], box: Box
              ) -> tuple[float, float, dict[str, tuple[float, float]], list]:
    """(stage time, exposed comm, collective -> (time, exposed), timeline events) of one
    simulated graph with its collectives on the stream (module note): the tasks that wait
    for no collective, then the first collective, the tasks that wait for it, and so on,
    each task keeping its simulated duration and the gap before it."""
    colls = [c for c in colls if c.kind != "SendRecv"]
    made, spans, types = _producers(res)
    levels = _levels(res.graph, colls)
    us = res.trace.us
    tasks = sorted(res.trace.tasks, key=lambda t: (t.start, t.task_id))
    prev_end = 0.0
    queued: list[list[tuple[Any, float]]] = [[] for _ in range(len(colls) + 1)]
    for t in tasks:
        gap = max(0.0, us(t.start) - prev_end)
        prev_end = max(prev_end, us(t.end))
        queued[levels.get(t.op_name.split("#", 1)[0], 0)].append((t, gap))
    events: list = []
    per: dict[str, tuple[float, float]] = {}
    cursor = exposed_total = 0.0
    ends: dict[str, tuple[float, float]] = {}
    for lv, batch in enumerate(queued):
        for t, gap in batch:
            s0 = cursor + gap
            cursor = s0 + us(t.end) - us(t.start)
            op = t.op_name.split("#", 1)[0]
            ends[op] = (min(ends.get(op, (s0, 0))[0], s0), cursor)
            events.append(("compute", t.op_name, s0, cursor, {"op_type": t.op_type}))
        if lv == len(colls):
            break
        c = colls[lv]
        dur, phases = _collective_time(c, box)
        node = made.get(c.in_values[0])
        start, exposed = cursor, dur
        if c.mc2 and node in ends and "matmul" in types.get(node, "").lower():
            s0, e0 = ends[node]
            rows = int(res.graph.values[c.in_values[0]].shape[0])
            mm = e0 - s0
            best = None
            for k in range(1, max(1, math.ceil(rows / MC2_CHUNK_ROWS)) + 1):
                comp = mm / k
                comm = _collective_time(
                    Collective(c.name, c.kind, c.group, math.ceil(c.nbytes / k), c.in_values,
                               c.out_values), box)[0]
                fused = comp + (k - 1) * max(comp, comm) + comm
                if best is None or fused < best[0]:
                    best = (fused, comp)
            exposed = max(0.0, best[0] - mm)
            comp = best[1]
            start = s0 + comp                   # the first chunk's communication starts
        events.append(("comm", c.name, start, start + dur,
                       {"kind": c.kind, "bytes": c.nbytes, "group": c.group,
                        "layer": c.layer, "phases": list(phases), "mc2": c.mc2,
                        "exposed_us": round(exposed, 4)}))
        cursor += exposed
        exposed_total += exposed
        per[c.name] = (dur, exposed)
    return cursor, exposed_total, per, events


def _representatives(model: ParallelModel, stage: int) -> tuple[tuple[int, ...],
                                                                list[tuple[str, tuple, int]]]:
    """(base layers: the first of each kind, [(kind, base + one more of that kind, count of
    that kind in the stage)]) of a stage's layers (module note)."""
    cfg = model.config
    layers = model.stage_layers(stage)
    kinds: dict[bool, list[int]] = {}
    for layer in layers:
        kinds.setdefault(cfg.moe_layer(layer), []).append(layer)
    base = tuple(sorted(ls[0] for ls in kinds.values()))
    extra = []
    for moe, ls in kinds.items():
        if len(ls) > 1:
            extra.append(("moe" if moe else "dense", tuple(sorted(base + (ls[1],))), len(ls)))
    return base, extra


def _stage_memory(model: ParallelModel, stage: int, built: dict, runs: dict, base: tuple,
                  extra: list) -> RankMemory:
    """A stage's rank memory (module note, *Memory*)."""
    w, kv = _held(model, stage, built, base, extra)
    act = max(activation_peak(r[0].graph) for r in runs.values())
    return RankMemory(w, kv, act, rank=model.stage_ranks(stage)[0], stage=stage)


def simulate_parallel(model: ParallelModel, chip: str | Chip | Box | None = None,
                      fusion: Any = True, detail: str = DEFAULT_DETAIL,
                      mode: str = DEFAULT_MODE, *, box: Box | None = None,
                      check_capacity: bool = True) -> ParallelResult:
    """Time one step of `model` on a Box (module note). chip: a chip name / Chip (its
    Atlas 800 box: A3 for the 910C, A2 otherwise, as many chips as the plan takes) or a Box;
    fusion, detail, mode: as `simulate` takes them, for every stage graph. Raises
    CapacityError when a rank's weights, KV cache and activations exceed the chip's HBM
    (`check_capacity=False` times it anyway); `ParallelResult.memory` has every stage's."""
    if not isinstance(model, ParallelModel):
        raise GraphError(f"simulate_parallel() needs a ParallelModel (models.decoder(..., "
                         f"parallel=asim.Parallel(...))), got {type(model).__name__}")
    box = _resolve_box(model, chip, box)
    p = model.parallel
    stages: list[StageTiming] = []
    timed: list[CollectiveTime] = []
    memory: list[RankMemory] = []
    notes = []
    guesses = sorted(k for k, v in box.topology.sources.items() if v.startswith("G"))
    if guesses:
        notes.append(f"{box.topology.name}: guessed (G) figures {', '.join(guesses)}")
    for s in range(p.pp):
        base, extra = _representatives(model, s)
        runs = {}
        built = {}
        for layers in [base, *(e[1] for e in extra)]:
            g, colls = model.build(s, layers)
            built[layers] = g
            res = simulate_graph(g, box.chip, fusion=fusion, detail=detail, mode=mode,
                                 check_capacity=False)
            runs[layers] = (res, colls, *_timeline(res, colls, box))
        memory.append(_stage_memory(model, s, built, runs, base, extra))
        if check_capacity:
            check_rank_capacity(model, memory[-1:], box.chip)
        res0, colls0, t0, comm0, per0, ev0 = runs[base]
        total, comm_total = t0, comm0
        counts: dict[str, int] = {c.name: 1 for c in colls0}
        for _kind, layers, n in extra:
            _, colls1, t1, comm1, per1, _ = runs[layers]
            total += (n - 1) * (t1 - t0)
            comm_total += (n - 1) * (comm1 - comm0)
            new = [c for c in colls1 if c.name not in counts]
            for c in new:                       # the added layer's collectives stand for n-1
                counts[c.name] = n - 1
            colls0 = colls0 + new
            per0 = {**per0, **{c.name: per1[c.name] for c in new if c.name in per1}}
        last = max(runs, key=lambda k: (len(runs[k][1]), len(k)))   # most collectives
        res_l, _, _, _, _, ev_l = runs[last]
        for c in colls0:
            if c.kind == "SendRecv":
                cross = ((s + 1) * p.stage_size) // box.topology.chips_per_server != \
                    (s * p.stage_size) // box.topology.chips_per_server
                dur, phases = _collective_time(c, box, cross)
                timed.append(CollectiveTime(c.name, c.kind, c.group, c.nbytes, s, None, dur,
                                            dur, 1, phases))
                continue
            dur, exposed = per0.get(c.name, (0.0, 0.0))
            timed.append(CollectiveTime(c.name, c.kind, c.group, c.nbytes, s, c.layer, dur,
                                        exposed, counts[c.name],
                                        _collective_time(c, box)[1]))
        stages.append(StageTiming(s, model.stage_ranks(s), total, total - comm_total,
                                  comm_total, res_l, last, model.stage_layers(s), ev_l))
        notes.append(f"stage {s}: layers {list(last)} simulated, the other "
                     f"{len(model.stage_layers(s)) - len(last)} extrapolated (identical "
                     f"layers)")
    m = p.micro()
    sends = sum(c.time_us for c in timed if c.kind == "SendRecv")
    step = sum(st.time_us for st in stages) + sends
    if m > 1:
        step += (m - 1) * max(st.time_us for st in stages)
    return ParallelResult(model, box, step, stages, timed, notes, memory)


def simulate(graph: Graph | ParallelModel, chip: Any = DEFAULT_CHIP, fusion: Any = True,
             detail: str = DEFAULT_DETAIL, *args: Any, **kwargs: Any) -> Result | ParallelResult:
    """`asim.simulate`: a Graph as `api.simulate` (every argument of it), a ParallelModel as
    `simulate_parallel` (chip: a chip or a Box; fusion, detail, mode)."""
    if isinstance(graph, ParallelModel):
        extra = set(kwargs) - {"mode", "box", "check_capacity"}
        if extra or args:
            raise ConfigError(f"simulate(ParallelModel): unsupported argument(s) "
                              f"{', '.join(sorted(extra)) or args} (chip, fusion, detail, "
                              f"mode, box, check_capacity)")
        return simulate_parallel(graph, chip, fusion, detail, **kwargs)
    return simulate_graph(graph, chip, fusion, detail, *args, **kwargs)


simulate.__doc__ = f"{simulate.__doc__}\n\napi.simulate:\n{simulate_graph.__doc__}"


# ----------------------------------------------------------------------------- values
def _shard_input(model: ParallelModel, rank: int, name: str, full: np.ndarray,
                 shape: tuple) -> np.ndarray:
    """A rank's share of a single-chip input: its sequences (dp) and KV heads (tp)."""
    sh = model.shard(rank)
    arr = np.asarray(full)
    b = shape[0]
    arr = arr[sh.dp_rank * b:(sh.dp_rank + 1) * b]
    if name.startswith(("past_key.", "past_value.")) and arr.shape[1] != shape[1]:
        cfg = model.config
        if cfg.kv_heads >= sh.tp:
            a, z = split_ranges(cfg.kv_heads, sh.tp, sh.tp_rank)
        else:
            a = split_ranges(cfg.heads, sh.tp, sh.tp_rank)[0] * cfg.kv_heads // cfg.heads
            z = a + 1
        arr = arr[:, a:z]
    if tuple(arr.shape) != tuple(shape):
        raise GraphError(f"input '{name}' of rank {rank}: share {arr.shape}, graph expects "
                         f"{shape}")
    return arr


def _groups(model: ParallelModel, rank: int, c: Collective) -> tuple[int, ...]:
    """The ranks taking part in collective `c` with `rank` (in group order)."""
    p = model.parallel
    sh = model.shard(rank)
    base = sh.stage * p.stage_size
    if c.kind == "AllToAll":                # every rank of the stage (ep = tp * dp)
        return tuple(base + i for i in range(p.stage_size))
    return tuple(base + sh.dp_rank * p.tp + t for t in range(p.tp))


def _dispatch(ins: list[list[np.ndarray]], ep: int, cap: int) -> tuple[list, list, list]:
    """AllToAll of routed token rows: source i's rows (sorted by expert, cumulative counts
    per expert) to the rank of their expert, grouped by local expert (padded to `cap` rows);
    returns (received rows, local cumulative counts, placements for the combine)."""
    rows = [x for x, _ in ins]
    counts = [np.diff(np.concatenate([[0], np.asarray(g, np.int64)])) for _, g in ins]
    starts = [np.concatenate([[0], np.cumsum(c)[:-1]]) for c in counts]
    experts = counts[0].size
    per = experts // ep
    outs, groups, places = [], [], []
    for j in range(ep):
        h = rows[0].shape[1]
        buf = np.zeros((cap, h), dtype=rows[0].dtype)
        at, cum = 0, []
        for e in range(j * per, (j + 1) * per):
            for i in range(len(rows)):
                n = int(counts[i][e])
                if at + n > cap:
                    raise GraphError(f"AllToAll dispatch: rank {j} receives more than {cap} "
                                     f"rows")
                buf[at:at + n] = rows[i][starts[i][e]:starts[i][e] + n]
                places.append((i, int(starts[i][e]), n, j, at))
                at += n
            cum.append(at)
        outs.append(buf)
        groups.append(np.asarray(cum, dtype=np.asarray(ins[0][1]).dtype))
    return outs, groups, places


def run_parallel(model: ParallelModel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Values of a plan: every rank's own graph (its weight slices) run with the numba
    executor on its share of the single-chip `inputs` (`input_ids`, `past_key.l`, ...), the
    collectives applied as HCCL defines them; returns the logits of the whole batch (as the
    single-chip graph's `logits`). Expert parallel receive buffers take every routed row
    (capacity ep x tokens x top_k), so the values do not depend on the even spread the
    timing assumes. One micro-batch (micro_batches=1 with pp)."""
    from .execute import execute

    p = model.parallel
    if p.micro() != 1:
        raise ConfigError(f"run_parallel: {p} runs {p.micro()} micro-batches; values are "
                          f"computed for micro_batches=1")
    cap = None
    if p.ep > 1:
        cfg = model.config
        cap = p.ep * model.local_batch * model.seq_len * cfg.top_k
    ranks = list(range(p.world))
    built = {r: model.rank_graph(r, capacity=cap) for r in ranks}
    env: dict[int, dict[str, np.ndarray]] = {}
    for r, (g, _) in built.items():
        env[r] = {}
        for name in g.inputs:
            if name in inputs:
                env[r][name] = _shard_input(model, r, name, inputs[name], g.values[name].shape)
    ran: dict[int, set[str]] = {r: set() for r in ranks}
    by_name = {r: {c.name: c for c in colls} for r, (_, colls) in built.items()}
    done: set[tuple[int, str]] = set()
    results: dict[int, dict[str, np.ndarray]] = {r: {} for r in ranks}
    places: dict[tuple[int, str], list] = {}
    while True:
        moved = False
        for r, (g, _) in built.items():
            known = env[r]
            ready, made = [], set()
            for n in g.nodes:               # every node whose inputs are known, in order
                if n.name in ran[r]:
                    continue
                if all(not i or i in known or i in made or i in g.constants
                       for i in n.inputs):
                    ready.append(n)
                    made.update(o for o in n.outputs if o)
            if ready:
                seg = g.extract(ready, f"{g.name}:rank{r}:{len(ran[r])}")
                seg.outputs = sorted(made)
                known.update(execute(seg, {k: known[k] for k in seg.inputs}))
                ran[r].update(n.name for n in ready)
                moved = True
        for r, (_, colls) in built.items():
            for c in colls:
                if (r, c.name) in done or not all(v in env[r] for v in c.in_values):
                    continue
                if c.kind == "SendRecv":
                    dst = r + p.stage_size
                    env[dst][c.out_values[0]] = env[r][c.in_values[0]]
                    done.add((r, c.name))
                    moved = True
                    continue
                group = _groups(model, r, c)
                # value names are each rank's own (auto-named nodes): match by collective
                mine = {q: by_name[q][c.name] for q in group}
                if not all(all(v in env[q] for v in mine[q].in_values) for q in group):
                    continue
                vals = [[env[q][v] for v in mine[q].in_values] for q in group]
                dtype = vals[0][0].dtype
                if c.kind == "AllReduce":
                    total = sum(v[0].astype(np.float32) for v in vals).astype(dtype)
                    outs = [[total] for _ in group]
                elif c.kind == "ReduceScatter":
                    total = sum(v[0].astype(np.float32) for v in vals).astype(dtype)
                    outs = [[part] for part in np.split(total, len(group), axis=c.axis)]
                elif c.kind == "AllGather":
                    full = np.concatenate([v[0] for v in vals], axis=c.axis)
                    outs = [[full] for _ in group]
                elif c.name.endswith(".dispatch.AllToAll"):
                    xs, gs, pl = _dispatch(vals, len(group), cap)
                    places[(group[0], c.name[:-len(".dispatch.AllToAll")])] = pl
                    outs = [[x, gg] for x, gg in zip(xs, gs)]
                else:                               # combine: rows back to their tokens
                    pl = places[(group[0], c.name[:-len(".combine.AllToAll")])]
                    outs = []
                    for i, q in enumerate(group):
                        out = built[q][0].values[mine[q].out_values[0]]
                        back = np.zeros(out.shape, dtype=storage_dtype(out.dtype))
                        for src, s0, n, j, at in pl:
                            if src == i:
                                back[s0:s0 + n] = vals[j][0][at:at + n]
                        outs.append([back])
                for q, o in zip(group, outs):
                    for name, arr in zip(mine[q].out_values, o):
                        if name in built[q][0].values:
                            env[q][name] = arr
                        else:
                            results[q][name] = arr
                    done.add((q, c.name))
                moved = True
        if not moved:
            break
    pending = [r for r, (g, _) in built.items() if len(ran[r]) < len(g.nodes)]
    if pending:
        raise GraphError(f"run_parallel: ranks {pending} are blocked (a collective never "
                         f"completed)")
    last = [r for r in ranks if model.shard(r).last]
    pieces = []
    for r in last:
        sh = model.shard(r)
        if sh.tp_rank != 0:
            continue
        got = results[r].get("logits", env[r].get("logits"))
        if got is None:
            g = built[r][0]
            got = env[r][g.outputs[0]]
        pieces.append(got)
    return {"logits": np.concatenate(pieces, axis=0)}


__all__ = ["simulate", "simulate_parallel", "run_parallel", "ParallelResult", "StageTiming",
           "CollectiveTime", "MC2_CHUNK_ROWS", "MemoryPlan", "RankMemory", "activation_peak",
           "cache_bytes",
           "bigger_plan", "check_rank_capacity", "CACHE_PREFIXES", "MAX_BIGGER_CHIPS"]
