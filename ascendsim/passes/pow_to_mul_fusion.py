"""PowToMulFusionPass (GraphFusion): Pow(x, 2) -> Mul(x, x); Pow(x, 3) -> Mul(Mul(x, x), x).

Pow with a general exponent runs on the AI CPU (or as exp/log on the vector unit); a Mul
chain runs on the AI Core's vector unit, far faster (seed 003: the Pow(x,2) -> Mul(x,x)
example). Matches a Pow whose exponent is a one-element constant; refused when that exponent
is not exactly 2 or 3, or when the exponent would broadcast the result to a larger shape.
Runs after the LayerNorm and GELU recognisers, which consume their own Pow nodes.
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_node, replace_nodes

POW, MUL = "Pow", "Mul"
EXPONENTS = (2.0, 3.0)


class PowToMulFusionPass(RewritePass):
    name = "PowToMulFusionPass"
    group = GRAPH_FUSION
    patterns = ("PowToMulFusion",)

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((POW,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != POW:
            return None
        e = view.scalar(node.inputs[1])
        return None if e is None else Match(node, [node], {"e": e})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        node = m.anchor
        d = require(m["e"] in EXPONENTS, f"exponent {m['e']:g} is not 2 or 3")
        return d.and_(lambda: require(view.value(node.outputs[0]).shape ==
                                      view.value(node.inputs[0]).shape,
                                      "the exponent broadcasts the result"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        node = m.anchor
        x = node.inputs[0]
        if m["e"] == 2.0:
            replace_nodes(graph, [node], MUL, [x, x], {}, node.name, node.outputs)
            return
        sq = add_node(graph, MUL, [x, x], base=f"{node.name}_sq")[0]
        replace_nodes(graph, [node], MUL, [sq.name, x], {}, node.name, node.outputs)
