"""Reductions (ONNX opset 18+ signatures): ReduceSum, ReduceMean, ReduceMax, ReduceMin,
ReduceProd, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, and
ArgMax/ArgMin.

`axes` is an optional input (a constant: the output shape depends on it); absent or empty
means every axis, unless `noop_with_empty_axes=1`, which makes the op an identity. All run on
the vector unit (category REDUCE); flops count the combining operations per input element
(SumSquare/L2/LogSumExp do more than one). Their vector instructions are sequences in
lower/vector_seq.py (SEQUENCES: reduce trees, per-row steps), not registry counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import GraphError
from ...kernels import reduce as kr
from ..registry import Category, OpDef, VecClass, register, register_grads, symbolic_base
from .elementwise import BOOL, FLOATS, NUMERIC, check_dtype

_REDUCE_ATTRS = {"keepdims": 1, "noop_with_empty_axes": 0}


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple:
    """The output shape of reducing `shape` over normalised `axes`."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce_axes(data: Any, axes_value: Any, axes: Any, attrs: dict) -> list[int] | None:
    """The normalised axes to reduce, or None for a no-op (empty axes with the noop flag).

    `axes_value` is the axes input Value (or None when absent), `axes` its constant data.
    """
    rank = len(data.shape)
    raw = np.asarray([] if axes is None else axes).reshape(-1)
    if raw.size and not np.all(np.mod(raw, 1) == 0):
        raise GraphError(f"axes '{axes_value.name}' must hold integers, got {raw.tolist()}")
    flat = [int(a) for a in raw]
    if not flat:
        return None if attrs["noop_with_empty_axes"] else list(range(rank))
    try:
        return kr.normalize_axes(flat, rank)
    except ValueError as exc:
        raise GraphError(f"{exc} of input '{data.name}' {tuple(data.shape)}") from None


def _unknown_axes_shape(data: Any, axes_value: Any, attrs: dict) -> tuple:
    """The output shape when `axes` is computed at run time: the rank is known (from the
    length of `axes` when keepdims=0), the dims become symbolic."""
    base = symbolic_base([data], "Reduce")
    if attrs["keepdims"]:
        rank = len(data.shape)
    else:
        n = axes_value.shape[0] if axes_value.shape else 1
        if not isinstance(n, int):
            raise GraphError(f"axes '{axes_value.name}' has unknown length and keepdims=0: the "
                             f"output rank cannot be inferred")
        rank = len(data.shape) - (n or len(data.shape))
    return tuple(f"{base}_d{i}" for i in range(rank))


def _reduce_infer(allowed: frozenset) -> Callable:
    def infer(ins, attrs, consts):
        data = ins[0]
        check_dtype(data, allowed)
        axes_value = ins[1] if len(ins) > 1 else None
        if axes_value is not None and (consts[1] if len(consts) > 1 else None) is None:
            return [(_unknown_axes_shape(data, axes_value, attrs), data.dtype)]
        axes = reduce_axes(data, ins[1] if len(ins) > 1 else None,
                           consts[1] if len(consts) > 1 else None, attrs)
        if axes is None:
            return [(data.shape, data.dtype)]
        return [(reduced_shape(data.shape, axes, attrs["keepdims"]), data.dtype)]
    return infer


def _reduce_kernel(mode: str) -> Callable:
    def kernel(args: list, attrs: dict) -> list:
        x = np.asarray(args[0])
        axes = args[1] if len(args) > 1 else None
        flat = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
        if not flat:
            if attrs["noop_with_empty_axes"]:
                return [x]
            flat = list(range(x.ndim))
        return [kr.reduce(mode, x, flat, bool(attrs["keepdims"]))]
    return kernel


def _per_input(k: int) -> Callable:
    return lambda ins, outs, attrs: k * ins[0].numel


def _arg_infer(ins, attrs, consts):
    data = ins[0]
    check_dtype(data, NUMERIC)
    rank = len(data.shape)
    try:
        (axis,) = kr.normalize_axes([attrs["axis"]], rank)
    except ValueError as exc:
        raise GraphError(f"{exc} of input '{data.name}' {tuple(data.shape)}") from None
    return [(reduced_shape(data.shape, [axis], attrs["keepdims"]), "int64")]


def _arg_kernel(is_max: bool) -> Callable:
    def kernel(args: list, attrs: dict) -> list:
        return [kr.arg_reduce(args[0], attrs["axis"], bool(attrs["keepdims"]), is_max,
                              bool(attrs["select_last_index"]))]
    return kernel


