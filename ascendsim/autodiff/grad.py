"""Reverse-mode autodiff as a graph transform: `grad(graph, loss, wrt)` returns a new Graph that
also computes the gradient of a scalar `loss` for each value in `wrt`, as outputs named
`<name>_grad`.

Note on the algorithm. The nodes that matter are those on a path from some `wrt` value to the
loss. They are visited in reverse topological order; each one's rule (`OpDef.grad`, beside the
op's shape inference in ir/ops/) receives its outputs' cotangents and appends the ops that
make its inputs' cotangents to the same graph. A value read by several nodes sums its
cotangents (Add). The loss's cotangent is seeded with ones. Nothing is simplified here: the
graph passes (constant folding, CSE, fusion) see the backward ops like any others.

Parameters (`wrt=None`): the graph's floating-point constants that feed computation, except
- 0-d and one-element constants (epsilons, scales such as GELU's 0.5 or attention's 1/sqrt(d):
  hyper-parameters, not weights);
- inputs an op declares untrainable (`OpDef.untrainable_inputs`): BatchNorm's running mean
  and variance are state, updated by a training step, not by gradients;
- the graph's `buffers`: fixed tables a model builder marks (`Graph.const(..., buffer=True)`:
  the decoder's rotary cos/sin tables and causal mask);
- constants only read by integer/shape/index paths (they are not floats, or no gradient
  reaches them).
Constant fills made by a node (ONNX ConstantOfShape with a constant shape, which the "light"
ONNX models use in place of initializers) count as constants: `fold_initializers` turns them
into lazy constants first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..errors import GraphError, UnsupportedOpError
from ..ir.graph import Graph, Node
from ..ir.registry import get_op
from ..ir.tensor import LazyTensor, Value
from ..ir.vjp import VJP

FLOAT_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16"})
#: ops that make an initializer-like constant from constant inputs (a fill, not computation)
INITIALIZER_OPS = frozenset({"ConstantOfShape"})
GRAD_SUFFIX = "_grad"


def _name(v: Value | str) -> str:
    return v if isinstance(v, str) else v.name


def fold_initializers(graph: Graph) -> Graph:
    """A copy of `graph` where each INITIALIZER_OPS node with constant inputs is a lazy
    constant of the same name (so it can be a parameter)."""
    g = graph.copy()
    keep: list[Node] = []
    for n in g.nodes:
        if n.op_type in INITIALIZER_OPS and all(i == "" or g.is_const(i) for i in n.inputs):
            args = [g.const_value(i) if i else None for i in n.inputs]
            kernel, attrs = get_op(n.op_type, n.name).kernel, dict(n.attrs)
            out = g.values[n.outputs[0]]

            def make(kernel=kernel, args=args, attrs=attrs) -> np.ndarray:
                return np.asarray(kernel(args, attrs)[0])
            g.constants[out.name] = LazyTensor(tuple(out.shape), out.dtype, make,
                                               f"{n.op_type} '{n.name}'")
        else:
            keep.append(n)
    g.nodes = keep
    return g


def _consumers(g: Graph) -> dict[str, list[tuple[Node, int]]]:
    uses: dict[str, list[tuple[Node, int]]] = {}
    for n in g.nodes:
        for k, i in enumerate(n.inputs):
            if i:
                uses.setdefault(i, []).append((n, k))
    return uses


def parameters(graph: Graph) -> list[str]:
    """The graph's trainable parameters, in first-use order (see the module doc)."""
    uses = _consumers(graph)
    out: list[str] = []
    for name in dict.fromkeys(i for n in graph.nodes for i in n.inputs if i):
        if name not in graph.constants or name in graph.buffers:
            continue
        v = graph.values[name]
        if v.dtype not in FLOAT_DTYPES or v.rank == 0 or v.numel <= 1:
            continue
        trainable = [(n, k) for n, k in uses.get(name, ())
                     if k not in get_op(n.op_type, n.name).untrainable_inputs]
        if trainable:
            out.append(name)
    return out


