"""Graph reading and editing helpers shared by the passes.

`GraphView` is the analysis side (producers, consumers, constness, external uses), built once
per rewrite round; the edit helpers are the mutation side. A rewrite keeps the names of the
values it replaces, so graph outputs and downstream readers never need re-wiring.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.registry import get_op, ops_where
from ..ir.tensor import LazyTensor, Value, is_static


@functools.cache
def forward_conv_ops() -> frozenset[str]:
    """Op types of forward convolutions: the registry's `conv` flag, not `transposed`, not a
    weight gradient (`conv_view`)."""
    return ops_where(lambda d: d.conv and not d.transposed and d.conv_view is None)


class GraphView:
    """Read-only indexes of a graph: who makes and who reads each value."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.outputs = set(graph.outputs)

    # built on first use: most anchors of a scan are rejected by op type before any lookup
    @functools.cached_property
    def producers(self) -> dict[str, Node]:
        return self.graph.producers()

    @functools.cached_property
    def consumers(self) -> dict[str, list[Node]]:
        return self.graph.consumers()

    def producer(self, value: str, op_types: Iterable[str] | None = None) -> Node | None:
        """The node making `value`, if any (and if its op type is one of `op_types`)."""
        node = self.producers.get(value)
        if node is None or (op_types is not None and node.op_type not in set(op_types)):
            return None
        return node

    def users(self, value: str) -> list[Node]:
        return self.consumers.get(value, [])

    def uses(self, value: str) -> int:
        """How many times `value` is read: by node inputs (each slot) and as a graph output."""
        n = sum(node.inputs.count(value) for node in self.users(value))
        return n + (1 if value in self.outputs else 0)

    def only_user(self, value: str) -> Node | None:
        """The single node reading `value` when nothing else (not a graph output) reads it."""
        users = self.users(value)
        if len(users) != 1 or value in self.outputs or users[0].inputs.count(value) != 1:
            return None
        return users[0]

    def is_const(self, value: str) -> bool:
        return bool(value) and value in self.graph.constants

    def const(self, value: str) -> np.ndarray | None:
        """The constant's data (materialised), or None when `value` is not a constant."""
        return self.graph.const_value(value) if self.is_const(value) else None

    def scalar(self, value: str) -> float | None:
        """The value of a constant with one element, else None."""
        if not self.is_const(value):
            return None
        v = self.graph.values[value]
        if not is_static(v.shape) or int(np.prod(v.shape)) != 1:
            return None
        return float(np.asarray(self.graph.const_value(value)).reshape(()))

    def value(self, name: str) -> Value:
        return self.graph.values[name]


def other_input(node: Node, value: str) -> str:
    """The input of a two-input node that is not `value`."""
    a, b = node.inputs[0], node.inputs[1]
    return b if a == value else a


def replace_nodes(graph: Graph, remove: Sequence[Node], op_type: str, inputs: Sequence[Any],
                  attrs: dict | None, name: str, outputs: Sequence[str],
                  subgraph: Graph | None = None) -> Node:
    """Remove `remove`, add one `op_type` node named `name` writing `outputs` (names kept);
    `graph.fused_names[name]` records the removed nodes' names (the model's names survive)."""
    members = list(dict.fromkeys(n.name for n in remove))
    if members and members != [name]:
        # a removed node of the same name: its own members (or itself) come first
        own = list(graph.fused_names.get(name, (name,))) if name in members else []
        expanded = own + [m for m in members if m != name]
        graph.fused_names[name] = tuple(dict.fromkeys(expanded))
    try:                                  # the removed node that came last (by identity)
        last_node: Node | None = max(remove, key=graph.nodes.index)
    except ValueError:                    # stale objects: only a walk of the graph can tell
        last_node = None
    where = graph.discard_nodes(remove)
    pos = where[-1] - (len(where) - 1)    # where the last removed node was, once they are gone
    for n in remove:
        for o in n.outputs:
            graph.values.pop(o, None)
    graph.add_node(op_type, list(inputs), attrs, name=name, outputs=list(outputs),
                   subgraph=subgraph, at=pos)
    node = graph.nodes[pos]
    if not _stays_in_order(graph, remove, last_node, node) and not in_order(graph):
        graph.toposort()                  # helper nodes appended by the caller: re-sort
    _drop_dead_constants_of(graph, remove, node)
    return node


def _stays_in_order(graph: Graph, remove: Sequence[Node], last: Node | None,
                    node: Node) -> bool:
    """Whether the graph, in order before the rewrite, is in order with `node` at the last
    removed node's place, decided from the rewrite alone (no walk of the graph): every input
    of `node` was read by a removed node (so it is defined before the place) or is a graph
    input or constant, and every output of `node` was written by the last removed node (so
    its readers come after the place). False means "unknown": the caller walks the graph."""
    if last is None:
        return False
    read = {i for n in remove for i in n.inputs}
    if any(i and i not in read and i not in graph.constants and i not in graph.inputs
           for i in node.inputs):
        return False
    return set(o for o in node.outputs if o) <= set(last.outputs)


def _drop_dead_constants_of(graph: Graph, remove: Sequence[Node], node: Node) -> None:
    """`drop_dead_constants` after a rewrite: only constants a removed node read can have
    become dead, so the graph is walked only when one of them is not read by the new node."""
    suspects = {i for n in remove for i in n.inputs if i in graph.constants}
    suspects -= set(node.inputs)
    if suspects:
        drop_dead_constants(graph)


def in_order(graph: Graph) -> bool:
    """Whether every node reads only values defined before it (the executor's requirement)."""
    defined = set(graph.inputs) | set(graph.constants)
    for n in graph.nodes:
        for i in n.inputs:
            if i and i not in defined:
                return False
        defined.update(n.outputs)
    return True


def remove_nodes(graph: Graph, remove: Iterable[Node]) -> None:
    """Drop nodes and the values they wrote (callers re-wire readers first)."""
    remove = list(remove)
    gone = {n.name for n in remove}
    graph.nodes = [n for n in graph.nodes if n.name not in gone]
    for n in remove:
        for o in n.outputs:
            if o not in graph.outputs:
                graph.values.pop(o, None)


def add_node(graph: Graph, op_type: str, inputs: Sequence[Any], attrs: dict | None = None,
             base: str | None = None, outputs: Sequence[str] | None = None) -> list[Value]:
    """Append a new node with a fresh name (call `graph.toposort()` after the edit)."""
    name = graph.fresh_node_name(base or op_type)
    return graph.add_node(op_type, list(inputs), attrs, name=name,
                          outputs=list(outputs) if outputs is not None else None)


def add_const(graph: Graph, data: np.ndarray | LazyTensor, base: str,
              dtype: str | None = None) -> Value:
    """A new constant named after `base`; `dtype` (a dtype name) converts the data, e.g. to
    bfloat16, whose arrays are float32 (kernels/bf16.py)."""
    return graph.const(data, name=graph.fresh_value_name(base), dtype=dtype)


def drop_dead_constants(graph: Graph) -> int:
    """Remove constants nothing reads (after a rewrite replaced their reader); return count."""
    read = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    dead = [c for c in graph.constants if c not in read]
    for c in dead:
        del graph.constants[c]
        graph.values.pop(c, None)
    return len(dead)


def category(node: Node) -> Any:
    return get_op(node.op_type, node.name).category


__all__ = ["GraphView", "other_input", "replace_nodes", "remove_nodes", "add_node", "add_const",
           "drop_dead_constants", "category"]
