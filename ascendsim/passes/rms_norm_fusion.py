"""RmsNormFusionPass (GraphFusion): the exported RMSNorm decomposition -> CANN's RmsNorm.

Pattern (anchored at the Div), as HF's LlamaRMSNorm exports without its fp32 up-cast::

    ms = ReduceMean(Mul(x, x) | Pow(x, 2), axes=[last], keepdims=1)
    y  = Mul(Div(x, Sqrt(Add(ms, eps))), gamma)          ->  y = RmsNorm(x, gamma, epsilon)

The gamma Mul is optional (gamma = 1 then). Refused: a mean over other axes or without
keepdims, a non-scalar epsilon, a gamma that is not a constant of the last axis's size, an
intermediate with another use. Runs before UB fusion (which would otherwise group the pieces).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_const, other_input, replace_nodes
from .softmax_small_op_fusion import reduce_axes

DIV, SQRT, ADD, MUL, POW, MEAN, RMS_NORM = ("Div", "Sqrt", "Add", "Mul", "Pow", "ReduceMean",
                                            "RmsNorm")


def _is_square_of(view: GraphView, node: Node | None, x: str) -> bool:
    if node is None:
        return False
    if node.op_type == MUL:
        return node.inputs[0] == x and node.inputs[1] == x
    return node.inputs[0] == x and view.scalar(node.inputs[1]) == 2.0


class RmsNormFusionPass(RewritePass):
    batch = True            # one rewrite per layer: every disjoint match of a scan
    name = "RmsNormFusionPass"
    group = GRAPH_FUSION
    patterns = ("RmsNormFusion",)

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((DIV,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != DIV:
            return None
        x = node.inputs[0]
        sqrt = view.producer(node.inputs[1], (SQRT,))
        add = view.producer(sqrt.inputs[0], (ADD,)) if sqrt is not None else None
        if add is None:
            return None
        mean = next((view.producer(i, (MEAN,)) for i in add.inputs
                     if view.producer(i, (MEAN,)) is not None), None)
        if mean is None:
            return None
        sq = view.producer(mean.inputs[0], (MUL, POW))
        if not _is_square_of(view, sq, x):
            return None
        parts = {"x": x, "mean": mean, "eps": view.scalar(other_input(add, mean.outputs[0])),
                 "gamma": None, "out": node.outputs[0]}
        nodes = [sq, mean, add, sqrt, node]
        user = view.only_user(node.outputs[0])
        if user is not None and user.op_type == MUL and view.is_const(other_input(user,
                                                                                  parts["out"])):
            nodes.append(user)
            parts.update(gamma=other_input(user, parts["out"]), out=user.outputs[0])
        return Match(node, nodes, parts)

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        x = view.value(m["x"])
        axes = reduce_axes(view, m["mean"])
        d = require(axes == (x.rank - 1,), f"the mean reduces axes {axes}, not the last axis")
        d = d.and_(lambda: require(bool(m["mean"].attrs.get("keepdims")), "the mean drops dims"))
        d = d.and_(lambda: require(m["eps"] is not None, "epsilon is not a scalar constant"))
        if m["gamma"] is not None:
            gs = view.value(m["gamma"]).shape
            d = d.and_(lambda: require(int(np.prod(gs)) == x.shape[-1] and gs[-1] == x.shape[-1],
                                       f"gamma shape {list(gs)} is not [{x.shape[-1]}]"))
        inner = [n.outputs[0] for n in m.nodes if n.outputs[0] != m["out"]]
        square = m.nodes[0]
        return d.and_(lambda: require(
            all(view.uses(v) == 1 for v in inner) and
            all(u.name in {n.name for n in m.nodes} for v in inner for u in view.users(v))
            and square.op_type in (MUL, POW),
            "an intermediate of the RMSNorm chain has other uses"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        x = view.value(m["x"])
        h = int(x.shape[-1])
        if m["gamma"] is None:
            gamma = np.ones(h)
        else:
            gamma = view.const(m["gamma"]).reshape(h)
        g = add_const(graph, gamma, f"{m.anchor.name}_gamma", x.dtype).name
        replace_nodes(graph, m.nodes, RMS_NORM, [m["x"], g], {"epsilon": float(m["eps"])},
                      m.anchor.name, [m["out"]])
