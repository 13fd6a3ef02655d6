"""CANN's training kernels as registry ops: BatchNorm training (BNTrainingReduce,
BNTrainingUpdate, BNTrainingUpdateGrad, BNTrainingReduceGrad), MaxPoolWithArgmax and its
gradient, SoftmaxCrossEntropyWithLogits, the LayerNorm gradient kernels, dropout
(DropOutGenMask, DropOutDoMask), the fused optimizers (ApplyMomentum, ApplyAdam, ApplyAdamW,
LAMB's LambApplyOptimizerAssign and LambApplyWeightAssign) and the float-status overflow check
(NPUGetFloatStatus, NPUClearFloatStatus).

Sources (op names, inputs, outputs and formulas):
- [MS-TBE] MindSpore's TBE op registrations, mindspore-ai/mindspore
  `mindspore/ops/_op_impl/tbe/<op>.py` (bn_training_reduce, bn_training_update,
  bn_training_update_grad, bn_training_reduce_grad, apply_momentum, apply_adam,
  lamb_apply_optimizer_assign, lamb_apply_weight_assign, npu_get_float_status, ...): the
  kernels CANN ships, their inputs/outputs, dtypes and fusion types (BN ops, optimizers
  ELEMWISE/OPAQUE).
- [MS-GK] MindSpore's graph-kernel expanders, `mindspore/ccsrc/backend/common/graph_kernel/
  expanders/lamb_apply_optimizer_assign.cc`, `lamb_apply_weight_assign.cc`: LAMB's two
  phases as primitive graphs (the formulas below).
- [MS-OPS] MindSpore's `ops/operations/inner_ops.py` docstrings of LambApplyOptimizerAssign /
  LambApplyWeightAssign, `nn_ops.py` NPUGetFloatStatus/NPUClearFloatStatus (status is a
  float32 (8,) tensor; a positive sum means overflow) and DropoutGenMask/DropoutDoMask.
- [TF] TensorFlow raw ops ApplyMomentum, ApplyAdam (the lr_t form), the names CANN's
  Ascend-TF adapter maps to its kernels.
- [NPU] torch_npu docs (Ascend/op-plugin `docs/context`): npu_clear_float_status,
  npu_get_float_status, npu_apply_adam_w.

Dataflow forms (where CANN's kernels update in place):
- Optimizers return the new state (`var`, `accum`/`m`/`v`) as outputs instead of assigning
  their inputs ("...Assign" in CANN's names); a training step feeds them to the next step.
- Float status: on the chip, every vector/cube instruction sets a sticky overflow flag in a
  status register; NPUClearFloatStatus zeroes it before the step and NPUGetFloatStatus reads
  it after (MindSpore orders them with Depend). Here the register is not modelled:
  NPUGetFloatStatus(*xs) takes the tensors whose computation it checks (usually the
  gradients) as ordering inputs and its value is 1.0 in element 0 when any of them holds
  inf/nan; it costs one 32-byte status read, not a pass over the tensors
  (`reads_inputs=False`). NPUClearFloatStatus(*xs) returns zeros(8) after its inputs; feed
  its output to NPUGetFloatStatus to order the two (as MindSpore's Depend does). Both act on
  the register, so they are never folded or merged (`deterministic=False`).
- Dropout: DropOutGenMask makes CANN's bit-packed mask, uint8 of ceil(numel/128)*16 bytes
  (one bit per element, 128-element groups), so the graph's bytes are CANN's; its kernel is an
  AI CPU kernel in CANN (MindSpore `_op_impl/aicpu/dropout_genmask.py`, `seed`/`seed2` attrs).
  DropOutDoMask accepts that mask or one byte (0/1) per element.
- MaxPoolWithArgmax's argmax is the flat index into the (H*W) plane of each (n, c), int32 (the
  TF/torch_npu index form); CANN's TBE kernel stores a bit mask of window positions instead
  (uint16), which holds the same information.
- LayerNormXBackprop/LayerNormBetaGammaBackprop take `mean` and `rstd` as ONNX
  LayerNormalization's optional outputs Mean and InvStdDev; CANN passes the variance and
  recomputes rstd = 1/sqrt(variance + epsilon) inside the kernel.

Costs: `flops` counts arithmetic per element; `vec_instrs` the vector instructions of
`vec_class` per element of the largest operand (the sequence each count stands for is in the
table's comment); `vec_extra` the instructions of slower classes (vsqrt, vdiv, vexp).
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np

from ...errors import GraphError
from ...kernels import pool as kpool
from ...kernels import training as kt
from ..registry import Category, OpDef, Unit, VecClass, register
from .elementwise import check_dtype, same_dtype
from .norm import norm_axis

#: dtypes the training kernels compute (bfloat16 as float32 storage, rounded per op by the
#: executor: kernels/bf16.py; fp64 for gradient checks)
TRAIN_FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
_B, _R, _T = VecClass.BINARY, VecClass.REDUCE, VecClass.TERNARY


# ----------------------------------------------------------------------------- checks
def _known(d) -> bool:
    return isinstance(d, (int, np.integer))


def _same_dims(a, b) -> bool:
    return len(a) == len(b) and all(not (_known(x) and _known(y)) or x == y
                                    for x, y in zip(a, b))


def _nc(x) -> None:
    check_dtype(x, TRAIN_FLOATS)
    if len(x.shape) < 2:
        raise GraphError(f"input '{x.name}' must be (N, C, ...), has shape {tuple(x.shape)}")


def _channel_vectors(x, vectors: list, names: list[str]) -> None:
    c = x.shape[1]
    for v, what in zip(vectors, names):
        if len(v.shape) != 1 or not _same_dims(v.shape, (c,)):
            raise GraphError(f"{what} '{v.name}' has shape {tuple(v.shape)}; expected ({c},), "
                             f"the channel count of '{x.name}' {tuple(x.shape)}")
        check_dtype(v, TRAIN_FLOATS, what)


def _like(a, b, what: str) -> None:
    if not _same_dims(a.shape, b.shape):
        raise GraphError(f"{what} '{b.name}' has shape {tuple(b.shape)}; expected "
                         f"{tuple(a.shape)} as '{a.name}'")


def _scalars(values: list, names: list[str]) -> None:
    for v, what in zip(values, names):
        if v is None:
            raise GraphError(f"missing scalar input '{what}'")
        if tuple(v.shape) not in ((), (1,)):
            raise GraphError(f"{what} '{v.name}' must be a scalar (shape () or (1,)), has "
                             f"shape {tuple(v.shape)}")
        check_dtype(v, TRAIN_FLOATS, what)


def _per_elem(k: float, which: int = 0) -> Callable:
    """flops = k per element of input `which`."""
    return lambda ins, outs, attrs: int(k * ins[which].numel)


def _per_out(k: float) -> Callable:
    return lambda ins, outs, attrs: int(k * outs[0].numel)


# ----------------------------------------------------------------------------- BatchNorm
def _bn_reduce_infer(ins, attrs, consts):
    x = ins[0]
    _nc(x)
    c = (x.shape[1],)
    work = "float64" if x.dtype == "float64" else "float32"
    return [(c, work), (c, work)]


def _bn_reduce_kernel(args, attrs):
    return list(kt.bn_training_reduce(args[0]))


_BN_UPDATE_IN = ("sum", "square_sum", "scale", "offset", "mean", "variance")


def _bn_update_infer(ins, attrs, consts):
    x = ins[0]
    _nc(x)
    _channel_vectors(x, list(ins[1:7]), list(_BN_UPDATE_IN))
    factor = attrs["factor"]
    if not 0.0 <= float(factor) <= 1.0:
        raise GraphError(f"factor must be in [0, 1], got {factor!r}")
    if float(attrs["epsilon"]) <= 0:
        raise GraphError(f"epsilon must be > 0, got {attrs['epsilon']!r}")
    stat = ((x.shape[1],), ins[5].dtype)
    return [(x.shape, x.dtype)] + [stat] * 4


def _bn_update_kernel(args, attrs):
    return kt.bn_training_update(*args[:7], float(attrs["factor"]), float(attrs["epsilon"]))


def _bn_update_grad_infer(ins, attrs, consts):
    grads, x = ins[0], ins[1]
    _nc(x)
    check_dtype(grads, TRAIN_FLOATS, "grads")
    _like(x, grads, "grads")
    _channel_vectors(x, list(ins[2:4]), ["batch_mean", "batch_variance"])
    stat = ((x.shape[1],), ins[2].dtype)
    return [stat, stat]


def _bn_update_grad_kernel(args, attrs):
    return kt.bn_training_update_grad(*args[:4], float(attrs["epsilon"]))


def _bn_reduce_grad_infer(ins, attrs, consts):
    grads, x = ins[0], ins[1]
    _nc(x)
    check_dtype(grads, TRAIN_FLOATS, "grads")
    _like(x, grads, "grads")
    _channel_vectors(x, list(ins[2:7]), ["diff_scale", "diff_offset", "scale", "batch_mean",
                                         "batch_variance"])
    return [(grads.shape, grads.dtype)]


def _bn_reduce_grad_kernel(args, attrs):
    return [kt.bn_training_reduce_grad(*args[:7], float(attrs["epsilon"]))]


# ----------------------------------------------------------------------------- max pool
def _window(x, attrs):
    if not attrs.get("kernel_shape"):
        raise GraphError("kernel_shape is required")
    if not 3 <= len(x.shape) <= 5:
        raise GraphError(f"x '{x.name}' {tuple(x.shape)} must be (N, C, 1 to 3 spatial dims)")
    return kpool.resolve_window(x.shape[2:], attrs["kernel_shape"], attrs)


def _maxpool_argmax_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, TRAIN_FLOATS)
    y = tuple(x.shape[:2]) + tuple(_window(x, attrs).out)
    return [(y, x.dtype), (y, "int32")]


def _maxpool_argmax_kernel(args, attrs):
    x = np.asarray(args[0])
    y, idx = kpool.max_pool_with_indices(x, {**attrs, "storage_order": 0})
    planes = x.shape[0] * x.shape[1]
    plane = int(np.prod(x.shape[2:], dtype=np.int64))
    base = (np.arange(planes, dtype=np.int64) * plane).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
    return [y, (idx - base).astype(np.int32)]


def _maxpool_grad_infer(ins, attrs, consts):
    x, grad, argmax = ins[0], ins[1], ins[2]
    check_dtype(x, TRAIN_FLOATS)
    check_dtype(grad, TRAIN_FLOATS, "grad")
    if argmax.dtype not in ("int32", "int64"):
        raise GraphError(f"argmax '{argmax.name}' has dtype {argmax.dtype}; expected int32")
    y = tuple(x.shape[:2]) + tuple(_window(x, attrs).out)
    for v, what in ((grad, "grad"), (argmax, "argmax")):
        if not _same_dims(v.shape, y):
            raise GraphError(f"{what} '{v.name}' has shape {tuple(v.shape)}; the pooled shape "
                             f"of '{x.name}' {tuple(x.shape)} is {y}")
    return [(x.shape, x.dtype)]


def _maxpool_grad_kernel(args, attrs):
    return [kt.max_pool_grad_with_argmax(args[0], args[1], args[2])]


def _window_size(attrs) -> int:
    return prod(int(k) for k in attrs["kernel_shape"])


def _maxpool_argmax_flops(ins, outs, attrs) -> int:
    """vmax and a vcmp/vsel for the argmax per window position."""
    return 2 * outs[0].numel * _window_size(attrs)


def _maxpool_grad_flops(ins, outs, attrs) -> int:
    """vcmp (argmax == position) and vsel/vadd per window position per pooled element."""
    return 2 * ins[1].numel * _window_size(attrs)


# ----------------------------------------------------------------------------- cross-entropy
def _xent_infer(ins, attrs, consts):
    x, labels = ins
    check_dtype(x, TRAIN_FLOATS, "features")
    same_dtype([x, labels])
    if len(x.shape) != 2:
        raise GraphError(f"features '{x.name}' must be (N, C), has shape {tuple(x.shape)}")
    _like(x, labels, "labels")
    return [((x.shape[0],), x.dtype), (x.shape, x.dtype)]


def _xent_kernel(args, attrs):
    return kt.softmax_cross_entropy_with_logits(args[0], args[1])


# ----------------------------------------------------------------------------- LayerNorm
def _ln_stats(x, axis: int, stats: list) -> None:
    rows = tuple(x.shape[:axis])
    for s in stats:
        check_dtype(s, TRAIN_FLOATS, "statistic")
        keep = rows + (1,) * (len(x.shape) - axis)
        if not (_same_dims(s.shape, keep) or _same_dims(s.shape, rows)):
            raise GraphError(f"statistic '{s.name}' has shape {tuple(s.shape)}; expected {keep}"
                             f" (one per row of '{x.name}' {tuple(x.shape)} before axis {axis})")


def _ln_common(ins, attrs):
    dy, x = ins[0], ins[1]
    check_dtype(x, TRAIN_FLOATS)
    check_dtype(dy, TRAIN_FLOATS, "dy")
    _like(x, dy, "dy")
    axis = norm_axis(attrs["axis"], len(x.shape), x)
    _ln_stats(x, axis, list(ins[2:4]))
    return dy, x, axis


def _ln_x_infer(ins, attrs, consts):
    dy, x, axis = _ln_common(ins, attrs)
    gamma = ins[4]
    check_dtype(gamma, TRAIN_FLOATS, "gamma")
    norm = tuple(x.shape[axis:])
    if not (_same_dims(gamma.shape, norm)
            or (len(gamma.shape) == 1 and _known(gamma.shape[0]) and all(map(_known, norm))
                and gamma.shape[0] == prod(norm))):
        raise GraphError(f"gamma '{gamma.name}' has shape {tuple(gamma.shape)}; expected {norm}")
    return [(dy.shape, dy.dtype)]


def _ln_x_kernel(args, attrs):
    x = np.asarray(args[1])
    return [kt.layer_norm_x_backprop(args[0], x, args[2], args[3], args[4],
                                     int(attrs["axis"]) % x.ndim)]


def _ln_bg_infer(ins, attrs, consts):
    dy, x, axis = _ln_common(ins, attrs)
    work = "float64" if x.dtype == "float64" else "float32"
    norm = tuple(x.shape[axis:])
    return [(norm, work), (norm, work)]


def _ln_bg_kernel(args, attrs):
    x = np.asarray(args[1])
    return kt.layer_norm_beta_gamma_backprop(args[0], x, args[2], args[3],
                                             int(attrs["axis"]) % x.ndim)


# ----------------------------------------------------------------------------- dropout
def _mask_shape(attrs) -> tuple[int, ...]:
    shape = attrs["shape"]
    if shape is None or not all(_known(d) and d >= 0 for d in shape):
        raise GraphError(f"shape must be a list of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in shape)


def _keep_prob(p) -> float:
    if not isinstance(p, (int, float, np.floating)) or not 0.0 < float(p) <= 1.0:
        raise GraphError(f"keep_prob must be in (0, 1], got {p!r}")
    return float(p)


def _gen_mask_infer(ins, attrs, consts):
    numel = prod(_mask_shape(attrs))
    _keep_prob(attrs["keep_prob"])
    return [((kt.mask_bytes(numel),), "uint8")]


def _gen_mask_kernel(args, attrs):
    return [kt.drop_out_gen_mask(_mask_shape(attrs), _keep_prob(attrs["keep_prob"]),
                                 int(attrs["seed"]), int(attrs["seed2"]))]


def _gen_mask_flops(ins, outs, attrs) -> int:
    """One random number and one compare per masked element."""
    return 2 * prod(_mask_shape(attrs))


def _do_mask_infer(ins, attrs, consts):
    x, mask, keep = ins
    check_dtype(x, TRAIN_FLOATS)
    _scalars([keep], ["keep_prob"])
    if mask.dtype != "uint8":
        raise GraphError(f"mask '{mask.name}' has dtype {mask.dtype}; expected uint8")
    if all(map(_known, x.shape)) and all(map(_known, mask.shape)):
        n, m = prod(x.shape), prod(mask.shape)
        if m not in (n, kt.mask_bytes(n)):
            raise GraphError(f"mask '{mask.name}' has {m} bytes; '{x.name}' {tuple(x.shape)} "
                             f"needs {kt.mask_bytes(n)} (bit-packed, DropOutGenMask) or {n}")
    return [(x.shape, x.dtype)]


def _do_mask_kernel(args, attrs):
    return [kt.drop_out_do_mask(args[0], args[1], args[2])]


# ----------------------------------------------------------------------------- optimizers
def _tensors_like(var, others: list, names: list[str]) -> None:
    check_dtype(var, TRAIN_FLOATS, "var")
    for v, what in zip(others, names):
        _like(var, v, what)
        check_dtype(v, TRAIN_FLOATS, what)


def _momentum_infer(ins, attrs, consts):
    var, accum, lr, grad, mom = ins
    _tensors_like(var, [accum, grad], ["accum", "grad"])
    _scalars([lr, mom], ["lr", "momentum"])
    return [(var.shape, var.dtype), (accum.shape, accum.dtype)]


def _momentum_kernel(args, attrs):
    return kt.apply_momentum(*args[:5], bool(attrs["use_nesterov"]))


_ADAM_SCALARS = ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"]


def _adam_infer(ins, attrs, consts):
    var, m, v, grad = ins[0], ins[1], ins[2], ins[9]
    _tensors_like(var, [m, v, grad], ["m", "v", "grad"])
    _scalars(list(ins[3:9]), _ADAM_SCALARS)
    return [(var.shape, var.dtype), (m.shape, m.dtype), (v.shape, v.dtype)]


def _adam_kernel(args, attrs):
    return kt.apply_adam(*args[:10], use_nesterov=bool(attrs["use_nesterov"]))


def _adamw_infer(ins, attrs, consts):
    var, m, v, grad = ins[0], ins[1], ins[2], ins[10]
    _tensors_like(var, [m, v, grad], ["m", "v", "grad"])
    _scalars(list(ins[3:10]), ["beta1_power", "beta2_power", "lr", "weight_decay", "beta1",
                               "beta2", "epsilon"])
    return [(var.shape, var.dtype), (m.shape, m.dtype), (v.shape, v.dtype)]


def _adamw_kernel(args, attrs):
    var, m, v, b1p, b2p, lr, wd, b1, b2, eps, grad = args[:11]
    return kt.apply_adam(var, m, v, b1p, b2p, lr, b1, b2, eps, grad, weight_decay=wd)


_LAMB1_SCALARS = ["beta1", "one_minus_beta1", "beta2", "one_minus_beta2", "epsilon", "step",
                  "weight_decay"]


def _lamb1_infer(ins, attrs, consts):
    grad, v, m, var = ins[:4]
    _tensors_like(var, [grad, v, m], ["grad", "v", "m"])
    _scalars(list(ins[4:11]), _LAMB1_SCALARS)
    return [(var.shape, var.dtype), (v.shape, v.dtype), (m.shape, m.dtype)]


def _lamb1_kernel(args, attrs):
    return kt.lamb_apply_optimizer_assign(*args[:11])


def _lamb2_infer(ins, attrs, consts):
    w_norm, g_norm, lr, update, var = ins
    _tensors_like(var, [update], ["update"])
    _scalars([w_norm, g_norm, lr], ["w_norm", "g_norm", "lr"])
    return [(var.shape, var.dtype)]


def _lamb2_kernel(args, attrs):
    return [kt.lamb_apply_weight_assign(*args[:5])]


# ----------------------------------------------------------------------------- float status
def _status_infer(ins, attrs, consts):
    return [((8,), "float32")]


def _get_status_kernel(args, attrs):
    return [kt.npu_get_float_status(list(args))]


def _clear_status_kernel(args, attrs):
    return [np.zeros(8, dtype=np.float32)]


def _status_flops(ins, outs, attrs) -> int:
    return 8


# ----------------------------------------------------------------------------- registry
_OPT_NOTE = "; returns the new state (CANN assigns it in place)"
_O, _E = Category.OPAQUE, Category.ELEMWISE
_OPS = [
    # BNTrainingReduce: vcadd (sum), vmul (square), vcadd (square sum)
    OpDef("BNTrainingReduce", _bn_reduce_infer, _bn_reduce_kernel, Category.REDUCE,
          inputs=("x",), num_outputs=2, flops=_per_elem(3), vec_class=_R, vec_instrs=2,
          vec_extra=((_B, 1),), builder="bn_training_reduce",
          doc="CANN BNTrainingReduce [MS-TBE bn_training_reduce]: per-channel (sum, "
              "square_sum) over every axis but 1, float32"),
    # BNTrainingUpdate: vsub (x - mean), vmul (rstd*scale), vadd (offset) per element; the
    # per-channel work (statistics, running averages) is on C elements only
    OpDef("BNTrainingUpdate", _bn_update_infer, _bn_update_kernel, Category.BROADCAST,
          inputs=("x",) + _BN_UPDATE_IN, attrs={"factor": 0.1, "epsilon": 1e-5},
          num_outputs=5, flops=_per_elem(3), vec_class=_B, vec_instrs=3,
          builder="bn_training_update",
          doc="CANN BNTrainingUpdate [MS-TBE bn_training_update]: n = numel/C, "
              "batch_mean = sum/n, batch_variance = square_sum/n - batch_mean^2 (biased), "
              "y = (x - bm)/sqrt(bv + eps)*scale + offset, mean_out = mean*(1-factor) + "
              "bm*factor, variance_out = variance*(1-factor) + bv*n/(n-1)*factor; outputs "
              "(y, mean_out, variance_out, batch_mean, batch_variance)"),
    # BNTrainingUpdateGrad: vsub, vmul (rstd), vmul (grads), vcadd x2
    OpDef("BNTrainingUpdateGrad", _bn_update_grad_infer, _bn_update_grad_kernel,
          Category.REDUCE, inputs=("grads", "x", "batch_mean", "batch_variance"),
          attrs={"epsilon": 1e-5}, num_outputs=2, flops=_per_elem(5), vec_class=_R,
          vec_instrs=2, vec_extra=((_B, 3),), builder="bn_training_update_grad",
          doc="CANN BNTrainingUpdateGrad [MS-TBE bn_training_update_grad]: diff_scale = "
              "sum(grads*(x - bm)/sqrt(bv + eps)), diff_offset = sum(grads) over all axes "
              "but 1"),
    # BNTrainingReduceGrad: vsub, vmul (xhat), vmul (xhat*ds/n), vsub x2, vmul (scale*rstd)
    OpDef("BNTrainingReduceGrad", _bn_reduce_grad_infer, _bn_reduce_grad_kernel,
          Category.BROADCAST, inputs=("grads", "x", "diff_scale", "diff_offset", "scale",
                                      "batch_mean", "batch_variance"),
          attrs={"epsilon": 1e-5}, flops=_per_elem(6), vec_class=_B, vec_instrs=6,
          builder="bn_training_reduce_grad",
          doc="CANN BNTrainingReduceGrad [MS-TBE bn_training_reduce_grad]: dx = "
              "scale/sqrt(bv + eps)*(grads - diff_offset/n - xhat*diff_scale/n), "
              "xhat = (x - bm)/sqrt(bv + eps)"),
    OpDef("MaxPoolWithArgmax", _maxpool_argmax_infer, _maxpool_argmax_kernel,
          Category.SEGMENT, inputs=("x",),
          attrs={"kernel_shape": None, "strides": None, "pads": None}, num_outputs=2,
          flops=_maxpool_argmax_flops, vec_class=_R, builder="max_pool_with_argmax",
          lowering="max_pool_with_argmax",
          doc="CANN MaxPoolWithArgmax [MS-TBE max_pool_with_argmax; TF MaxPoolWithArgmax]: "
              "(y, argmax int32 = flat index into x's H*W plane); pads as ONNX [begin, end]"),
    OpDef("MaxPoolGradWithArgmax", _maxpool_grad_infer, _maxpool_grad_kernel,
          Category.SEGMENT, inputs=("x", "grad", "argmax"),
          attrs={"kernel_shape": None, "strides": None, "pads": None},
          flops=_maxpool_grad_flops, vec_class=_R, builder="max_pool_grad_with_argmax",
          doc="CANN MaxPoolGradWithArgmax [MS-TBE max_pool_grad_with_argmax]: dx = exact "
              "scatter-add of grad to the argmax positions"),
    # SoftmaxCrossEntropyWithLogits: vcmax, vsub, vcadd, vsub (x - lse), vmul (labels),
    # vcadd (loss), vmul (1/sum), vsub (- labels) + vexp
    OpDef("SoftmaxCrossEntropyWithLogits", _xent_infer, _xent_kernel, Category.REDUCE,
          inputs=("features", "labels"), num_outputs=2, flops=_per_elem(10), vec_class=_R,
          vec_instrs=3, vec_extra=((_B, 5), (VecClass.EXP, 1)),
          builder="softmax_cross_entropy_with_logits",
          doc="CANN SoftmaxCrossEntropyWithLogits [MS-TBE softmax_cross_entropy_with_logits]"
              ": loss = -sum(labels*log_softmax(features)) per row, backprop = "
              "softmax(features) - labels"),
    # LayerNormXBackprop: vsub, vmul (xhat), vmul (dy*gamma), vmul (g*xhat), vmul, vsub x2,
    # vmul (rstd) + 2 vcadd
    OpDef("LayerNormXBackprop", _ln_x_infer, _ln_x_kernel, Category.REDUCE,
          inputs=("dy", "x", "mean", "rstd", "gamma"), attrs={"axis": -1},
          flops=_per_elem(10), vec_class=_R, vec_instrs=2, vec_extra=((_B, 8),),
          builder="layer_norm_x_backprop",
          doc="CANN LayerNormXBackprop [MS-TBE layer_norm_x_backprop]: dx = rstd*(g - "
              "mean(g) - xhat*mean(g*xhat)) over axes [axis, rank), g = dy*gamma, xhat = "
              "(x - mean)*rstd; mean/rstd as ONNX LayerNormalization's Mean/InvStdDev (CANN "
              "passes the variance)"),
    # LayerNormBetaGammaBackprop: vsub, vmul (xhat), vmul (dy*xhat), vadd x2 (accumulate)
    OpDef("LayerNormBetaGammaBackprop", _ln_bg_infer, _ln_bg_kernel, Category.REDUCE,
          inputs=("dy", "x", "mean", "rstd"), attrs={"axis": -1}, num_outputs=2,
          flops=_per_elem(5), vec_class=_B, vec_instrs=5,
          builder="layer_norm_beta_gamma_backprop",
          doc="CANN LayerNormBetaGammaBackprop [MS-TBE layer_norm_beta_gamma_backprop]: "
              "dgamma = sum(dy*xhat), dbeta = sum(dy) over axes [0, axis), float32"),
    OpDef("DropOutGenMask", _gen_mask_infer, _gen_mask_kernel, _O, unit=Unit.AICPU,
          inputs=(), attrs={"shape": None, "keep_prob": 0.9, "seed": 0, "seed2": 0},
          flops=_gen_mask_flops, deterministic=False, builder="drop_out_gen_mask",
          doc="CANN DropOutGenMask (AI CPU) [MS-OPS DropoutGenMask]: bit-packed keep mask "
              "of Bernoulli(keep_prob), uint8 of ceil(numel/128)*16 bytes; seeded"),
    # DropOutDoMask: vsel (unpacked mask), vmuls (1/keep_prob)
    OpDef("DropOutDoMask", _do_mask_infer, _do_mask_kernel, _E,
          inputs=("x", "mask", "keep_prob"), flops=_per_elem(2), vec_class=_B, vec_instrs=2,
          builder="drop_out_do_mask",
          doc="CANN DropOutDoMask [MS-TBE drop_out_do_mask]: y = x*mask/keep_prob"),
    # ApplyMomentum: vmul, vadd (accum), vmuls (lr), vsub (var)
    OpDef("ApplyMomentum", _momentum_infer, _momentum_kernel, _E,
          inputs=("var", "accum", "lr", "grad", "momentum"), attrs={"use_nesterov": 0},
          num_outputs=2, flops=_per_elem(4), vec_class=_B, vec_instrs=4,
          builder="apply_momentum",
          doc="CANN ApplyMomentum [MS-TBE apply_momentum; TF ApplyMomentum]: accum = "
              "accum*momentum + grad; var -= lr*accum (nesterov: var -= lr*(grad + "
              "momentum*accum))" + _OPT_NOTE),
    # ApplyAdam: m: vsub, vmul, vadd; v: vmul, vsub, vmul, vadd; var: vadd (eps), vmul, vsub
    # + vsqrt, vdiv
    OpDef("ApplyAdam", _adam_infer, _adam_kernel, _E,
          inputs=("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2",
                  "epsilon", "grad"), attrs={"use_nesterov": 0}, num_outputs=3,
          flops=_per_elem(12), vec_class=_B, vec_instrs=10,
          vec_extra=((VecClass.SQRT, 1), (VecClass.DIV, 1)), builder="apply_adam",
          doc="CANN ApplyAdam [MS-TBE apply_adam; TF ApplyAdam]: lr_t = lr*sqrt(1 - "
              "beta2_power)/(1 - beta1_power); m += (grad - m)*(1 - beta1); v += (grad^2 - v)"
              "*(1 - beta2); var -= lr_t*m/(sqrt(v) + epsilon)" + _OPT_NOTE),
    # ApplyAdamW: the A2's kernel is TBE's dynamic apply_adam_w.py (CANN 8.1.RC1, public copy
    # leideng/CANN-8.1.RC1 at 4332a01, opp .../tbe/impl/dynamic/apply_adam_w.py; registered
    # in the ascend910b ops-info, while ops-nn's Ascend C ApplyAdamW is for the 950 only).
    # Per element, over whole tiles: 9 binary (m*beta1, (beta1-1)*gt, vsub; v*beta2,
    # (beta2-1)*gt, *gt, vsub; var*(1-lr*wd), the final vadd), 12 unary (vmuls of grad by
    # +-1; vadds beta1-1 and beta2-1 and vmuls -lr on the broadcast scalars, which other
    # unary ops read and so stay whole tiles; their 3 vector_dups; vmuls by weight_decay,
    # vadds +1, vmuls -v_out, vadds eps, vmuls step_size: broadcasts only binary ops read
    # fold into scalars), 2 vdiv (by beta2_power_out - 1, m_out / denom), 1 vsqrt
    OpDef("ApplyAdamW", _adamw_infer, _adamw_kernel, _E,
          inputs=("var", "m", "v", "beta1_power", "beta2_power", "lr", "weight_decay",
                  "beta1", "beta2", "epsilon", "grad"), num_outputs=3, flops=_per_elem(13),
          vec_class=_B, vec_instrs=9,
          vec_extra=((VecClass.UNARY, 12), (VecClass.SQRT, 1), (VecClass.DIV, 2)),
          builder="apply_adam_w",
          doc="CANN ApplyAdamW [NPU npu_apply_adam_w]: var *= 1 - lr*weight_decay, then as "
              "ApplyAdam (TF's lr_t form; torch_npu's kernel bias-corrects m and v "
              "separately, which differs only in where epsilon sits)" + _OPT_NOTE),
    # LambApplyOptimizerAssign: v: vmul x2, vadd; m: vmul x2, vadd; vmuls x2 (1/c1, 1/c2),
    # vadd (eps), vmul + vadd (wd*var) + vsqrt, vdiv
    OpDef("LambApplyOptimizerAssign", _lamb1_infer, _lamb1_kernel, _E,
          inputs=("grad", "v", "m", "var", "beta1", "one_minus_beta1", "beta2",
                  "one_minus_beta2", "epsilon", "step", "weight_decay"), num_outputs=3,
          flops=_per_elem(14), vec_class=_B, vec_instrs=11,
          vec_extra=((VecClass.SQRT, 1), (VecClass.DIV, 1)),
          builder="lamb_apply_optimizer_assign",
          doc="CANN LambApplyOptimizerAssign [MS-GK lamb_apply_optimizer_assign.cc, MS-OPS]"
              ": next_v = v*beta2 + grad^2*(1-beta2), next_m = m*beta1 + grad*(1-beta1); "
              "bias correction m_hat = next_m/(1 - beta1^step), v_hat = next_v/(1 - "
              "beta2^step); update = m_hat/(sqrt(v_hat) + epsilon) + weight_decay*var; "
              "outputs (update, next_v, next_m) (MindSpore's extra decay_flag input is "
              "folded into weight_decay = 0)"),
    # LambApplyWeightAssign: vmuls (lr*ratio), vsub; the trust ratio is scalar work
    OpDef("LambApplyWeightAssign", _lamb2_infer, _lamb2_kernel, _E,
          inputs=("w_norm", "g_norm", "lr", "update", "var"), flops=_per_elem(2, 3),
          vec_class=_B, vec_instrs=2, builder="lamb_apply_weight_assign",
          doc="CANN LambApplyWeightAssign [MS-GK lamb_apply_weight_assign.cc]: trust ratio "
              "= w_norm/g_norm when both > 0, else 1 (g_norm = ||update||); var_new = var - "
              "lr*ratio*update" + _OPT_NOTE),
    OpDef("NPUGetFloatStatus", _status_infer, _get_status_kernel, _O, inputs=("*xs",),
          flops=_status_flops, vec_class=VecClass.MOVE, vec_instrs=1, reads_inputs=False,
          deterministic=False, builder="npu_get_float_status",
          doc="CANN NPUGetFloatStatus [MS-OPS, NPU npu_get_float_status]: float32[8] status, "
              "element 0 = 1.0 when any input holds inf/nan (the inputs order it and stand "
              "for the computation the status register watched)"),
    OpDef("NPUClearFloatStatus", _status_infer, _clear_status_kernel, _O, inputs=("*xs",),
          flops=_status_flops, vec_class=VecClass.MOVE, vec_instrs=1, reads_inputs=False,
          deterministic=False, builder="npu_clear_float_status",
          doc="CANN NPUClearFloatStatus [MS-OPS, NPU npu_clear_float_status]: zeroes the "
              "status (float32[8] zeros), after its (ordering) inputs"),
]

for _op in _OPS:
    register(_op)
