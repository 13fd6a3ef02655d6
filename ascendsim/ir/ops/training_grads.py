"""Gradient rules of CANN's training forward kernels (ops/training.py): the backward a training
step builds from them is made of CANN's gradient kernels, as MindSpore's bprop rules do
(BatchNorm: BNTrainingUpdateGrad + BNTrainingReduceGrad; MaxPool: MaxPoolGradWithArgmax;
DropOutDoMask by the same mask; SoftmaxCrossEntropyWithLogits: its backprop output).

Kept in their own module (imported after ops/training.py) so the two families merge cleanly;
each rule follows the op's signature as documented there.
"""

from __future__ import annotations

from ...errors import GraphError
from ..registry import register_grads


def _bn_update_grad(ctx, douts):
    """Through y only. When (sum, square_sum) come from BNTrainingReduce of the same x, the
    statistics' share of dx is in BNTrainingReduceGrad, so they get no cotangent."""
    g, node = ctx.g, ctx.node
    if any(d is not None for d in douts[1:]):
        raise GraphError(f"BNTrainingUpdate '{node.name}' gradient: only through y (the "
                         f"running and batch statistics are state)")
    reduce = ctx.producer(node.inputs[1])
    if reduce is None or reduce.op_type != "BNTrainingReduce" or \
            reduce.inputs[0] != node.inputs[0] or reduce.outputs[1] != node.inputs[2]:
        raise GraphError(f"BNTrainingUpdate '{node.name}' gradient: sum and square_sum must "
                         f"come from BNTrainingReduce of the same x")
    x, scale, offset = ctx.ins[0], ctx.ins[3], ctx.ins[4]
    bm, bv = ctx.outs[3], ctx.outs[4]
    eps = float(ctx.attrs["epsilon"])
    dy = douts[0]
    d_scale, d_offset = g.bn_training_update_grad(dy, x, bm, bv, epsilon=eps)
    out: list = [None] * 7
    if ctx.needs(0):
        out[0] = g.bn_training_reduce_grad(dy, x, d_scale, d_offset, scale, bm, bv, epsilon=eps)
    if ctx.needs(3):
        out[3] = d_scale if d_scale.dtype == scale.dtype else g.cast(d_scale, to=scale.dtype)
    if ctx.needs(4):
        out[4] = d_offset if d_offset.dtype == offset.dtype else \
            g.cast(d_offset, to=offset.dtype)
    return out


def _bn_reduce_grad(ctx, douts):
    """sum = sum(x), square_sum = sum(x^2) over every axis but 1 (when differentiated on
    their own): dx = d_sum + 2 x d_square_sum, per channel."""
    g, x = ctx.g, ctx.ins[0]
    rank = len(x.shape)
    terms = []
    if douts[0] is not None:
        terms.append(g.cast(ctx.channel(douts[0], rank), to=x.dtype))
    if douts[1] is not None:
        two_x = g.mul(x, ctx.scalar(2.0, x.dtype))
        terms.append(g.mul(two_x, g.cast(ctx.channel(douts[1], rank), to=x.dtype)))
    dx = terms[0] if len(terms) == 1 else g.add(*terms)
    return [g.expand(dx, ctx.ints(ctx.shape(x)))]


def _max_pool_argmax_grad(ctx, douts):
    if douts[1] is not None:
        raise GraphError(f"MaxPoolWithArgmax '{ctx.node.name}' gradient: argmax is an index")
    a = ctx.attrs
    return [ctx.g.max_pool_grad_with_argmax(ctx.ins[0], douts[0], ctx.outs[1],
                                            kernel_shape=a["kernel_shape"],
                                            strides=a["strides"], pads=a["pads"])]


def _xent_grad(ctx, douts):
    """d features = backprop * d loss (per row); d labels = -log_softmax(features) d loss."""
    g = ctx.g
    if douts[1] is not None:
        raise GraphError(f"SoftmaxCrossEntropyWithLogits '{ctx.node.name}' gradient: only "
                         f"through the loss output")
    dloss = ctx.reshape(douts[0], (int(ctx.outs[0].shape[0]), 1))
    out: list = [None, None]
    if ctx.needs(0):
        out[0] = g.mul(ctx.outs[1], dloss)
    if ctx.needs(1):
        out[1] = g.neg(g.mul(g.log_softmax(ctx.ins[0], axis=1), dloss))
    return out


def _do_mask_grad(ctx, douts):
    return [ctx.g.drop_out_do_mask(douts[0], ctx.ins[1], ctx.ins[2]), None, None]


register_grads({"BNTrainingUpdate": _bn_update_grad, "BNTrainingReduce": _bn_reduce_grad,
                "MaxPoolWithArgmax": _max_pool_argmax_grad,
                "SoftmaxCrossEntropyWithLogits": _xent_grad, "DropOutDoMask": _do_mask_grad})
