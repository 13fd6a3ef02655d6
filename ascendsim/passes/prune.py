"""PrunePass (GE): keep only what the requested outputs need.

With `optimize(outputs=[...])` the graph's outputs become those values (an intermediate may be
asked for); then every node, value and constant no output depends on is removed. Runs first in
the GE stage and again in each fixpoint round, so nodes orphaned by folding disappear.
"""

from __future__ import annotations

from ..ir.graph import Graph
from .base import GE, Pass, PassContext, PassResult


class PrunePass(Pass):
    name = "PrunePass"
    group = GE
    patterns = ("DeadNode",)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        if ctx.outputs is not None and list(graph.outputs) != list(ctx.outputs):
            graph.outputs = list(ctx.outputs)
            res.note(f"outputs set to {', '.join(ctx.outputs)}")
        before = len(graph.constants)
        removed = graph.remove_unused()
        stats = res.stats("DeadNode")
        stats.matched += removed
        stats.effected += removed
        if removed or len(graph.constants) != before:
            res.note(f"removed {removed} node(s) and {before - len(graph.constants)} "
                     f"constant(s) no output needs")
        return res
