"""SplitConcatElemwiseFusionPass (GraphFusion): split an element-wise op over a Concat's parts.

The split-fusion case modelled here (seed 001: "an op split in two, each half fused with its
neighbours"): ``f(Concat(a, b))`` with f a unary element-wise op becomes
``Concat(f(a), f(b))``. Each `f` then sits right after the cube op that produced its part
(conv -> relu), where UB fusion merges it into that op's epilogue, and the Concat reads
already-activated parts: one element-wise launch and one full DDR round trip disappear once
UB fusion runs. Refused when a Concat input is not the only output use of a cube op (then
there is no neighbour for the half to fuse with, and splitting only adds launches), or when
the Concat output has another use.
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.registry import Category, get_op
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_node, replace_nodes

CONCAT = "Concat"


class SplitConcatElemwiseFusionPass(RewritePass):
    name = "SplitConcatElemwiseFusionPass"
    group = GRAPH_FUSION
    patterns = ("SplitConcatElemwiseFusion",)

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if get_op(node.op_type).category != Category.ELEMWISE or len(node.inputs) != 1:
            return None
        concat = view.producer(node.inputs[0], (CONCAT,))
        return None if concat is None else Match(node, [concat, node], {"concat": concat})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        concat = m["concat"]
        d = require(view.only_user(concat.outputs[0]) is m.anchor,
                    f"Concat output '{concat.outputs[0]}' has other uses")
        for i in concat.inputs:
            p = view.producer(i)
            ok = p is not None and get_op(p.op_type).category == Category.CUBE and \
                view.only_user(i) is concat
            d = d.and_(require(ok, f"Concat input '{i}' is not the sole use of a cube op's "
                                   f"output: no neighbour to fuse the split part with"))
        return d

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        node, concat = m.anchor, m["concat"]
        parts = [add_node(graph, node.op_type, [i], node.attrs, base=f"{node.name}_part")[0].name
                 for i in concat.inputs]
        replace_nodes(graph, [concat, node], concat.op_type, parts, concat.attrs, concat.name,
                      node.outputs)