#: op type -> (kernel mode, allowed dtypes, flops per input element)
REDUCE_OPS: dict[str, tuple[str, frozenset, int]] = {
    "ReduceSum": ("sum", NUMERIC, 1),
    "ReduceMean": ("mean", NUMERIC, 1),
    "ReduceMax": ("max", NUMERIC | BOOL, 1),
    "ReduceMin": ("min", NUMERIC | BOOL, 1),
    "ReduceProd": ("prod", NUMERIC, 1),
    "ReduceSumSquare": ("sum_square", NUMERIC, 2),
    "ReduceL1": ("l1", NUMERIC, 2),
    "ReduceL2": ("l2", NUMERIC, 2),
    "ReduceLogSum": ("log_sum", FLOATS, 1),
    "ReduceLogSumExp": ("log_sum_exp", FLOATS, 4),
}

for _op, (_mode, _allowed, _k) in REDUCE_OPS.items():
    register(OpDef(_op, _reduce_infer(_allowed), _reduce_kernel(_mode), Category.REDUCE,
                   inputs=("data", "axes?"), attrs=dict(_REDUCE_ATTRS), flops=_per_input(_k),
                   vec_class=VecClass.REDUCE, needs_const_inputs=(1,),
                   doc=f"ONNX {_op}: reduce over the constant `axes` input"))

for _op, _is_max in (("ArgMax", True), ("ArgMin", False)):
    register(OpDef(_op, _arg_infer, _arg_kernel(_is_max), Category.REDUCE, inputs=("data",),
                   attrs={"axis": 0, "keepdims": 1, "select_last_index": 0},
                   flops=_per_input(1), vec_class=VecClass.REDUCE,
                   doc=f"ONNX {_op}: int64 index along `axis`"))



# ----------------------------------------------------------------------------- gradients
def _reduced_axes(ctx) -> list[int]:
    """The axes a reduce node reduced (constant `axes` input; empty means all)."""
    rank = len(ctx.ins[0].shape)
    axes = ctx.const_input(1) if len(ctx.ins) > 1 and ctx.ins[1] is not None else None
    if len(ctx.ins) > 1 and ctx.ins[1] is not None and axes is None:
        raise GraphError(f"{ctx.node.op_type} '{ctx.node.name}' gradient: axes must be a "
                         f"constant")
    flat = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not flat and ctx.attrs["noop_with_empty_axes"]:
        return []
    return kr.normalize_axes(flat, rank) if flat else list(range(rank))


def _kept(ctx, v):
    """`v` (a reduce output or its cotangent) with the reduced axes kept as ones."""
    shape = list(ctx.shape(ctx.ins[0]))
    for a in _reduced_axes(ctx):
        shape[a] = 1
    return ctx.reshape(v, shape)


def _broadcast_back(ctx, dy):
    return ctx.g.expand(_kept(ctx, dy), ctx.ints(ctx.shape(ctx.ins[0])))


def _sum_grad(ctx, douts):
    return [_broadcast_back(ctx, douts[0]), None]


def _mean_grad(ctx, douts):
    shape = ctx.shape(ctx.ins[0])
    n = int(np.prod([shape[a] for a in _reduced_axes(ctx)] or [1]))
    dy = ctx.g.mul(douts[0], ctx.scalar(1.0 / n, douts[0].dtype))
    return [_broadcast_back(ctx, dy), None]


def _sum_square_grad(ctx, douts):
    g, x = ctx.g, ctx.ins[0]
    return [g.mul(_broadcast_back(ctx, douts[0]), g.mul(x, ctx.scalar(2.0, x.dtype))), None]


def _extreme_grad(ctx, douts):
    """The cotangent goes to every element equal to the max (min); ties share it whole
    (inputs with ties are a kink: differentiate away from them)."""
    g, x = ctx.g, ctx.ins[0]
    hit = g.equal(x, _kept(ctx, ctx.outs[0]))
    return [g.where(hit, _kept(ctx, douts[0]), ctx.scalar(0.0, x.dtype)), None]


register_grads({"ReduceSum": _sum_grad, "ReduceMean": _mean_grad,
                "ReduceSumSquare": _sum_square_grad, "ReduceMax": _extreme_grad,
                "ReduceMin": _extreme_grad})
