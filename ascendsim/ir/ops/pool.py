"""Pooling ops (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool): SEGMENT ops that the
vector unit runs window by window.

ONNX opset 21 signatures and attributes. The window geometry (pads, auto_pad, ceil_mode,
dilations) comes from `kernels.pool.resolve_window`, shared with the kernels. MaxPool's
optional Indices output is computed by `kernels.pool.max_pool_with_indices`; the registered
op makes the Y output only (see the note in `_max_pool_infer`). ``flops`` counts the window
size per output element.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ...errors import GraphError
from ...kernels import pool as kpool
from ..registry import Category, OpDef, Unit, VecClass, register, register_grads

POOL_DTYPES = ("float16", "bfloat16", "float32", "float64")
MAXPOOL_DTYPES = POOL_DTYPES + ("int8", "uint8")

_WINDOW_ATTRS = {"auto_pad": "NOTSET", "ceil_mode": 0, "dilations": None, "kernel_shape": None,
                 "pads": None, "strides": None}


def _check_x(x, allowed) -> None:
    if x.dtype not in allowed:
        raise GraphError(f"dtype {x.dtype} of '{x.name}' is not supported; "
                         f"expected one of {', '.join(allowed)}")
    if not 3 <= x.rank <= 5:
        raise GraphError(f"X '{x.name}' {x.shape} must be (N, C, 1 to 3 spatial dims)")


def _window_infer(ins, attrs, allowed):
    x = ins[0]
    _check_x(x, allowed)
    if not attrs.get("kernel_shape"):
        raise GraphError("kernel_shape is required")
    win = kpool.resolve_window(x.shape[2:], attrs["kernel_shape"], attrs,
                               bool(attrs.get("ceil_mode")))
    return x.shape[:2] + win.out


def _max_pool_infer(ins, attrs, consts):
    # The optional Indices output (int64) is asked for with num_outputs=2, as LayerNorm's
    # optional outputs are (the ONNX importer sets it from the node's output list).
    if attrs["storage_order"] not in (0, 1):
        raise GraphError(f"storage_order must be 0 or 1, got {attrs['storage_order']}")
    if attrs["num_outputs"] not in (1, 2):
        raise GraphError(f"num_outputs must be 1 (Y) or 2 (Y, Indices), got "
                         f"{attrs['num_outputs']!r}")
    y = _window_infer(ins, attrs, MAXPOOL_DTYPES)
    return [(y, ins[0].dtype), (y, "int64")][:attrs["num_outputs"]]


def _avg_pool_infer(ins, attrs, consts):
    return [(_window_infer(ins, attrs, POOL_DTYPES), ins[0].dtype)]


def _window_flops(ins, outs, attrs) -> int:
    return outs[0].numel * prod(int(k) for k in attrs["kernel_shape"])


def _global_infer(ins, attrs, consts):
    x = ins[0]
    _check_x(x, POOL_DTYPES)
    return [(x.shape[:2] + (1,) * (x.rank - 2), x.dtype)]


def _global_flops(ins, outs, attrs) -> int:
    return ins[0].numel


register(OpDef(
    "MaxPool", _max_pool_infer, kpool.max_pool, Category.SEGMENT, unit=Unit.VECTOR,
    attrs={**_WINDOW_ATTRS, "storage_order": 0, "num_outputs": 1}, num_outputs="num_outputs",
    flops=_window_flops, vec_class=VecClass.REDUCE, lowering="max_pool",
    doc="ONNX MaxPool; num_outputs=2 (non-ONNX attribute) adds the Indices output"))
register(OpDef(
    "AveragePool", _avg_pool_infer, kpool.average_pool, Category.SEGMENT, unit=Unit.VECTOR,
    attrs={**_WINDOW_ATTRS, "count_include_pad": 0}, flops=_window_flops,
    vec_class=VecClass.REDUCE))
register(OpDef(
    "GlobalAveragePool", _global_infer, kpool.global_average_pool, Category.SEGMENT,
    unit=Unit.VECTOR, flops=_global_flops, vec_class=VecClass.REDUCE))
register(OpDef(
    "GlobalMaxPool", _global_infer, kpool.global_max_pool, Category.SEGMENT, unit=Unit.VECTOR,
    flops=_global_flops, vec_class=VecClass.REDUCE))


# ----------------------------------------------------------------------------- gradients
def _max_pool_grad(ctx, douts):
    """Exact: the argmax of each window (MaxPoolWithArgmax, recomputed) routes its output's
    cotangent to one input element; overlapping windows add (MaxPoolGradWithArgmax)."""
    if ctx.attrs["num_outputs"] != 1 or len(ctx.ins[0].shape) != 4:
        raise GraphError(f"MaxPool '{ctx.node.name}' gradient: 2-D pooling with the Y output "
                         f"only")
    win = _plain_window(ctx, "MaxPool")
    g, x = ctx.g, ctx.ins[0]
    attrs = {"kernel_shape": list(win.kernel), "strides": list(win.strides),
             "pads": list(win.pads_begin + win.pads_end)}
    _, argmax = g.max_pool_with_argmax(x, **attrs)
    return [g.max_pool_grad_with_argmax(x, douts[0], argmax, **attrs)]


def _plain_window(ctx, what: str) -> kpool.Window:
    x = ctx.ins[0]
    win = kpool.resolve_window(ctx.shape(x)[2:], ctx.attrs["kernel_shape"], ctx.attrs,
                               bool(ctx.attrs.get("ceil_mode")))
    if any(d != 1 for d in win.dilations):
        raise GraphError(f"{what} '{ctx.node.name}' gradient: dilations are not supported")
    return win


def _avg_pool_grad(ctx, douts):
    """dx = ConvTranspose(dy / count, ones) per channel (group = C): each input element gets
    the cotangent of every window that covers it over that window's divisor. `count` is a
    constant from the geometry (pads counted or not, ceil_mode windows clipped)."""
    g, x, dy = ctx.g, ctx.ins[0], douts[0]
    xs, ys = ctx.shape(x), ctx.shape(ctx.outs[0])
    win = _plain_window(ctx, "AveragePool")
    include = bool(ctx.attrs["count_include_pad"])
    counts = np.ones(ys[2:], dtype=np.float64)
    for ax, (h, k, s, pb, pe, p) in enumerate(zip(xs[2:], win.kernel, win.strides,
                                                 win.pads_begin, win.pads_end, ys[2:])):
        lo, hi = (-pb, h + pe) if include else (0, h)
        start = np.arange(p) * s - pb
        per = np.minimum(start + k, hi) - np.maximum(start, lo)
        shape = [1] * len(ys[2:])
        shape[ax] = p
        counts = counts * per.reshape(shape)
    c = xs[1]
    scaled = g.mul(dy, g.const((1.0 / counts).astype(dy.dtype)))
    ones = g.const(np.ones((c, 1) + tuple(win.kernel), dtype=dy.dtype))
    full = [si * (p - 1) + k - b - e
            for si, p, k, b, e in zip(win.strides, ys[2:], win.kernel, win.pads_begin,
                                      win.pads_end)]
    opad = [max(h - f, 0) for h, f in zip(xs[2:], full)]
    dx = g.conv_transpose(scaled, ones, kernel_shape=list(win.kernel),
                          strides=list(win.strides), pads=list(win.pads_begin + win.pads_end),
                          group=c, output_padding=opad)
    if any(f > h for f, h in zip(full, xs[2:])):     # ceil_mode windows past the end
        dx = g.slice(dx, ctx.ints([0] * len(full)), ctx.ints(list(xs[2:])),
                     ctx.ints(list(range(2, len(xs)))))
    return [dx]


def _global_avg_grad(ctx, douts):
    x, dy = ctx.ins[0], douts[0]
    shape = ctx.shape(x)
    scale = ctx.scalar(1.0 / prod(shape[2:]), dy.dtype)
    return [ctx.g.expand(ctx.g.mul(dy, scale), ctx.ints(shape))]


def _global_max_grad(ctx, douts):
    g, x = ctx.g, ctx.ins[0]
    return [g.where(g.equal(x, ctx.outs[0]), douts[0], ctx.scalar(0.0, x.dtype))]


register_grads({"MaxPool": _max_pool_grad, "AveragePool": _avg_pool_grad,
                "GlobalAveragePool": _global_avg_grad, "GlobalMaxPool": _global_max_grad})
