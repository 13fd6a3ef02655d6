"""L2 fusion (stage "l2_fusion", CANN's `--buffer_optimize=l2_optimize`): ops stay separate
tasks, but intermediates are handed over through L2 instead of DDR; a batch too large for L2
is split (batch 8 run as 4 x batch 2) when that is faster.

What the lowering already does, and what this pass adds
-------------------------------------------------------
The simulated L2 (`ascendsim.sim.l2cache`, an LRU write-back cache) keeps a task output that
fits resident until something newer pushes it out, so a small intermediate needs no pass to
stay in L2. What it cannot do alone is make a large one fit. `L2BatchSplitFusionPass` finds
*chains* of AI Core ops that are batch-separable (every data input and output has the batch
N as its leading dimension: element-wise, broadcast, segment (pooling) and cube ops, and UB-
fused nodes made of them) and whose intermediates do not fit, and replaces each with one
FusedOp, fusion "L2":

- `node.subgraph` is the original chain (so values are unchanged: the ops are batch-separable);
- `attrs["batch_split"] = k`: the chain runs as k chunks of `attrs["chunk_batch"] = N / k`
  samples, each op a separate task per chunk (k times the launches);
- `attrs["l2_values"]`: the intermediates, which stay in L2 (a chunk's intermediate fits).

k is the smallest divisor of N for which the largest intermediate of a chunk fits in half of
L2 (`chip.l2_resident_bytes`: the rest is left to the chunk's inputs and outputs). The split
is made only when it is faster, decided in two steps. A quick static screen: unsplit, every
intermediate that does not fit is written to and read back from HBM (2 x bytes /
`hbm_bandwidth_bytes_per_s`); split, it moves through L2 (2 x bytes /
`l2_bandwidth_bytes_per_s`) but every op of the chain pays (k - 1) more launches
(`sink_launch_us`: GE runs graphs sunk on the device); a chain the screen rejects is
refused. Then the decision: the chain alone, as a graph, is lowered and simulated on the
chip both ways (the context's `cost_model`: lowering + engine with the caller's detail, mode
and streams) for k and for the next divisor of N; smaller chunks also make cube and vector
tiles less efficient, which only the simulation sees. The faster split is kept when its
simulated time is below the unsplit chain's.
Refusals carry the figures (screen estimate or simulated times) in the log.

Lowering contract: a FusedOp with fusion "L2" lowers its inner nodes as separate tasks (the
simulated L2 keeps `l2_values` if they fit; each chunk reuses the previous chunk's buffers);
with `batch_split = k > 1`, each inner node is lowered k times on `chunk_batch`-sized shapes
(see the report of issue 5 for the lines the lowering needs).
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.registry import Category, Unit, weight_inputs
from ..ir.tensor import is_static
from .base import L2_FUSION, CostModel, Pass, PassContext, PassResult
from .exclude import excluded, leaves
from .partition import FusionGraph, data_inputs, fusion_graph, opdef, unit_of
from .ub_fusion import display_type, fuse_nodes

#: categories whose ops compute each batch sample independently
_SEPARABLE = (Category.ELEMWISE, Category.BROADCAST, Category.SEGMENT, Category.CUBE)


def batch_separable(graph: Graph, node: Node, batch: int | None = None,
                    consts: frozenset[str] = frozenset()) -> int | None:
    """The batch size N if `node` computes each of N leading-dim samples independently
    (every data input and output that is not a constant leads with N), else None. `consts`:
    names that are constants of an enclosing graph (a fused node's weights are inputs of its
    subgraph)."""
    return _separable(graph, node, batch, consts | frozenset(graph.constants))


def _separable(graph: Graph, node: Node, batch: int | None, consts: frozenset[str]) -> int | None:
    """`batch_separable` with `consts` already holding `graph`'s constants (a pass testing
    every node of a large graph builds that set once)."""
    if node.subgraph is not None:
        if node.attrs.get("fusion") != "UB":
            return None
        sub = node.subgraph
        inner_consts = consts | frozenset(sub.constants)
        inner = [_separable(sub, n, batch, inner_consts) for n in sub.nodes]
        if not inner or any(b is None for b in inner) or len(set(inner)) != 1:
            return None
        # a computed weight read inside (a training step's ConvTranspose of the Cast master
        # weight, leading with N in ResNet-50's batch-512 step: (512, 256, 1, 1)) is shared by
        # the chunks: `weight_inputs` of the fused node names it, and the lowering's
        # `chunk_values` leaves it whole
        return inner[0]
    if opdef(node).category not in _SEPARABLE or \
            unit_of(graph, node) not in (Unit.CUBE, Unit.VECTOR):
        return None
    # weights (constants, or a cube op's computed W) are shared by every chunk; activations
    # lead with N
    weights = weight_inputs(node)
    vals = [graph.values[v] for v in (*data_inputs(graph, node), *node.outputs)
            if v and v not in consts and v not in weights]
    if not vals or any(not is_static(v.shape) or v.rank < 2 for v in vals):
        return None
    leads = {v.shape[0] for v in vals}
    n = batch if batch is not None else next(iter(leads))
    if leads != {n} or n <= 1:
        return None
    # a constant read element by element along the batch (same rank, leading dim N: e.g. the
    # fp32 master weight of an optimizer update) would have to be split with the chunks; the
    # chunks share constants whole, so such a node is not batch-separable
    if opdef(node).category in (Category.ELEMWISE, Category.BROADCAST):
        out_rank = max(graph.values[o].rank for o in node.outputs if o)
        for v in data_inputs(graph, node):
            if v in consts:
                shape = graph.values[v].shape
                if len(shape) == out_rank and shape and shape[0] == n:
                    return None
    return n


def chain_graph(graph: Graph, chain: list[Node], fg: FusionGraph | None = None) -> Graph:
    """The chain alone as a graph: its outside inputs become graph inputs (constants stay
    constants, lazily), the values it hands on become graph outputs. `fg`: the caller's
    current analysis of `graph` (built here when not given)."""
    if fg is None or fg.graph is not graph:
        fg = FusionGraph(graph)
    members = fg.members(chain)
    g = graph.extract(chain, f"{graph.name}:{chain[0].name}")
    g.outputs = fg.outputs_of(members)
    return g


def _signature(graph: Graph, nodes: list[Node]) -> tuple:
    """What the simulated time of a chain depends on: op types, attributes, shapes, dtypes,
    constness of inputs, the links between the ops, fused subgraphs (value names aside)."""
    local: dict[str, int] = {}
    sig = []
    for n in nodes:
        ins = []
        for v in n.inputs:
            val = graph.values.get(v) if v else None
            ins.append((local.get(v, -1), v in graph.constants,
                        None if val is None else (val.shape, val.dtype)))
        for o in n.outputs:
            local.setdefault(o, len(local))
        inner = _signature(n.subgraph, list(n.subgraph.nodes)) if n.subgraph is not None \
            else ()
        sig.append((n.op_type, repr(sorted((k, repr(a)) for k, a in n.attrs.items())),
                    tuple(ins), inner))
    return tuple(sig)


def simulated_us(graph: Graph, chain: list[Node], attrs: dict, cost: CostModel,
                 memo: dict | None = None,
                 fg: FusionGraph | None = None) -> tuple[float, float]:
    """Simulated time of `chain` as it is and as one L2 FusedOp with `attrs` (the pass's
    cost model); `memo` reuses the times of an identical chain (a model's repeated layers);
    `fg` is the caller's analysis of `graph`."""
    sig = _signature(graph, chain)
    key = (sig, attrs["batch_split"])
    if memo is not None and key in memo:
        return memo[key]
    alone = chain_graph(graph, chain, fg)
    split = alone.copy()
    fuse_nodes(split, list(split.nodes), attrs)
    # the unsplit time does not depend on the split tried: simulated once per chain signature
    unsplit = memo.get((sig, None)) if memo is not None else None
    if unsplit is None:
        unsplit = cost(alone)
    times = (unsplit, cost(split))
    if memo is not None:
        memo[key] = times
        memo[(sig, None)] = unsplit
    return times


class L2BatchSplitFusionPass(Pass):
    """Chains whose intermediates do not fit in L2 run as batch chunks that do."""

    name = "L2BatchSplitFusionPass"
    group = L2_FUSION
    patterns = ("L2BatchSplitFusion",)
    pattern = "L2BatchSplitFusion"

    def chains(self, fg: FusionGraph) -> list[list[Node]]:
        g = fg.graph
        consts = frozenset(g.constants)
        taken: set[str] = set()
        out: list[list[Node]] = []
        for node in fg.live_nodes():
            if node.name in taken:
                continue
            n = _separable(g, node, None, consts)
            if n is None:
                continue
            chain = [node]
            while True:
                outs = [o for o in chain[-1].outputs if o]
                if len(outs) != 1 or outs[0] in fg.graph_outputs:
                    break
                readers = fg.users(outs[0])
                if len(readers) != 1 or readers[0].name in taken or \
                        _separable(g, readers[0], n, consts) is None:
                    break
                chain.append(readers[0])
            if len(chain) > 1:
                taken.update(c.name for c in chain)
                out.append(chain)
        return out

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        chip = ctx.chip
        budget = chip.l2_resident_bytes
        memo: dict = {}
        fg = fusion_graph(graph, ctx)
        for chain in self.chains(fg):
            inter = [o for n in chain[:-1] for o in n.outputs if o]
            sizes = {v: graph.values[v].nbytes for v in inter}
            big = {v: b for v, b in sizes.items() if b > budget}
            if not big:
                continue      # the lowering keeps these in L2 already
            res.matched(self.pattern)
            n = int(graph.values[inter[0]].shape[0])
            worst = max(sizes.values())
            k = next((d for d in range(1, n + 1) if n % d == 0 and worst / d <= budget), None)
            if k is None:
                res.refuse(self.pattern, chain[0].name,
                           f"one sample's intermediate ({worst // n} B) exceeds half of L2 "
                           f"({budget} B)")
                continue
            why = excluded(ctx.options, self.name, chain)
            if why:
                res.refuse(self.pattern, chain[0].name, why)
                continue
            if ctx.cost_model is None:
                res.refuse(self.pattern, chain[0].name,
                           "no cost model to decide the split (optimize through the API layer, "
                           "ascendsim.optimize, which simulates candidates)")
                continue
            tasks = len(chain)
            unsplit_us = sum(2 * b for b in big.values()) / chip.hbm_bandwidth_bytes_per_s * 1e6
            split_us = (sum(2 * b for b in big.values()) / chip.l2_bandwidth_bytes_per_s * 1e6
                        + (k - 1) * tasks * chip.sink_launch_us)
            if split_us >= unsplit_us:
                res.refuse(self.pattern, chain[0].name,
                           f"not faster: batch {n} as {k} x {n // k} costs an estimated "
                           f"{split_us:.1f} us (L2 traffic + {(k - 1) * tasks} more launches) "
                           f"vs {unsplit_us:.1f} us of HBM round trips")
                continue
            base = {"fusion": "L2", "pattern": self.pattern,
                    "display_type": "L2_" + display_type(chain, "_"), "l2_values": tuple(inter)}

            def attrs_for(d: int, base: dict = base, n: int = n) -> dict:
                return {**base, "batch_split": d, "chunk_batch": n // d}

            # the smallest fitting split and the next one (smaller chunks leave more of L2
            # free; the simulation tells which pays)
            tries = [k] + [d for d in range(k + 1, n + 1) if n % d == 0][:1]
            before_us, after_us, k = min(
                ((*simulated_us(graph, chain, attrs_for(d), ctx.cost_model, memo, fg), d)
                 for d in tries),
                key=lambda t: t[1])
            attrs = attrs_for(k)
            if after_us >= before_us:
                res.refuse(self.pattern, chain[0].name,
                           f"not faster when simulated: batch {n} as {k} x {n // k} takes "
                           f"{after_us:.1f} us vs {before_us:.1f} us unsplit")
                continue
            members = leaves(chain)
            fused = fuse_nodes(graph, chain, attrs, fg=fg)     # keeps `fg` up to date
            res.committed(self.pattern, fused.name, members)
            res.note(f"batch {n} split {k} x {n // k}: {len(inter)} intermediates "
                     f"({sum(sizes.values())} B) through L2; simulated {before_us:.1f} us -> "
                     f"{after_us:.1f} us")
            res.bytes_saved += 2 * sum(big.values())
        return res


__all__ = ["L2BatchSplitFusionPass", "batch_separable"]
