"""One training step of any graph, as a graph: forward, loss, backward, optimizer update.

`training_step(graph, loss, optimizer, ...)` rewrites a forward (inference) graph the way the
Ascend frameworks (MindSpore, TF/PyTorch adapters) build a training graph for CANN:

1. Parameters (see autodiff/grad.py) become graph inputs named as the constant was, so constant
   folding cannot fold them; their new values are outputs `<param>_new`.
2. Training forms of the layers: each inference BatchNormalization becomes BNTrainingReduce +
   BNTrainingUpdate (batch statistics; the running mean/variance become state inputs
   `<mean>`/`<var>` and outputs `<mean>_new`/`<var>_new`); MaxPool becomes MaxPoolWithArgmax
   (its argmax routes the gradient exactly); LayerNormalization keeps its Mean/InvStdDev for
   LayerNormXBackprop/LayerNormBetaGammaBackprop; RmsNorm also returns its rstd for
   RmsNormGrad; an exported (inference) Dropout becomes
   DropOutGenMask + DropOutDoMask (seeded from the node's name). The rules of these ops build
   the backward from BNTrainingUpdateGrad + BNTrainingReduceGrad, MaxPoolGradWithArgmax and
   DropOutDoMask by the same mask.
3. The loss: "softmax_cross_entropy" (SoftmaxCrossEntropyWithLogits on the logits, the Softmax's
   input when the model ends in Softmax, against one-hot float "labels" (N, C); batch mean),
   "mse" (mean squared error against "labels" of the output's shape), or a scalar Value.
4. Mixed precision (the frameworks' O2 level): the model computes in float16 (float inputs and
   constants are float16); parameters are float32 master inputs Cast to float16 for use; the
   loss is computed in float32; gradients flow back through the Casts to float32. A norm's
   float32 statistics that the model reads itself (LayerNormalization's Mean) are Cast to
   float16 for those readers. Optimizer kernels of float16/bfloat16 parameters (no mixed
   precision) take float32 scalars (epsilon 1e-8 is 0 in float16).
   Loss scaling: the backward is seeded with the loss scale; gradients are unscaled in float32.
   A static scale (a float) only scales; the dynamic scale ("dynamic", default under mixed
   precision) also checks the gradients for inf/nan (NPUGetFloatStatus), keeps every parameter
   and optimizer state unchanged on overflow, and updates the scale as MindSpore's
   DynamicLossScaleUpdateCell: halve on overflow (not below 1), double after `scale_window`
   good steps. State: inputs "loss_scale", "good_steps"; outputs "loss_scale_new",
   "good_steps_new".
5. The optimizer, as CANN's fused kernels on the float32 master weights: "sgd" (Mul, Sub),
   "momentum" (ApplyMomentum; state `<param>_m`), "adam" (ApplyAdam; `<param>_m`, `<param>_v`
   and the "step" counter, bias correction from beta^step), "adamw" (ApplyAdamW), "lamb"
   (LambApplyOptimizerAssign + LambApplyWeightAssign with the trust ratio's norms).
   Optimizer state inputs are `<param>_m`/`<param>_v`/"step"; outputs add "_new".

Outputs, in order: "loss", then per parameter `<param>_new` (and `_m_new`, `_v_new`), then BN
state, then "step_new", "loss_scale_new", "good_steps_new" as the configuration has them.
`initial_state(step)` gives the values every state input starts from.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, GraphError
from ..gcpause import gc_paused
from ..ir.graph import Graph, Node
from ..ir.registry import Category, Unit, get_op
from ..ir.tensor import ConstData, LazyTensor, Value, as_storage, materialize
from .grad import FLOAT_DTYPES, backward, fold_initializers, parameters

LOSSES = ("softmax_cross_entropy", "mse")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "lamb")
COMPUTE_HALF = "float16"
MASTER = "float32"
#: MindSpore DynamicLossScaleManager's defaults: factor 2, window 1000 (its initial scale is
#: 2**24; 2**16 is the common starting point of Apex/PyTorch AMP, used here)
DEFAULT_LOSS_SCALE = 2.0 ** 16
SCALE_FACTOR = 2.0
SCALE_WINDOW = 1000


@dataclass
class _Step:
    """The step under construction: the graph, its state inputs and their initial values."""

    g: Graph
    init: dict[str, ConstData] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    state_outputs: list[str] = field(default_factory=list)   # BN running statistics
    _small: dict = field(default_factory=dict)

    def scalar(self, v: float, dtype: str = MASTER) -> Value:
        key = (dtype, float(v))
        if key not in self._small:
            self._small[key] = self.g.const(v, dtype=dtype)
        return self._small[key]

    def state_input(self, name: str, shape: Sequence[int], dtype: str, init: ConstData) -> Value:
        v = self.g.input(name, tuple(int(d) for d in shape), dtype)
        self.init[name] = init
        return v

    def emit(self, value: Value, name: str, state: bool = False) -> None:
        """Make `value` a graph output called `name` (a free Identity view)."""
        self.g.add_node("Identity", [value], name=name, outputs=[name])
        (self.state_outputs if state else self.outputs).append(name)


def _check(graph: Graph, loss: Any, optimizer: str, loss_scale: Any, lr: float) -> None:
    if isinstance(loss, str) and loss not in LOSSES and loss not in graph.values:
        raise ConfigError(f"loss={loss!r}: valid values are {', '.join(LOSSES)} or a scalar "
                          f"value of graph '{graph.name}' (a Value or its name)")
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer={optimizer!r}: valid values are {', '.join(OPTIMIZERS)}")
    if not lr > 0:
        raise ConfigError(f"lr={lr!r}: must be > 0")
    if loss_scale is not None and loss_scale != "dynamic":
        if isinstance(loss_scale, bool) or not isinstance(loss_scale, (int, float)) \
                or not loss_scale > 0:
            raise ConfigError(f"loss_scale={loss_scale!r}: give a positive number (static), "
                              f"'dynamic' or None")


@gc_paused()
def training_step(graph: Graph, loss: str | Value = "softmax_cross_entropy",
                  optimizer: str = "momentum", lr: float = 0.01, *, momentum: float = 0.9,
                  betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                  weight_decay: float = 0.0, nesterov: bool = False,
                  mixed_precision: bool = True, loss_scale: float | str | None = None,
                  name: str | None = None) -> Graph:
    """One training step of `graph` as a new Graph (see the module doc for what it contains
    and how inputs and outputs are named). `loss_scale`: None = "dynamic" under mixed
    precision, else no scaling; a number = a static scale; "dynamic" = dynamic scaling.
    `weight_decay`: L2 added to the gradient (sgd, momentum, adam), decoupled (adamw, lamb)."""
    _check(graph, loss, optimizer, loss_scale, lr)
    if loss_scale is None:
        loss_scale = "dynamic" if mixed_precision else 1.0
    g = fold_initializers(graph)
    g.name = name or f"{graph.name}TrainingStep"
    step = _Step(g)
    params = parameters(g)
    # a float32 model computes in float16 under mixed precision; a float16 one already does
    to_half = mixed_precision and any(g.values[p].dtype == MASTER for p in params)
    _training_forms(step)
    masters = _params_to_inputs(step, params, mixed_precision)
    if to_half:
        _to_half(g, set(step.init))
    g.toposort()
    g.infer_shapes()
    loss_v = _add_loss(step, loss)
    _update(step, loss_v, masters, optimizer, lr, momentum, betas, eps, weight_decay,
            nesterov, loss_scale)
    g.outputs = ["loss"] + step.outputs + step.state_outputs
    g.remove_unused()
    g.validate()
    g.initial_state = step.init   # type: ignore[attr-defined]
    return g


def initial_state(step: Graph) -> dict[str, np.ndarray]:
    """The starting value of every state input of a training step (parameters from the
    model's constants, optimizer moments 0, step 0, loss scale, good steps 0, BN statistics)."""
    init = getattr(step, "initial_state", None)
    if init is None:
        raise GraphError(f"graph '{step.name}' was not made by training_step")
    return {k: np.asarray(materialize(v)) for k, v in init.items()}


# ----------------------------------------------------------------------------- parameters
def _to_half(g: Graph, keep: set[str]) -> None:
    """Compute in float16: float32 inputs and constants (but `keep`: state and master
    weights) become float16, Casts to float32 become Casts to float16 (the caller re-infers
    the shapes)."""
    for name in g.inputs:
        v = g.values[name]
        if v.dtype == "float32" and name not in keep:
            g.values[name] = Value(name, v.shape, COMPUTE_HALF, v.layout)
    for name, data in list(g.constants.items()):
        v = g.values[name]
        if v.dtype != "float32" or name in keep:
            continue
        g.constants[name] = _lazy_cast(data, COMPUTE_HALF)
        g.values[name] = Value(name, v.shape, COMPUTE_HALF, v.layout)
    g.nodes = [Node(n.name, n.op_type, n.inputs, n.outputs, {**n.attrs, "to": COMPUTE_HALF},
                    n.subgraph)
               if n.op_type == "Cast" and n.attrs.get("to") == "float32" else n
               for n in g.nodes]
    _half_statistics(g)


#: outputs of norms that stay float32 beside float16 operands (ONNX's stash type, CANN's
#: float32 statistics): LayerNormalization's Mean and InvStdDev, RmsNorm's rstd
_STATISTICS = {"LayerNormalization": (1, 2), "RmsNorm": (1,)}


def _half_statistics(g: Graph) -> None:
    """A norm's float32 statistics that the model itself reads (a graph using
    LayerNormalization's Mean) are Cast to float16 for those readers; the norm's node keeps
    them float32 under a new name (its gradient rule reads them so)."""
    read = {i for n in g.nodes for i in n.inputs if i} | set(g.outputs)
    for node in list(g.nodes):
        stats = [node.outputs[k] for k in _STATISTICS.get(node.op_type, ())
                 if k < len(node.outputs) and node.outputs[k] in read
                 and g.values[node.outputs[k]].dtype == "float32"]
        if not stats:
            continue
        renamed = {o: g.fresh_value_name(f"{o}.float32") for o in stats}
        i = g.nodes.index(node)
        g.nodes[i] = Node(node.name, node.op_type, node.inputs,
                          tuple(renamed.get(o, o) for o in node.outputs), node.attrs,
                          node.subgraph)
        for old, new in renamed.items():
            v = g.values.pop(old)
            g.values[new] = Value(new, v.shape, v.dtype, v.layout)
            g.add_node("Cast", [g.values[new]], {"to": COMPUTE_HALF},
                       name=g.fresh_node_name("Cast"), outputs=[old], at=i + 1)


def _lazy_cast(data: ConstData, dtype: str) -> ConstData:
    if isinstance(data, LazyTensor):
        return LazyTensor(data.shape, dtype, lambda: as_storage(materialize(data), dtype),
                          f"{data.describe} as {dtype}")
    return as_storage(data, dtype)


@dataclass(frozen=True)
class _Param:
    name: str        # the master input (and the parameter's name)
    master: Value    # float32 under mixed precision, else the parameter's dtype


def _params_to_inputs(step: _Step, params: list[str], mixed: bool) -> list[_Param]:
    """Each parameter constant becomes an input of its name: a float32 master under mixed
    precision, Cast to float16 where it is used (BNTrainingUpdate's channel vectors stay
    float32, as CANN's kernel takes them)."""
    g = step.g
    users: dict[str, list[Node]] = {}
    for n in g.nodes:
        for i in dict.fromkeys(n.inputs):
            users.setdefault(i, []).append(n)
    out, renamed, casts = [], {}, []
    for p in params:
        v = g.values.pop(p)
        data = g.constants.pop(p)
        dtype = MASTER if mixed else v.dtype
        master = step.state_input(p, v.shape, dtype, _lazy_cast(data, dtype))
        bn_only = all(n.op_type == "BNTrainingUpdate" for n in users.get(p, ()))
        # a bfloat16 model computes in bf16 from float32 masters (its optimizer then works in
        # fp32: beta2 = 0.999 is 1.0 in bf16); any other in float16
        half = "bfloat16" if v.dtype == "bfloat16" else COMPUTE_HALF
        compute = half if mixed and not bn_only else dtype
        if compute != dtype:
            renamed[p] = f"{p}_{compute}"
            casts.append((master, compute, renamed[p]))
        out.append(_Param(p, master))
    g.nodes = [n if not any(i in renamed for i in n.inputs) else
               Node(n.name, n.op_type, tuple(renamed.get(i, i) for i in n.inputs), n.outputs,
                    n.attrs, n.subgraph) for n in g.nodes]
    g.outputs = [renamed.get(o, o) for o in g.outputs]
    for master, compute, used in casts:
        g.add_node("Cast", [master], {"to": compute}, name=f"{master.name}.cast", outputs=[used])
    return out


# ----------------------------------------------------------------------------- loss
def _add_loss(step: _Step, loss: str | Value) -> Value:
    g = step.g
    if not isinstance(loss, str) or loss not in LOSSES:
        v = g.value(loss if isinstance(loss, str) else loss.name)
        if v.numel != 1 or v.dtype not in FLOAT_DTYPES:
            raise GraphError(f"loss '{v.name}' must be a one-element float value, has shape "
                             f"{v.shape} and dtype {v.dtype}")
        g.add_node("Identity", [v], name="loss", outputs=["loss"])
        return g.values["loss"]
    if not g.outputs:
        raise GraphError(f"graph '{g.name}' has no output to train")
    out = g.values[g.outputs[0]]
    if loss == "mse":
        y = _to_master(g, out)
        labels = g.input("labels", y.shape, y.dtype)
        d = g.sub(y, labels)
        mean = g.reduce_mean(g.mul(d, d), list(range(y.rank)), keepdims=0)
        g.add_node("Identity", [mean], name="loss", outputs=["loss"])
        return g.values["loss"]
    logits = _logits(g, out)
    if logits.rank != 2:
        logits = g.flatten(logits, axis=1)
    z = _to_master(g, logits)
    labels = g.input("labels", z.shape, z.dtype)
    per_row, _ = g.softmax_cross_entropy_with_logits(z, labels)
    mean = g.reduce_mean(per_row, [0], keepdims=0)
    g.add_node("Identity", [mean], name="loss", outputs=["loss"])
    return g.values["loss"]


def _logits(g: Graph, out: Value) -> Value:
    """The Softmax's input when `out` is a Softmax over the classes (through views such as
    the Reshapes an opset < 13 Softmax imports with), else `out` itself."""
    producers = g.producers()
    v = out
    while (node := producers.get(v.name)) is not None:
        opdef = get_op(node.op_type, node.name)
        if node.op_type == "Softmax":
            axis = int(node.attrs["axis"]) % v.rank
            if all(d == 1 for d in v.shape[axis + 1:]):
                return g.values[node.inputs[0]]
            return out
        if opdef.unit != Unit.NONE or opdef.category != Category.INJECTIVE:
            return out
        v = g.values[node.inputs[0]]
    return out


def _to_master(g: Graph, v: Value) -> Value:
    return v if v.dtype in (MASTER, "float64") else g.cast(v, to=MASTER)


# ----------------------------------------------------------------------------- training forms
def _training_forms(step: _Step) -> None:
    """Rewrite inference BatchNorm, MaxPool and LayerNorm into their training forms."""
    g = step.g
    kept: list[Node] = []
    rewrites = []
    for n in g.nodes:
        rule = _FORMS.get(n.op_type)
        if rule is not None and rule.applies(g, n):
            rewrites.append((rule, n))
        else:
            kept.append(n)
    g.nodes = kept
    for rule, n in rewrites:
        for o in n.outputs:
            del g.values[o]
        rule.rewrite(step, n)
    g.toposort()


@dataclass(frozen=True)
class _Form:
    applies: Any
    rewrite: Any


def _bn_applies(g: Graph, n: Node) -> bool:
    return not int(n.attrs["training_mode"]) and len(n.outputs) == 1


def _bn_rewrite(step: _Step, n: Node) -> None:
    """BNTrainingReduce (sum, square sum) + BNTrainingUpdate (y, running stats, batch
    stats); running mean/variance become state inputs (their constant, float32) and outputs."""
    g = step.g
    x, scale, bias, mean, var = n.inputs
    total, square = g.bn_training_reduce(x, name=f"{n.name}.reduce")
    chan = total.dtype     # float32 channel vectors beside float16 x
    for c in (scale, bias, mean, var):     # constants move to the channel dtype once
        v = g.values[c]
        if c in g.constants and v.dtype != chan:
            g.constants[c] = _lazy_cast(g.constants[c], chan)
            g.values[c] = Value(c, v.shape, chan, v.layout)
    state = []
    for s in (mean, var):
        if s in g.constants and s not in step.init:
            data = g.constants.pop(s)
            v = g.values.pop(s)
            state.append(step.state_input(s, v.shape, v.dtype, data))
        else:
            state.append(g.values[s])
    scale_v, bias_v = (_as_dtype(g, g.values[v], chan) for v in (scale, bias))
    mean_v, var_v = (_as_dtype(g, v, chan) for v in state)
    g.add_node("BNTrainingUpdate", [x, total, square, scale_v, bias_v, mean_v, var_v],
               {"factor": 1.0 - float(n.attrs["momentum"]), "epsilon": float(n.attrs["epsilon"])},
               name=n.name, outputs=[n.outputs[0], f"{n.name}.mean_out", f"{n.name}.var_out",
                                     f"{n.name}.batch_mean", f"{n.name}.batch_var"])
    for s, out in zip(state, (f"{n.name}.mean_out", f"{n.name}.var_out")):
        if s.name in step.init:
            step.emit(_as_dtype(g, g.values[out], s.dtype), f"{s.name}_new", state=True)


def _as_dtype(g: Graph, v: Value, dtype: str) -> Value:
    return v if v.dtype == dtype else g.cast(v, to=dtype)


def _maxpool_applies(g: Graph, n: Node) -> bool:
    x = g.values[n.inputs[0]]
    a = n.attrs
    return (x.rank == 4 and a["num_outputs"] == 1 and not a["ceil_mode"]
            and a.get("auto_pad", "NOTSET") == "NOTSET"
            and all(d == 1 for d in (a.get("dilations") or [1])) and a["storage_order"] == 0)


def _maxpool_rewrite(step: _Step, n: Node) -> None:
    a = n.attrs
    k = list(a["kernel_shape"])
    step.g.add_node("MaxPoolWithArgmax", [n.inputs[0]],
                    {"kernel_shape": k, "strides": list(a.get("strides") or [1] * len(k)),
                     "pads": list(a.get("pads") or [0] * 2 * len(k))},
                    name=n.name, outputs=[n.outputs[0], f"{n.name}.argmax"])


def _ln_applies(g: Graph, n: Node) -> bool:
    return len(n.outputs) == 1


def _ln_rewrite(step: _Step, n: Node) -> None:
    step.g.add_node("LayerNormalization", list(n.inputs), {**n.attrs, "num_outputs": 3},
                    name=n.name, outputs=[n.outputs[0], f"{n.name}.mean", f"{n.name}.rstd"])


def _rms_applies(g: Graph, n: Node) -> bool:
    return len(n.outputs) == 1


def _rms_rewrite(step: _Step, n: Node) -> None:
    """RmsNorm also returns rstd, which RmsNormGrad reads (as CANN's kernel pair does)."""
    step.g.add_node("RmsNorm", list(n.inputs), {**n.attrs, "num_outputs": 2}, name=n.name,
                    outputs=[n.outputs[0], f"{n.name}.rstd"])


def _dropout_applies(g: Graph, n: Node) -> bool:
    """An exported (inference) Dropout with a constant ratio > 0 whose mask nobody reads."""
    if len(n.inputs) > 2 and n.inputs[2]:
        return False
    mask = n.outputs[1:]
    if mask and (mask[0] in g.outputs or any(mask[0] in m.inputs for m in g.nodes)):
        return False
    return _dropout_ratio(g, n) > 0.0


def _dropout_ratio(g: Graph, n: Node) -> float:
    if len(n.inputs) < 2 or not n.inputs[1]:
        return 0.5                                  # ONNX Dropout's default ratio
    ratio = g.const_value(n.inputs[1])
    return -1.0 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])


