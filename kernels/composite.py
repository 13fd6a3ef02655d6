"""Composite kernels: the values of a fused node, computed in one pass over the data.

Design
------
A fused node's subgraph is cut into *runs*: maximal stretches (in topological order) of
element-wise ops that a loop can compute together: every op has a numba scalar function in the
registry (`OpDef.scalar`), one output, no absent inputs, and one compute dtype shared by all
its inputs and outputs (float16 computes in float32, as the vector kernels do), and the
shapes its ops write broadcast to one loop shape (operands broadcast into it; an op whose shape
does not broadcast with the stretch's, such as a sibling of another shape after a Reshape,
starts a new run). Every other
op (a cube head, a reduce, a reshape) runs its own registry kernel between runs, so a
Conv + BN + ReLU node is the conv kernel followed by one composite loop for the epilogue.

For each run, Python source is generated: a loop nest over the loop shape, after collapsing
adjacent dimensions that every operand walks contiguously (so a same-shape chain is one flat
loop that LLVM vectorises). In the innermost loop an operand is either contiguous (`a[b + i]`)
or broadcast along it (loaded once, before the loop). The body calls each op's scalar
function inline (`njit(inline="always")` in kernels/elementwise.py), casting each result to
the compute dtype and, for float16, rounding it to float16 precision (`round_f16`), as the
per-op kernels round each result; so results match unfused ones bit for bit (float32, and
float16 too); intermediates live in registers, only the run's outputs are stored. Attribute
operands (LeakyRelu's alpha: `scalar_args`) are compile-time constants of the source.

Compiled kernels are cached in memory per signature (program, compute dtype, collapsed rank,
innermost access pattern). With `kernels.config.CACHE` on, the generated source is also written
as a module under `COMPOSITE_CACHE_DIR` (env `ASCENDSIM_COMPOSITE_CACHE`, default
`~/.cache/ascendsim/composite`) and compiled with numba's `cache=True`, so a new process loads
the machine code instead of recompiling; if the directory is not writable the source is
compiled in memory only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from .config import CACHE, FASTMATH

#: where generated kernel modules are written (and numba caches their machine code)
COMPOSITE_CACHE_DIR = Path(os.environ.get(
    "ASCENDSIM_COMPOSITE_CACHE", Path.home() / ".cache" / "ascendsim" / "composite"))

#: compute dtype of each storage dtype a composite loop supports
_COMPUTE = {"float16": "float32", "float32": "float32", "float64": "float64",
            "int32": "int32", "int64": "int64"}

_LOCK = threading.Lock()
_KERNELS: dict[tuple, Any] = {}
_PLANS: weakref.WeakKeyDictionary[Any, Plan] = weakref.WeakKeyDictionary()


# ----------------------------------------------------------------------------- fp16 rounding
@njit(inline="always", cache=CACHE, fastmath=False)
def round_f16(x):
    """A float32 rounded to the nearest float16 value (ties to even, overflow to inf), kept
    as float32: what a float16 vector instruction's result is, computed without float16 types
    (numba has none on CPU). Normal range: Veltkamp's split (x * (2**13 + 1) ...) keeps the top
    11 significand bits, rounded by the float32 adder; subnormal range (below 2**-14): adding
    and subtracting 0.5, whose float32 spacing is float16's 2**-24. Needs fastmath off (the
    default, kernels/config.py): reassociation would cancel the rounding."""
    a = abs(x)
    p = a * np.float32(8193.0)
    hi = p - (p - a)
    lo = (a + np.float32(0.5)) - np.float32(0.5)
    r = lo if a < np.float32(6.103515625e-05) else hi
    r = r if a < np.float32(65520.0) else np.float32(math.inf)
    r = np.float32(math.copysign(r, x))
    return r if x == x else x


# ----------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class Step:
    """One op of a run: scalar function index, argument refs ("i3" input, "t1" temp), extras."""

    op_type: str
    args: tuple[str, ...]
    extras: tuple[float, ...]
    variadic: bool


@dataclass
class Run:
    """A stretch of element-wise ops compiled into one loop."""

    nodes: list
    inputs: list[str]          # values read from outside the run, first-use order
    outputs: list[str]         # values the run stores (read later, or subgraph outputs)
    dtype: str                 # storage dtype of every value of the run
    shape: tuple[int, ...]
    program: tuple[Step, ...]
    stores: tuple[str, ...]    # temp ref of each output

    @property
    def key(self) -> tuple:
        return (self.program, self.stores, self.dtype)


@dataclass
class Plan:
    """How to compute a subgraph: runs (one composite loop each) and single nodes, in order."""

    steps: list            # Run | Node

    @property
    def runs(self) -> list[Run]:
        return [s for s in self.steps if isinstance(s, Run)]


def _opdef(node):
    from ..ir.registry import get_op

    return get_op(node.op_type, node.name)


def _scalar_extras(node) -> tuple[float, ...] | None:
    from ..ir.ops.elementwise import scalar_args

    try:
        return tuple(float(a) for a in scalar_args(node.op_type, node.attrs))
    except (TypeError, ValueError):
        return None


def _arity(fn) -> int | None:
    py = getattr(fn, "py_func", None)
    return py.__code__.co_argcount if py is not None else None


def compilable(sub, node) -> bool:
    """Whether a composite loop can compute `node` (see the module doc)."""
    from ..ir.registry import Category

    d = _opdef(node)
    if node.subgraph is not None or d.scalar is None or d.category > Category.BROADCAST:
        return False
    if not isinstance(d.num_outputs, int) or d.num_outputs != 1 or len(node.outputs) != 1:
        return False
    if any(not i for i in node.inputs) or not node.inputs:
        return False
    dtypes = {sub.values[v].dtype for v in (*node.inputs, node.outputs[0])}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _COMPUTE:
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


def plan(sub) -> Plan:
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


def _out_shape(sub, node) -> tuple[int, ...]:
    return tuple(sub.values[node.outputs[0]].shape)


def _joins(sub, run: list, node) -> bool:
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


def _make_run(sub, nodes: list, later: set[str]) -> Run:
    refs: dict[str, str] = {}
    inputs: list[str] = []
    program: list[Step] = []
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
        refs[n.outputs[0]] = f"t{j}"
    outputs = [n.outputs[0] for n in nodes if n.outputs[0] in later]
    shape = np.broadcast_shapes(*(tuple(sub.values[n.outputs[0]].shape) for n in nodes))
    return Run(nodes, inputs, outputs, sub.values[nodes[0].outputs[0]].dtype,
               tuple(int(d) for d in shape), tuple(program), tuple(refs[o] for o in outputs))


# ----------------------------------------------------------------------------- codegen
def _collapse(shape: tuple[int, ...],
              strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims, merge neighbours every array walks contiguously."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    if not dims:
        return [1], [[0] for _ in strides]
    out_shape = [shape[dims[0]]]
    out_strides = [[s[dims[0]]] for s in strides]
    for d in dims[1:]:
        n = shape[d]
        if all(os[-1] == s[d] * n for os, s in zip(out_strides, strides)):
            out_shape[-1] *= n
            for os, s in zip(out_strides, strides):
                os[-1] = s[d]
        else:
            out_shape.append(n)
            for os, s in zip(out_strides, strides):
                os.append(s[d])
    return out_shape, out_strides


def _bcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of a C-contiguous array of `shape` broadcast to `out` (0 = repeated)."""
    st = [0] * len(out)
    acc = 1
    for k in range(1, len(shape) + 1):
        d = shape[-k]
        st[-k] = acc if d != 1 else 0
        acc *= d
    return st


