"""Compute the real values of a graph (fused or not) with the registry's numba kernels.

bfloat16 values are float32 arrays rounded to bf16 precision (see kernels/bf16.py): inputs
are rounded when fed, every op's bf16 output is rounded once after its kernel ran in float32.

The executor never looks at the clock: values and timing share the graph, nothing else.
Intermediates are freed as soon as their last reader has run, so a deep model needs memory
for its live tensors only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import AscendSimError, ConfigError, GraphError
from ..ir.graph import Graph
from ..ir.registry import get_op
from ..ir.tensor import as_storage, materialize


def _check_inputs(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    missing = [n for n in graph.inputs if n not in feeds]
    if missing:
        raise GraphError(f"graph '{graph.name}': missing input(s) {', '.join(missing)}")
    extra = [n for n in feeds if n not in graph.inputs]
    if extra:
        raise GraphError(f"graph '{graph.name}': unknown input(s) {', '.join(extra)}; "
                         f"inputs are {', '.join(graph.inputs)}")
    env: dict[str, np.ndarray] = {}
    for name in graph.inputs:
        decl = graph.values[name]
        arr = np.asarray(feeds[name])
        if len(arr.shape) != len(decl.shape) or any(
                isinstance(d, int) and d != a for d, a in zip(decl.shape, arr.shape)):
            raise GraphError(f"input '{name}' has shape {arr.shape}, graph '{graph.name}' "
                             f"expects {decl.shape}")
        if decl.dtype == "bfloat16":
            if arr.dtype.kind != "f" and arr.dtype.name != "bfloat16":   # ml_dtypes' is kind V
                raise GraphError(f"input '{name}' has dtype {arr.dtype}, expected bfloat16 "
                                 f"values as a float array (16-bit patterns: "
                                 f"ascendsim.kernels.bf16.from_bits)")
            arr = as_storage(arr, "bfloat16")
        elif arr.dtype.name != decl.dtype:
            if not np.can_cast(arr.dtype, decl.dtype, casting="same_kind"):
                raise GraphError(f"input '{name}' has dtype {arr.dtype}, expected {decl.dtype}")
            arr = arr.astype(decl.dtype)
        env[name] = arr
    return env


def run_graph(graph: Graph, feeds: list, cube_fp32: str = "float32") -> list:
    """The body runner control-flow ops get: `graph`'s outputs for positional inputs."""
    out = execute(graph, dict(zip(graph.inputs, feeds)), cube_fp32=cube_fp32)
    return [out[o] for o in graph.outputs]


def execute(graph: Graph, inputs: Mapping[str, np.ndarray],
            outputs: list[str] | None = None,
            progress: Callable[[int, int], None] | None = None,
            cube_fp32: str = "float32") -> dict[str, np.ndarray]:
    """Run `graph` on `inputs` and return its outputs (or the named values) as arrays.

    progress: called as progress(work_done, work_total) after each node, the work of a node
    being its flops (at least 1), so the fraction is the share of the arithmetic done.
    cube_fp32: the dtype a cube op reads float32 operands in (the chip's CANN precision mode,
    `hw.precision.cube_fp32_dtype`): "float16" or "bfloat16" rounds them before the kernel,
    which accumulates in float32 as the cube's L0C does; "float32" keeps them."""
    if cube_fp32 not in CUBE_FP32_DTYPES:
        raise ConfigError(f"cube_fp32={cube_fp32!r}: expected one of "
                         f"{', '.join(CUBE_FP32_DTYPES)}")
    body = run_graph if cube_fp32 == "float32" else \
        (lambda g, feeds: run_graph(g, feeds, cube_fp32))
    wanted = list(outputs) if outputs is not None else list(graph.outputs)
    weights = node_work(graph) if progress is not None else []
    total_work, done_work = sum(weights), 0
    env = _check_inputs(graph, inputs)
    readers = Counter(i for n in graph.nodes for i in n.inputs if i)
    keep = set(wanted)

    def fetch(name: str) -> np.ndarray | None:
        if not name:
            return None
        if name in env:
            return env[name]
        if name in graph.constants:
            return materialize(graph.constants[name])
        raise GraphError(f"value '{name}' is read before it is computed in graph '{graph.name}'")

    done_nodes: list[None] = []
    for node in graph.nodes:
        opdef = get_op(node.op_type, node.name)
        args = [fetch(i) for i in node.inputs]
        try:
            if node.subgraph is not None:
                # each run of element-wise ops is one composite loop (see .composite)
                results = run_subgraph(node.subgraph, args, body, cube_fp32)
            else:
                results = opdef.run_kernel(cube_operands(opdef, args, cube_fp32),
                                           node.attrs, body)
        except AscendSimError:
            raise
        except Exception as exc:  # a kernel failure must name the node, not numba internals
            shapes = [None if a is None else (a.shape, a.dtype.name) for a in args]
            raise GraphError(f"node '{node.name}' ({node.op_type}) failed on inputs {shapes}: "
                             f"{type(exc).__name__}: {exc}") from exc
        if len(results) != len(node.outputs):
            raise GraphError(f"node '{node.name}' ({node.op_type}) kernel returned "
                             f"{len(results)} outputs, expected {len(node.outputs)}")
        for name, arr in zip(node.outputs, results):
            if name:
                env[name] = stored(graph, name, arr)
        if progress is not None:
            done_work += weights[len(done_nodes)]
            done_nodes.append(None)
            progress(done_work, total_work)
        for i in node.inputs:
            if i:
                readers[i] -= 1
                if readers[i] == 0 and i not in keep and i not in graph.inputs:
                    env.pop(i, None)
    return {name: fetch(name) for name in wanted}  # type: ignore[misc]


def node_flops(graph: Graph, node) -> int | None:
    """The arithmetic of one node from the registry's flops rule (a fused node: its ops'),
    None when a shape is symbolic or the rule cannot price it."""
    if node.subgraph is not None:
        total = 0
        for inner in node.subgraph.nodes:
            f = node_flops(node.subgraph, inner)
            if f is None:
                return None
            total += f
        return total
    try:
        ins = [graph.values[i] for i in node.inputs if i]
        outs = [graph.values[o] for o in node.outputs if o]
        return int(get_op(node.op_type, node.name).flops(ins, outs, node.attrs))
    except Exception:  # a symbolic shape, a control-flow body: not priced
        return None


def graph_flops(graph: Graph) -> int | None:
    """The arithmetic of a whole graph (sum of node_flops), None when a node cannot be priced."""
    total = 0
    for node in graph.nodes:
        f = node_flops(graph, node)
        if f is None:
            return None
        total += f
    return total


def node_work(graph: Graph) -> list[int]:
    """Each node's share of an execution's work for progress: its flops, at least 1."""
    return [max(1, node_flops(graph, n) or 0) for n in graph.nodes]


from .composite import (  # noqa: E402  (the planner imports run_graph lazily)
    CUBE_FP32_DTYPES,
    cube_operands,
    run_subgraph,
    stored,
)

__all__ = ["execute", "run_graph", "run_subgraph", "graph_flops", "node_flops"]
