"""Data-parallel training across chips: one chip's training step plus HCCL's gradient all-reduce.

`simulate_data_parallel(step_graph, world_size=N, chip=..., interconnect=None)` simulates the
step on one chip (every chip of a data-parallel job runs the same step on its own batch) and
adds the all-reduce of the gradients, as the frameworks and HCCL run it.

Note on the model
-----------------
*Gradients.* Values named `<param>_grad` (`asim.grad`) are the gradients. In a training step
(`asim.training_step`, and the built-in `*_training_step` models) a parameter is a graph input
`<param>` with an output `<param>_new` (its optimizer state `<param>_m`, `<param>_v` likewise):
the gradient is where the optimizer's element-wise, parameter-shaped update chain starts (the
first value, walking back from the update, made by an op that is not element-wise on
parameter-shaped operands: the GEMM, transpose or reduction that ends the backward pass, or
the Cast of a float16 gradient to its float32 master's dtype, which frameworks all-reduce).
Other `_new` outputs (the step counter, the loss scale, BatchNorm's running statistics, whose
update is not such a chain) are state, not parameters.

*Split at the gradients.* The step is cut in two graphs, as GE cuts a graph at its HCCL ops
(an AllReduce is a fusion barrier): forward + backward (everything a gradient needs, and
what the outputs no gradient feeds need; the gradients become outputs) and the optimizer
(the rest: what the gradients feed and no gradient needs, and what only it reads). Each is
optimised and simulated on the chip with the caller's fusion and detail. These two give the
timeline (when each gradient is ready, how long the optimizer waits for its buckets); the
step's compute is the whole step simulated as `simulate` does, and the step is that plus
the delay communication adds to the timeline, so one chip's step is `simulate`'s.

*Buckets.* Gradients are grouped into buckets of `bucket_bytes` in framework order (the
reverse of the forward order, as PyTorch DDP and MindSpore's gradient fusion do). A bucket's
all-reduce starts when the task producing its last gradient ends in the single-chip trace, so
communication overlaps the rest of the backward pass. Communication runs on its own lanes
(HCCS inside a server, RoCE between servers), one transfer at a time per lane. The optimizer
replays its single-chip tasks in order after the backward pass, each task waiting for the
buckets of the gradients it reads.

*All-reduce algorithms* (in `ascendsim.hw.collectives`, shared with the inference plans of
`ascendsim.plan`; HCCL's, with the alpha-beta costs of HCCL's algorithm docs; reduction
compute (gamma) is not modelled): inside a server, Mesh for chips of one full-mesh group
(2 steps of n/p bytes on every link at once) and a ring over the 910's 8 chips (HCCL's
"8P ring": 2(p-1) steps of n/p, paced by its slowest hop); between servers, HCCL's
hierarchical scheme (intra-server ReduceScatter, inter-server AllReduce of each chip's n/p
slice over its own NIC, intra-server AllGather), the inter-server AllReduce being recursive
halving-doubling when the server count is a power of two and a ring otherwise (HCCL's default
on Atlas training products; Atlas A2 selects adaptively, not modelled). `algorithm="ring"` or
`"halving_doubling"` run that algorithm flat over all chips instead (paced by the slowest
link it crosses).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .api import DEFAULT_CHIP, DEFAULT_DETAIL, DEFAULT_MODE
from .errors import ConfigError, GraphError
from .hw import Chip, get_chip
from .hw.collectives import (
    ALGORITHMS,
    CommPhase,
    allreduce_phases,
    allreduce_seconds,
    server_layout,
)
from .hw.interconnect import Interconnect, get_interconnect
from .ir import Graph, Node
from .ir.registry import Category, Unit

#: PyTorch DDP's default bucket size (bucket_cap_mb=25)
DEFAULT_BUCKET_BYTES = 25 * 2 ** 20
_ELEMENTWISE = (Category.ELEMWISE, Category.BROADCAST)


# ----------------------------------------------------------------------------- gradients
@dataclass(frozen=True)
class Gradient:
    """A parameter's gradient: the values that carry it (several when the backward pass sums
    partial gradients inside the update chain) and the bytes that are all-reduced."""

    param: str
    values: tuple[str, ...]
    nbytes: int


def _update_region(graph: Graph, param: str, starts: list[str],
                   producers: dict[str, Node], stop: frozenset[str] = frozenset()
                   ) -> tuple[set[str], list[str]]:
    """Walk back from a parameter's update outputs through element-wise ops on
    parameter-shaped operands; returns (region node names, boundary values = gradients).
    Values in `stop` are boundaries whatever produces them."""
    numel, dtype = graph.values[param].numel, graph.values[param].dtype
    region: set[str] = set()
    grads: list[str] = []
    stack = list(starts)
    seen: set[str] = set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in stop:
            grads.append(v)
            continue
        node = producers.get(v)
        if node is None:
            continue                              # a constant (the master copy, state)
        ins = [i for i in node.inputs if i and i not in graph.constants]
        shaped = all(graph.values[i].numel in (numel, 1) for i in ins)
        passes_through = (node.opdef.category in _ELEMENTWISE
                          or node.opdef.unit_for(node, {}) == Unit.NONE)   # Identity views
        # the Cast into the parameter's dtype (a float32 master's gradient, from the float16
        # backward) ends the backward pass: frameworks all-reduce the master-dtype gradient
        casts_in = (node.op_type == "Cast" and graph.values[v].dtype == dtype
                    and any(graph.values[i].dtype != dtype for i in ins))
        if (node.subgraph is None and passes_through and shaped and not casts_in
                and graph.values[v].numel == numel):
            region.add(node.name)
            stack.extend(ins)
        elif v not in grads:
            grads.append(v)
    return region, grads


def _param_grads(graph: Graph, param: str, outs: list[str], producers: dict[str, Node],
                 stop: frozenset[str] = frozenset()) -> tuple[set[str], list[str]]:
    """`_update_region` of a parameter's update outputs, its boundaries kept to the
    parameter-shaped values that are not the outputs themselves."""
    numel = graph.values[param].numel
    region, grads = _update_region(graph, param, outs, producers, stop)
    return region, [v for v in grads if graph.values[v].numel == numel and v not in outs]


def _optimizer_grad_inputs(graph: Graph, region: set[str]) -> frozenset[str]:
    """The values the fused optimizer updates of `region` read at their `grad` input
    (ApplyMomentum, ApplyAdam, ApplyAdamW, LambApplyOptimizerAssign): the gradients, where
    a backward pass ending in a parameter-shaped element-wise op (ReduceMax's Where) would
    otherwise be walked into as if it were part of the update."""
    out = set()
    for node in graph.nodes:
        if node.name not in region:
            continue
        names = [name.rstrip("?") for name in node.opdef.inputs]
        at = names.index("grad") if "grad" in names else len(node.inputs)
        if at < len(node.inputs):
            out.add(node.inputs[at])
    return frozenset(v for v in out if v)


def find_gradients(graph: Graph) -> list[Gradient]:
    """The gradients of a training step graph, in forward order of their parameters (see the
    module's Note on the model for the two namings understood); GraphError if none."""
    producers = graph.producers()
    named = [v for v in graph.values if v.endswith("_grad") and v[:-5] in graph.values
             and v in producers]
    found: dict[str, tuple[str, ...]] = {}
    if named:
        found = {v[:-5]: (v,) for v in named}
    else:
        # training_step: input `<param>` -> output `<param>_new`, state `<param>_m/_v(_new)`
        stems = {o[: -len("_new")]: o for o in graph.outputs
                 if o.endswith("_new") and o[: -len("_new")] in graph.inputs}
        for param, out in stems.items():
            if param.endswith(("_m", "_v")) and param[:-2] in stems:
                continue
            numel = graph.values[param].numel
            if numel <= 1:                  # the step counter, the loss scale: state
                continue
            outs = [out] + [stems[s] for s in (f"{param}_m", f"{param}_v") if s in stems]
            region, grads = _param_grads(graph, param, outs, producers)
            if not grads:           # the backward's last op is parameter-shaped, element-wise
                region, grads = _param_grads(graph, param, outs, producers,
                                             _optimizer_grad_inputs(graph, region))
            # an update reads the old value (var -= lr * ...); BatchNorm's running statistics
            # are new values computed inside BNTrainingUpdate, which is not such a chain
            reads_old = any(param in n.inputs for n in graph.nodes if n.name in region)
            if reads_old and grads:
                found[param] = tuple(grads)
    if not found:
        raise GraphError(f"graph '{graph.name}' has no gradients to all-reduce: expected "
                         f"values named <param>_grad (asim.grad) or a training step's "
                         f"parameter updates <param> -> <param>_new (asim.training_step)")
    # forward order: where each parameter is first read (its cast, for fp16 masters, counts)
    first: dict[str, int] = {}
    for i, n in enumerate(graph.nodes):
        for v in n.inputs:
            first.setdefault(v, i)
    def order(param: str) -> int:
        idx = first.get(param, len(graph.nodes))
        for n in graph.nodes[idx:idx + 1]:        # fp16 master -> Cast -> forward reads
            for o in n.outputs:
                idx = min(idx, first.get(o, idx))
        return idx
    out = []
    for param in sorted(found, key=order):
        vals = found[param]
        out.append(Gradient(param, vals, max(graph.values[v].nbytes for v in vals)))
    return out


def _subgraph(graph: Graph, nodes: list[Node], name: str, extra_outputs: Iterable[str]) -> Graph:
    """`nodes` of `graph` as a graph of their own: values they read from elsewhere become
    inputs (constants stay constants), graph outputs they make plus `extra_outputs` are its
    outputs."""
    g = graph.extract(nodes, name)
    made = {o for n in nodes for o in n.outputs if o}
    outs = [o for o in graph.outputs if o in made]
    outs += [o for o in extra_outputs if o in made and o not in outs]
    g.outputs = outs
    return g


def _ancestors(graph: Graph, values: Iterable[str]) -> set[str]:
    """Names of the nodes `values` depend on (their producers, transitively)."""
    producers = graph.producers()
    by_name = {n.name: n for n in graph.nodes}
    out: set[str] = set()
    stack = [producers[v].name for v in values if v in producers]
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.add(name)
        stack.extend(producers[i].name for i in by_name[name].inputs if i and i in producers)
    return out


def split_at_gradients(graph: Graph, grads: list[Gradient]) -> tuple[Graph, Graph]:
    """(forward + backward, optimizer) (no optimizer node at all for a graph of gradients
    only, e.g. `asim.grad`'s). Forward + backward is what the gradients need, plus what the
    outputs the gradients do not feed need (the loss, BatchNorm's running statistics); the
    optimizer is the rest. A backward node that reads a gradient is not the optimizer when a
    later gradient needs it: BatchNorm's scale and offset gradients feed its input gradient
    (BNTrainingReduceGrad), so the rest of the backward pass depends on them. A node that
    reads no gradient but only feeds the update (the weight decay's `w * decay`) is the
    optimizer's."""
    gvals = {v for gr in grads for v in gr.values}
    needed = _ancestors(graph, gvals)
    tainted = set(gvals)
    for n in graph.nodes:
        if n.name not in needed and any(v in tainted for v in n.inputs):
            tainted.update(o for o in n.outputs if o)
    fb_names = needed | _ancestors(graph, [o for o in graph.outputs if o not in tainted])
    fb_nodes = [n for n in graph.nodes if n.name in fb_names]
    opt_nodes = [n for n in graph.nodes if n.name not in fb_names]
    read_by_opt = {v for n in opt_nodes for v in n.inputs if v}
    fb = _subgraph(graph, fb_nodes, f"{graph.name}:forward_backward",
                   [*sorted(gvals), *sorted(read_by_opt)])
    opt = _subgraph(graph, opt_nodes, f"{graph.name}:optimizer", [])
    return fb, opt


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class CommInterval:
    """One stage of one bucket's all-reduce on one lane (times in us from the step start)."""

    bucket: int
    lane: str
    what: str
    start_us: float
    end_us: float
    nbytes: int


@dataclass(frozen=True)
class Bucket:
    index: int
    params: tuple[str, ...]
    nbytes: int
    ready_us: float           # its last gradient is produced
    done_us: float            # its all-reduce has finished


@dataclass
class DataParallelResult:
    """A data-parallel step on `world_size` chips (times in us)."""

    world_size: int
    chip: Chip
    interconnect: Interconnect
    algorithm: str
    step_us: float                    # one step, every chip
    compute_us: float                 # the single-chip step, as `simulate` gives it
    forward_backward_us: float        # the two halves of the step cut at the gradients
    optimizer_us: float
    comm_us: float                    # time some lane is communicating
    exposed_comm_us: float            # step time beyond the single-chip step
    buckets: list[Bucket]
    comm: list[CommInterval]
    compute_tasks: list[tuple[str, float, float]]      # (op, start_us, end_us), both graphs
    forward_backward: Any = None      # Result of the forward + backward graph
    optimizer: Any = None             # Result of the optimizer graph
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def comm_share(self) -> float:
        """Fraction of the step spent waiting for communication (exposed / step)."""
        return self.exposed_comm_us / self.step_us if self.step_us > 0 else 0.0

    @property
    def scaling_efficiency(self) -> float:
        """Achieved throughput over N x single-chip throughput (= compute / step)."""
        return self.compute_us / self.step_us if self.step_us > 0 else 1.0

    @property
    def gradient_bytes(self) -> int:
        return sum(b.nbytes for b in self.buckets)

    def table(self) -> str:
        return (f"{self.world_size} chips ({self.chip.name}, {self.algorithm}): step "
                f"{self.step_us / 1e3:.2f} ms, compute {self.compute_us / 1e3:.2f} ms, comm "
                f"{self.comm_us / 1e3:.2f} ms ({self.exposed_comm_us / 1e3:.2f} ms exposed, "
                f"{100 * self.comm_share:.1f}% of the step), scaling efficiency "
                f"{100 * self.scaling_efficiency:.1f}%, {len(self.buckets)} buckets, "
                f"{self.gradient_bytes / 2 ** 20:.1f} MiB of gradients")

    def plot_timeline(self, path: str | None = None, width: float = 12.0, dpi: int = 110):
        """Compute (forward + backward, then optimizer) and one lane per link class with each
        bucket's all-reduce stages; saved to `path` when given."""
        from matplotlib.figure import Figure

        lanes = ["compute", *sorted({c.lane for c in self.comm}, reverse=True)]
        fig = Figure(figsize=(width, 1.4 + 0.55 * len(lanes)), dpi=dpi, layout="constrained")
        ax = fig.add_subplot()
        colors = {"forward_backward": "tab:blue", "optimizer": "tab:green"}
        for kind, color in colors.items():       # one collection per lane and colour: fast
            spans = [(s, e - s) for k, s, e in self.compute_tasks if k == kind]
            ax.broken_barh(spans, (0.1, 0.8), facecolors=color)
        for y, lane in enumerate(lanes[1:], start=1):
            comm = [c for c in self.comm if c.lane == lane]
            ax.broken_barh([(c.start_us, c.end_us - c.start_us) for c in comm], (y + 0.1, 0.8),
                           facecolors=[f"C{c.bucket % 10}" for c in comm], edgecolor="black",
                           linewidth=0.3)
        ax.set_yticks([i + 0.5 for i in range(len(lanes))], lanes)
        ax.set_ylim(0, len(lanes))
        ax.invert_yaxis()
        ax.set_xlabel("time (us)")
        ax.set_title(f"data parallel on {self.world_size} x {self.chip.name}: step "
                     f"{self.step_us:.0f} us, exposed comm {self.exposed_comm_us:.0f} us "
                     f"(blue: forward+backward, green: optimizer, lanes: buckets)",
                     fontsize="medium")
        if path:
            fig.savefig(path)
        return fig


# ----------------------------------------------------------------------------- the step
def _buckets(grads: list[Gradient], bucket_bytes: int) -> list[list[Gradient]]:
    """Framework order (reverse of forward), a new bucket when the next gradient would
    overflow the current one."""
    out: list[list[Gradient]] = []
    size = 0
    for gr in reversed(grads):
        if not out or (size + gr.nbytes > bucket_bytes and out[-1]):
            out.append([])
            size = 0
        out[-1].append(gr)
        size += gr.nbytes
    return out


def _task_ends(res) -> dict[str, float]:
    """End (us) of each top-level node's last task in a Result (L2 batch chunks `op#k`)."""
    ends: dict[str, float] = {}
    for t in res.trace.tasks:
        op = t.op_name.split("#", 1)[0]
        ends[op] = max(ends.get(op, 0.0), res.trace.us(t.end))
    return ends


#: the last single-chip steps simulated: (graph key, chip, fusion, detail, mode) -> results
_SINGLE: dict[tuple, tuple] = {}
_SINGLE_KEEP = 4


def single_chip_step(step_graph: Graph, chip: Chip, fusion: Any = True,
                     detail: str = DEFAULT_DETAIL,
                     mode: str = DEFAULT_MODE) -> tuple[list[Gradient], Any, Any, float]:
    """(gradients, forward+backward Result, optimizer Result, the whole step's time in us as
    `simulate` gives it) of one chip's step. The last few are kept (keyed by the graph's
    structure and every chip figure), so a scaling study over world sizes simulates the chip
    once."""
    from .api import simulate
    from .ir.identity import graph_key

    key = (graph_key(step_graph), chip, repr(fusion), detail, mode)
    if key not in _SINGLE:
        grads = find_gradients(step_graph)
        fb_graph, opt_graph = split_at_gradients(step_graph, grads)
        fb = simulate(fb_graph, chip, fusion=fusion, detail=detail, mode=mode)
        opt = (simulate(opt_graph, chip, fusion=fusion, detail=detail, mode=mode)
               if opt_graph.nodes else None)
        whole = (simulate(step_graph, chip, fusion=fusion, detail=detail, mode=mode).time_us
                 if opt is not None else fb.time_us)
        while len(_SINGLE) >= _SINGLE_KEEP:
            del _SINGLE[next(iter(_SINGLE))]
        _SINGLE[key] = (grads, fb, opt, whole)
    return _SINGLE[key]


def simulate_data_parallel(step_graph: Graph, world_size: int = 8,
                           chip: str | Chip = DEFAULT_CHIP,
                           interconnect: str | Interconnect | None = None,
                           bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                           algorithm: str | None = None, fusion: Any = True,
                           detail: str = DEFAULT_DETAIL,
                           mode: str = DEFAULT_MODE) -> DataParallelResult:
    """One data-parallel training step on `world_size` chips (see the module's Note).

    step_graph: a training step (gradients named `<param>_grad`, or the built-in models'
    `<param>_new` updates of a training step). interconnect: a built-in name, a TOML file or an
    `Interconnect`; None = the one named like the chip. bucket_bytes: gradient bucket size.
    algorithm: None (HCCL's choice), "ring" or "halving_doubling" (flat over all chips).
    fusion, detail, mode: as `simulate` takes them, for both halves of the step."""
    if not isinstance(step_graph, Graph):
        raise GraphError(f"simulate_data_parallel() needs a Graph, got "
                         f"{type(step_graph).__name__}")
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes <= 0:
        raise ConfigError(f"bucket_bytes={bucket_bytes!r}: must be a positive integer")
    chip = get_chip(chip)
    ic = get_interconnect(interconnect, chip)
    allreduce_phases(1.0, world_size, ic, algorithm)            # checks world size, algorithm
    grads, fb, opt, whole_us = single_chip_step(step_graph, chip, fusion, detail, mode)
    fb_us, opt_us = fb.time_us, (opt.time_us if opt is not None else 0.0)

    # when each gradient is ready: the end of the task of the (fused) node that makes it
    made_by = {o: n.name for n in fb.graph.nodes for o in n.outputs if o}
    ends = _task_ends(fb)
    def ready(value: str) -> float:
        return ends.get(made_by.get(value, ""), fb_us)

    # buckets and their all-reduces, one transfer at a time per lane
    lane_free: dict[str, float] = {}
    comm: list[CommInterval] = []
    buckets: list[Bucket] = []
    bucket_of: dict[str, int] = {}
    for i, members in enumerate(_buckets(grads, bucket_bytes)):
        nbytes = sum(g.nbytes for g in members)
        t = max(ready(v) for g in members for v in g.values)
        start_ready = t
        for ph in allreduce_phases(nbytes, world_size, ic, algorithm):
            start = max(t, lane_free.get(ph.lane, 0.0))
            t = start + ph.seconds * 1e6
            lane_free[ph.lane] = t
            comm.append(CommInterval(i, ph.lane, ph.what, start, t, nbytes))
        buckets.append(Bucket(i, tuple(g.param for g in members), nbytes, start_ready, t))
        for g in members:
            for v in g.values:
                bucket_of[v] = i

    # the optimizer: its tasks in order, each after the buckets of the gradients it reads
    needs: dict[str, set[int]] = {}
    for n in (opt.graph.nodes if opt is not None else []):
        dep: set[int] = set()
        for v in n.inputs:
            if v in bucket_of:
                dep.add(bucket_of[v])
            dep |= needs.get(v, set())
        for o in n.outputs:
            if o:
                needs[o] = dep
        needs[n.name] = dep
    every = set(range(len(buckets)))
    compute_tasks = [("forward_backward", fb.trace.us(t.start), fb.trace.us(t.end))
                     for t in fb.trace.tasks]
    # in-order stream: a task that must wait for a bucket delays every later task as much
    delay = 0.0
    for task in sorted(opt.trace.tasks if opt is not None else [], key=lambda x: x.start):
        start = fb_us + opt.trace.us(task.start)
        dep = needs.get(task.op_name.split("#", 1)[0], every)
        delay = max([delay, *(buckets[b].done_us - start for b in dep)])
        compute_tasks.append(("optimizer", start + delay, fb_us + opt.trace.us(task.end) + delay))
    # the cut timeline gives what communication adds; the compute is the uncut step
    compute_us = whole_us
    step_us = compute_us + max(0.0, max([fb_us + opt_us + delay, *(b.done_us for b in buckets)])
                               - (fb_us + opt_us))
    busy = _union([(c.start_us, c.end_us) for c in comm])
    return DataParallelResult(
        world_size=world_size, chip=chip, interconnect=ic, algorithm=algorithm or "hierarchical",
        step_us=step_us, compute_us=compute_us, forward_backward_us=fb_us, optimizer_us=opt_us,
        comm_us=busy, exposed_comm_us=max(0.0, step_us - compute_us), buckets=buckets,
        comm=comm, compute_tasks=compute_tasks, forward_backward=fb, optimizer=opt,
        meta={"gradients": len(grads), "bucket_bytes": bucket_bytes,
              "servers": server_layout(world_size, ic)[0]})


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


__all__ = ["simulate_data_parallel", "DataParallelResult", "allreduce_phases",
           "allreduce_seconds", "find_gradients", "split_at_gradients", "CommPhase",
           "Gradient", "ALGORITHMS", "DEFAULT_BUCKET_BYTES"]