def _dropout_rewrite(step: _Step, n: Node) -> None:
    """DropOutGenMask (AI CPU, seeded from the node's name) + DropOutDoMask: a training step
    drops activations as the frameworks train."""
    g = step.g
    x = g.values[n.inputs[0]]
    keep = 1.0 - _dropout_ratio(g, n)
    seed = zlib.crc32(n.name.encode()) & 0x7FFFFFFF
    mask = g.drop_out_gen_mask(shape=[int(d) for d in x.shape], keep_prob=keep, seed=seed,
                               seed2=0, name=f"{n.name}.gen_mask")
    keep_v = g.const(np.asarray(keep, dtype=x.dtype))   # its own: mixed precision recasts it
    g.add_node("DropOutDoMask", [x, mask, keep_v], name=n.name,
               outputs=[n.outputs[0]])


_FORMS = {"BatchNormalization": _Form(_bn_applies, _bn_rewrite),
          "Dropout": _Form(_dropout_applies, _dropout_rewrite),
          "MaxPool": _Form(_maxpool_applies, _maxpool_rewrite),
          "LayerNormalization": _Form(_ln_applies, _ln_rewrite),
          "RmsNorm": _Form(_rms_applies, _rms_rewrite)}


# ----------------------------------------------------------------------------- update
def _update(step: _Step, loss: Value, params: list[_Param], optimizer: str, lr: float,
            momentum: float, betas: tuple[float, float], eps: float, weight_decay: float,
            nesterov: bool, loss_scale: float | str) -> None:
    g = step.g
    dynamic = loss_scale == "dynamic"
    if dynamic:
        scale = step.state_input("loss_scale", (), MASTER,
                                 np.asarray(DEFAULT_LOSS_SCALE, np.float32))
    else:
        scale = step.scalar(float(loss_scale), loss.dtype)
    seed = scale if scale.dtype == loss.dtype else g.cast(scale, to=loss.dtype)
    grads = backward(g, loss.name, [p.name for p in params], seed=seed)
    overflow = None
    if dynamic:
        status = g.npu_get_float_status(*grads.values())
        flag = g.gather(status, g.const(np.asarray(0, np.int64)), axis=0)
        overflow = g.greater(flag, step.scalar(0.0))
    unscale = None if loss_scale == 1.0 else g.reciprocal(scale) if dynamic else \
        step.scalar(1.0 / float(loss_scale))

    def keep(old: Value, new: Value) -> Value:
        return new if overflow is None else g.where(overflow, old, new)

    counter = old_step = None
    if optimizer in ("adam", "adamw", "lamb"):
        old_step = step.state_input("step", (), MASTER, np.asarray(0.0, np.float32))
        counter = g.add(old_step, step.scalar(1.0))
    opt = _OPTIMIZERS[optimizer]
    for p in params:
        d = grads[p.name]
        d = d if d.dtype == p.master.dtype else g.cast(d, to=p.master.dtype)
        if unscale is not None:
            d = g.mul(d, _as_dtype(g, unscale, d.dtype))
        news = opt(step, p, d, counter, _Hyper(lr, momentum, betas, eps, weight_decay,
                                                nesterov))
        for suffix, (old, new) in news.items():
            step.emit(keep(old, new), f"{p.name}{suffix}_new")
    if counter is not None:
        step.emit(keep(old_step, counter), "step_new")
    if dynamic:
        good = step.state_input("good_steps", (), MASTER, np.asarray(0.0, np.float32))
        good1 = g.add(good, step.scalar(1.0))
        grow = g.greater_or_equal(good1, step.scalar(float(SCALE_WINDOW)))
        up = g.where(grow, g.mul(scale, step.scalar(SCALE_FACTOR)), scale)
        down = g.max(g.mul(scale, step.scalar(1.0 / SCALE_FACTOR)), step.scalar(1.0))
        step.emit(g.where(overflow, down, up), "loss_scale_new")
        zero = step.scalar(0.0)
        step.emit(g.where(overflow, zero, g.where(grow, zero, good1)), "good_steps_new")


