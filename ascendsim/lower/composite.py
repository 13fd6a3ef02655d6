"""Lowering of fused nodes (op type FusedOp, `node.subgraph`): UB/GraphKernel fusion and L2 chains.

Note on the model
-----------------
With fusion "UB" or "GraphKernel" a fused node is ONE task: its intermediates stay in UB, it
reads only its external inputs from GM and writes only its outputs; its vector work is the
sum of its parts (vector.py); a cube op at its head keeps its cube tiling and the rest runs
on V per output tile (cube.py, `lower_cube_head`). With fusion "L2" the inner ops stay
separate tasks (each lowered by the dispatcher's table) whose intermediates
(`attrs["l2_values"]`) are kept in L2; with `attrs["batch_split"] = k` the chain is lowered k
times on `chunk_batch` samples (tasks named `<op>#<chunk>`, each chunk converting its own
slice of the chain's inputs).
"""

from __future__ import annotations

from typing import Any

from ..ir.graph import Node, rebound_subgraph
from ..ir.registry import Category, Unit, get_op, weight_inputs
from ..ir.tensor import Value
from .context import UNSET, Lowering
from .cube import lower_cube_head
from .vector import lower_vector

FUSION_L2 = "L2"


def lower_fused(low: Lowering, node: Node) -> None:
    """A fused node: an L2 chain (`lower_l2_chain`) or one task doing the work of its
    members (a cube head with its epilogue, or a vector sequence)."""
    if node.subgraph is None:      # no members to lower: a plain vector op
        lower_vector(low, node, [node], get_op(node.op_type, node.name).category)
        return
    sub = rebound(low, node)
    kind = node.attrs.get("fusion", "")
    display = node.attrs.get("display_type") or node.op_type
    inner = tuple(n.name for n in sub.nodes)
    if kind == FUSION_L2:
        lower_l2_chain(low, node)
        return
    low.sub = sub
    try:
        units = [low.unit(n) for n in sub.nodes]
        if Unit.CUBE in units:
            head = sub.nodes[units.index(Unit.CUBE)]
            tail = [n for n in sub.nodes if n is not head and low.unit(n) != Unit.NONE]
            lower_cube_head(low, node, head, tail, inner, display)
        else:
            nodes = [n for n in sub.nodes if low.unit(n) != Unit.NONE]
            cat = max((get_op(n.op_type).category for n in nodes), default=Category.ELEMWISE)
            lower_vector(low, node, nodes, cat, inner, node.name, display,
                         [f"{kind or 'UB'} fusion of {len(nodes)} ops: intermediates stay "
                          f"in UB"])
    finally:
        low.sub = None


def lower_l2_chain(low: Lowering, node: Node) -> None:
    """L2 fusion: the inner ops stay separate tasks handing their intermediates over through
    L2 (the simulated L2 keeps what fits); with `batch_split = k` the chain runs k times on
    `chunk_batch` samples (tasks named `<op>#<chunk>`), each chunk's intermediates reusing
    the previous chunk's (same names: the same buffers)."""
    sub = node.subgraph
    k = int(node.attrs.get("batch_split") or 1)
    values = low.values
    low.chain_full = {n: values[n] for n in (*sub.inputs, *sub.outputs)
                      if n in values} if k > 1 else {}
    # every chunk has the same shapes: inferred once
    chunk = chunk_values(node, k, low.g.constants) if k > 1 else sub.values
    outer = low.undo
    for c in range(k):
        # the chunk's values over the outer ones; what the chunk sets is undone after it
        # (`set_value`): each chunk starts from the same values
        undo = low.undo = {}
        for key, v in chunk.items():
            low.set_value(key, v)
        if k > 1:
            # each chunk converts its own slice of the chain's inputs
            for name in sub.inputs:
                for key in low.converted_by_root.pop(name, ()):
                    low.converted.pop(key, None)
        start = len(low.tasks)
        low.chunk_tag = f"#{c}" if k > 1 else ""
        try:
            for n in sub.nodes:
                low.node(n)
        finally:
            low.chunk_tag = ""
            low.undo = outer
            for key, old in undo.items():
                low.checked.pop(key, None)
                if old is UNSET:
                    del values[key]
                else:
                    values[key] = old
        if k > 1:
            for t in low.tasks[start:]:
                t.op_name = f"{t.op_name}#{c}"
                t.notes = t.notes + (f"L2 fusion: batch chunk {c + 1} of {k} "
                                     f"({node.attrs.get('chunk_batch')} samples)",)
    low.chain_full = {}
    # consumers outside the chain see the full-size outputs
    outs = set(sub.outputs)
    for k2, v in sub.values.items():
        if k2 not in values or k2 in outs:
            low.set_value(k2, v)


def rebound(low: Lowering, node: Node) -> Any:
    """`rebound_subgraph` of `node` at the current input shapes, once per node and
    shapes (the chunks of an L2 chain lower the same inner nodes at the same shapes; the
    subgraph is only read)."""
    key = (id(node), tuple((v.shape, v.dtype) if (v := low.values.get(i)) is not None
                           else None for i in node.inputs))
    hit = low.rebound_memo.get(key)
    if hit is None:
        hit = low.rebound_memo[key] = (rebound_subgraph(node, low.values), node)
    return hit[0]


def chunk_values(node: Node, k: int, outer_constants) -> dict[str, Value]:
    """Values of a batch-split L2 chain for one chunk: every activation input (not a weight,
    computed or constant, nor another constant of the outer graph) whose leading dim is the
    full batch gets `chunk_batch`, shapes re-inferred through the chain."""
    sub = node.subgraph.copy()
    chunk = int(node.attrs.get("chunk_batch") or 0)
    full = chunk * k
    weights = set().union(*(weight_inputs(n) for n in sub.nodes))
    for n in reversed(sub.nodes):        # a weight's Cast inside the chain: its input too
        if n.outputs and all(o in weights for o in n.outputs):
            weights.update(i for i in n.inputs if i)
    for name in sub.inputs:
        v = sub.values[name]
        if v.shape and v.shape[0] == full and name not in outer_constants \
                and name not in weights:
            sub.values[name] = Value(name, (chunk,) + tuple(v.shape[1:]), v.dtype, v.layout)
    sub.infer_shapes()
    return dict(sub.values)


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"fused": lower_fused}

__all__ = ["FUSION_L2", "lower_fused", "lower_l2_chain", "rebound", "chunk_values",
           "LOWERINGS"]
