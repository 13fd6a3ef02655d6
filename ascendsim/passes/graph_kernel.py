"""Graph-kernel fusion (MindSpore `enable_graph_kernel`, `optimize(graph_kernel=True)`).

Two stages, as the MindSpore tutorial (seed 000) describes them, each a pass:

1. `BasicOpsFusion` (stage "graph_kernel_basic") merges connected *basic* ops into composite
   ops (FusedOp, fusion "GraphKernel"). A basic op is one AKG compiles for the AI Core's vector
   unit: category ELEMWISE, BROADCAST, INJECTIVE (reshape-like) or REDUCE whose unit is the
   vector unit or none (a view). Cube ops and AI CPU ops are not basic. A group is kept only
   when it saves a launch, i.e. holds at least two ops that run on the vector unit.
2. `CompositeOpsFusion` (stage "graph_kernel_composite") merges each composite with neighbouring ops
   its kernel can compute and with neighbouring composites. What a composite kernel can compute is a
   basic op, or an element-wise op whose arithmetic the registry gives as a numba scalar function
   (`OpDef.scalar`): that is exactly what the executor (`execute/composite.py`) compiles into the
   fused loop. So an AI CPU element-wise op is left alone by basic fusion (it is not an AI Core op),
   but a composite next to it takes it in: its work then runs inside the composite on the vector
   unit, costed by its vector class, and its AI CPU launch disappears. This is the seed's
   `pow(mul(x, 2) + 1, 3)`: Mul+Add -> one composite, then composite + Pow -> one composite. Two
   lone absorbable ops are not merged here (that is basic fusion's job); every merge involves a
   composite.

Both stages merge along producer -> consumer edges with union-find (`partition.
connected_groups`): no merge may create a cycle, and a group's op count may not exceed
`ctx.options["graph_kernel_max_ops"]` (default `DEFAULT_MAX_OPS`). Composites may have several
outputs: a value read outside the group is an extra output (it is written to DDR once).
Merged composites are flattened, so a composite's subgraph holds original ops only.
"""

from __future__ import annotations

from abc import abstractmethod

from ..ir.graph import Graph, Node
from ..ir.registry import Unit
from .base import GRAPH_KERNEL, Pass, PassContext, PassResult
from .exclude import excluded, leaves
from .partition import (
    connected_groups,
    fusion_graph,
    is_absorbable,
    is_basic,
    is_composite,
    unit_of,
)
from .ub_fusion import display_type, fuse_nodes

#: default size limit of a composite, in original ops (TorchInductor's max_fusion_size is 64)
DEFAULT_MAX_OPS = 64


def max_ops_of(ctx: PassContext) -> int:
    from ..errors import ConfigError

    n = ctx.options.get("graph_kernel_max_ops", DEFAULT_MAX_OPS) if ctx.options else \
        DEFAULT_MAX_OPS
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ConfigError(f"graph_kernel_max_ops must be an integer >= 2, got {n!r}")
    return n


def _vector_ops(graph: Graph, nodes: list[Node]) -> int:
    count = 0
    for n in nodes:
        if n.subgraph is not None:
            count += _vector_ops(n.subgraph, list(n.subgraph.nodes))
        elif unit_of(graph, n) != Unit.NONE:
            count += 1
    return count


class _GraphKernelPass(Pass):
    group = GRAPH_KERNEL
    pattern = ""

    @abstractmethod
    def candidate(self, graph: Graph, node: Node) -> bool:
        """Whether `node` may join a composite in this stage."""

    def may_merge(self, a: list[Node], b: list[Node]) -> bool:
        return True

    def keep(self, graph: Graph, group: list[Node]) -> str:
        """Why a found group is not worth a composite ("" = keep it)."""
        return ""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        fg = fusion_graph(graph, ctx)
        # a stage whose merges are all allowed passes no test (no member lists per merge)
        merges = None if type(self).may_merge is _GraphKernelPass.may_merge else self.may_merge
        part = connected_groups(fg, lambda n: self.candidate(graph, n), max_ops_of(ctx),
                                merges)
        for node_name, why in part.refused:
            res.matched(self.pattern)
            res.refuse(self.pattern, node_name, why)
        for group in part.groups:
            res.matched(self.pattern)
            # check on the current graph (a group committed before may add paths between
            # others); every commit keeps `fg` up to date
            why = (self.keep(graph, group) or fg.creates_cycle(fg.members(group))
                   or excluded(ctx.options, self.name, group))
            if why:
                res.refuse(self.pattern, group[0].name, why)
                continue
            attrs = {"fusion": "GraphKernel", "pattern": self.pattern,
                     "display_type": "Fused_" + display_type(group, "_")}
            members = leaves(group)
            fused = fuse_nodes(graph, group, attrs, flatten=is_composite, fg=fg)
            res.committed(self.pattern, fused.name, members)
        return res


class BasicOpsFusion(_GraphKernelPass):
    """Connected basic AI Core ops -> composite ops."""

    name = "BasicOpsFusion"
    patterns = ("BasicOpsFusion",)
    pattern = "BasicOpsFusion"

    def candidate(self, graph: Graph, node: Node) -> bool:
        return is_basic(graph, node)

    def keep(self, graph: Graph, group: list[Node]) -> str:
        if _vector_ops(graph, group) < 2:
            return "no benefit: fewer than two ops run on the vector unit (views only)"
        return ""


class CompositeOpsFusion(_GraphKernelPass):
    """Composites + neighbouring ops their kernel can compute, and composites + composites."""

    name = "CompositeOpsFusion"
    patterns = ("CompositeOpsFusion",)
    pattern = "CompositeOpsFusion"

    def candidate(self, graph: Graph, node: Node) -> bool:
        return is_composite(node) or is_absorbable(graph, node)

    def may_merge(self, a: list[Node], b: list[Node]) -> bool:
        return any(is_composite(n) for n in (*a, *b))


__all__ = ["BasicOpsFusion", "CompositeOpsFusion", "DEFAULT_MAX_OPS", "max_ops_of"]
