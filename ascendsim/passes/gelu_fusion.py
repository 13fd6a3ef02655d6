"""GeluFusionPass (GraphFusion): PyTorch's exported GELU decompositions -> Gelu.

Two patterns, anchored at their transcendental op:

- erf form (`approximate="none"`): ``x * 0.5 * (1 + Erf(x / sqrt(2)))`` (also ``x * 0.7071..``)
- tanh form (`approximate="tanh"`):
  ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` (x^3 as Pow(x, 3))

The tail ``x * 0.5 * (1 + f)`` is accepted in the three association orders exporters emit:
``Mul(Mul(x, c), 0.5)``, ``Mul(Mul(x, 0.5), c)`` and ``Mul(x, Mul(c, 0.5))``. Constants are
compared within their dtype's precision (1e-4 relative; fp16 2e-3, since fp16 stores sqrt(2)
as 1.414). Refused: an intermediate with another use.
"""

from __future__ import annotations

import math

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, other_input, replace_nodes

ERF, TANH, ADD, MUL, DIV, POW, GELU = "Erf", "Tanh", "Add", "Mul", "Div", "Pow", "Gelu"
SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_COEF = 0.044715
#: relative tolerance of a pattern constant, by its dtype (fp16 stores sqrt(2) as 1.414)
RTOL = {"float16": 2e-3, "bfloat16": 1e-2}
RTOL_DEFAULT = 1e-4


def _const_close(view: GraphView, name: str, want: float) -> bool:
    """Whether `name` is a one-element constant equal to `want` within its dtype's precision."""
    v = view.scalar(name)
    if v is None:
        return False
    rtol = RTOL.get(view.value(name).dtype, RTOL_DEFAULT)
    return abs(v - want) <= rtol * abs(want)


def _scaled(view: GraphView, value: str, mul: float) -> tuple[Node, str] | None:
    """(node, x) when `value` is x * mul (or x / (1/mul)) with a scalar constant."""
    n = view.producer(value, (MUL, DIV))
    if n is None:
        return None
    if n.op_type == MUL:
        for k in (0, 1):
            if _const_close(view, n.inputs[1 - k], mul):
                return n, n.inputs[k]
        return None
    return (n, n.inputs[0]) if _const_close(view, n.inputs[1], 1.0 / mul) else None


def _user(view: GraphView, value: str, op: str) -> Node | None:
    """The first reader of `value` of type `op` (other readers are refused by `check`)."""
    return next((u for u in view.users(value) if u.op_type == op), None)


def _tail(view: GraphView, f_out: str, x: str) -> tuple[list[Node], str] | None:
    """Match ``x * 0.5 * (1 + f)`` from f's output; return (nodes, output value)."""
    add = _user(view, f_out, ADD)
    if add is None or not _const_close(view, other_input(add, f_out), 1.0):
        return None
    c = add.outputs[0]
    m1 = _user(view, c, MUL)
    if m1 is None:
        return None
    o = other_input(m1, c)
    if o == x:                                             # Mul(Mul(x, c), 0.5)
        m2 = _user(view, m1.outputs[0], MUL)
        if m2 is not None and _const_close(view, other_input(m2, m1.outputs[0]), 0.5):
            return [add, m1, m2], m2.outputs[0]
        return None
    half = view.producer(o, (MUL,))                         # Mul(Mul(x, 0.5), c)
    if half is not None and x in half.inputs and _const_close(view, other_input(half, x), 0.5):
        return [add, half, m1], m1.outputs[0]
    if _const_close(view, o, 0.5):                          # Mul(x, Mul(c, 0.5))
        m2 = _user(view, m1.outputs[0], MUL)
        if m2 is not None and other_input(m2, m1.outputs[0]) == x:
            return [add, m1, m2], m2.outputs[0]
    return None


class GeluFusionPass(RewritePass):
    name = "GeluFusionPass"
    group = GRAPH_FUSION
    patterns = ("GeluErfFusion", "GeluTanhFusion")

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((ERF, TANH))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type == ERF:
            sc = _scaled(view, node.inputs[0], 1.0 / SQRT2)
            if sc is None:
                return None
            head, x = [sc[0], node], sc[1]
            approx, pattern = "none", "GeluErfFusion"
        elif node.op_type == TANH:
            sc = _scaled(view, node.inputs[0], SQRT_2_OVER_PI)
            if sc is None:
                return None
            inner = view.producer(sc[1], (ADD,))
            if inner is None:
                return None
            found = None
            for k in (0, 1):
                cube = _scaled(view, inner.inputs[1 - k], TANH_COEF)
                if cube is None:
                    continue
                p = view.producer(cube[1], (POW,))
                if p is not None and p.inputs[0] == inner.inputs[k] and \
                        _const_close(view, p.inputs[1], 3.0):
                    found = (p, cube[0], inner.inputs[k])
            if found is None:
                return None
            head, x = [found[0], found[1], inner, sc[0], node], found[2]
            approx, pattern = "tanh", "GeluTanhFusion"
        else:
            return None
        tail = _tail(view, node.outputs[0], x)
        if tail is None:
            return None
        return Match(node, head + tail[0], {"x": x, "out": tail[1], "approx": approx,
                                            "pattern": pattern})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        inside = {n.name for n in m.nodes}
        for n in m.nodes:
            for o in n.outputs:
                if o == m["out"]:
                    continue
                users = view.users(o)
                if o in view.outputs or any(u.name not in inside for u in users):
                    return require(False, f"intermediate '{o}' of the GELU chain has other uses")
        return require(True, "")

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        replace_nodes(graph, m.nodes, GELU, [m["x"]], {"approximate": m["approx"]},
                      m.anchor.name, [m["out"]])
