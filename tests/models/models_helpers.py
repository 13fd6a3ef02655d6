"""Helpers for the model-builder tests: seeded feeds, cube MACs, laziness checks."""

from __future__ import annotations

import numpy as np

from ascendsim.autodiff import initial_state
from ascendsim.ir.graph import Graph
from ascendsim.ir.registry import Category, get_op
from ascendsim.ir.tensor import LazyTensor


def feeds(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: normal floats; int64 ids in range of the table they index; a training
    step's state inputs (parameters, optimizer state, loss scale) at their initial values."""
    rng = np.random.default_rng(seed)
    state = initial_state(g) if hasattr(g, "initial_state") else {}
    out: dict[str, np.ndarray] = {}
    for name in g.inputs:
        v = g.values[name]
        if name in state:
            out[name] = state[name]
        elif v.dtype == "int64":
            high = {"token_type_ids": 2}.get(name, 16)
            out[name] = rng.integers(0, high, v.shape).astype(np.int64)
        elif name == "labels":
            rows, classes = v.shape
            out[name] = np.eye(classes, dtype=v.dtype)[rng.integers(0, classes, rows)]
        else:
            out[name] = rng.standard_normal(v.shape).astype(v.dtype)
    return out


def cube_macs(g: Graph) -> int:
    """Multiply-accumulates of the graph's cube ops, from the registry's flops (= 2 * MACs)."""
    total = 0
    for n in g.nodes:
        op = get_op(n.op_type, n.name)
        if op.category == Category.CUBE:
            ins = [g.values[i] if i else None for i in n.inputs]
            total += op.flops(ins, [g.values[o] for o in n.outputs], n.attrs) // 2
    return total


def lazy_weights(g: Graph) -> list[LazyTensor]:
    return [c for c in g.constants.values() if isinstance(c, LazyTensor)]


def materialised(g: Graph) -> int:
    """How many lazy constants have been built (must stay 0 for shape-only work)."""
    return sum(1 for c in lazy_weights(g) if c._cache)


def count(g: Graph, op_type: str) -> int:
    return sum(1 for n in g.nodes if n.op_type == op_type)
