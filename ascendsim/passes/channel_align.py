"""ChannelAlignFusionPass (GraphFusion, off by default): pad conv channels to a multiple of 16.

The cube works on 16x16 fractals and data is laid out NC1HWC0 with C0 = 16, so a channel count
that is a multiple of 16 runs about 20% faster (seed 003). For Conv1 -> [unary element-wise
ops] -> Conv2 where Conv1's output channels C are not a multiple of 16, Conv1's weights (and
bias) get zero rows up to Cp = ceil16(C) and Conv2's weights get zero input-channel columns,
so the padded channels exist only between the two convs and cannot change any output: Conv2
multiplies them by zero whatever the element-wise ops made of them.

"When that is faster": the padded tensor is Cp/C times larger, the aligned layout saves
ALIGN_GAIN (20%, seed 003), so the rewrite is applied only when Cp / C * (1 - ALIGN_GAIN) < 1,
i.e. C >= 13 for Cp = 16; smaller counts are refused with the figures. Also refused: grouped
convs, non-constant weights, an intermediate used outside the chain.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.registry import Category, get_op
from ..ir.tensor import ConstData, LazyTensor, as_storage, materialize
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_const, drop_dead_constants, forward_conv_ops
from .shapes import reinfer

C0 = 16
#: speed-up of channel-aligned layouts (seed 003: "multiples of 16 run ~20% faster")
ALIGN_GAIN = 0.20


def _pad_axis(data: ConstData, axis: int, to: int, dtype: str, what: str) -> LazyTensor:
    """A lazy copy of constant `data` zero-padded along `axis` to length `to`."""
    shape = list(data.shape)
    pad = to - shape[axis]
    shape[axis] = to

    def make() -> np.ndarray:
        arr = materialize(data)
        widths = [(0, 0)] * arr.ndim
        widths[axis] = (0, pad)
        return as_storage(np.pad(arr, widths), dtype)
    return LazyTensor(tuple(shape), dtype, make, what)


class ChannelAlignFusionPass(RewritePass):
    name = "ChannelAlignFusionPass"
    group = GRAPH_FUSION
    patterns = ("ChannelAlignFusion",)
    default_on = False

    def anchor_types(self) -> frozenset[str] | None:
        return forward_conv_ops()

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type not in forward_conv_ops():
            return None
        c = view.value(node.outputs[0]).shape[1]
        if not isinstance(c, int) or c % C0 == 0:
            return None
        chain: list[Node] = []
        v = node.outputs[0]
        while True:
            user = view.only_user(v)
            if user is None:
                return None
            if user.op_type in forward_conv_ops():
                break
            if get_op(user.op_type).category != Category.ELEMWISE or len(user.inputs) != 1:
                return None
            chain.append(user)
            v = user.outputs[0]
        if user.inputs[0] != v:
            return None
        return Match(node, [node, *chain, user], {"conv1": node, "conv2": user, "c": c})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        c1, c2, c = m["conv1"], m["conv2"], m["c"]
        cp = -(-c // C0) * C0
        d = require(int(c1.attrs.get("group", 1)) == 1 and int(c2.attrs.get("group", 1)) == 1,
                    "grouped convolution")
        consts = [i for i in (*c1.inputs[1:], c2.inputs[1]) if i]
        d = d.and_(lambda: require(all(view.is_const(i) for i in consts),
                                   "conv weights are not constant"))
        return d.and_(lambda: require(cp / c * (1 - ALIGN_GAIN) < 1,
                                      f"padding {c} -> {cp} channels costs {cp / c:.2f}x data, "
                                      f"more than the {ALIGN_GAIN:.0%} alignment gain"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        c1, c2, c = m["conv1"], m["conv2"], m["c"]
        cp = -(-c // C0) * C0
        w1 = view.value(c1.inputs[1])
        new1 = [c1.inputs[0], add_const(graph, _pad_axis(graph.constants[c1.inputs[1]], 0, cp,
                                                         w1.dtype, f"aligned {c1.name} w"),
                                        f"{c1.name}_w_c{cp}").name]
        if len(c1.inputs) > 2 and c1.inputs[2]:
            new1.append(add_const(graph, _pad_axis(graph.constants[c1.inputs[2]], 0, cp,
                                                   w1.dtype, f"aligned {c1.name} b"),
                                  f"{c1.name}_b_c{cp}").name)
        w2 = view.value(c2.inputs[1])
        new2 = list(c2.inputs)
        new2[1] = add_const(graph, _pad_axis(graph.constants[c2.inputs[1]], 1, cp, w2.dtype,
                                             f"aligned {c2.name} w"), f"{c2.name}_w_c{cp}").name
        edits = {c1.name: tuple(new1), c2.name: tuple(new2)}
        graph.nodes = [Node(n.name, n.op_type, edits[n.name], n.outputs, n.attrs, n.subgraph)
                       if n.name in edits else n for n in graph.nodes]
        reinfer(graph)
        drop_dead_constants(graph)