def _source(run: Run, rank: int, inner: tuple[int, ...], fnames: list[str]) -> str:
    """Python source of the loop nest (see module doc); `inner[k]` is 1 when input k is
    contiguous along the innermost dim, 0 when broadcast. `RD` rounds each result to the
    storage precision (identity, or `round_f16` for float16)."""
    n_in, n_out = len(run.inputs), len(run.stores)
    ins = ", ".join(f"a{k}" for k in range(n_in))
    outs = ", ".join(f"o{m}" for m in range(n_out))
    lines = [f"def composite(shape, strides, {ins}, {outs}):"]
    ind = "    "
    for k in range(n_in + 1):
        lines.append(f"{ind}b{k}_0 = 0")
    consts: dict[float, str] = {}
    for step in run.program:
        for x in step.extras:
            if x not in consts:
                consts[x] = f"c{len(consts)}"
                lines.append(f"{ind}{consts[x]} = RD(CT({x!r}))")
    for lvl in range(rank - 1):
        lines.append(f"{ind}for d{lvl} in range(shape[{lvl}]):")
        ind += "    "
        for k in range(n_in + 1):
            lines.append(f"{ind}b{k}_{lvl + 1} = b{k}_{lvl} + d{lvl} * strides[{k}, {lvl}]")
    last = rank - 1
    for k in range(n_in):
        if not inner[k]:
            lines.append(f"{ind}i{k} = a{k}[b{k}_{last}]")
    lines.append(f"{ind}for d{last} in range(shape[{last}]):")
    ind += "    "
    for k in range(n_in):
        if inner[k]:
            lines.append(f"{ind}i{k} = a{k}[b{k}_{last} + d{last}]")
    for j, step in enumerate(run.program):
        extra = [consts[x] for x in step.extras]
        if step.variadic:
            expr = step.args[0]
            for a in step.args[1:]:
                expr = f"{fnames[j]}({', '.join([expr, a, *extra])})"
            lines.append(f"{ind}t{j} = RD(CT({expr}))")
        else:
            lines.append(f"{ind}t{j} = RD(CT({fnames[j]}({', '.join([*step.args, *extra])})))")
    for m, ref in enumerate(run.stores):
        lines.append(f"{ind}o{m}[b{n_in}_{last} + d{last}] = {ref}")
    return "\n".join(lines) + "\n"


@njit(inline="always", cache=CACHE)
def _same(x):
    return x


