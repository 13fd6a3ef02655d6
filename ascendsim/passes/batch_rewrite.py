"""`BatchRewritePass`: a RewritePass that applies every disjoint match of one scan before
re-reading the graph (the LLM fusions match once per layer; re-reading a 1,000-node graph
after each of ~100 rewrites would dominate the optimisation time).

Valid for rewrites that keep the names of the values they replace and touch only the nodes of
their match: a later candidate that shares a node with an applied one is left for the next
scan, which re-reads the graph; scanning stops when a scan applies nothing.
"""

from __future__ import annotations

from ..ir.graph import Graph
from .base import PassContext, PassResult, RewritePass
from .rewrite import GraphView


class BatchRewritePass(RewritePass):
    """RewritePass skeleton with one graph read per scan instead of one per rewrite."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        default = self.pattern or self.patterns[0]
        decided: set[str] = set()
        while True:
            view = GraphView(graph)
            touched: set[str] = set()
            applied = deferred = 0
            for node in list(graph.nodes):
                if node.name in decided or node.name in touched:
                    continue
                m = self.match(graph, node, view)
                if m is None:
                    continue
                names = {n.name for n in m.nodes}
                if names & touched:
                    deferred += 1
                    continue
                decided.add(node.name)
                pattern = m.parts.get("pattern") or default
                res.matched(pattern)
                dec = self.check(graph, m, view, ctx)
                if not dec.ok:
                    res.refuse(pattern, node.name, dec.why)
                    continue
                self.rewrite(graph, m, view, ctx)
                res.effected(pattern)
                touched |= names
                applied += 1
            if not applied or not deferred:
                return res


__all__ = ["BatchRewritePass"]
