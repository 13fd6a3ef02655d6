"""Reduction kernels: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp, ArgMax/ArgMin.

Any set of axes is brought to a 3-D view (outer, reduced, inner): free when the reduced axes
are adjacent (a reshape), else one transpose copy puts them last (inner = 1). The loop kernel
then walks memory in order, accumulating a whole `inner` row at a time.

Accumulators: fp16 accumulates in fp32 (as the vector unit's reduce does), fp32 in fp32,
fp64 in fp64, integers in int64; the result is rounded back to the input dtype. The combining
arithmetic is the element-wise ops' scalar functions (`scalar_add`, `scalar_max`, ...), not a copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from .config import JIT
from .elementwise import scalar_abs, scalar_add, scalar_exp, scalar_max, scalar_min, scalar_mul

#: Combine kinds of `_reduce3` (the post-step, e.g. mean's division, is in `reduce`).
SUM, MAX, MIN, PROD, SUMSQ, L1 = 0, 1, 2, 3, 4, 5


@njit(inline="always", **JIT)
def _combine(kind, acc, v):
    if kind == SUM:
        return scalar_add(acc, v)
    if kind == MAX:
        return scalar_max(acc, v)
    if kind == MIN:
        return scalar_min(acc, v)
    if kind == PROD:
        return scalar_mul(acc, v)
    if kind == SUMSQ:
        return scalar_add(acc, scalar_mul(v, v))
    return scalar_add(acc, scalar_abs(v))


@njit(**JIT)
def _reduce3(x, kind, init, out):
    """out[o, i] = combine over r of x[o, r, i], starting from `init`."""
    n0, n1, n2 = x.shape
    for o in range(n0):
        if n2 == 1:                      # reduced axes last: a register accumulator
            acc = init
            for r in range(n1):
                acc = _combine(kind, acc, x[o, r, 0])
            out[o, 0] = acc
            continue
        for i in range(n2):
            out[o, i] = init
        for r in range(n1):              # a whole contiguous row of `inner` at a time
            for i in range(n2):
                out[o, i] = _combine(kind, out[o, i], x[o, r, i])


@njit(**JIT)
def _sum_exp3(x, shift, out):
    """out[o, i] = sum over r of exp(x[o, r, i] - shift[o, i]) (LogSumExp's second pass)."""
    n0, n1, n2 = x.shape
    for o in range(n0):
        for i in range(n2):
            out[o, i] = 0.0
        for r in range(n1):
            for i in range(n2):
                out[o, i] += scalar_exp(x[o, r, i] - shift[o, i])


@njit(**JIT)
def _arg3(x, is_max, last, out):
    """Index along r of the max (is_max) or min of x[o, :, i]; ties pick the first, or the
    last when `last`; a NaN wins (as numpy's argmax)."""
    n0, n1, n2 = x.shape
    for o in range(n0):
        for i in range(n2):
            best = x[o, 0, i]
            k = 0
            for r in range(1, n1):
                v = x[o, r, i]
                if best != best:
                    break
                better = v > best if is_max else v < best
                if better or (last and v == best) or v != v:
                    best, k = v, r
            out[o, i] = k


def normalize_axes(axes: Sequence[int], rank: int) -> list[int]:
    """Sorted non-negative axes; ValueError names an axis outside [-rank, rank-1] or a repeat."""
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"axes {list(axes)} repeat an axis")
    return sorted(out)


def to3d(x: np.ndarray, axes: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """View `x` as (outer, reduced, inner) and return it with the kept dims' shape."""
    shape = x.shape
    kept = tuple(d for i, d in enumerate(shape) if i not in axes)
    red = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    if not axes:
        return x.reshape(1, 1, -1), kept
    if axes == list(range(axes[0], axes[-1] + 1)):
        outer = int(np.prod(shape[:axes[0]], dtype=np.int64))
        inner = int(np.prod(shape[axes[-1] + 1:], dtype=np.int64))
        return np.ascontiguousarray(x).reshape(outer, red, inner), kept
    perm = [i for i in range(x.ndim) if i not in axes] + list(axes)
    outer = int(np.prod(kept, dtype=np.int64))
    return np.ascontiguousarray(x.transpose(perm)).reshape(outer, red, 1), kept


def _acc_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize <= 4 else np.dtype(np.float64)
    return np.dtype(np.int64)


def _init(kind: int, dtype: np.dtype, src: np.dtype) -> object:
    """The identity of a combine kind in accumulator `dtype` for input dtype `src` (max of
    nothing is -inf, or False for bool, as ONNX's empty-set tests)."""
    if kind in (MAX, MIN):
        if src == np.bool_:
            return int(kind == MIN)
        if dtype.kind == "f":
            return -np.inf if kind == MAX else np.inf
        info = np.iinfo(dtype)
        return info.min if kind == MAX else info.max
    return 1 if kind == PROD else 0


def _out_shape(shape: tuple, axes: list[int], keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


#: op name -> (combine kind, post-step)
_MODES = {"sum": (SUM, None), "mean": (SUM, "mean"), "max": (MAX, None), "min": (MIN, None),
          "prod": (PROD, None), "sum_square": (SUMSQ, None), "l1": (L1, None),
          "l2": (SUMSQ, "sqrt"), "log_sum": (SUM, "log"), "log_sum_exp": (MAX, "lse")}


def reduce(mode: str, x: np.ndarray, axes: Sequence[int], keepdims: bool) -> np.ndarray:
    """Reduce `x` over `axes` (already chosen: empty means none) with `mode` (see _MODES)."""
    x = np.asarray(x)
    axes = normalize_axes(axes, x.ndim)
    kind, post = _MODES[mode]
    acc = _acc_dtype(x.dtype)
    x3, _ = to3d(x.astype(acc, copy=False), axes)
    out = np.empty((x3.shape[0], x3.shape[2]), dtype=acc)
    _reduce3(x3, kind, out.dtype.type(_init(kind, acc, x.dtype)), out)
    with np.errstate(all="ignore"):
        if post == "mean":
            out = out / max(x3.shape[1], 1) if x3.shape[1] else out * np.nan
        elif post == "sqrt":
            out = np.sqrt(out)
        elif post == "log":
            out = np.log(out)
        elif post == "lse":
            shift = np.where(np.isfinite(out), out, 0).astype(acc)
            s = np.empty_like(out)
            _sum_exp3(x3, shift, s)
            out = np.log(s) + shift
    return np.asarray(out).astype(x.dtype, copy=False).reshape(
        _out_shape(x.shape, axes, keepdims))


def arg_reduce(x: np.ndarray, axis: int, keepdims: bool, is_max: bool,
               select_last_index: bool) -> np.ndarray:
    """ArgMax/ArgMin along one axis: int64 indices."""
    x = np.asarray(x)
    (axis,) = normalize_axes([axis], x.ndim)
    if x.shape[axis] == 0:
        raise ValueError(f"cannot take the arg{'max' if is_max else 'min'} of an empty axis")
    x3, _ = to3d(x.astype(_acc_dtype(x.dtype), copy=False), [axis])
    out = np.empty((x3.shape[0], x3.shape[2]), dtype=np.int64)
    _arg3(x3, is_max, bool(select_last_index), out)
    return out.reshape(_out_shape(x.shape, [axis], keepdims))