def _on_path(g: Graph, sources: Iterable[str], loss: str) -> tuple[set[str], list[Node]]:
    """Values on some path from `sources` to `loss`, and the nodes between them (in order)."""
    ancestors = g.ancestors([loss])
    reach = {s for s in sources if s in ancestors}
    nodes: list[Node] = []
    for n in g.nodes:
        if any(i in reach for i in n.inputs if i) and any(o in ancestors for o in n.outputs):
            nodes.append(n)
            reach.update(o for o in n.outputs if o in ancestors)
    return reach, nodes


def backward(g: Graph, loss: str, wrt: Sequence[str], seed: Value | None = None
             ) -> dict[str, Value]:
    """Append to `g` (in place) the ops computing d loss / d w for each w in `wrt`; return
    the cotangent Value per name (zeros for a w the loss does not depend on). `seed` is the
    loss's cotangent (ones by default; a training step's loss scale)."""
    lv = g.value(loss)
    if lv.dtype not in FLOAT_DTYPES or lv.numel != 1:
        raise GraphError(f"loss '{loss}' must be a one-element float value, has shape "
                         f"{lv.shape} and dtype {lv.dtype}")
    for w in wrt:
        if g.value(w).dtype not in FLOAT_DTYPES:
            raise GraphError(f"cannot differentiate with respect to '{w}': dtype "
                             f"{g.values[w].dtype} is not floating-point")
    reach, nodes = _on_path(g, wrt, loss)
    if seed is None:
        seed = g.const(np.ones(lv.shape, dtype=lv.dtype), name=g.fresh_value_name(
            f"{loss}{GRAD_SUFFIX}_seed"))
    cot: dict[str, Value] = {loss: seed}
    forward = g.producers()
    small: dict = {}
    for node in reversed(nodes):
        douts = [cot.get(o) for o in node.outputs]
        if all(d is None for d in douts):
            continue
        opdef = get_op(node.op_type, node.name)
        if opdef.grad is None:
            raise UnsupportedOpError(node.op_type, node.name,
                                     detail="no gradient rule (OpDef.grad) for this op")
        ins = [g.values[i] if i else None for i in node.inputs]
        wanted = [bool(i) and i in reach for i in node.inputs]
        ctx = VJP(g, node, ins, [g.values[o] for o in node.outputs], wanted, forward, small)
        dins = opdef.grad(ctx, douts)
        for name, d, want in zip(node.inputs, dins, wanted):
            if d is None or not want:
                continue
            _check_cotangent(node, g.values[name], d)
            old = cot.get(name)
            cot[name] = d if old is None else g.add(old, d)
    out: dict[str, Value] = {}
    for w in wrt:
        v = g.values[w]
        out[w] = cot.get(w) or g.const(LazyTensor.full(tuple(v.shape), v.dtype, 0.0))
    return out


def _check_cotangent(node: Node, value: Value, d: Value) -> None:
    if tuple(d.shape) != tuple(value.shape) or d.dtype != value.dtype:
        raise GraphError(f"gradient rule of {node.op_type} '{node.name}' gave '{d.name}' "
                         f"{d.shape} {d.dtype} for input '{value.name}' {value.shape} "
                         f"{value.dtype}")


def grad(graph: Graph, loss: Value | str, wrt: Sequence[Value | str] | None = None) -> Graph:
    """A new Graph computing `graph`'s outputs and, for each value in `wrt` (default: the
    graph's parameters, see `parameters`), the gradient of the scalar `loss` as an output
    named `<name>_grad`. The input graph is not modified.

    Raises UnsupportedOpError naming the op (and "no gradient rule") for an op on the path
    from `wrt` to `loss` that has no rule; GraphError for a non-scalar or non-float loss."""
    g = fold_initializers(graph)
    loss_name = _name(loss)
    g.value(loss_name)
    names = parameters(g) if wrt is None else [_name(w) for w in wrt]
    grads = backward(g, loss_name, names)
    for w, d in grads.items():
        g.add_node("Identity", [d], name=f"{w}{GRAD_SUFFIX}", outputs=[f"{w}{GRAD_SUFFIX}"])
        g.output(f"{w}{GRAD_SUFFIX}")
    return g


__all__ = ["grad", "backward", "parameters", "fold_initializers", "GRAD_SUFFIX"]
