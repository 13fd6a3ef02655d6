"""ConstantFoldingPass (GE): fold constant subexpressions, interleaved with shape inference.

Note on the algorithm. A node folds when every input is a constant, or when it only needs the
*shape* of its inputs and that shape is static (`Shape`, `Size`: `OpDef.shape_only_inputs`). The
folded value becomes a `LazyTensor` constant under the node's output name: its maker runs the
op's kernel on the (materialised) inputs only when somebody needs the values, so folding a
`ConstantOfShape`/`Expand` of a constant shape, or a chain of weight transforms, costs no memory
in a shape-only run. Small results (<= EAGER_BYTES) are computed at once so a failing kernel is
a logged refusal here, not a surprise later.

The size limit. A *generator* fold (its inputs hold at most EAGER_BYTES of data: a
ConstantOfShape, an Expand or Tile of a small constant, a Range) is only a description, like a
seeded weight, and is never refused: that is how a model's generated weights fold for free. A
fold that computes from larger constant data (a Transpose or Mul of a weight) would
materialise its result when values are needed, so it is refused, and logged, when the result
is larger than `fold_limit_bytes` (optimize(), default 64 MiB); such a node then stays a run-
time op (onnxsim #178: folding size-changing ops can blow a model up).

After a round that folded anything, shapes are re-inferred over the whole graph (a Reshape
whose shape input just became constant now has a static output), which can make more nodes
foldable (Shape of that output), so rounds repeat until nothing changes: the fixpoint GE
reaches with its re-pass worklist. Runs that would not terminate are cut at MAX_ROUNDS.

Skipped: random ops (never deterministic), control flow (CondRemovePass handles a constant If;
a Loop is not unrolled), fused nodes, outputs with symbolic shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import AscendSimError, GraphError
from ..execute import run_graph
from ..ir.graph import Graph, Node
from ..ir.registry import get_op
from ..ir.tensor import LazyTensor, is_static, itemsize, materialize, numel
from .base import GE, Pass, PassContext, PassResult
from .shapes import reinfer

#: results up to this size are computed at fold time (shape chains, small tables)
EAGER_BYTES = 4096
MAX_ROUNDS = 32


def human_bytes(n: int) -> str:
    """A byte count for a log line: B, KiB or MiB."""
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def _has_graph_attr(node: Node) -> bool:
    return node.subgraph is not None or any(isinstance(v, Graph) for v in node.attrs.values())


class ConstantFoldingPass(Pass):
    name = "ConstantFoldingPass"
    group = GE
    patterns = ("ConstantFolding", "ShapeFolding")

    def __init__(self) -> None:
        #: node -> its op's shape-only inputs, or None when it can never fold (not
        #: deterministic, or a subgraph): facts of the immutable node, kept across the rounds
        #: of the GE stage so a re-scan looks up only what folds change (constness, shapes)
        self._foldable: dict[Node, tuple[int, ...] | None] = {}

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        res = self.new_result()
        refused: set[str] = set()
        for _ in range(MAX_ROUNDS):
            folded: set[str] = set()
            for node in list(graph.nodes):
                if node.name not in refused and self._fold(graph, node, ctx, res, refused):
                    folded.add(node.name)
            if not folded:
                break
            # folded nodes leave the graph once per round, not one list rebuild per fold
            gone = [n for n in graph.nodes if n.name in folded]
            graph.nodes = [n for n in graph.nodes if n.name not in folded]
            # their outputs are constants now: only what reads them (and so on) re-infers
            reinfer(graph, {o for n in gone for o in n.outputs if o})
        else:
            res.note(f"stopped after {MAX_ROUNDS} fold/infer rounds")
        return res

    def _kind(self, graph: Graph, node: Node) -> str | None:
        """'ShapeFolding', 'ConstantFolding' or None (cannot fold)."""
        try:
            shape_only = self._foldable[node]
        except KeyError:
            opdef = get_op(node.op_type, node.name)
            shape_only = self._foldable[node] = (
                None if not opdef.deterministic or _has_graph_attr(node)
                else tuple(opdef.shape_only_inputs))
        if shape_only is None:
            return None
        if shape_only:
            ok = all(is_static(graph.values[node.inputs[i]].shape) for i in shape_only
                     if i < len(node.inputs) and node.inputs[i])
            return "ShapeFolding" if ok else None
        if all(graph.is_const(i) for i in node.inputs if i):
            return "ConstantFolding"
        return None

    def _fold(self, graph: Graph, node: Node, ctx: PassContext, res: PassResult,
              refused: set[str]) -> bool:
        """Fold `node` into constants; the caller then drops it from `graph.nodes`."""
        kind = self._kind(graph, node)
        if kind is None:
            return False
        outs = [graph.values[o] for o in node.outputs if o]
        if not all(is_static(v.shape) for v in outs):
            return False
        res.matched(kind)
        size = sum(numel(v.shape) * itemsize(v.dtype) for v in outs)
        if self._data_bytes(graph, node, kind) > EAGER_BYTES and size > ctx.fold_limit_bytes:
            refused.add(node.name)
            why = (f"fold would materialise {human_bytes(size)} > limit "
                   f"{human_bytes(ctx.fold_limit_bytes)} (fold_limit_bytes)")
            res.refuse(kind, node.name, why)
            res.note(f"not folded '{node.name}' ({node.op_type}): {why}")
            return False
        lazies = self._lazy_outputs(graph, node, kind)
        if size <= EAGER_BYTES:
            try:
                for lz in lazies:
                    lz.materialize()
            except (AscendSimError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
                refused.add(node.name)
                res.refuse(kind, node.name, f"kernel failed at fold time: {exc}")
                return False
        for o, lz in zip([o for o in node.outputs if o], lazies):
            graph.constants[o] = lz
        res.effected(kind)
        return True

    @staticmethod
    def _data_bytes(graph: Graph, node: Node, kind: str) -> int:
        """Bytes of constant data the fold reads (shape-only inputs read none)."""
        if kind == "ShapeFolding":
            return 0
        return sum(graph.values[i].nbytes for i in node.inputs if i)

    @staticmethod
    def _lazy_outputs(graph: Graph, node: Node, kind: str) -> list[LazyTensor]:
        """One LazyTensor per output, sharing a single kernel call made on first use."""
        opdef = get_op(node.op_type, node.name)
        shape_only = set(opdef.shape_only_inputs)
        args_src: list[Any] = []
        for k, i in enumerate(node.inputs):
            if not i:
                args_src.append(None)
            elif kind == "ShapeFolding" and k in shape_only:
                v = graph.values[i]
                # a zero-strided view of the right shape: no memory, only the shape is read
                args_src.append(("probe", tuple(v.shape), v.dtype))
            else:
                args_src.append(graph.constants[i])
        attrs, cache = dict(node.attrs), []

        def run_kernel() -> list[np.ndarray]:
            if not cache:
                args = []
                for a in args_src:
                    if isinstance(a, tuple) and a and a[0] == "probe":
                        args.append(np.broadcast_to(np.zeros((), dtype=a[2]), a[1]))
                    else:
                        args.append(None if a is None else materialize(a))
                try:
                    cache.append([np.asarray(r) for r in opdef.run_kernel(args, attrs, run_graph)])
                except AscendSimError:
                    raise
                except Exception as exc:   # name the node, not numba internals
                    raise GraphError(f"folding node '{node.name}' ({node.op_type}) failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
            return cache[0]

        lazies = []
        for k, o in enumerate(node.outputs):
            if not o:
                continue
            v = graph.values[o]
            lazies.append(LazyTensor(tuple(int(d) for d in v.shape), v.dtype,
                                     lambda k=k: run_kernel()[k],
                                     f"fold({node.op_type} '{node.name}')"))
        return lazies
