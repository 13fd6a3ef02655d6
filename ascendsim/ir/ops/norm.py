"""Normalisations (ONNX opset-21 signatures): Softmax, LogSoftmax, LayerNormalization,
BatchNormalization, InstanceNormalization and LRN.

Categories, for fusion: Softmax, LogSoftmax, LayerNorm and InstanceNorm reduce along axes and
then apply an element-wise step (REDUCE); BatchNorm at inference is a per-channel affine map
(BROADCAST); LRN sums a window of channels (SEGMENT). All run on the vector unit.

Optional outputs (LayerNorm's Mean/InvStdDev, BatchNorm's running statistics in training mode)
are asked for with the non-ONNX attribute `num_outputs` (OpDef.num_outputs names it): the ONNX
importer sets it to the node's output count, a builder user writes
``y, mean, inv = g.layer_normalization(x, s, b, num_outputs=3)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import GraphError
from ...kernels import norm as kn
from ..registry import Category, OpDef, VecClass, broadcast_shapes, register, register_grads
from ..tensor import storage_dtype
from .elementwise import FLOATS, ONNX_DTYPES, check_dtype, same_dtype


def norm_axis(axis: int, rank: int, data: object) -> int:
    """`axis` in [0, rank), or GraphError naming the input and its shape."""
    if not -rank <= int(axis) < rank:
        raise GraphError(f"axis {axis} is out of range for input '{data.name}' of shape "
                         f"{tuple(data.shape)} (rank {rank})")
    return int(axis) % rank


def _count(attrs: dict, allowed: tuple[int, ...]) -> int:
    n = attrs["num_outputs"]
    if n not in allowed:
        raise GraphError(f"num_outputs must be one of {list(allowed)}, got {n!r}")
    return int(n)


def _per_elem(k: int) -> Callable:
    return lambda ins, outs, attrs: k * ins[0].numel


# ----------------------------------------------------------------------------- softmax
def _softmax_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    norm_axis(attrs["axis"], len(x.shape), x)
    return [(x.shape, x.dtype)]


def _softmax_kernel(log: bool) -> Callable:
    def kernel(args: list, attrs: dict) -> list:
        x = np.asarray(args[0])
        return [kn.softmax(x, int(attrs["axis"]) % max(x.ndim, 1), log)]
    return kernel


# ----------------------------------------------------------------------------- LayerNorm
def _stash_dtype(attrs: dict, x_dtype: str) -> str:
    code = attrs["stash_type"]
    dtype = ONNX_DTYPES.get(int(code)) if isinstance(code, (int, np.integer)) else None
    if dtype not in FLOATS:
        raise GraphError(f"stash_type must be an ONNX float type code (1, 10, 11, 16), "
                         f"got {code!r}")
    return dtype


def _check_broadcast_to(param: object, shape: tuple, what: str) -> None:
    try:
        ok = broadcast_shapes(shape, param.shape) == tuple(shape)
    except GraphError:
        ok = False
    if not ok:
        raise GraphError(f"{what} '{param.name}' of shape {tuple(param.shape)} does not "
                         f"broadcast to {tuple(shape)}")


def _layer_norm_infer(ins, attrs, consts):
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    check_dtype(x, FLOATS)
    same_dtype([v for v in (x, scale, bias) if v is not None])
    rank = len(x.shape)
    axis = norm_axis(attrs["axis"], rank, x)
    for p, what in ((scale, "Scale"), (bias, "B")):
        if p is not None:
            _check_broadcast_to(p, x.shape[axis:], what)
    stat = (tuple(x.shape[:axis]) + (1,) * (rank - axis), _stash_dtype(attrs, x.dtype))
    return [(x.shape, x.dtype), stat, stat][:_count(attrs, (1, 2, 3))]


def _layer_norm_kernel(args: list, attrs: dict) -> list:
    x = np.asarray(args[0])
    axis = int(attrs["axis"]) % x.ndim
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    cols = int(np.prod(x.shape[axis:], dtype=np.int64))
    norm_shape = x.shape[axis:]
    g = np.broadcast_to(args[1], norm_shape).reshape(1, cols)
    b = (np.zeros((1, 1)) if len(args) < 3 or args[2] is None
         else np.broadcast_to(args[2], norm_shape).reshape(1, cols))
    y, mean, inv = kn.normalize_rows(x.reshape(rows, cols), g, b, float(attrs["epsilon"]))
    stat_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
    stat = storage_dtype(_stash_dtype(attrs, x.dtype.name))
    outs = [y.reshape(x.shape).astype(x.dtype, copy=False),
            mean.reshape(stat_shape).astype(stat), inv.reshape(stat_shape).astype(stat)]
    return outs[:int(attrs["num_outputs"])]


# ----------------------------------------------------------------------------- BatchNorm
def _channel_param_check(x, params: list, names: tuple[str, ...]) -> None:
    c = x.shape[1]
    for p, what in zip(params, names):
        if len(p.shape) != 1 or (isinstance(p.shape[0], int) and isinstance(c, int)
                                 and p.shape[0] != c):
            raise GraphError(f"{what} '{p.name}' has shape {tuple(p.shape)}; expected ({c},), "
                             f"the channel count of '{x.name}' {tuple(x.shape)}")


def _batch_norm_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    if len(x.shape) < 2:
        raise GraphError(f"input '{x.name}' must be (N, C, ...), has shape {tuple(x.shape)}")
    params = list(ins[1:5])
    _channel_param_check(x, params, ("scale", "B", "input_mean", "input_var"))
    for p in params:
        check_dtype(p, FLOATS, "parameter")
    n = _count(attrs, (1, 3))
    if attrs["training_mode"] not in (0, 1):
        raise GraphError(f"training_mode must be 0 or 1, got {attrs['training_mode']!r}")
    if n == 3 and not attrs["training_mode"]:
        raise GraphError("running_mean/running_var outputs exist only with training_mode=1")
    stat = ((x.shape[1],), ins[3].dtype)
    return [(x.shape, x.dtype), stat, stat][:n]


def _batch_norm_kernel(args: list, attrs: dict) -> list:
    """Inference: the given statistics. training_mode=1: batch statistics (population
    variance), running stats updated as mean * momentum + batch * (1 - momentum)."""
    x, scale, bias, mean, var = (np.asarray(a) for a in args[:5])
    eps = float(attrs["epsilon"])
    if not attrs["training_mode"]:
        return [kn.batch_norm(x, scale, bias, mean, var, eps)]
    bmean, bvar = kn.channel_stats(x)
    y = kn.batch_norm(x, scale, bias, bmean, bvar, eps)
    mom = float(attrs["momentum"])
    run_mean = (mean * mom + bmean * (1 - mom)).astype(mean.dtype)
    run_var = (var * mom + bvar * (1 - mom)).astype(var.dtype)
    return [y, run_mean, run_var][:int(attrs["num_outputs"])]


# ----------------------------------------------------------------------------- InstanceNorm
def _instance_norm_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    if len(x.shape) < 3:
        raise GraphError(f"input '{x.name}' must be (N, C, D1, ...), has shape "
                         f"{tuple(x.shape)}")
    same_dtype(ins[:3])
    _channel_param_check(x, list(ins[1:3]), ("scale", "B"))
    return [(x.shape, x.dtype)]


def _instance_norm_kernel(args: list, attrs: dict) -> list:
    x, scale, bias = (np.asarray(a) for a in args[:3])
    n, c = x.shape[:2]
    x2 = x.reshape(n * c, -1)
    g = np.tile(scale, n).reshape(-1, 1)
    b = np.tile(bias, n).reshape(-1, 1)
    y, _, _ = kn.normalize_rows(x2, g, b, float(attrs["epsilon"]))
    return [y.reshape(x.shape).astype(x.dtype, copy=False)]


# ----------------------------------------------------------------------------- LRN
def _lrn_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    size = attrs["size"]
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
        raise GraphError(f"attribute 'size' must be a positive int, got {size!r}")
    if len(x.shape) < 3:
        raise GraphError(f"input '{x.name}' must be (N, C, D1, ...), has shape "
                         f"{tuple(x.shape)}")
    return [(x.shape, x.dtype)]


def _lrn_kernel(args: list, attrs: dict) -> list:
    return [kn.lrn(args[0], attrs["size"], attrs["alpha"], attrs["beta"], attrs["bias"])]


def _lrn_flops(ins, outs, attrs) -> int:
    return (2 * int(attrs["size"] or 1) + 4) * ins[0].numel


def _lrn_instrs(ins, outs, attrs) -> int:
    """vmul (square), size - 1 vadd (window), vmuls, vadds, vln, vmuls, vexp (pow), vdiv."""
    return int(attrs["size"] or 1) + 7


# ----------------------------------------------------------------------------- registry
# Cost columns: `flops` (arithmetic, for the roofline); the vector instructions of Softmax,
# LogSoftmax, LayerNormalization and InstanceNormalization are their instruction sequences in
# lower/vector_seq.py (SEQUENCES), so they carry no `vec_instrs` here; the others:
#   BatchNorm   1: one vmla per element (inference: x * a + b, a/b folded per channel)
#   LRN  size + 7: see _lrn_instrs
_R, _E = Category.REDUCE, VecClass.EXP
register(OpDef("Softmax", _softmax_infer, _softmax_kernel(False), _R, inputs=("input",),
               attrs={"axis": -1}, flops=_per_elem(5), vec_class=_E,
               doc="ONNX Softmax-13 along `axis` (max-subtracted)"))
register(OpDef("LogSoftmax", _softmax_infer, _softmax_kernel(True), _R, inputs=("input",),
               attrs={"axis": -1}, flops=_per_elem(5), vec_class=_E,
               doc="ONNX LogSoftmax-13 along `axis`"))
register(OpDef("LayerNormalization", _layer_norm_infer, _layer_norm_kernel, _R,
               inputs=("X", "Scale", "B?"),
               attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1, "num_outputs": 1},
               num_outputs="num_outputs", flops=_per_elem(8), vec_class=VecClass.REDUCE,
               doc="ONNX LayerNormalization-17 over axes [axis, rank)"))
register(OpDef("BatchNormalization", _batch_norm_infer, _batch_norm_kernel, Category.BROADCAST,
               inputs=("X", "scale", "B", "input_mean", "input_var"),
               attrs={"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0, "num_outputs": 1},
               num_outputs="num_outputs", flops=_per_elem(2), vec_class=VecClass.TERNARY,
               vec_instrs=1, untrainable_inputs=(3, 4),
               doc="ONNX BatchNormalization-15; inference is a per-channel affine map"))
register(OpDef("InstanceNormalization", _instance_norm_infer, _instance_norm_kernel, _R,
               inputs=("input", "scale", "B"), attrs={"epsilon": 1e-5}, flops=_per_elem(8),
               vec_class=VecClass.REDUCE, doc="ONNX InstanceNormalization-6"))
register(OpDef("LRN", _lrn_infer, _lrn_kernel, Category.SEGMENT, inputs=("X",),
               attrs={"alpha": 1e-4, "beta": 0.75, "bias": 1.0, "size": None},
               flops=_lrn_flops, vec_class=_E, vec_instrs=_lrn_instrs, builder="lrn",
               doc="ONNX LRN-13 across channels"))


# ----------------------------------------------------------------------------- gradients
def _softmax_grad(ctx, douts):
    """dx = y (dy - sum(dy y)) along the axis."""
    g, y, dy = ctx.g, ctx.outs[0], douts[0]
    axis = norm_axis(ctx.attrs["axis"], len(y.shape), y)
    s = g.reduce_sum(g.mul(dy, y), ctx.ints([axis]), keepdims=1)
    return [g.mul(y, g.sub(dy, s))]


def _log_softmax_grad(ctx, douts):
    """dx = dy - softmax(x) sum(dy) along the axis."""
    g, y, dy = ctx.g, ctx.outs[0], douts[0]
    axis = norm_axis(ctx.attrs["axis"], len(y.shape), y)
    s = g.reduce_sum(dy, ctx.ints([axis]), keepdims=1)
    return [g.sub(dy, g.mul(g.exp(y), s))]


def _layer_norm_grad(ctx, douts):
    """CANN's LayerNormXBackprop (dx) and LayerNormBetaGammaBackprop (dgamma, dbeta) from the
    forward's Mean/InvStdDev (recomputed by a 3-output LayerNorm when the node has only Y).
    A graph that reads Mean or InvStdDev itself adds their share to dx (element-wise, in the
    statistics' dtype): d mean / n, and -d rstd rstd^3 (x - mean) / n."""
    g = ctx.g
    x, scale = ctx.ins[0], ctx.ins[1]
    bias = ctx.ins[2] if len(ctx.ins) > 2 else None
    dy = douts[0]
    axis = norm_axis(ctx.attrs["axis"], len(x.shape), x)
    if dy is None:
        out = [None] * len(ctx.ins)
        if ctx.needs(0):
            out[0] = _layer_norm_stats_dx(ctx, douts, axis)
        return out
    if len(ctx.outs) == 3:
        mean, rstd = ctx.outs[1], ctx.outs[2]
    else:
        _, mean, rstd = g.layer_normalization(*[v for v in ctx.ins if v is not None],
                                              axis=axis, epsilon=ctx.attrs["epsilon"],
                                              stash_type=ctx.attrs["stash_type"],
                                              num_outputs=3)
    shape = ctx.shape(x)
    gamma = ctx.reshape(g.expand(scale, ctx.ints(shape[axis:])), shape[axis:])
    out: list = [None] * len(ctx.ins)
    if ctx.needs(0):
        out[0] = g.layer_norm_x_backprop(dy, x, mean, rstd, gamma, axis=axis)
        if any(d is not None for d in douts[1:]):
            out[0] = g.add(out[0], _layer_norm_stats_dx(ctx, douts, axis))
    if ctx.needs(1) or (bias is not None and ctx.needs(2)):
        dgamma, dbeta = g.layer_norm_beta_gamma_backprop(dy, x, mean, rstd, axis=axis)

        def like(d, p):   # float32 sums back to the parameter's dtype
            d = ctx.unbroadcast(d, p)
            return d if d.dtype == p.dtype else g.cast(d, to=p.dtype)
        out[1] = like(dgamma, scale) if ctx.needs(1) else None
        if bias is not None and ctx.needs(2):
            out[2] = like(dbeta, bias)
    return out


def _layer_norm_stats_dx(ctx, douts, axis: int):
    """dx of LayerNormalization's Mean and InvStdDev outputs (see `_layer_norm_grad`)."""
    g, x = ctx.g, ctx.ins[0]
    mean, rstd = ctx.outs[1], ctx.outs[2] if len(ctx.outs) > 2 else None
    shape = ctx.shape(x)
    sd = mean.dtype
    inv_n = ctx.scalar(1.0 / int(np.prod(shape[axis:], dtype=np.int64)), sd)
    terms = []
    if douts[1] is not None:
        terms.append(g.mul(douts[1], inv_n))
    if len(douts) > 2 and douts[2] is not None:
        xs = x if x.dtype == sd else g.cast(x, to=sd)
        r3 = g.mul(rstd, g.mul(rstd, rstd))
        terms.append(g.neg(g.mul(g.mul(g.mul(douts[2], r3), inv_n), g.sub(xs, mean))))
    dx = g.expand(terms[0] if len(terms) == 1 else g.add(*terms), ctx.ints(shape))
    return dx if dx.dtype == x.dtype else g.cast(dx, to=x.dtype)


def _batch_norm_grad(ctx, douts):
    """Inference form y = (x - mean) * scale / sqrt(var + eps) + B: a per-channel affine map.
    The running statistics are state, not parameters (`parameters` leaves them out), but
    their cotangents are made when asked for or when they are computed from something
    differentiated (statistics computed from x): d mean = -sum(dy) scale inv,
    d var = -sum(dy (x - mean)) scale inv^3 / 2. (Training steps use CANN's BNTraining* ops
    instead; see autodiff/training.py.)"""
    if int(ctx.attrs["training_mode"]):
        raise GraphError(f"BatchNormalization '{ctx.node.name}' gradient: training_mode=1 is "
                         f"not differentiated; training steps use BNTrainingReduce/Update")
    g, dy = ctx.g, douts[0]
    x, scale, _, mean, var = ctx.ins
    rank = len(x.shape)
    eps = ctx.scalar(float(ctx.attrs["epsilon"]), var.dtype)
    inv = g.reciprocal(g.sqrt(g.add(var, eps)))
    out: list = [None] * 5
    if ctx.needs(0):
        out[0] = g.mul(dy, ctx.channel(g.mul(scale, inv), rank))
    if ctx.needs(1):
        xhat = g.mul(g.sub(x, ctx.channel(mean, rank)), ctx.channel(inv, rank))
        out[1] = ctx.sum_to_channel(g.mul(dy, xhat))
    if ctx.needs(2):
        out[2] = ctx.sum_to_channel(dy)
    if ctx.needs(3):
        out[3] = g.neg(g.mul(ctx.sum_to_channel(dy), g.mul(scale, inv)))
    if ctx.needs(4):
        centred = g.mul(dy, g.sub(x, ctx.channel(mean, rank)))
        cube = g.mul(inv, g.mul(inv, inv))
        out[4] = g.mul(g.mul(ctx.sum_to_channel(centred), g.mul(scale, cube)),
                       ctx.scalar(-0.5, var.dtype))
    return out


def _lrn_grad(ctx, douts):
    """y = x d^-beta, d = bias + alpha/size * (window sum over channels of x^2):
    dx = dy d^-beta - (2 alpha beta / size) x * window_sum^T(dy y / d). The channel-window
    sums are AveragePools over a (N, 1, C, H*W) view times the size (count_include_pad)."""
    g, x, y, dy = ctx.g, ctx.ins[0], ctx.outs[0], douts[0]
    size = int(ctx.attrs["size"])
    alpha, beta, bias = (float(ctx.attrs[k]) for k in ("alpha", "beta", "bias"))
    shape = ctx.shape(x)
    view = (shape[0], 1, shape[1], int(np.prod(shape[2:])))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2

    def window_sum(v, before: int, after: int):
        pooled = g.average_pool(ctx.reshape(v, view), kernel_shape=[size, 1],
                                pads=[before, 0, after, 0], count_include_pad=1)
        return ctx.reshape(g.mul(pooled, ctx.scalar(float(size), x.dtype)), shape)

    c = lambda v: ctx.scalar(v, x.dtype)   # noqa: E731
    d = g.add(g.mul(window_sum(g.mul(x, x), lo, hi), c(alpha / size)), c(bias))
    d_pow = g.exp(g.mul(g.log(d), c(-beta)))
    back = window_sum(g.div(g.mul(dy, y), d), hi, lo)
    return [g.sub(g.mul(dy, d_pow), g.mul(g.mul(x, back), c(2 * alpha * beta / size)))]


register_grads({"Softmax": _softmax_grad, "LogSoftmax": _log_softmax_grad,
                "LayerNormalization": _layer_norm_grad, "BatchNormalization": _batch_norm_grad,
                "LRN": _lrn_grad})
