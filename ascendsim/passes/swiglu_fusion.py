"""SwiGluFusionPass (GraphFusion): silu(first half) * second half -> CANN's SwiGlu.

Pattern (anchored at the outer Mul), as a merged gate/up projection exports::

    a = Slice(x, [0], [n/2], [last]);  b = Slice(x, [n/2], [n], [last])
    y = Mul(Mul(a, Sigmoid(a)), b)                      ->  y = SwiGlu(x, dim=-1)

(either operand order of both Muls). Refused: slices that are not the two halves of the last
axis of one tensor, steps other than 1, an intermediate with another use.
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, replace_nodes

MUL, SIGMOID, SLICE, SWIGLU = "Mul", "Sigmoid", "Slice", "SwiGlu"


def slice_range(view: GraphView, node: Node | None) -> tuple[str, int, int, int] | None:
    """(data, start, end, axis) of a one-axis, step-1 Slice with constant bounds (end clamped
    to the dim, negative axis normalised), else None."""
    if node is None or node.op_type != SLICE:
        return None
    ins = list(node.inputs) + [""] * (5 - len(node.inputs))
    data, starts, ends, axes, steps = ins[:5]
    rank = view.value(data).rank
    vals = [view.const(v) if v else None for v in (starts, ends, axes, steps)]
    if vals[0] is None or vals[1] is None or vals[0].size != 1 or vals[1].size != 1:
        return None
    if (axes and vals[2] is None) or (steps and (vals[3] is None or int(vals[3].reshape(-1)[0])
                                                 != 1)):
        return None
    axis = int(vals[2].reshape(-1)[0]) % rank if axes else 0
    dim = view.value(data).shape[axis]
    if not isinstance(dim, int):
        return None
    start, end = int(vals[0].reshape(-1)[0]), int(vals[1].reshape(-1)[0])
    start, end = (s + dim if s < 0 else s for s in (start, end))
    return data, max(0, min(start, dim)), max(0, min(end, dim)), axis


class SwiGluFusionPass(RewritePass):
    batch = True            # one rewrite per layer: every disjoint match of a scan
    name = "SwiGluFusionPass"
    group = GRAPH_FUSION
    patterns = ("SwiGluFusion",)

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((MUL,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != MUL:
            return None
        for k in (0, 1):
            inner = view.producer(node.inputs[k], (MUL,))
            if inner is None:
                continue
            for j in (0, 1):
                sig = view.producer(inner.inputs[j], (SIGMOID,))
                if sig is None or sig.inputs[0] != inner.inputs[1 - j]:
                    continue
                a_node = view.producer(sig.inputs[0], (SLICE,))
                b_node = view.producer(node.inputs[1 - k], (SLICE,))
                a, b = slice_range(view, a_node), slice_range(view, b_node)
                if a is None or b is None:
                    continue
                return Match(node, [a_node, b_node, sig, inner, node],
                             {"a": a, "b": b, "x": a[0], "sig": sig, "inner": inner})
        return None

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        (xa, a0, a1, ax), (xb, b0, b1, bx) = m["a"], m["b"]
        x = view.value(m["x"])
        n = x.shape[-1]
        d = require(xa == xb and ax == bx == x.rank - 1 and (a0, a1, b0, b1) ==
                    (0, n // 2, n // 2, n) and n % 2 == 0,
                    f"slices [{a0}:{a1}] and [{b0}:{b1}] are not the two halves of the last "
                    f"axis of one tensor")
        a_out = m.nodes[0].outputs[0]
        return d.and_(lambda: require(
            view.uses(a_out) == 2 and view.uses(m.nodes[1].outputs[0]) == 1 and
            view.uses(m["sig"].outputs[0]) == 1 and view.uses(m["inner"].outputs[0]) == 1,
            "an intermediate of the SwiGLU chain has other uses"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        replace_nodes(graph, m.nodes, SWIGLU, [m["x"]], {"dim": -1}, m.anchor.name,
                      m.anchor.outputs)


__all__ = ["SwiGluFusionPass", "slice_range"]
