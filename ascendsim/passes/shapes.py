"""Shape inference as the passes see it: the registry's, plus Loop carried shapes to a fixpoint.

The registry infers a Loop's carried outputs as its carried inputs (one look at the body). A
body may change a carried shape from one iteration to the next (a growing Concat), so here the
body is re-inferred with the carried shapes it produced until they stop changing; a dim that
differs between iterations is widened to a symbolic dim named after the node, value and axis,
so the iteration terminates (graph-optimizers.md §5.11). `reinfer` and the verifier both use
`infer_node`, so the shapes a pass records and the shapes the verifier expects agree.
"""

from __future__ import annotations

from ..errors import AscendSimError, GraphError
from ..ir.graph import Graph, Node
from ..ir.registry import get_op
from ..ir.tensor import Value, dtype_name

MAX_LOOP_ROUNDS = 8


def is_loop(node: Node) -> bool:
    """A loop node, whose carried shapes are inferred by iterating its body to a fixpoint."""
    flow = get_op(node.op_type, node.name).control
    return flow is not None and flow.is_loop


def _registry_infer(graph: Graph, node: Node) -> list[tuple[tuple, str]]:
    opdef = get_op(node.op_type, node.name)
    ins = [graph.values[i] if i else None for i in node.inputs]
    consts = [graph.const_value(n) if (k in opdef.const_inputs and n) else None
              for k, n in enumerate(node.inputs)]
    try:
        specs = opdef.infer(ins, node.attrs, consts)
    except AscendSimError as exc:
        msg = str(exc)
        raise GraphError(msg if f"'{node.name}'" in msg else
                         f"node '{node.name}' ({node.op_type}): {msg}") from None
    except (ValueError, IndexError, TypeError, KeyError) as exc:
        raise GraphError(f"node '{node.name}' ({node.op_type}): shape inference failed: "
                         f"{exc}") from None
    return [(tuple(s), dtype_name(d)) for s, d in specs]


def _widen(name: str, shapes: list[tuple], outs: list[tuple]) -> list[tuple]:
    """Carried shapes after one more iteration: a dim that changed becomes symbolic."""
    widened = []
    for k, (s, o) in enumerate(zip(shapes, outs)):
        if len(s) != len(o):
            raise GraphError(f"Loop '{name}': carried value {k} changes rank from {len(s)} "
                             f"to {len(o)} inside the body")
        widened.append(tuple(a if a == b else f"{name}_v{k}_d{j}"
                             for j, (a, b) in enumerate(zip(s, o))))
    return widened


def loop_fixpoint(graph: Graph, node: Node) -> list[tuple[tuple, str]]:
    """Carried and scan output shapes of a loop node, iterating its body to a fixpoint."""
    flow = get_op(node.op_type, node.name).control
    first, (body_attr,) = flow.first_carried, flow.bodies
    specs = _registry_infer(graph, node)
    body: Graph = node.attrs[body_attr]
    n_cap = int(node.attrs.get(flow.captured_attr, 0))
    carried_in = list(node.inputs[first:len(node.inputs) - n_cap])
    captured = list(node.inputs[len(node.inputs) - n_cap:]) if n_cap else []
    n = len(carried_in)
    shapes = [tuple(graph.values[i].shape) for i in carried_in]
    body_in = list(body.inputs)
    for _ in range(MAX_LOOP_ROUNDS):
        b = body.copy()
        for name, s in zip(body_in[first:first + n], shapes):
            old = b.values[name]
            b.values[name] = Value(name, s, old.dtype, old.layout)
        for name, outer in zip(body_in[first + n:], captured):
            old = b.values[name]
            b.values[name] = Value(name, graph.values[outer].shape, old.dtype, old.layout)
        reinfer(b)
        outs = [tuple(b.values[o].shape) for o in b.outputs[1:1 + n]]
        widened = _widen(node.name, shapes, outs)
        if widened == shapes:
            scans = [tuple(b.values[o].shape) for o in b.outputs[1 + n:]]
            result = [(s, d) for s, (_, d) in zip(shapes, specs[:n])]
            for (reg_shape, d), sc in zip(specs[n:], scans):
                result.append(((reg_shape[0],) + sc, d))
            return result
        shapes = widened
    raise GraphError(f"Loop '{node.name}': carried shapes did not reach a fixpoint in "
                     f"{MAX_LOOP_ROUNDS} rounds")


def accepts(graph: Graph, node: Node, recorded: list[tuple[tuple, str]],
            inferred: list[tuple[tuple, str]] | None = None) -> bool:
    """Whether recorded output specs are a valid inference: equal to `infer_node` (pass it as
    `inferred` when already computed), or (for a loop, before LoopShapeInferencePass ran) the
    registry's single look at the body."""
    if recorded == (inferred if inferred is not None else infer_node(graph, node)):
        return True
    return is_loop(node) and recorded == _registry_infer(graph, node)


def infer_node(graph: Graph, node: Node) -> list[tuple[tuple, str]]:
    """The (shape, dtype) of each output of `node` as the passes infer it."""
    if is_loop(node):
        return loop_fixpoint(graph, node)
    return _registry_infer(graph, node)


def _same_spec(value: Value, shape: tuple, dtype: str) -> bool:
    """`value` already records exactly this shape (dims of the same types) and dtype."""
    return (value.dtype == dtype and value.shape == shape
            and all(type(a) is type(b) for a, b in zip(value.shape, shape)))


def reinfer(graph: Graph, changed: set[str] | None = None) -> None:
    """Re-infer every node's outputs in order (fused nodes keep their subgraph's shapes). A
    value whose spec does not change keeps its Value object (the verifier then knows it
    unchanged).

    `changed`: the names whose Value or constness changed since the graph was consistent
    (every node's outputs as `infer_node` gives them, as the verifier checks); then only the
    nodes reading one of them, or a value this re-inference replaced, are re-inferred (a
    node's inference reads only its inputs' Values and constants, so the others would keep
    their Values). A pass that folded a few nodes of a large graph re-infers their readers,
    not the graph."""
    dirty = None if changed is None else set(changed)
    for node in graph.nodes:
        if node.subgraph is not None:
            continue
        if dirty is not None and dirty.isdisjoint(node.inputs):
            continue
        for o, (s, d) in zip(node.outputs, infer_node(graph, node)):
            if o:
                old = graph.values[o]
                if not (type(old.shape) is tuple and _same_spec(old, s, d)):
                    graph.values[o] = Value(o, s, d, old.layout)
                    if dirty is not None:
                        dirty.add(o)
