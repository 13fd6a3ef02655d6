"""Composite loops: a chain of element-wise scalar functions compiled into one numba loop nest.

This module generates, compiles and runs the loops; it knows nothing of graphs. The executor
(`ascendsim.execute.composite`) cuts a fused node's subgraph into runs and describes each as a
`Loop`: a program of `Step`s over input refs, the scalar function of each step (numba
functions of kernels/elementwise.py, which the registry names per op), the storage dtype and
the loop shape.

For each loop, Python source is generated: a loop nest over the loop shape, after collapsing
adjacent dimensions that every operand walks contiguously (so a same-shape chain is one flat
loop that LLVM vectorises). In the innermost loop an operand is either contiguous (`a[b + i]`)
or broadcast along it (loaded once, before the loop). The body calls each op's scalar
function inline (`njit(inline="always")` in kernels/elementwise.py), casting each result to
the compute dtype and, for float16, rounding it to float16 precision (`round_f16`), as the
per-op kernels round each result (bfloat16: `round_bf16_scalar`, as the executor rounds each
bf16 result); so results match unfused ones bit for bit (float32, float16 and bfloat16);
intermediates live in registers, only the run's outputs are stored. Attribute operands
(LeakyRelu's alpha: `scalar_args`) are compile-time constants of the source.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from .bf16 import round_bf16_scalar
from .config import CACHE, FASTMATH

#: where generated kernel modules are written (and numba caches their machine code)
COMPOSITE_CACHE_DIR = Path(os.environ.get(
    "ASCENDSIM_COMPOSITE_CACHE", Path.home() / ".cache" / "ascendsim" / "composite"))

#: compute dtype of each storage dtype a composite loop supports
COMPUTE_DTYPES = {"float16": "float32", "float32": "float32", "float64": "float64",
            "int32": "int32", "int64": "int64", "bfloat16": "float32"}
#: the rounding each step's result gets, per storage dtype (name of a function of this module)
ROUNDING = {"float16": "round_f16", "bfloat16": "round_bf16_scalar"}
#: the numpy dtype a loop's outputs are stored in (bfloat16: float32, see kernels/bf16.py)
STORED = {"bfloat16": "float32"}

_LOCK = threading.Lock()
_KERNELS: dict[tuple, Any] = {}


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


# ----------------------------------------------------------------------------- loops
@dataclass(frozen=True)
class Step:
    """One op of a loop: its name (for messages and cache keys), argument refs ("i3" input,
    "t1" an earlier step's result), compile-time scalar extras, and whether the scalar function
    folds over its arguments (a variadic op: Sum, Max, ...)."""

    op_type: str
    args: tuple[str, ...]
    extras: tuple[float, ...]
    variadic: bool


@dataclass(frozen=True)
class Loop:
    """Everything needed to generate and run one composite loop."""

    program: tuple[Step, ...]
    scalars: tuple[Callable, ...]   # numba scalar function of each step
    n_inputs: int
    stores: tuple[str, ...]         # step ref ("t2") of each output, in order
    dtype: str                      # storage dtype of every value of the loop
    shape: tuple[int, ...]          # loop shape; operands broadcast into it

    @property
    def key(self) -> tuple:
        return (self.program, self.stores, self.dtype)


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


def _source(loop: Loop, rank: int, inner: tuple[int, ...], fnames: list[str]) -> str:
    """Python source of the loop nest (see module doc); `inner[k]` is 1 when input k is
    contiguous along the innermost dim, 0 when broadcast. `RD` rounds each result to the
    storage precision (identity, or `round_f16` for float16)."""
    n_in, n_out = loop.n_inputs, len(loop.stores)
    ins = ", ".join(f"a{k}" for k in range(n_in))
    outs = ", ".join(f"o{m}" for m in range(n_out))
    lines = [f"def composite(shape, strides, {ins}, {outs}):"]
    ind = "    "
    for k in range(n_in + 1):
        lines.append(f"{ind}b{k}_0 = 0")
    consts: dict[float, str] = {}
    for step in loop.program:
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
    for j, step in enumerate(loop.program):
        extra = [consts[x] for x in step.extras]
        if step.variadic:
            expr = step.args[0]
            for a in step.args[1:]:
                expr = f"{fnames[j]}({', '.join([expr, a, *extra])})"
            lines.append(f"{ind}t{j} = RD(CT({expr}))")
        else:
            lines.append(f"{ind}t{j} = RD(CT({fnames[j]}({', '.join([*step.args, *extra])})))")
    for m, ref in enumerate(loop.stores):
        lines.append(f"{ind}o{m}[b{n_in}_{last} + d{last}] = {ref}")
    return "\n".join(lines) + "\n"


@njit(inline="always", cache=CACHE)
def _same(x):
    return x


def _importable(fn: Callable) -> tuple[str, str] | None:
    """(module, name) under which a generated module can import scalar function `fn`."""
    py = getattr(fn, "py_func", fn)
    mod, name = getattr(py, "__module__", None), getattr(py, "__name__", None)
    if mod and name and getattr(sys.modules.get(mod), name, None) is fn:
        return mod, name
    return None


def _compile(loop: Loop, rank: int, inner: tuple[int, ...]):
    key = (loop.key, rank, inner)
    with _LOCK:
        fn = _KERNELS.get(key)
    if fn is not None:
        return fn
    fnames = [f"f{j}" for j in range(len(loop.program))]
    body = _source(loop, rank, inner, fnames)
    ct = COMPUTE_DTYPES[loop.dtype]
    rd = ROUNDING.get(loop.dtype, "_same")
    where = [_importable(f) for f in loop.scalars]
    fn = None
    if CACHE and all(where):
        header = ["import numpy as np", "from numba import njit",
                  f"from ascendsim.kernels.composite import {rd} as RD", f"CT = np.{ct}"]
        header += [f"from {m} import {n} as {fnames[j]}" for j, (m, n) in enumerate(where)]
        fn = _load(header, body)
    if fn is None:
        ns: dict[str, Any] = {"np": np, "CT": getattr(np, ct),
                              "RD": globals()[rd]}
        ns.update(zip(fnames, loop.scalars))
        exec(compile(body, f"<composite {loop.program[0].op_type}...>", "exec"), ns)
        fn = njit(fastmath=FASTMATH, error_model="numpy")(ns["composite"])
    with _LOCK:
        _KERNELS[key] = fn
    return fn


def _elementwise_version() -> str:
    """A hash of the source of everything a generated kernel inlines (the scalar functions,
    `round_f16`): numba's disk cache only watches the generated module, so it goes in its text."""
    from . import bf16, elementwise

    h = hashlib.sha1(Path(elementwise.__file__).read_bytes())
    h.update(Path(__file__).read_bytes())
    h.update(Path(bf16.__file__).read_bytes())
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


# ----------------------------------------------------------------------------- running
def run_loop(loop: Loop, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Compute a loop's outputs from its input arrays (broadcast into the loop shape)."""
    ct = np.dtype(COMPUTE_DTYPES[loop.dtype])
    shape = loop.shape
    flat = [np.ascontiguousarray(a, dtype=ct).reshape(-1) for a in arrays]
    strides = [_bcast_strides(np.shape(a), shape) for a in arrays]
    strides.append(_bcast_strides(shape, shape))
    cshape, cstrides = _collapse(shape, strides)
    rank = len(cshape)
    inner = tuple(1 if s[-1] else 0 for s in cstrides[:-1])
    fn = _compile(loop, rank, inner)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    outs = [np.empty(n, dtype=ct) for _ in loop.stores]
    st = np.array(cstrides, dtype=np.int64).reshape(len(cstrides), rank)
    if n:
        fn(np.array(cshape, dtype=np.int64), st, *flat, *outs)
    store = STORED.get(loop.dtype, loop.dtype)
    return [o.reshape(shape).astype(store, copy=False) for o in outs]


__all__ = ["Step", "Loop", "run_loop", "round_f16", "round_bf16_scalar", "COMPUTE_DTYPES",
           "COMPOSITE_CACHE_DIR"]