@dataclass(frozen=True)
class _Hyper:
    lr: float
    momentum: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    nesterov: bool


def _hyper_dtype(dtype: str) -> str:
    """The dtype of an optimizer kernel's scalar inputs (learning rate, betas, epsilon, beta
    powers) for a parameter of `dtype`: float32 for a half-precision parameter, whose kernel
    computes in float32 (in float16, epsilon 1e-8 is 0 and beta2 0.999 rounds to 0.99902;
    a zero gradient then divides 0 by 0)."""
    return MASTER if dtype in ("float16", "bfloat16") else dtype


def _moment(step: _Step, p: _Param, suffix: str) -> Value:
    v = p.master
    return step.state_input(f"{p.name}{suffix}", v.shape, v.dtype,
                            LazyTensor.full(tuple(v.shape), v.dtype, 0.0))


def _l2(step: _Step, p: _Param, d: Value, h: _Hyper) -> Value:
    if not h.weight_decay:
        return d
    return step.g.add(d, step.g.mul(p.master, step.scalar(h.weight_decay, d.dtype)))


def _sgd(step: _Step, p: _Param, d: Value, counter: Value | None, h: _Hyper) -> dict:
    g, w = step.g, p.master
    return {"": (w, g.sub(w, g.mul(_l2(step, p, d, h), step.scalar(h.lr, w.dtype))))}


