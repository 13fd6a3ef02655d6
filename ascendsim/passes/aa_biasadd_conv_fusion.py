"""AABiasaddConvFusion (GraphFusion, cannot be switched off): bias-less Conv + BiasAdd -> Conv.

The bias joins the conv's accumulator (L0C) instead of a separate vector pass over the output.
Matches a Conv without a bias whose output feeds a BiasAdd along the channel axis (NCHW/NCDHW),
or an Add of a constant that broadcasts per output channel ([C,1,1] or [1,C,1,1], the ONNX
form). Refused: the conv already has a bias (CANN does not apply it then), the conv output is
also used elsewhere or is a graph output, the bias is not one value per output channel, or
shapes are not static (CANN: static only). Runs first, as the "AA" prefix orders it in FE.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.tensor import LazyTensor, as_storage, is_static, materialize
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_const, forward_conv_ops, replace_nodes

#: the conv op and the bias-add ops this pass matches (pattern data)
BIAS_OPS = ("BiasAdd", "Add")
#: BiasAdd data formats whose channel axis is 1 (the conv's NCHW output)
CHANNEL_FIRST = ("NCHW", "NCDHW")


def per_channel_bias(view: GraphView, conv_out: str, bias: str) -> np.ndarray | None:
    """The bias as a [C] array when `bias` is a constant adding one value per channel (axis 1)."""
    if not view.is_const(bias):
        return None
    out, b = view.value(conv_out), view.value(bias)
    c = out.shape[1]
    dims = tuple(b.shape)
    ok = dims in {(c,) + (1,) * (out.rank - 2), (1, c) + (1,) * (out.rank - 2)}
    return view.const(bias).reshape(-1) if ok and isinstance(c, int) else None


class AABiasaddConvFusion(RewritePass):
    name = "AABiasaddConvFusion"
    group = GRAPH_FUSION
    patterns = ("AABiasaddConvFusion",)
    disableable = False

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset(BIAS_OPS)

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type not in BIAS_OPS:
            return None
        for x in dict.fromkeys(node.inputs[:2]):
            conv = view.producer(x, forward_conv_ops())
            if conv is not None:
                bias = node.inputs[1] if node.inputs[0] == x else node.inputs[0]
                if node.op_type == "Add" and not view.is_const(bias):
                    continue
                return Match(node, [conv, node], {"conv": conv, "x": x, "bias": bias})
        return None

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        conv: Node = m["conv"]
        node = m.anchor
        d = require(len(conv.inputs) < 3 or not conv.inputs[2],
                    f"conv '{conv.name}' already has a bias")
        d = d.and_(lambda: require(view.only_user(m["x"]) is node,
                                   f"conv output '{m['x']}' has other uses"))
        d = d.and_(lambda: require(is_static(view.value(m["x"]).shape),
                                   "conv output shape is not static"))
        if node.op_type == "BiasAdd":
            return d.and_(lambda: require(node.attrs.get("data_format") in CHANNEL_FIRST
                                          and node.inputs[0] == m["x"],
                                          f"BiasAdd data_format {node.attrs.get('data_format')}"
                                          f" is not channel-first"))
        return d.and_(lambda: require(per_channel_bias(view, m["x"], m["bias"]) is not None,
                                      f"'{m['bias']}' {view.value(m['bias']).shape} is not one "
                                      f"value per output channel"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        conv: Node = m["conv"]
        node = m.anchor
        if node.op_type == "BiasAdd":
            bias = m["bias"]
        else:
            src = graph.constants[m["bias"]]
            c = view.value(m["x"]).shape[1]
            dtype = view.value(m["x"]).dtype
            bias = add_const(graph, LazyTensor(
                (c,), dtype, lambda: as_storage(materialize(src).reshape(-1), dtype),
                f"bias of {conv.name}"), f"{conv.name}_bias").name
        replace_nodes(graph, [conv, node], conv.op_type, [conv.inputs[0], conv.inputs[1], bias],
                      conv.attrs, conv.name, node.outputs)


