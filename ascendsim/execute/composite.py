"""Fused nodes' values: a subgraph cut into runs of element-wise ops, each one composite loop.

A fused node's subgraph is cut into *runs*: maximal stretches (in topological order) of
element-wise ops that a loop can compute together: every op has a numba scalar function in the
registry (`OpDef.scalar`), one output, no absent inputs, and one compute dtype shared by all
its inputs and outputs (float16 computes in float32, as the vector kernels do), and the
shapes its ops write broadcast to one loop shape (operands broadcast into it; an op whose shape
does not broadcast with the stretch's, such as a sibling of another shape after a Reshape,
starts a new run). Every other
op (a cube head, a reduce, a reshape) runs its own registry kernel between runs, so a
Conv + BN + ReLU node is the conv kernel followed by one composite loop for the epilogue.
The loops themselves are generated and compiled by `ascendsim.kernels.composite`, which
knows nothing of graphs; this planner (the executor's) describes each run to it as a `Loop`.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import AscendSimError, GraphError
from ..ir.graph import Graph, Node
from ..ir.ops.elementwise import scalar_args
from ..ir.registry import BodyRunner, Category, OpDef, get_op
from ..ir.tensor import as_storage, materialize
from ..kernels.bf16 import round_bf16
from ..kernels.composite import COMPUTE_DTYPES, Loop, Step, run_loop

_LOCK = threading.Lock()
_PLANS: weakref.WeakKeyDictionary[Graph, Plan] = weakref.WeakKeyDictionary()


@dataclass
class Run:
    """A stretch of element-wise ops of a subgraph, computed by one composite loop."""

    nodes: list[Node]
    inputs: list[str]          # values read from outside the run, first-use order
    outputs: list[str]         # values the run stores (read later, or subgraph outputs)
    loop: Loop


@dataclass
class Plan:
    """How to compute a subgraph: runs (one composite loop each) and single nodes, in order."""

    steps: list            # Run | Node

    @property
    def runs(self) -> list[Run]:
        return [s for s in self.steps if isinstance(s, Run)]


def _opdef(node: Node) -> OpDef:
    return get_op(node.op_type, node.name)


def _scalar_extras(node: Node) -> tuple[float, ...] | None:
    try:
        return tuple(float(a) for a in scalar_args(node.op_type, node.attrs))
    except (TypeError, ValueError):
        return None


def _arity(fn) -> int | None:
    py = getattr(fn, "py_func", None)
    return py.__code__.co_argcount if py is not None else None


def compilable(sub: Graph, node: Node) -> bool:
    """Whether a composite loop can compute `node` (see the module doc)."""
    d = _opdef(node)
    if node.subgraph is not None or d.scalar is None or d.category > Category.BROADCAST:
        return False
    if not isinstance(d.num_outputs, int) or d.num_outputs != 1 or len(node.outputs) != 1:
        return False
    if any(not i for i in node.inputs) or not node.inputs:
        return False
    dtypes = {sub.values[v].dtype for v in (*node.inputs, node.outputs[0])}
    if len(dtypes) != 1 or next(iter(dtypes)) not in COMPUTE_DTYPES:
        return False
    if any(not all(isinstance(x, int) for x in sub.values[v].shape)
           for v in (*node.inputs, node.outputs[0])):
        return False
    extras = _scalar_extras(node)
    if extras is None:
        return False
    variadic = d.inputs and d.inputs[0].startswith("*")
    arity = _arity(d.scalar)
    need = (2 if variadic else len(node.inputs)) + len(extras)
    return arity == need


def plan(sub: Graph) -> Plan:
    """The execution plan of a subgraph (cached per subgraph object)."""
    with _LOCK:
        got = _PLANS.get(sub)
    if got is not None:
        return got
    # stretches of compilable nodes of one dtype, in topological order
    steps: list = []
    cur: list = []
    for node in sub.nodes:
        if compilable(sub, node):
            if cur and not _joins(sub, cur, node):
                steps.append(cur)
                cur = []
            cur.append(node)
            continue
        if cur:
            steps.append(cur)
            cur = []
        steps.append(node)
    if cur:
        steps.append(cur)
    # the values read after each step (by a later step, or as subgraph outputs)
    later_reads: list[set[str]] = []
    acc: set[str] = set(sub.outputs)
    for st in reversed(steps):
        later_reads.append(set(acc))
        nodes = st if isinstance(st, list) else [st]
        acc |= {i for n in nodes for i in n.inputs if i}
    later_reads.reverse()
    out: list = []
    for st, later in zip(steps, later_reads):
        if isinstance(st, list):
            out.extend(_make_run(sub, nodes, needed)
                       for nodes, needed in _split_by_shape(sub, st, later))
        else:
            out.append(st)
    p = Plan(out)
    with _LOCK:
        _PLANS[sub] = p
    return p


def _out_shape(sub: Graph, node: Node) -> tuple[int, ...]:
    return tuple(sub.values[node.outputs[0]].shape)


def _joins(sub: Graph, run: list[Node], node: Node) -> bool:
    """Whether `node` may extend the stretch `run`: same storage dtype, and its output shape
    broadcasts with the stretch's loop shape (topological order may put side by side two ops
    of unrelated shapes, e.g. the (32, 4) sibling of an op after a Reshape to (128,))."""
    if sub.values[node.outputs[0]].dtype != sub.values[run[0].outputs[0]].dtype:
        return False
    try:
        np.broadcast_shapes(*(_out_shape(sub, n) for n in run), _out_shape(sub, node))
    except ValueError:
        return False
    return True


def _split_by_shape(sub, nodes: list, later: set[str]) -> list[tuple[list, set[str]]]:
    """Cut a stretch into loops of one shape each. The loop shape S is the broadcast of the
    stretch's output shapes; an op writing a smaller shape is computed inline (redundantly, from
    broadcast operands) unless its value is needed outside the stretch: then it and its
    (smaller-shaped) producers in the stretch form a loop of their own, first."""
    shape = lambda n: tuple(sub.values[n.outputs[0]].shape)  # noqa: E731
    big = np.broadcast_shapes(*(shape(n) for n in nodes))
    small = {n.outputs[0] for n in nodes if shape(n) != big and n.outputs[0] in later}
    if not small:
        return [(nodes, later)]
    extract: set[str] = set()
    for n in reversed(nodes):             # the small values and their producers in the stretch
        if n.outputs[0] in small or n.outputs[0] in extract:
            extract.add(n.outputs[0])
            extract.update(i for i in n.inputs if i)
    pre = [n for n in nodes if n.outputs[0] in extract]
    rest = [n for n in nodes if n.outputs[0] not in extract]
    if not rest:
        # every op writes a smaller shape that is needed ((32, 1) and (1, 4) side by side):
        # no loop shape serves them all; one loop per op
        return [([n], later | {i for m in nodes for i in m.inputs if i}) for n in nodes]
    needed = later | {i for n in rest for i in n.inputs if i}
    out = _split_by_shape(sub, pre, needed)
    if rest:
        out.append((rest, later))
    return out


def _make_run(sub: Graph, nodes: list[Node], later: set[str]) -> Run:
    refs: dict[str, str] = {}
    inputs: list[str] = []
    program: list[Step] = []
    scalars = []
    for j, n in enumerate(nodes):
        args = []
        for v in n.inputs:
            if v not in refs:
                refs[v] = f"i{len(inputs)}"
                inputs.append(v)
            args.append(refs[v])
        d = _opdef(n)
        program.append(Step(n.op_type, tuple(args), _scalar_extras(n) or (),
                            bool(d.inputs and d.inputs[0].startswith("*"))))
        scalars.append(d.scalar)
        refs[n.outputs[0]] = f"t{j}"
    outputs = [n.outputs[0] for n in nodes if n.outputs[0] in later]
    shape = np.broadcast_shapes(*(tuple(sub.values[n.outputs[0]].shape) for n in nodes))
    loop = Loop(tuple(program), tuple(scalars), len(inputs), tuple(refs[o] for o in outputs),
                sub.values[nodes[0].outputs[0]].dtype, tuple(int(d) for d in shape))
    return Run(nodes, inputs, outputs, loop)


def stored(graph: Graph, name: str, arr: object) -> np.ndarray:
    """A kernel's result as the value `name` is stored: a bfloat16 value is rounded to bf16
    here, once per op, as the chip rounds each result (kernels compute bf16 in float32 and
    know nothing of it; see kernels/bf16.py); every other dtype is kept as computed."""
    decl = graph.values.get(name)
    if decl is not None and decl.dtype == "bfloat16":
        return as_storage(arr, "bfloat16")
    return np.asarray(arr)


#: the dtypes a cube op may read float32 operands in (`cube_operands`)
CUBE_FP32_DTYPES = ("float32", "float16", "bfloat16")


def cube_operands(opdef: OpDef, args: list, cube_fp32: str) -> list:
    """`args` as a cube op reads them: its two matrix operands, when float32, rounded to
    `cube_fp32` (CANN's precision mode; the result still accumulates in float32). Other ops'
    arguments, a bias and non-float32 operands are returned unchanged."""
    if cube_fp32 == "float32" or opdef.category != Category.CUBE:
        return args
    out = list(args)
    for i in range(min(2, len(out))):
        a = out[i]
        if a is not None and np.asarray(a).dtype == np.float32:
            out[i] = round_bf16(a) if cube_fp32 == "bfloat16" else \
                np.asarray(a).astype(np.float16).astype(np.float32)
    return out


def run_subgraph(sub: Graph, args: list, run_body: BodyRunner,
                 cube_fp32: str = "float32") -> list[np.ndarray]:
    """Values of a fused node's outputs: runs by their composite loops, other ops by their
    registry kernels (nested fused nodes recursively; `run_body` runs control-flow bodies;
    `cube_fp32` as in `cube_operands`)."""
    env: dict[str, Any] = dict(zip(sub.inputs, args))
    p = plan(sub)
    readers = Counter(i for st in p.steps for n in (st.nodes if isinstance(st, Run) else [st])
                      for i in n.inputs if i)
    keep = set(sub.outputs)

    def fetch(v: str):
        if not v:
            return None
        if v in env:
            return env[v]
        if v in sub.constants:
            return materialize(sub.constants[v])
        raise GraphError(f"fused subgraph '{sub.name}': value '{v}' read before it is computed")

    for st in p.steps:
        if isinstance(st, Run):
            results = run_loop(st.loop, [fetch(v) for v in st.inputs])
            env.update(zip(st.outputs, results))
            nodes = st.nodes
        else:
            a = [fetch(i) for i in st.inputs]
            try:
                res = run_subgraph(st.subgraph, a, run_body, cube_fp32) \
                    if st.subgraph is not None else \
                    _opdef(st).run_kernel(cube_operands(_opdef(st), a, cube_fp32), st.attrs,
                                          run_body)
            except AscendSimError:
                raise
            except Exception as exc:   # name the inner node, not numba internals
                shapes = [None if x is None else (np.shape(x), np.asarray(x).dtype.name)
                          for x in a]
                raise GraphError(f"node '{st.name}' ({st.op_type}) inside fused subgraph "
                                 f"'{sub.name}' failed on inputs {shapes}: "
                                 f"{type(exc).__name__}: {exc}") from exc
            env.update((o, stored(sub, o, r)) for o, r in zip(st.outputs, res) if o)
            nodes = [st]
        for n in nodes:
            for i in n.inputs:
                if i:
                    readers[i] -= 1
                    if readers[i] == 0 and i not in keep:
                        env.pop(i, None)
    return [fetch(o) for o in sub.outputs]


def composite_chain(ops: list[tuple[str, tuple[float, ...]]], x: np.ndarray) -> np.ndarray:
    """A one-input chain `ops` (op type, scalar second operands) computed by one composite
    loop: a convenience for benchmarks and tests (`[("Mul", (2.0,)), ("Relu", ())]`)."""
    g = Graph("chain")
    v = g.input("x", x.shape, x.dtype.name)
    for op, consts in ops:
        v = g.add_node(op, [v, *[np.asarray(c, dtype=x.dtype) for c in consts]])[0]
    g.output(v)
    from . import run_graph

    return run_subgraph(g, [x], run_graph)[0]


__all__ = ["CUBE_FP32_DTYPES", "cube_operands", "plan", "run_subgraph", "compilable",
           "composite_chain", "Plan", "Run"]