def _momentum(step: _Step, p: _Param, d: Value, counter: Value | None, h: _Hyper) -> dict:
    w, m = p.master, _moment(step, p, "_m")
    c = lambda v: step.scalar(v, _hyper_dtype(w.dtype))   # noqa: E731
    w2, m2 = step.g.apply_momentum(w, m, c(h.lr), _l2(step, p, d, h), c(h.momentum),
                                   use_nesterov=int(h.nesterov))
    return {"": (w, w2), "_m": (m, m2)}


def _powers(step: _Step, counter: Value, h: _Hyper, dtype: str) -> tuple[Value, Value]:
    """beta1^step, beta2^step as Exp(step * ln beta) (vector ops, shared by every param)."""
    key = ("powers", dtype)
    if key not in step._small:
        g = step.g
        t = _as_dtype(g, counter, dtype)
        step._small[key] = tuple(g.exp(g.mul(t, step.scalar(float(np.log(b)), dtype)))
                                 for b in h.betas)
    return step._small[key]


def _adam(step: _Step, p: _Param, d: Value, counter: Value | None, h: _Hyper,
          decoupled: bool = False) -> dict:
    w, m, v = p.master, _moment(step, p, "_m"), _moment(step, p, "_v")
    hyper = _hyper_dtype(w.dtype)
    c = lambda x: step.scalar(x, hyper)   # noqa: E731
    b1p, b2p = _powers(step, counter, h, hyper)
    if decoupled:
        w2, m2, v2 = step.g.apply_adam_w(w, m, v, b1p, b2p, c(h.lr), c(h.weight_decay),
                                         c(h.betas[0]), c(h.betas[1]), c(h.eps), d)
    else:
        w2, m2, v2 = step.g.apply_adam(w, m, v, b1p, b2p, c(h.lr), c(h.betas[0]),
                                       c(h.betas[1]), c(h.eps), _l2(step, p, d, h))
    return {"": (w, w2), "_m": (m, m2), "_v": (v, v2)}


