"""Cube ops (MatMul, Gemm, Conv, ConvTranspose) and BiasAdd, the bias epilogue they fuse with.

Signatures and attribute names are ONNX opset 21's, with two documented extensions that the
Ascend stack uses:
- MatMul takes an optional third input ``bias`` (1-D, along the last axis), as CANN's
  MatMulV2 does; the MatMulBiasAdd fusion pass produces it. The bias joins the fp32
  accumulator, so the fused op rounds once.
- BiasAdd (TF/CANN, not ONNX): ``x + bias`` along the channel axis given by ``data_format``
  ("NCHW"/"NCDHW": axis 1; "NHWC"/"NDHWC": the last axis); the AABiasaddConvFusion pass folds
  it into the preceding Conv's bias.

Numerics: fp16 and bf16 operands accumulate in fp32 and round once (the cube's L0C; a bf16
result is rounded by the executor, kernels/bf16.py); int8/uint8 MatMul
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
from ..registry import Category, OpDef, Unit, VecClass, broadcast_shapes, register, register_grads
from ..tensor import Value

FLOATS = ("float16", "bfloat16", "float32", "float64")
MATMUL_DTYPES = FLOATS + ("int8", "uint8")
# Bias dtypes a cube op accepts per operand dtype (fp16 and bf16 also take an fp32 bias, as
# CANN's MatMulV2 does).
_BIAS_DTYPES = {"float16": ("float16", "float32"), "bfloat16": ("bfloat16", "float32"),
                "float32": ("float32",),
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
    return [(out, dtype if dtype == "bfloat16" else kmm.out_dtype(dtype).name)]


def _matmul_flops(ins, outs, attrs) -> int:
    a = ins[0]
    return 2 * outs[0].numel * int(a.shape[-1])


register(OpDef(
    "MatMul", _matmul_infer, kmm.matmul, Category.CUBE, unit=Unit.CUBE,
    inputs=("a", "b", "bias?"), flops=_matmul_flops, builder="matmul",
    attrs={"block_dim": 0, "single_core": None},
    doc="numpy.matmul semantics; optional 1-D bias along the last axis (CANN MatMulV2, "
        "non-ONNX extension used by MatMulBiasAdd fusion); int8 -> int32. block_dim: the "
        "kernel's block dim when a profile fixes it (0: the cube tiling chooses); "
        "single_core: [singleCoreM, singleCoreN], the output block each core owns when the "
        "kernel fixes its split (None: the base blocks are spread evenly)"))


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
    attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0, "block_dim": 0,
           "single_core": None},
    flops=_gemm_flops,
    doc="ONNX Gemm; block_dim: the kernel's block dim when a profile fixes it (0: the cube "
        "tiling chooses); single_core: [singleCoreM, singleCoreN], the output block each core "
        "owns when the kernel fixes its split (None: the base blocks are spread evenly)"))


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
    attrs={**_WINDOW_ATTRS, "group": 1, "block_dim": 0}, flops=_conv_flops,
    doc="ONNX Conv (CANN Conv2D): an implicit GEMM on the cube; block_dim: the kernel's block "
        "dim when a profile fixes it (0: the cube tiling chooses)"))


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


def _filter_grad_infer(ins, attrs, consts):
    x, dy = ins[0], ins[1]
    filt = attrs.get("filter_shape")
    if not filt or len(filt) != len(x.shape) or len(x.shape) < 3:
        raise GraphError(f"Conv2DBackpropFilter: filter_shape {filt} must give (M, C, *kernel) "
                         f"for X '{x.name}' of rank {len(x.shape)}")
    if len(dy.shape) != len(x.shape):
        raise GraphError(f"Conv2DBackpropFilter: dY '{dy.name}' {dy.shape} and X '{x.name}' "
                         f"{x.shape} differ in rank")
    if _check_group(attrs["group"]) != 1:
        raise GraphError(f"Conv2DBackpropFilter: group {attrs['group']} is not supported "
                         f"(group 1 only; grouped weight gradients stay a Conv)")
    filt = tuple(int(d) for d in filt)
    for what, have, want in (("batch", dy.shape[0], x.shape[0]), ("dY channels", dy.shape[1],
                             filt[0]), ("X channels", x.shape[1], filt[1])):
        if _known(have, want) and int(have) != int(want):
            raise GraphError(f"Conv2DBackpropFilter: {what} {have} does not match {want} "
                             f"(X '{x.name}' {x.shape}, dY '{dy.name}' {dy.shape}, filter {filt})")
    win = resolve_window(x.shape[2:], filt[2:], attrs)
    if _known(*win.out) and tuple(win.out) != tuple(dy.shape[2:]):
        raise GraphError(f"Conv2DBackpropFilter: dY '{dy.name}' spatial {tuple(dy.shape[2:])} is "
                         f"not the forward output {tuple(win.out)} of X '{x.name}' {x.shape}")
    return [(filt, x.dtype)]


def _filter_grad_flops(ins, outs, attrs) -> int:
    dy, w = ins[1], outs[0]
    return 2 * dy.numel * int(w.shape[1]) * prod(int(k) for k in w.shape[2:])


def _filter_grad_view(attrs: dict, x_shape: tuple, dy_shape: tuple, out_shape: tuple) -> tuple:
    return kconv.conv_backprop_filter_view(x_shape, dy_shape, out_shape, attrs)


# CANN's weight-gradient kernel (MindSpore's Conv2D bprop and torch_npu's convolution_backward
# launch it; the ResNet-50 training profile of Huawei-Performance-Model/Ascend-910B,
# resnet50_16_224_224, runs one Conv2DBackpropFilter per conv): x and dy are read in their
# NC1HWC0 layout, the N/C swaps of the Conv it equals are addressing, not data movement.
register(OpDef(
    "Conv2DBackpropFilter", _filter_grad_infer, kconv.conv_backprop_filter, Category.CUBE,
    unit=Unit.CUBE, inputs=("x", "dy"), conv=True, conv_view=_filter_grad_view,
    builder="conv_backprop_filter",
    attrs={**_WINDOW_ATTRS, "group": 1, "filter_shape": None, "block_dim": 0},
    flops=_filter_grad_flops,
    doc="dW of a group-1 Conv from its input X and output gradient dY (CANN "
        "Conv2DBackpropFilter): the Conv of X^T by dY^T, one cube kernel; block_dim: the "
        "kernel's block dim when a profile fixes it (0: the cube tiling chooses)"))


# ----------------------------------------------------------------------------- gradients
# dA = dY B^T and dB = A^T dY on the cube (Gemm/MatMul with transposed operands); Conv's data
# gradient is a ConvTranspose by the same weight, its weight gradient a Conv of the input by
# the output gradient (strides and dilations swap), so both do the forward's MACs.
def _matmul_grad(ctx, douts):
    g, dy = ctx.g, douts[0]
    a, b = ctx.ins[0], ctx.ins[1]
    sa, sb = ctx.shape(a), ctx.shape(b)
    if len(sa) == 1 or len(sb) == 1:
        raise GraphError(f"MatMul '{ctx.node.name}' gradient: 1-D operands are not supported "
                         f"({sa}, {sb})")
    out: list = [None] * len(ctx.ins)
    if len(sb) == 2:
        # a weight shared by every row: flatten the rows and use Gemm (as frameworks do)
        rows = int(prod(sa[:-1]))
        dy2 = ctx.reshape(dy, (rows, sb[1]))
        if ctx.needs(0):
            out[0] = ctx.reshape(g.gemm(dy2, b, transB=1), sa)
        if ctx.needs(1):
            out[1] = g.gemm(ctx.reshape(a, (rows, sa[-1])), dy2, transA=1)
    else:
        def swap(v: Value) -> Value:
            r = len(v.shape)
            return g.transpose(v, perm=list(range(r - 2)) + [r - 1, r - 2])
        if ctx.needs(0):
            out[0] = ctx.unbroadcast(g.matmul(dy, swap(b)), a)
        if ctx.needs(1):
            out[1] = ctx.unbroadcast(g.matmul(swap(a), dy), b)
    if len(ctx.ins) > 2 and ctx.ins[2] is not None and ctx.needs(2):
        out[2] = ctx.sum_to_channel(dy, axis=-1)
    return out


def _gemm_grad(ctx, douts):
    """Y = alpha A' B' + beta C with A' = A or A^T (transA), B' likewise."""
    g, dy = ctx.g, douts[0]
    a, b = ctx.ins[0], ctx.ins[1]
    ta, tb = int(ctx.attrs["transA"]), int(ctx.attrs["transB"])
    alpha, beta = float(ctx.attrs["alpha"]), float(ctx.attrs["beta"])
    out: list = [None] * len(ctx.ins)
    if ctx.needs(0):    # dA' = alpha dY B'^T
        out[0] = (g.gemm(b, dy, alpha=alpha, transA=tb, transB=1) if ta else
                  g.gemm(dy, b, alpha=alpha, transB=1 - tb))
    if ctx.needs(1):    # dB' = alpha A'^T dY
        out[1] = (g.gemm(dy, a, alpha=alpha, transA=1, transB=ta) if tb else
                  g.gemm(a, dy, alpha=alpha, transA=1 - ta))
    if len(ctx.ins) > 2 and ctx.ins[2] is not None and ctx.needs(2):
        dc = dy if beta == 1.0 else g.mul(dy, ctx.scalar(beta, dy.dtype))
        out[2] = ctx.unbroadcast(dc, ctx.ins[2])
    return out


def _bias_add_grad(ctx, douts):
    axis = kmm.channel_axis(len(ctx.ins[0].shape), ctx.attrs["data_format"])
    return [douts[0], ctx.sum_to_channel(douts[0], axis) if ctx.needs(1) else None]


def _conv_grad(ctx, douts):
    g, dy = ctx.g, douts[0]
    x, w = ctx.ins[0], ctx.ins[1]
    xs, ws, ys = ctx.shape(x), ctx.shape(w), ctx.shape(ctx.outs[0])
    kernel = tuple(int(k) for k in ws[2:])
    win = resolve_window(xs[2:], kernel, ctx.attrs)
    s, d, pb, pe = win.strides, win.dilations, list(win.pads_begin), list(win.pads_end)
    group = int(ctx.attrs["group"])
    out: list = [None] * len(ctx.ins)
    if ctx.needs(0):
        opad = [h - (si * (p - 1) + (k - 1) * di + 1 - b - e)
                for h, si, p, k, di, b, e in zip(xs[2:], s, ys[2:], kernel, d, pb, pe)]
        out[0] = g.conv_transpose(dy, w, kernel_shape=list(kernel), strides=list(s),
                                  dilations=list(d), pads=pb + pe, group=group,
                                  output_padding=opad)
    if ctx.needs(1):
        out[1] = _conv_weight_grad(ctx, x, dy, xs, ys, kernel, win, group)
    if len(ctx.ins) > 2 and ctx.ins[2] is not None and ctx.needs(2):
        out[2] = ctx.sum_to_channel(dy, axis=1)
    return out


def _conv_weight_grad(ctx, x, dy, xs, ys, kernel, win, group) -> Value:
    """dW[m, c, k] = sum_{n, p} dy[n, m, p] x[n, g(m) cg + c, s p + d k - pad]: a grouped Conv
    of x laid out (cg, G*N, *S) by dy laid out (M, N, *P), strides = the forward's dilations,
    dilations = its strides; the end padding is trimmed (or x cropped) so the output is
    exactly the kernel's size."""
    g = ctx.g
    n, c = xs[:2]
    rank = len(xs)
    if group == 1:     # CANN's one-kernel weight gradient (the Conv below, without transposes)
        return g.conv_backprop_filter(
            x, dy, filter_shape=[int(ys[1]), int(c)] + list(kernel),
            strides=list(win.strides), dilations=list(win.dilations),
            pads=list(win.pads_begin) + list(win.pads_end))
    sp = list(range(3, rank + 1))
    cg = c // group
    if group == 1:
        xt = g.transpose(x, perm=[1, 0] + list(range(2, rank)))
    else:
        x5 = ctx.reshape(x, (n, group, cg) + tuple(xs[2:]))
        xt = ctx.reshape(g.transpose(x5, perm=[2, 1, 0] + sp), (cg, group * n) + tuple(xs[2:]))
    dyt = g.transpose(dy, perm=[1, 0] + list(range(2, rank)))
    s, d = win.strides, win.dilations
    pb = list(win.pads_begin)
    pe = [(k - 1) * di + si * (p - 1) + 1 - h - b
          for k, di, si, p, h, b in zip(kernel, d, s, ys[2:], xs[2:], pb)]
    if any(e < 0 for e in pe):
        ends = [h + min(e, 0) for h, e in zip(xs[2:], pe)]
        xt = g.slice(xt, ctx.ints([0] * len(ends)), ctx.ints(ends),
                     ctx.ints(list(range(2, rank))))
    dwt = g.conv(xt, dyt, kernel_shape=list(ys[2:]), strides=list(d), dilations=list(s),
                 pads=pb + [max(e, 0) for e in pe], group=group)
    return g.transpose(dwt, perm=[1, 0] + list(range(2, rank)))


register_grads({"MatMul": _matmul_grad, "Gemm": _gemm_grad, "BiasAdd": _bias_add_grad,
                "Conv": _conv_grad})
