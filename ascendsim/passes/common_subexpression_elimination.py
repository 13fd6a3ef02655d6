"""CommonSubexpressionEliminationPass (GE): merge nodes that compute the same thing.

Two nodes are the same expression when they have the same op type, the same inputs (in any
order for a commutative op) and equal attributes; the later one is removed and its readers
read the earlier one's outputs. Excluded (graph-optimizers.md §5.10): random ops, control flow
and fused nodes (their bodies are not compared). A duplicate whose output is a graph output is
refused, so output names never change (ORT #4110).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.registry import get_op
from .base import GE, Pass, PassContext, PassResult
from .rewrite import remove_nodes


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, Graph):
        return ("graph", id(v))
    return v


def _key(node: Node) -> tuple | None:
    if not get_op(node.op_type, node.name).deterministic or node.subgraph is not None:
        return None
    if any(isinstance(v, Graph) for v in node.attrs.values()):
        return None
    ins = node.inputs
    if get_op(node.op_type, node.name).commutative:
        ins = tuple(sorted(ins))
    try:
        attrs = _freeze(node.attrs)
        hash(attrs)
    except TypeError:
        return None
    return (node.op_type, ins, attrs, len(node.outputs))


class CommonSubexpressionEliminationPass(Pass):
    name = "CommonSubexpressionEliminationPass"
    group = GE
    patterns = ("CommonSubexpression",)

    def __init__(self) -> None:
        #: node -> its `_key` (a pure function of the immutable node): the stage's next
        #: round re-reads the nodes no pass replaced without freezing their attributes again
        self._keys: dict[Node, tuple | None] = {}

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        keys = self._keys
        seen: dict[tuple, Node] = {}
        dup: list[Node] = []
        outputs = set(graph.outputs)
        # value -> the value read instead (a duplicate's output -> the kept node's); applied
        # to each node as the scan reaches it, which is what `Graph.replace_uses` per merge
        # did (readers come after the duplicate; a kept node's outputs are never renamed)
        renamed: dict[str, str] = {}
        nodes = graph.nodes
        for idx in range(len(nodes)):
            node = nodes[idx]
            if renamed and not renamed.keys().isdisjoint(node.inputs):
                node = nodes[idx] = Node(node.name, node.op_type,
                                         tuple(renamed.get(i, i) for i in node.inputs),
                                         node.outputs, node.attrs, node.subgraph)
            try:
                key = keys[node]
            except KeyError:
                key = keys[node] = _key(node)
            if key is None:
                continue
            first = seen.get(key)
            if first is None:
                seen[key] = node
                continue
            res.matched("CommonSubexpression")
            clash = [o for o in node.outputs if o in outputs]
            if clash:
                res.refuse("CommonSubexpression", node.name,
                           f"output '{clash[0]}' is a graph output; merging would rename it")
                continue
            for old, new in zip(node.outputs, first.outputs):
                if old:
                    renamed[old] = new
            dup.append(node)
            res.effected("CommonSubexpression")
        if dup:
            remove_nodes(graph, dup)
        return res