def _adamw(step: _Step, p: _Param, d: Value, counter: Value | None, h: _Hyper) -> dict:
    return _adam(step, p, d, counter, h, decoupled=True)


def _lamb(step: _Step, p: _Param, d: Value, counter: Value | None, h: _Hyper) -> dict:
    """LAMB's two CANN phases: the Adam-style update direction, then the layer-wise trust
    ratio ||w|| / ||update|| (norms as ReduceL2 over the whole tensor)."""
    g, w = step.g, p.master
    m, v = _moment(step, p, "_m"), _moment(step, p, "_v")
    hyper = _hyper_dtype(w.dtype)
    c = lambda x: step.scalar(x, hyper)   # noqa: E731
    b1, b2 = h.betas
    update, v2, m2 = g.lamb_apply_optimizer_assign(
        d, v, m, w, c(b1), c(1.0 - b1), c(b2), c(1.0 - b2), c(h.eps),
        _as_dtype(g, counter, hyper), c(h.weight_decay))
    axes = list(range(w.rank))
    w_norm = g.reduce_l2(w, axes, keepdims=0)
    u_norm = g.reduce_l2(update, axes, keepdims=0)
    w2 = g.lamb_apply_weight_assign(w_norm, u_norm, c(h.lr), update, w)
    return {"": (w, w2), "_m": (m, m2), "_v": (v, v2)}


_OPTIMIZERS = {"sgd": _sgd, "momentum": _momentum, "adam": _adam, "adamw": _adamw,
               "lamb": _lamb}

__all__ = ["training_step", "initial_state", "LOSSES", "OPTIMIZERS"]
