"""Cube ops (MatMul, Gemm, Conv, ConvTranspose) and BiasAdd, the bias epilogue they fuse with.

Signatures and attribute names are ONNX opset 21's, with two documented extensions that the
Ascend stack uses:
- MatMul takes an optional third input ``bias`` (1-D, along the last axis), as CANN's
  MatMulV2 does; the MatMulBiasAdd fusion pass produces it. The bias joins the fp32
  accumulator, so the fused op rounds once.
- BiasAdd (TF/CANN, not ONNX): ``x + bias`` along the channel axis given by ``data_format``
  ("NCHW"/"NCDHW": axis 1; "NHWC"/"NDHWC": the last axis); the AABiasaddConvFusion pass folds
  it into the preceding Conv's bias.

Numerics: fp16 operands accumulate in fp32 and round once (the cube's L0C); int8/uint8 MatMul
accumulates and returns int32. ``flops`` is 2 x the real multiply-accumulates (group-aware).
Symbolic batch dims pass through; symbolic spatial dims give readable symbolic output dims.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from ...errors import GraphError
from ...kernels import conv as kconv
from ...kernels import matmul as kmm
from ...kernels.pool import resolve_window
from ..registry import Category, OpDef, Unit, VecClass, broadcast_shapes, register
from ..tensor import Value

FLOATS = ("float16", "float32", "float64")
MATMUL_DTYPES = FLOATS + ("int8", "uint8")
# Bias dtypes a cube op accepts per operand dtype (fp16 also takes an fp32 bias, as CANN does).
_BIAS_DTYPES = {"float16": ("float16", "float32"), "float32": ("float32",),
                "float64": ("float64",), "int8": ("int32",), "uint8": ("int32",)}
DATA_FORMATS = ("NCHW", "NCDHW", "NHWC", "NDHWC")


def _known(*dims: object) -> bool:
    return all(isinstance(d, int) for d in dims)


def _same_dtype(a: Value, b: Value, allowed: Sequence[str]) -> str:
    if a.dtype != b.dtype:
        raise GraphError(f"'{a.name}' is {a.dtype} but '{b.name}' is {b.dtype}; "
                         f"both operands need one dtype")
    if a.dtype not in allowed:
        raise GraphError(f"dtype {a.dtype} of '{a.name}' is not supported; "
                         f"expected one of {', '.join(allowed)}")
    return a.dtype


def _check_bias(bias: Value | None, n: object, dtype: str, what: str) -> None:
    if bias is None:
        return
    if bias.rank != 1 or (_known(n, bias.shape[0]) and bias.shape[0] not in (n, 1)):
        raise GraphError(f"bias '{bias.name}' has shape {bias.shape}, expected ({n},) "
                         f"(one value per {what})")
    if bias.dtype not in _BIAS_DTYPES[dtype]:
        raise GraphError(f"bias '{bias.name}' is {bias.dtype}; with {dtype} operands it must "
                         f"be {' or '.join(_BIAS_DTYPES[dtype])}")


# ----------------------------------------------------------------------------- MatMul
def _matmul_infer(ins, attrs, consts):
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    dtype = _same_dtype(a, b, MATMUL_DTYPES)
    if a.rank == 0 or b.rank == 0:
        raise GraphError(f"MatMul operands must have rank >= 1, got {a.shape} and {b.shape}")
    sa = a.shape if a.rank > 1 else (1,) + a.shape
    sb = b.shape if b.rank > 1 else b.shape + (1,)
    if _known(sa[-1], sb[-2]) and sa[-1] != sb[-2]:
        raise GraphError(f"inner dimensions differ: '{a.name}' {a.shape} has K={sa[-1]}, "
                         f"'{b.name}' {b.shape} has K={sb[-2]}")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    out = batch + (sa[-2:-1] if a.rank > 1 else ()) + (sb[-1:] if b.rank > 1 else ())
    if bias is not None and b.rank == 1:
        raise GraphError(f"bias '{bias.name}' needs a 2-D or higher B ('{b.name}' is 1-D)")
    _check_bias(bias, sb[-1], dtype, "output column")
    return [(out, kmm.out_dtype(dtype).name)]


def _matmul_flops(ins, outs, attrs) -> int:
    a = ins[0]
    return 2 * outs[0].numel * int(a.shape[-1])


register(OpDef(
    "MatMul", _matmul_infer, kmm.matmul, Category.CUBE, unit=Unit.CUBE,
    inputs=("a", "b", "bias?"), flops=_matmul_flops, builder="matmul",
    doc="numpy.matmul semantics; optional 1-D bias along the last axis (CANN MatMulV2, "
        "non-ONNX extension used by MatMulBiasAdd fusion); int8 -> int32"))


# ----------------------------------------------------------------------------- Gemm
def _gemm_infer(ins, attrs, consts):
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    dtype = _same_dtype(a, b, FLOATS)
    if a.rank != 2 or b.rank != 2:
        raise GraphError(f"Gemm needs 2-D A and B, got {a.shape} and {b.shape}")
    m, ka = a.shape[::-1] if attrs["transA"] else a.shape
    kb, n = b.shape[::-1] if attrs["transB"] else b.shape
    if _known(ka, kb) and ka != kb:
        raise GraphError(f"inner dimensions differ: A' is {(m, ka)}, B' is {(kb, n)} "
                         f"(transA={attrs['transA']}, transB={attrs['transB']})")
    if c is not None:
        if c.dtype != dtype:
            raise GraphError(f"C '{c.name}' is {c.dtype}, A and B are {dtype}")
        fits = c.rank <= 2 and all(not _known(cd, od) or cd in (1, od)
                                   for cd, od in zip(c.shape[::-1], (n, m)))
        if not fits:
            raise GraphError(f"C '{c.name}' {c.shape} does not broadcast to {(m, n)}")
    return [((m, n), dtype)]


def _gemm_flops(ins, outs, attrs) -> int:
    a = ins[0]
    k = a.shape[0] if attrs["transA"] else a.shape[1]
    return 2 * outs[0].numel * int(k)


register(OpDef(
    "Gemm", _gemm_infer, kmm.gemm, Category.CUBE, unit=Unit.CUBE, inputs=("a", "b", "c?"),
    attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}, flops=_gemm_flops))


# ----------------------------------------------------------------------------- BiasAdd
def _bias_add_infer(ins, attrs, consts):
    x, bias = ins[0], ins[1]
    fmt = attrs["data_format"]
    if fmt not in DATA_FORMATS:
        raise GraphError(f"data_format {fmt!r} is not one of {', '.join(DATA_FORMATS)}")
    if x.rank < 2:
        raise GraphError(f"BiasAdd input '{x.name}' must have rank >= 2, got {x.shape}")
    if x.dtype != bias.dtype:
        raise GraphError(f"bias '{bias.name}' is {bias.dtype}, '{x.name}' is {x.dtype}")
    ch = x.shape[kmm.channel_axis(x.rank, fmt)]
    if bias.rank != 1 or (_known(ch, bias.shape[0]) and bias.shape[0] != ch):
        raise GraphError(f"bias '{bias.name}' has shape {bias.shape}, expected ({ch},): the "
                         f"channels of '{x.name}' {x.shape} in {fmt}")
    return [(x.shape, x.dtype)]


register(OpDef(
    "BiasAdd", _bias_add_infer, kmm.bias_add, Category.BROADCAST, unit=Unit.VECTOR,
    inputs=("x", "bias"), attrs={"data_format": "NCHW"}, vec_class=VecClass.BINARY,
    doc="TF/CANN BiasAdd (non-ONNX): x + bias along the channel axis of data_format"))


# ----------------------------------------------------------------------------- Conv
_WINDOW_ATTRS = {"auto_pad": "NOTSET", "dilations": None, "kernel_shape": None, "pads": None,
                 "strides": None}


def _conv_operands(x: Value, w: Value) -> None:
    _same_dtype(x, w, FLOATS)
    if not 3 <= x.rank <= 5:
        raise GraphError(f"X '{x.name}' {x.shape} must be (N, C, 1 to 3 spatial dims)")
    if w.rank != x.rank:
        raise GraphError(f"W '{w.name}' {w.shape} must have the rank of X '{x.name}' {x.shape}")


def _kernel_shape(w: Value, attrs: dict) -> tuple:
    ks = attrs.get("kernel_shape")
    spatial = tuple(w.shape[2:])
    if ks:
        ks = tuple(int(k) for k in ks)
        if len(ks) != len(spatial) or (_known(*spatial) and ks != spatial):
            raise GraphError(f"kernel_shape {list(ks)} does not match W's spatial dims "
                             f"{list(spatial)}")
        return ks
    if not _known(*spatial):
        raise GraphError(f"W has symbolic spatial dims {spatial}; give kernel_shape")
    return spatial


def _check_group(group: int) -> int:
    if int(group) < 1:
        raise GraphError(f"group must be >= 1, got {group}")
    return int(group)


def _conv_infer(ins, attrs, consts):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    _conv_operands(x, w)
    group = _check_group(attrs["group"])
    c, (m, cg) = x.shape[1], w.shape[:2]
    if _known(c, cg) and c != cg * group:
        raise GraphError(f"channel mismatch: X '{x.name}' has {c} channels but W '{w.name}' "
                         f"{w.shape} expects {cg} per group x group {group} = {cg * group}")
    if _known(m) and m % group:
        raise GraphError(f"bad group: W '{w.name}' has {m} output channels, not divisible by "
                         f"group {group}")
    win = resolve_window(x.shape[2:], _kernel_shape(w, attrs), attrs)
    _check_bias(bias, m, x.dtype, "output channel")
    return [((x.shape[0], m) + win.out, x.dtype)]


def _conv_flops(ins, outs, attrs) -> int:
    w = ins[1]
    return 2 * outs[0].numel * int(w.shape[1]) * prod(int(k) for k in w.shape[2:])


register(OpDef(
    "Conv", _conv_infer, kconv.conv, Category.CUBE, unit=Unit.CUBE, inputs=("x", "w", "b?"),
    conv=True,
    attrs={**_WINDOW_ATTRS, "group": 1}, flops=_conv_flops))


def _conv_transpose_infer(ins, attrs, consts):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    _conv_operands(x, w)
    group = _check_group(attrs["group"])
    c, (cw, mg) = x.shape[1], w.shape[:2]
    if _known(c, cw) and c != cw:
        raise GraphError(f"channel mismatch: X '{x.name}' has {c} channels but W '{w.name}' "
                         f"{w.shape} has {cw} input channels")
    if _known(c) and c % group:
        raise GraphError(f"bad group: X '{x.name}' has {c} channels, not divisible by group "
                         f"{group}")
    _kernel_shape(w, attrs)
    _, out = kconv.conv_transpose_geometry(x.shape, w.shape, attrs)
    m = mg * group if _known(mg) else mg
    _check_bias(bias, m, x.dtype, "output channel")
    return [((x.shape[0], m) + tuple(out), x.dtype)]


def _conv_transpose_flops(ins, outs, attrs) -> int:
    x, w = ins[0], ins[1]
    return 2 * x.numel * int(w.shape[1]) * prod(int(k) for k in w.shape[2:])


register(OpDef(
    "ConvTranspose", _conv_transpose_infer, kconv.conv_transpose, Category.CUBE, unit=Unit.CUBE,
    conv=True, transposed=True,
    inputs=("x", "w", "b?"),
    attrs={**_WINDOW_ATTRS, "group": 1, "output_padding": None, "output_shape": None},
    flops=_conv_transpose_flops))
