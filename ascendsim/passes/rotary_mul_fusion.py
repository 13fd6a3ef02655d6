"""RotaryMulFusionPass (GraphFusion): HF's apply_rotary_pos_emb -> CANN's RotaryMul.

Pattern (anchored at the Add), one per rotated tensor (q and k)::

    rot = Concat(Neg(Slice(x, [D/2], [D], [last])), Slice(x, [0], [D/2], [last]), axis=last)
    y   = Add(Mul(x, cos), Mul(rot, sin))                 ->  y = RotaryMul(x, cos, sin)

(either operand order of the Muls and the Add). Refused: slices that are not the two halves of
x's last axis, cos/sin that do not broadcast to x, an intermediate with another use.
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.registry import broadcast_shapes
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, other_input, replace_nodes
from .swiglu_fusion import slice_range

ADD, MUL, CONCAT, NEG, ROTARY = "Add", "Mul", "Concat", "Neg", "RotaryMul"


class RotaryMulFusionPass(RewritePass):
    batch = True            # one rewrite per layer: every disjoint match of a scan
    name = "RotaryMulFusionPass"
    group = GRAPH_FUSION
    patterns = ("RotaryMulFusion",)

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((ADD,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != ADD:
            return None
        muls = [view.producer(i, (MUL,)) for i in node.inputs]
        if any(m is None for m in muls):
            return None
        for r in (0, 1):
            m_rot, m_x = muls[r], muls[1 - r]
            for j in (0, 1):
                cat = view.producer(m_rot.inputs[j], (CONCAT,))
                if cat is None or len(cat.inputs) != 2:
                    continue
                neg = view.producer(cat.inputs[0], (NEG,))
                hi = slice_range(view, view.producer(neg.inputs[0])) if neg else None
                lo = slice_range(view, view.producer(cat.inputs[1]))
                if hi is None or lo is None or hi[0] != lo[0] or hi[0] not in m_x.inputs:
                    continue
                x = hi[0]
                nodes = [view.producer(neg.inputs[0]), view.producer(cat.inputs[1]), neg, cat,
                         m_rot, m_x, node]
                return Match(node, nodes, {"x": x, "hi": hi, "lo": lo, "cat": cat,
                                           "cos": other_input(m_x, x),
                                           "sin": m_rot.inputs[1 - j]})
        return None

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        x = view.value(m["x"])
        d = x.shape[-1]
        (_, h0, h1, hax), (_, l0, l1, lax) = m["hi"], m["lo"]
        axis = m["cat"].attrs.get("axis", 0) % x.rank
        dec = require(isinstance(d, int) and d % 2 == 0 and hax == lax == axis == x.rank - 1
                      and (h0, h1, l0, l1) == (d // 2, d, 0, d // 2),
                      "the slices are not the two halves of the last axis")

        def fits(v: str) -> bool:
            try:
                return broadcast_shapes(x.shape, view.value(v).shape) == tuple(x.shape)
            except Exception:
                return False
        dec = dec.and_(lambda: require(fits(m["cos"]) and fits(m["sin"]),
                                       "cos/sin do not broadcast to x"))
        inner = [n.outputs[0] for n in m.nodes[:-1]]
        return dec.and_(lambda: require(all(view.uses(v) == 1 for v in inner),
                                        "an intermediate of the rotary chain has other uses"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        replace_nodes(graph, m.nodes, ROTARY, [m["x"], m["cos"], m["sin"]], {},
                      m.anchor.name, m.anchor.outputs)