def _compile(run: Run, rank: int, inner: tuple[int, ...]):
    key = (run.key, rank, inner)
    with _LOCK:
        fn = _KERNELS.get(key)
    if fn is not None:
        return fn
    fnames = [f"f{j}" for j in range(len(run.program))]
    body = _source(run, rank, inner, fnames)
    ct = _COMPUTE[run.dtype]
    rd = "round_f16" if run.dtype == "float16" else "_same"
    header = ["import numpy as np", "from numba import njit",
              "from ascendsim.ir.registry import get_op",
              f"from ascendsim.kernels.composite import {rd} as RD", f"CT = np.{ct}"]
    header += [f"{fnames[j]} = get_op({s.op_type!r}).scalar" for j, s in enumerate(run.program)]
    fn = _load(header, body) if CACHE else None
    if fn is None:
        from ..ir.registry import get_op

        ns: dict[str, Any] = {"np": np, "CT": getattr(np, ct),
                              "RD": round_f16 if run.dtype == "float16" else _same}
        ns.update({fnames[j]: get_op(s.op_type).scalar for j, s in enumerate(run.program)})
        exec(compile(body, f"<composite {run.program[0].op_type}...>", "exec"), ns)
        fn = njit(fastmath=FASTMATH, error_model="numpy")(ns["composite"])
    with _LOCK:
        _KERNELS[key] = fn
    return fn


def _elementwise_version() -> str:
    """A hash of the source of everything a generated kernel inlines (the scalar functions,
    `round_f16`): numba's disk cache only watches the generated module, so it goes in its text."""
    from . import elementwise

    h = hashlib.sha1(Path(elementwise.__file__).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:12]


def _load(header: list[str], body: str):
    """Write the kernel as a module in the cache directory and import it (numba cache=True);
    None when the directory cannot be used."""
    text = "\n".join(header) + f"\n# inlined code version {_elementwise_version()}\n\n" + \
        body.replace("def composite", "@njit(cache=True, fastmath=" + repr(FASTMATH) +
                     ", error_model='numpy')\ndef composite", 1)
    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
    modname = f"ascendsim_composite_{digest}"
    if modname in sys.modules:
        return sys.modules[modname].composite
    try:
        COMPOSITE_CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path = COMPOSITE_CACHE_DIR / f"{modname}.py"
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            return None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except OSError:
        return None
    sys.modules[modname] = mod
    return mod.composite


# ----------------------------------------------------------------------------- execution
def run_kernel(run: Run, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Compute a run's outputs from its input arrays with its composite loop."""
    ct = np.dtype(_COMPUTE[run.dtype])
    shape = run.shape
    flat = [np.ascontiguousarray(a, dtype=ct).reshape(-1) for a in arrays]
    strides = [_bcast_strides(np.shape(a), shape) for a in arrays]
    strides.append(_bcast_strides(shape, shape))
    cshape, cstrides = _collapse(shape, strides)
    rank = len(cshape)
    inner = tuple(1 if s[-1] else 0 for s in cstrides[:-1])
    fn = _compile(run, rank, inner)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    outs = [np.empty(n, dtype=ct) for _ in run.stores]
    st = np.array(cstrides, dtype=np.int64).reshape(len(cstrides), rank)
    if n:
        fn(np.array(cshape, dtype=np.int64), st, *flat, *outs)
    return [o.reshape(shape).astype(run.dtype, copy=False) for o in outs]


def run_subgraph(sub, args: list) -> list[np.ndarray]:
    """Values of a fused node's outputs: runs by their composite loops, other ops by their
    registry kernels (nested fused nodes recursively)."""
    from ..errors import AscendSimError, GraphError
    from ..ir.tensor import materialize

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
            results = run_kernel(st, [fetch(v) for v in st.inputs])
            env.update(zip(st.outputs, results))
            nodes = st.nodes
        else:
            a = [fetch(i) for i in st.inputs]
            try:
                res = run_subgraph(st.subgraph, a) if st.subgraph is not None else \
                    _opdef(st).kernel(a, st.attrs)
            except AscendSimError:
                raise
            except Exception as exc:   # name the inner node, not numba internals
                shapes = [None if x is None else (np.shape(x), np.asarray(x).dtype.name)
                          for x in a]
                raise GraphError(f"node '{st.name}' ({st.op_type}) inside fused subgraph "
                                 f"'{sub.name}' failed on inputs {shapes}: "
                                 f"{type(exc).__name__}: {exc}") from exc
            env.update((o, np.asarray(r)) for o, r in zip(st.outputs, res) if o)
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
    from ..ir.graph import Graph

    g = Graph("chain")
    v = g.input("x", x.shape, x.dtype.name)
    for op, consts in ops:
        v = g.add_node(op, [v, *[np.asarray(c, dtype=x.dtype) for c in consts]])[0]
    g.output(v)
    return run_subgraph(g, [x])[0]


__all__ = ["plan", "run_subgraph", "run_kernel", "compilable", "composite_chain", "Plan", "Run",
           "COMPOSITE_CACHE_DIR"]
