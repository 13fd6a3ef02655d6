"""A stable identity for graphs: `graph_key(graph)` hashes the structure (nodes, attributes,
shapes, dtypes, constants by content or lazy description), so the same model built twice, or
a pickled copy, has the same key. Sweeps use it to name points; data-parallel runs to reuse a
single-chip simulation."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from .graph import Graph


def canon(obj: Any) -> Any:
    """A stable, hashable-by-repr form of an attribute or constant (arrays by content)."""
    if isinstance(obj, Graph):
        return ("graph", graph_key(obj))
    if isinstance(obj, np.ndarray):
        return ("array", str(obj.dtype), obj.shape,
                hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest())
    if isinstance(obj, np.generic):
        return ("scalar", str(obj.dtype), obj.item())
    if isinstance(obj, Mapping):
        return tuple(sorted((str(k), canon(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return tuple(canon(v) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__,
                tuple((f.name, canon(getattr(obj, f.name))) for f in dataclasses.fields(obj)))
    return repr(obj)


def _constant_key(data: Any) -> Any:
    from .tensor import LazyTensor

    if isinstance(data, LazyTensor):       # described, not materialised: shape-only models
        return ("lazy", tuple(data.shape), data.dtype, data.describe)
    return canon(np.asarray(data))


def graph_key(graph: Graph) -> str:
    """A stable hash of a graph's structure: nodes in order (type, inputs, outputs, attributes,
    fused subgraphs), every value's shape/dtype/layout, inputs, outputs and constants (arrays
    by content, lazy constants by their description). Equal graphs built twice hash equal."""
    h = hashlib.sha256()
    h.update(repr((graph.name, tuple(graph.inputs), tuple(graph.outputs))).encode())
    for v in sorted(graph.values.values(), key=lambda v: v.name):
        h.update(repr((v.name, tuple(v.shape), v.dtype, v.layout)).encode())
    for name in sorted(graph.constants):
        h.update(repr((name, _constant_key(graph.constants[name]))).encode())
    for n in graph.nodes:
        h.update(repr((n.name, n.op_type, tuple(n.inputs), tuple(n.outputs), canon(n.attrs),
                       graph_key(n.subgraph) if n.subgraph is not None else None)).encode())
    return h.hexdigest()


__all__ = ["graph_key", "canon"]
