"""ConstantFuseSamePass (GE): merge duplicate constants, so identical weights share memory.

The key is CANN's: dtype + shape + the raw bytes (ConstantFuseSamePass keys on data size,
memcmp of the bytes, DataType, Format and shape); equal bytes with a different dtype or shape
do not merge. Lazy constants up to LAZY_COMPARE_BYTES are materialised to compare; larger
ones merge only when they are the same object or come from the same deterministic maker
(seeded random or fill: equal description, shape and dtype), so a shape-only run of a big
model never materialises its weights here. The log reports the bytes saved.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.tensor import LazyTensor, materialize
from .base import GE, Pass, PassContext, PassResult

LAZY_COMPARE_BYTES = 64 * 1024


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB"


class ConstantFuseSamePass(Pass):
    name = "ConstantFuseSamePass"
    group = GE
    patterns = ("ConstantFuseSame",)

    @staticmethod
    def _key(graph: Graph, name: str) -> tuple | None:
        data = graph.constants[name]
        v = graph.values[name]
        if isinstance(data, LazyTensor) and data.nbytes > LAZY_COMPARE_BYTES:
            if not data.describe or data.describe.startswith("fold("):
                return ("object", id(data))
            return ("lazy", v.dtype, tuple(v.shape), data.describe)
        arr = np.ascontiguousarray(materialize(data))
        digest = hashlib.sha256(arr.tobytes()).hexdigest()
        return ("bytes", v.dtype, tuple(v.shape), digest)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        first: dict[tuple, str] = {}
        outputs = set(graph.outputs)
        merged = 0
        renamed: dict[str, str] = {}
        for name in list(graph.constants):
            key = self._key(graph, name)
            if key is None:
                continue
            keep = first.setdefault(key, name)
            if keep == name:
                continue
            if key[0] == "bytes" and not np.array_equal(graph.const_value(keep),
                                                        graph.const_value(name)):
                continue   # a digest collision: not the same data
            res.matched("ConstantFuseSame")
            if name in outputs:
                res.refuse("ConstantFuseSame", name, "constant is a graph output")
                continue
            data = graph.constants.pop(name)
            graph.values.pop(name)
            renamed[name] = keep
            res.bytes_saved += data.nbytes
            merged += 1
            res.effected("ConstantFuseSame")
        if renamed:       # one rewrite of the readers for all merged constants
            graph.nodes = [n if not any(i in renamed for i in n.inputs) else
                           Node(n.name, n.op_type, tuple(renamed.get(i, i) for i in n.inputs),
                                n.outputs, n.attrs, n.subgraph) for n in graph.nodes]
        if merged:
            res.note(f"merged {merged} duplicate constant(s) into shared ones; "
                     f"{_kib(res.bytes_saved)} ({res.bytes_saved} bytes) of weight memory saved")
        return res
