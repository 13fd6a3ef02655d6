"""UB fusion (switch group "UBFusion", hardware dependent): ops whose intermediates stay in the
Unified Buffer instead of going UB -> DDR -> UB, committed as FusedOp nodes (fusion "UB").

The four categories of the source documents, each a pass with CANN's name, run in priority
order (cube heads first, as TVM's phase 0 settles complex ops before the rest; CANN runs its
named patterns before the automatic fallback):

1. `TbeConvElemwiseFusionPass`  cube op (Conv, MatMul, Gemm: category CUBE) + element-wise
   epilogue, each op single-input single-output (Conv + folded BN + ReLU). CANN has the same
   for matmul heads (ATbeMatMulElemwiseFusionPass); one pass here, keyed on the category.
2. `TbeReduceElemwiseFusionPass` one reduce + element-wise ops after it (first) and before it.
3. `TbeSegmentElemwiseFusionPass` one segment op (pooling-like) + element-wise, likewise.
4. `TbeEltwiseFusionPass` element-wise chains; the first op may have several inputs.
5. `AutomaticUbFusion` (lowest priority, "cann8" rule set only) connected element-wise ops
   not taken before.

The limits come from `fusion_rules` (rule set from `ctx.options["ub_rules"]`, default "seed");
the chip (for the UB capacity) from `ctx.chip`. Element-wise = registry category ELEMWISE or
BROADCAST on the vector unit; a broadcast operand counts as an input, a scalar constant does
not (it is an immediate of the vector instruction). A matched group is refused, and the log's
explain view says why, when contracting it would create a cycle, when an intermediate is read
outside the group (or is a graph output), or when its tiled working set does not fit the UB (see
`partition`). Refused ops stay available: a later anchor may start a smaller group with them.

What this does not do: dynamic shapes are fused like static ones (CANN's UB passes are mostly
static-only); AI CPU ops (e.g. Pow) and views never join a UB group.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Container, Sequence

from ..ir.graph import Graph, Node
from ..ir.registry import Category, Unit, ops_where
from .base import UB_FUSION, YES, Decision, Pass, PassContext, PassResult, no
from .exclude import excluded, leaves
from .fusion_rules import UbRules, get_rules
from .partition import (
    FusionGraph,
    chain_backward,
    chain_forward,
    check_ub,
    connected_groups,
    data_inputs,
    fusion_graph,
    is_elementwise,
    is_scalar_const,
    opdef,
    unit_of,
)


# ----------------------------------------------------------------------------- options
def rules_of(ctx: PassContext) -> UbRules:
    """The UB rule set: ctx.options["ub_rules"] ("seed", "cann8" or a UbRules), else "seed"."""
    return get_rules(ctx.options.get("ub_rules") if ctx.options else None)


# ----------------------------------------------------------------------------- the rewrite
def display_type(nodes: Sequence[Node], sep: str = "") -> str:
    """A readable op-type label of a group ("ConvRelu", "Fused_Mul_Add")."""
    types: list[str] = []
    for n in nodes:
        if n.subgraph is not None:
            types.extend(m.op_type for m in _flat(n))
        else:
            types.append(n.op_type)
    return sep.join(types)


def _flat(node: Node) -> list[Node]:
    if node.subgraph is None:
        return [node]
    return [m for n in node.subgraph.nodes for m in _flat(n)]


class _Taken(Container[str]):
    """Node names a fresh name must avoid, as a membership test (no set of the whole graph)."""

    def __init__(self, test: Callable[[str], bool]) -> None:
        self._test = test

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._test(key)


def fuse_nodes(graph: Graph, nodes: Sequence[Node], attrs: dict, name: str | None = None,
               flatten: Callable[[Node], bool] = lambda n: False,
               fg: FusionGraph | None = None) -> Node:
    """Replace `nodes` by one FusedOp node (the FuseMutator side of the partition).

    The subgraph holds the original nodes (the subgraph of a node for which `flatten` is true
    is inlined, so merged composites stay one level deep). Its inputs are the values the group
    reads from outside, except scalar constants (vector immediates) and constants read only as
    compile-time parameters (`needs_const_inputs`): those move inside. Its outputs are the
    values read outside the group or graph outputs. Value names are kept; the fused node takes
    the place of the group's last member in the node order.

    `fg`: the pass's current analysis of `graph`; it is updated in place (`FusionGraph.commit`)
    so a pass committing many groups does not re-index the whole graph per group. When the
    commit broke the topological order the graph is re-sorted (`FusionGraph.resort`).
    """
    if fg is None or fg.graph is not graph:
        fg = FusionGraph(graph)
    group = fg.members(nodes)
    order = [fg.nodes[i] for i in sorted(group)]
    outputs = fg.outputs_of(group)
    inner: list[Node] = []
    sub_consts: dict = {}
    sub_values: dict = {}
    for n in order:
        if n.subgraph is not None and flatten(n):
            inner.extend(n.subgraph.nodes)
            sub_consts.update(n.subgraph.constants)
            sub_values.update(n.subgraph.values)
        else:
            inner.append(n)
    produced = {o for n in inner for o in n.outputs if o}
    # constants that are compile-time parameters (needs_const_inputs: a Reshape's shape, a
    # reduce's axes) or scalars (vector immediates) move inside; other constants (weights)
    # stay inputs, read from memory like activations
    param = {v for n in inner for i, v in enumerate(n.inputs)
             if v in graph.constants and i in opdef(n).needs_const_inputs}
    data = {v for n in inner for i, v in enumerate(n.inputs)
            if v and i not in opdef(n).needs_const_inputs}
    # a one-element constant is an immediate only for vector element-wise ops; a cube op's
    # bias or a (K, 1) weight is a memory operand the lowering loads from GM (a Conv 1 -> 1
    # channel with bias lost its bias input when it moved inside)
    operands = {v for n in inner for i, v in enumerate(n.inputs)
                if v and i not in opdef(n).needs_const_inputs
                and (n.subgraph is not None or opdef(n).category > Category.BROADCAST)}
    inputs: list[str] = []
    for n in inner:
        for v in n.inputs:
            if not v or v in produced or v in sub_consts or v in inputs:
                continue
            if ((is_scalar_const(graph, v) and v not in operands)
                    or (v in param and v not in data)):
                sub_consts[v] = graph.constants[v]
            else:
                inputs.append(v)
    sub = Graph(name or "fused")
    for v in (*inputs, *sub_consts, *produced):
        sub.values[v] = sub_values.get(v) or graph.values[v]
    sub.inputs = list(inputs)
    sub.outputs = list(outputs)
    sub.constants = dict(sub_consts)
    sub.nodes = list(inner)
    sub.toposort()
    gone = {n.name for n in order}
    for n in order:
        for o in n.outputs:
            if o and o not in outputs:
                graph.values.pop(o, None)
    if name is None:
        index = fg.index
        name = graph.fresh_node_name(attrs.get("display_type") or "Fused",
                                     _Taken(lambda k: k in index and k not in gone))
    fused = graph.add_fused(sub, attrs, name=name)
    # the fused node sits where its last member was; the order can only break there (a
    # reader of one of its outputs placed between the members); constants can only die
    # where the members read them
    in_order = fg.commit(group, fused)
    fg.sync_nodes(group, fused)
    if not in_order:
        fg.resort()
    dead = [*fg.dead_consts, *(v for n in order for v in n.inputs
                               if v in graph.constants and v not in fg.readers
                               and v not in fg.graph_outputs)]
    fg.dead_consts = []
    for c in dict.fromkeys(dead):
        del graph.constants[c]
        graph.values.pop(c, None)
    return fused


# ----------------------------------------------------------------------------- the passes
class UbFusionPass(Pass):
    """Skeleton of the UB passes: find a group at each anchor, check it, commit it."""

    group = UB_FUSION
    pattern: str = ""

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        """The group anchored at `node` under `rules`, or None. The per-anchor scan of `run`
        calls it; a pass with its own `run` (AutomaticUbFusion) leaves it matching nothing."""
        return None

    def anchor_types(self) -> frozenset[str] | None:
        """The op types `match` can anchor a group at (it returns None for every other node),
        so the scan passes the rest over without a call; None: any op type."""
        return None

    def last_values(self, group: list[Node]) -> set[str]:
        """Values the group may hand outside (the chain's last value)."""
        return {o for o in group[-1].outputs if o}

    def check(self, fg: FusionGraph, group: list[Node], chip) -> Decision:
        members = fg.members(group)
        why = fg.creates_cycle(members)
        if why:
            return no(why)
        esc = fg.escapes(members, allowed=self.last_values(group))
        if esc:
            value, reader = esc[0]
            return no(f"intermediate '{value}' is also read by {reader!r} outside the group "
                      f"(multi-consumer)")
        return check_ub(fg.graph, group, chip, fg)

    def attrs(self, group: list[Node]) -> dict:
        return {"fusion": "UB", "pattern": self.pattern, "display_type": display_type(group)}

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        rules, chip = rules_of(ctx), ctx.chip
        # anchors tried, and nodes that matched nothing (fusing never makes a match possible:
        # a fused node is opaque to every UB pattern)
        skip: set[str] = set()
        fg = fusion_graph(graph, ctx)
        # After a commit the scan goes on from the anchor: every node before it was tried
        # already, and the fused node takes an index after it (see FusionGraph.commit). Only
        # when the commit re-sorted the graph does the scan restart from the top.
        start = 0
        anchors = self.anchor_types()
        while True:
            for pos in range(start, len(fg.nodes)):
                node = fg.nodes[pos]
                if node is None or node.name in skip or (
                        anchors is not None and node.op_type not in anchors):
                    continue
                skip.add(node.name)
                group = self.match(fg, node, rules)
                if not group:
                    continue
                res.matched(self.pattern)
                dec = self.check(fg, group, chip)
                if not dec:
                    res.refuse(self.pattern, node.name, dec.why)
                    group = self.shrink(fg, group)
                    if not group:
                        continue
                    res.matched(self.pattern)   # the shorter chain is a match of its own
                    dec = self.check(fg, group, chip)
                    if not dec:
                        res.refuse(self.pattern, node.name, dec.why)
                        continue
                why = excluded(ctx.options, self.name, group)
                if why:
                    res.refuse(self.pattern, node.name, why)
                    continue
                resorts = fg.resorts
                members = leaves(group)
                fused = fuse_nodes(graph, group, self.attrs(group), fg=fg)
                res.committed(self.pattern, fused.name, members)
                start = 0 if fg.resorts != resorts else min(pos, fg.index[fused.name])
                break
            else:
                return res

    def shrink(self, fg: FusionGraph, group: list[Node]) -> list[Node] | None:
        """After a multi-consumer refusal: the chain up to the first escaping value, which then
        becomes the group's output (None when that leaves fewer than two ops)."""
        members = fg.members(group)
        esc = fg.escapes(members, allowed=self.last_values(group))
        if not esc:
            return None
        producer = fg.producer_of(esc[0][0])
        cut = next(i for i, n in enumerate(group) if n is producer or n.name == producer.name)
        return group[:cut + 1] if cut >= 1 else None


def _single_input_eltwise(fg: FusionGraph) -> Callable[[Node, str], bool]:
    """A chain follower: element-wise, one output, its only data input the chain's value."""
    return lambda r, v: is_elementwise(fg.graph, r) and data_inputs(fg.graph, r) == [v]


def _sole_reader(fg: FusionGraph, node: Node) -> bool:
    out = [o for o in node.outputs if o]
    return (len(out) == 1 and out[0] not in fg.graph_outputs
            and len(fg.readers.get(out[0], [])) == 1)


class TbeConvElemwiseFusionPass(UbFusionPass):
    """Conv + element-wise: a cube head and at most `conv_eltwise_max` single-input
    single-output element-wise ops after it."""

    name = "TbeConvElemwiseFusionPass"
    patterns = ("TbeConvElemwiseFusion",)
    pattern = "TbeConvElemwiseFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return ops_where(lambda d: d.category == Category.CUBE)

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if node.subgraph is not None or opdef(node).category != Category.CUBE \
                or unit_of(fg.graph, node) != Unit.CUBE or rules.conv_eltwise_max == 0:
            return None
        tail = chain_forward(fg, node, _single_input_eltwise(fg), rules.conv_eltwise_max)
        return [node, *tail] if tail else None


class _AnchoredPass(UbFusionPass):
    """Reduce/Segment + element-wise: exactly one anchor op of `anchor` category (one streamed
    input; constant operands such as a norm's scale and bias are parameters); element-wise
    ops after it first (up to post), then before it (up to pre), at most total in all. The
    ops before it are taken only while each one's output feeds the chain alone (the walk
    stops at a shared value); the first of them may have several inputs."""

    anchor: Category = Category.REDUCE

    @abstractmethod
    def limits(self, rules: UbRules) -> tuple[int, int, int]:
        """(ops before the anchor, ops after it, total) allowed by `rules`."""

    def anchor_types(self) -> frozenset[str] | None:
        return ops_where(lambda d: d.category == self.anchor)

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        pre_max, post_max, total = self.limits(rules)
        g = fg.graph
        if node.subgraph is not None or opdef(node).category != self.anchor \
                or unit_of(g, node) != Unit.VECTOR or len([o for o in node.outputs if o]) != 1:
            return None
        # one streamed input; constant operands (LayerNorm's scale and bias) are parameters
        ins = [v for v in data_inputs(g, node) if v not in g.constants]
        if len(ins) != 1 or total == 0:
            return None
        post = chain_forward(fg, node, _single_input_eltwise(fg), min(post_max, total))

        def before(p: Node, first: bool) -> bool:
            return (is_elementwise(g, p) and _sole_reader(fg, p)
                    and (first or len(data_inputs(g, p)) == 1))

        pre = chain_backward(fg, node, ins[0], before, min(pre_max, total - len(post)))
        group = [*pre, node, *post]
        return group if len(group) > 1 else None


class TbeReduceElemwiseFusionPass(_AnchoredPass):
    """Reduce + element-wise (one reduce, rule-set limits on each side and in all)."""

    name = "TbeReduceElemwiseFusionPass"
    patterns = ("TbeReduceElemwiseFusion",)
    pattern = "TbeReduceElemwiseFusion"
    anchor = Category.REDUCE

    def limits(self, rules: UbRules) -> tuple[int, int, int]:
        return rules.reduce_pre_max, rules.reduce_post_max, rules.reduce_total_max


class TbeSegmentElemwiseFusionPass(_AnchoredPass):
    """Segment + element-wise, as Reduce + element-wise with a segment (pooling-like) op."""

    name = "TbeSegmentElemwiseFusionPass"
    patterns = ("TbeSegmentElemwiseFusion",)
    pattern = "TbeSegmentElemwiseFusion"
    anchor = Category.SEGMENT

    def limits(self, rules: UbRules) -> tuple[int, int, int]:
        return rules.segment_pre_max, rules.segment_post_max, rules.segment_total_max


class TbeEltwiseFusionPass(UbFusionPass):
    """Element-wise chains of at most `eltwise_max` ops: the first may have several inputs,
    the rest one input (the previous op's output) and one output."""

    name = "TbeEltwiseFusionPass"
    patterns = ("TbeEltwiseFusion",)
    pattern = "TbeEltwiseFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return ops_where(lambda d: d.category <= Category.BROADCAST)   # `is_elementwise`

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if rules.eltwise_max < 2 or not is_elementwise(fg.graph, node):
            return None
        tail = chain_forward(fg, node, _single_input_eltwise(fg), rules.eltwise_max - 1)
        return [node, *tail] if tail else None


class AutomaticUbFusion(UbFusionPass):
    """Connected element-wise ops not taken by a named pattern, up to `automatic_max` ops
    (CANN 8: 28); off (matches nothing) under rule sets where the limit is 0. A group may have
    several outputs, but no intermediate may also be read outside it."""

    name = "AutomaticUbFusion"
    patterns = ("AutomaticUbFusion",)
    pattern = "AutomaticUbFusion"

    def last_values(self, group: list[Node]) -> set[str]:
        inside = {v for n in group for v in n.inputs if v}
        return {o for n in group for o in n.outputs if o and o not in inside}

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        rules, chip = rules_of(ctx), ctx.chip
        if rules.automatic_max < 2:
            res.note(f"rule set '{rules.name}' has no automatic UB fusion")
            return res
        fg = fusion_graph(graph, ctx)
        part = connected_groups(fg, lambda n: is_elementwise(graph, n), rules.automatic_max)
        for node_name, why in part.refused:
            res.matched(self.pattern)
            res.refuse(self.pattern, node_name, why)
        for group in part.groups:
            res.matched(self.pattern)
            # check on the current graph: a group committed before may add paths between
            # others (`fg` is kept up to date by every commit)
            dec = self.check(fg, [fg.nodes[fg.index[n.name]] for n in group], chip)
            if not dec:
                res.refuse(self.pattern, group[0].name, dec.why)
                continue
            why = excluded(ctx.options, self.name, group)
            if why:
                res.refuse(self.pattern, group[0].name, why)
                continue
            members = leaves(group)
            fused = fuse_nodes(graph, group, self.attrs(group), fg=fg)
            res.committed(self.pattern, fused.name, members)
        return res


#: the UB stage, in priority order
UB_PASSES: tuple[type[Pass], ...] = (
    TbeConvElemwiseFusionPass, TbeReduceElemwiseFusionPass, TbeSegmentElemwiseFusionPass,
    TbeEltwiseFusionPass, AutomaticUbFusion)


__all__ = ["UB_PASSES", "UbFusionPass", "TbeConvElemwiseFusionPass", "TbeEltwiseFusionPass",
           "TbeReduceElemwiseFusionPass", "TbeSegmentElemwiseFusionPass", "AutomaticUbFusion",
           "fuse_nodes", "display_type", "rules_of", "YES"]
