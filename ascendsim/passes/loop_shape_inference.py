"""LoopShapeInferencePass (GE): Loop output shapes inferred by iterating the body to a fixpoint.

For each Loop, the body is re-inferred with the carried shapes it produced until they are
stable (`shapes.loop_fixpoint`): a carried dim that changes across iterations becomes a
symbolic dim instead of the first iteration's value, and the Loop's outputs, then everything
downstream, are re-inferred. matched = loops analysed; effected = loops whose recorded output
shapes changed; their body's carried inputs are widened the same way, so the body
accepts every iteration's values. (GE does the same with its re-pass of a node after its subgraphs.)
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.registry import get_op
from ..ir.tensor import Value
from .base import GE, Pass, PassContext, PassResult
from .shapes import infer_node, is_loop, reinfer


class LoopShapeInferencePass(Pass):
    name = "LoopShapeInferencePass"
    group = GE
    patterns = ("LoopShapeFixpoint",)

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        changed = False
        for idx, node in enumerate(list(graph.nodes)):
            if not is_loop(node):
                continue
            if node.name not in self._seen:     # re-runs in the GE fixpoint count once
                self._seen.add(node.name)
                res.matched("LoopShapeFixpoint")
            specs = infer_node(graph, node)
            recorded = [(tuple(graph.values[o].shape), graph.values[o].dtype)
                        for o in node.outputs if o]
            if specs != recorded:
                graph.nodes[idx] = self._widen_body(graph, node, specs)
                res.effected("LoopShapeFixpoint")
                res.note(f"'{node.name}': carried/scan shapes {recorded} -> {specs}")
                changed = True
        if changed:
            reinfer(graph)
        return res

    @staticmethod
    def _widen_body(graph: Graph, node: Node, specs: list) -> Node:
        """The loop node with a body whose carried inputs take the fixpoint shapes, so the
        body accepts every iteration's values."""
        flow = get_op(node.op_type, node.name).control
        first, (body_attr,) = flow.first_carried, flow.bodies
        body: Graph = node.attrs[body_attr].copy()
        n = len(node.inputs) - first - int(node.attrs.get(flow.captured_attr, 0))
        for name, (shape, _) in zip(body.inputs[first:first + n], specs[:n]):
            old = body.values[name]
            body.values[name] = Value(name, shape, old.dtype, old.layout)
        reinfer(body)
        return Node(node.name, node.op_type, node.inputs, node.outputs,
                    {**node.attrs, body_attr: body}, node.subgraph)
