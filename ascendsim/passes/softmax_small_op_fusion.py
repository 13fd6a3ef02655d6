"""SoftmaxSmallOpFusionPass (GraphFusion, off by default as in CANN): small ops -> Softmax.

Pattern (anchored at the Div)::

    m = ReduceMax(x, axes=[a], keepdims=1); e = Exp(Sub(x, m))
    y = Div(e, ReduceSum(e, axes=[a], keepdims=1))          ->  y = Softmax(x, axis=a)

CANN's conditions: static shapes; both reductions over the same single axis with keepdims;
the intermediates have no other use (Exp is read by exactly the ReduceSum and the Div).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.tensor import is_static
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, replace_nodes

#: the decomposition, as op types along the chain
DIV, EXP, SUB, REDUCE_MAX, REDUCE_SUM, SOFTMAX = ("Div", "Exp", "Sub", "ReduceMax",
                                                   "ReduceSum", "Softmax")


def reduce_axes(view: GraphView, node: Node) -> tuple[int, ...] | None:
    """The normalised axes of a reduce node with constant axes, or None."""
    if len(node.inputs) < 2 or not node.inputs[1]:
        return None
    axes = view.const(node.inputs[1])
    if axes is None:
        return None
    rank = view.value(node.inputs[0]).rank
    return tuple(sorted(int(a) % rank for a in np.asarray(axes).reshape(-1)))


class SoftmaxSmallOpFusionPass(RewritePass):
    name = "SoftmaxSmallOpFusionPass"
    group = GRAPH_FUSION
    patterns = ("SoftmaxSmallOpFusion",)
    default_on = False

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((DIV,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != DIV:
            return None
        exp = view.producer(node.inputs[0], (EXP,))
        rsum = view.producer(node.inputs[1], (REDUCE_SUM,))
        if exp is None or rsum is None or rsum.inputs[0] != exp.outputs[0]:
            return None
        sub = view.producer(exp.inputs[0], (SUB,))
        if sub is None:
            return None
        rmax = view.producer(sub.inputs[1], (REDUCE_MAX,))
        if rmax is None or rmax.inputs[0] != sub.inputs[0]:
            return None
        return Match(node, [rmax, sub, exp, rsum, node],
                     {"x": sub.inputs[0], "rmax": rmax, "sub": sub, "exp": exp, "rsum": rsum})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        a1, a2 = reduce_axes(view, m["rmax"]), reduce_axes(view, m["rsum"])
        d = require(a1 is not None and a1 == a2 and len(a1) == 1,
                    f"reduce axes {a1} and {a2} are not the same single axis")
        d = d.and_(lambda: require(bool(m["rmax"].attrs.get("keepdims")) and
                                   bool(m["rsum"].attrs.get("keepdims")),
                                   "a reduction does not keep dims"))
        d = d.and_(lambda: require(is_static(view.value(m["x"]).shape), "shape is not static"))
        exp_out = m["exp"].outputs[0]
        d = d.and_(lambda: require(view.uses(exp_out) == 2 and
                                   view.only_user(m["rmax"].outputs[0]) is m["sub"] and
                                   view.only_user(m["sub"].outputs[0]) is m["exp"] and
                                   view.only_user(m["rsum"].outputs[0]) is m.anchor,
                                   "an intermediate of the softmax chain has other uses"))
        return d

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        axis = reduce_axes(view, m["rmax"])[0]  # type: ignore[index]
        replace_nodes(graph, m.nodes, SOFTMAX, [m["x"]], {"axis": axis}, m.anchor.name,
                      m.anchor.outputs)
