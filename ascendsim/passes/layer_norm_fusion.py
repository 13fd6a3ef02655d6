"""LayerNormFusionPass (GraphFusion): PyTorch's exported LayerNorm decomposition -> one op.

PyTorch (opset < 17) exports `nn.LayerNorm` as (anchored at the Div)::

    mean = ReduceMean(x, axes);  d = Sub(x, mean);  var = ReduceMean(Pow(d, 2), axes)
    n = Div(d, Sqrt(Add(var, eps)));  y = Add(Mul(n, gamma), beta)

and it becomes `LayerNormalization(x, gamma, beta, axis=first reduced axis, epsilon=eps)`.
`Mul(d, d)` is accepted for the square; the affine Mul/Add are optional (gamma = 1, beta = 0
then). Refused: axes that are not the trailing axes (LayerNormalization normalises axis..end),
the two means over different axes, an intermediate with another use, a gamma or beta whose
shape is not x.shape[axis:] after dropping leading ones (ORT #25855 fused such a case wrongly).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_const, other_input, replace_nodes
from .softmax_small_op_fusion import reduce_axes

DIV, SQRT, ADD, MUL, SUB, POW, MEAN, LAYER_NORM = ("Div", "Sqrt", "Add", "Mul", "Sub", "Pow",
                                                   "ReduceMean", "LayerNormalization")


def _affine(view: GraphView, value: str, op: str) -> tuple[Node, str] | None:
    """(node, const operand) when `value`'s only reader is `op` with a constant other input."""
    user = view.only_user(value)
    if user is None or user.op_type != op:
        return None
    other = other_input(user, value)
    return (user, other) if view.is_const(other) else None


class LayerNormFusionPass(RewritePass):
    name = "LayerNormFusionPass"
    group = GRAPH_FUSION
    patterns = ("LayerNormFusion",)

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((DIV,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != DIV:
            return None
        d, sd = node.inputs[0], node.inputs[1]
        sub = view.producer(d, (SUB,))
        sqrt = view.producer(sd, (SQRT,))
        if sub is None or sqrt is None:
            return None
        add_eps = view.producer(sqrt.inputs[0], (ADD,))
        if add_eps is None:
            return None
        var = next((view.producer(i, (MEAN,)) for i in add_eps.inputs
                    if view.producer(i, (MEAN,)) is not None), None)
        mean = view.producer(sub.inputs[1], (MEAN,))
        if var is None or mean is None or mean.inputs[0] != sub.inputs[0]:
            return None
        sq = view.producer(var.inputs[0], (POW, MUL))
        if sq is None or sq.inputs[0] != d:
            return None
        eps = view.scalar(other_input(add_eps, var.outputs[0]))
        nodes = [mean, sub, sq, var, add_eps, sqrt, node]
        parts = {"x": sub.inputs[0], "mean": mean, "var": var, "sub": sub, "sq": sq,
                 "eps": eps, "out": node.outputs[0], "gamma": None, "beta": None}
        scale = _affine(view, node.outputs[0], MUL)
        if scale is not None:
            nodes.append(scale[0])
            parts.update(gamma=scale[1], out=scale[0].outputs[0])
            shift = _affine(view, scale[0].outputs[0], ADD)
            if shift is not None:
                nodes.append(shift[0])
                parts.update(beta=shift[1], out=shift[0].outputs[0])
        return Match(node, nodes, parts)

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        x = view.value(m["x"])
        a1, a2 = reduce_axes(view, m["mean"]), reduce_axes(view, m["var"])
        sq: Node = m["sq"]
        d = require(a1 is not None and a1 == a2, f"the two means reduce axes {a1} and {a2}")
        d = d.and_(lambda: require(tuple(a1 or ()) == tuple(range(x.rank - len(a1 or ()),
                                                                    x.rank)),
                                   f"axes {a1} are not the trailing axes of rank {x.rank}"))
        d = d.and_(lambda: require(m["eps"] is not None, "epsilon is not a scalar constant"))
        d = d.and_(lambda: require(bool(m["mean"].attrs.get("keepdims")) and
                                   bool(m["var"].attrs.get("keepdims")), "a mean drops dims"))
        d = d.and_(lambda: require(
            (sq.op_type == POW and view.scalar(sq.inputs[1]) == 2.0) or
            (sq.op_type == MUL and sq.inputs[0] == sq.inputs[1]), "the square is not d^2"))
        inner = [m["mean"].outputs[0], m["sq"].outputs[0], m["var"].outputs[0]]
        d = d.and_(lambda: require(all(view.uses(v) == 1 for v in inner)
                                   and view.uses(m["sub"].outputs[0]) == (3 if sq.op_type == MUL
                                                                          else 2),
                                   "an intermediate of the LayerNorm chain has other uses"))
        norm_shape = tuple(x.shape[x.rank - len(a1 or ()):])
        for key in ("gamma", "beta"):
            if m[key] is not None:
                s = tuple(view.value(m[key]).shape)
                while s and s[0] == 1 and len(s) > len(norm_shape):
                    s = s[1:]
                d = d.and_(require(s == norm_shape, f"{key} shape {list(view.value(m[key]).shape)}"
                                                    f" is not {list(norm_shape)}"))
        return d

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        x = view.value(m["x"])
        axes = reduce_axes(view, m["mean"]) or ()
        norm_shape = tuple(x.shape[x.rank - len(axes):])
        ins = []
        for key, fill in (("gamma", 1.0), ("beta", 0.0)):
            if m[key] is None:
                ins.append(add_const(graph, np.full(norm_shape, fill),
                                     f"{m.anchor.name}_{key}", x.dtype).name)
            else:
                data = view.const(m[key]).reshape(norm_shape)
                ins.append(add_const(graph, data, f"{m.anchor.name}_{key}", x.dtype).name)
        replace_nodes(graph, m.nodes, LAYER_NORM, [m["x"], *ins],
                      {"axis": x.rank - len(axes), "epsilon": float(m["eps"])},
                      m.anchor.name, [m["out"]])
