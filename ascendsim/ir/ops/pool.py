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

from ...errors import GraphError
from ...kernels import pool as kpool
from ..registry import Category, OpDef, Unit, VecClass, register

POOL_DTYPES = ("float16", "float32", "float64")
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
    flops=_window_flops, vec_class=VecClass.REDUCE,
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
