"""CondRemovePass (GE): an `If` whose condition is a constant is replaced by its live branch.

The chosen branch (a closed graph: its inputs are the If's captured inputs, in order) is
inlined: its constants and nodes are copied into the parent under fresh names prefixed with
the If's name, its inputs are wired to the captured values and its outputs take the If's
output names (an Identity is added when a branch returns one of its inputs or constants
directly). Shapes are re-inferred afterwards, since the If's merged output shape ("a|b") is
now the branch's own. The dead condition chain is left to PrunePass; a condition that only
becomes constant after folding is caught in the next GE round.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.registry import get_op
from ..ir.tensor import Value
from .base import GE, Pass, PassContext, PassResult
from .rewrite import GraphView
from .shapes import reinfer


def inline_graph(graph: Graph, body: Graph, inputs: list[str], outputs: list[str],
                 prefix: str) -> None:
    """Copy closed graph `body` into `graph`: body inputs read `inputs`, outputs write `outputs`."""
    mapping = dict(zip(body.inputs, inputs))
    for c, data in body.constants.items():
        new = graph.fresh_value_name(f"{prefix}/{c}")
        v = body.values[c]
        graph.values[new] = Value(new, v.shape, v.dtype, v.layout)
        graph.constants[new] = data
        mapping[c] = new
    direct: dict[str, str] = {}
    passthrough: list[tuple[str, str]] = []
    for bo, oo in zip(body.outputs, outputs):
        if bo in mapping or bo in direct:
            passthrough.append((bo, oo))
        else:
            direct[bo] = oo
    taken = {n.name for n in graph.nodes}
    for n in body.nodes:
        outs = []
        for o in n.outputs:
            if not o:
                outs.append("")
                continue
            name = direct.get(o) or graph.fresh_value_name(f"{prefix}/{o}")
            v = body.values[o]
            graph.values[name] = Value(name, v.shape, v.dtype, v.layout)
            mapping[o] = name
            outs.append(name)
        nname = f"{prefix}/{n.name}"
        while nname in taken:
            nname = graph.fresh_node_name(nname)
        taken.add(nname)
        graph.nodes.append(Node(nname, n.op_type, tuple(mapping[i] if i else "" for i in n.inputs),
                                tuple(outs), dict(n.attrs), n.subgraph))
    for bo, oo in passthrough:
        graph.add_node("Identity", [mapping[bo]], name=graph.fresh_node_name(f"{prefix}/out"),
                       outputs=[oo])


class CondRemovePass(Pass):
    name = "CondRemovePass"
    group = GE
    patterns = ("CondRemove",)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        for node in list(graph.nodes):
            flow = get_op(node.op_type, node.name).control
            if flow is None or flow.condition is None:
                continue
            idx, (when_true, when_false) = flow.condition, flow.bodies
            cond = GraphView(graph).const(node.inputs[idx])
            if cond is None:
                continue
            res.matched("CondRemove")
            if np.asarray(cond).size != 1:
                res.refuse("CondRemove", node.name, f"condition has {np.asarray(cond).size} "
                                                    f"elements, expected 1")
                continue
            take = bool(np.asarray(cond).reshape(-1)[0])
            branch: Graph = node.attrs[when_true if take else when_false]
            graph.nodes = [n for n in graph.nodes if n.name != node.name]
            for o in node.outputs:
                graph.values.pop(o, None)
            captured = [i for k, i in enumerate(node.inputs) if k != idx]
            inline_graph(graph, branch, captured, list(node.outputs), node.name)
            graph.toposort()
            reinfer(graph)
            res.effected("CondRemove")
            res.note(f"'{node.name}': condition is constant {take}; inlined "
                     f"{when_true if take else when_false} ({len(branch.nodes)} nodes)")
        return res
