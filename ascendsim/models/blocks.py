"""Building blocks shared by the model builders: seeded lazy weights, layers, and a gradient tape.

A `ModelBuilder` wraps a `Graph` with a compute dtype and a base seed. Weights are lazy
constants (`LazyTensor`) whose seed is derived from the weight's name, so the same model built
twice has the same weights, and a full-size model costs no weight memory until values are asked.

Training steps are built with a `Tape`: each layer that is given a tape records a closure that,
run in reverse order by `Tape.backward`, appends the layer's gradient ops to the same graph
(reverse-mode differentiation written per layer, not per op type, so no op-type tables are
needed outside the registry). Gradients of a value used twice are summed with Add nodes.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import LazyTensor, Value, dtype_name

#: dtypes the model builders accept for their compute
FLOAT_DTYPES = ("float16", "float32", "float64")


def one(out: Value | tuple) -> Value:
    """The first output of a builder call (ops with optional extra outputs return tuples)."""
    return out[0] if isinstance(out, tuple) else out


def check_dtype(dtype: str) -> str:
    """A floating dtype name, or ConfigError listing the valid ones."""
    try:
        name = dtype_name(dtype)
    except Exception:
        name = str(dtype)
    if name not in FLOAT_DTYPES:
        raise ConfigError(f"dtype={dtype!r}: model builders take one of {', '.join(FLOAT_DTYPES)}")
    return name


def check_positive(**sizes: int) -> None:
    """ConfigError naming the first size argument that is not a positive integer."""
    for key, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise ConfigError(f"{key}={v!r}: must be a positive integer")


def check_choice(key: str, value: str, valid: Sequence[str]) -> str:
    if value not in valid:
        raise ConfigError(f"{key}={value!r}: valid values are {', '.join(valid)}")
    return value


def _uniform_values(shape: tuple[int, ...], dtype: str, seed: int, lo: float,
                    hi: float) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def _uniform(shape: tuple[int, ...], dtype: str, seed: int, lo: float, hi: float) -> LazyTensor:
    # a partial of a module-level function, not a closure: graphs pickle (process pools, Dask)
    make = functools.partial(_uniform_values, shape, dtype, seed, lo, hi)
    return LazyTensor(shape, dtype, make, f"uniform({lo}, {hi}, seed={seed})")


class ModelBuilder:
    """A graph under construction with a compute dtype and name-derived weight seeds."""

    def __init__(self, name: str, dtype: str = "float32", seed: int = 0) -> None:
        self.g = Graph(name)
        self.dtype = check_dtype(dtype)
        self.seed = int(seed)
        self._small: dict[tuple, Value] = {}   # shared small constants (scalars, shapes, axes)

    def _seed(self, name: str) -> int:
        return (zlib.crc32(name.encode()) + 7919 * self.seed) & 0x7FFFFFFF

    def weight(self, name: str, shape: Sequence[int], scale: float | None = None,
               dtype: str | None = None) -> Value:
        """A seeded random weight (normal times `scale`; He scale over shape[1:] by default)."""
        return self.g.weight(name, shape, dtype or self.dtype, seed=self._seed(name), scale=scale)

    def uniform(self, name: str, shape: Sequence[int], lo: float, hi: float,
                dtype: str | None = None) -> Value:
        """A seeded uniform weight in [lo, hi) (BN variances, LN gains)."""
        shape = tuple(int(d) for d in shape)
        return self.g.const(_uniform(shape, dtype or self.dtype, self._seed(name), lo, hi), name)

    def fill(self, name: str, shape: Sequence[int], value: float,
             dtype: str | None = None) -> Value:
        """A constant filled with `value`, lazily (optimizer state, masks)."""
        shape = tuple(int(d) for d in shape)
        return self.g.const(LazyTensor.full(shape, dtype or self.dtype, value), name)

    def scalar(self, value: float, dtype: str | None = None) -> Value:
        """A 0-d constant of the compute dtype (for ops whose first input is not a float)."""
        dt = dtype or self.dtype
        key = (dt, float(value))
        if key not in self._small:
            self._small[key] = self.g.const(np.asarray(value, dtype=dt), dtype=dt)
        return self._small[key]

    def ints(self, values: Sequence[int]) -> Value:
        """An int64 1-d constant (shapes, axes, indices), shared by equal uses."""
        key = ("int64", *(int(v) for v in values))
        if key not in self._small:
            self._small[key] = self.g.const(np.asarray(key[1:], dtype=np.int64))
        return self._small[key]


# --------------------------------------------------------------------------- gradient tape
@dataclass
class Param:
    """A trainable weight: the Value the forward reads, and the stored (master) Value."""

    name: str
    value: Value
    master: Value


@dataclass
class Tape:
    """Records per-layer backward closures; `backward` runs them in reverse order."""

    mb: ModelBuilder
    grads: dict[str, Value] = field(default_factory=dict)
    params: list[Param] = field(default_factory=list)
    param_grads: dict[str, Value] = field(default_factory=dict)
    _steps: list[Callable[[], None]] = field(default_factory=list)

    def on_backward(self, fn: Callable[[], None]) -> None:
        self._steps.append(fn)

    def grad(self, v: Value) -> Value | None:
        return self.grads.get(v.name)

    def accumulate(self, v: Value, dv: Value) -> None:
        """Add `dv` to the gradient of `v` (a value read by several layers sums its gradients)."""
        old = self.grads.get(v.name)
        self.grads[v.name] = dv if old is None else self.mb.g.add(old, dv)

    def param(self, name: str, make: Callable[[str | None], Value]) -> Value:
        """A trainable weight, made by `make(dtype)`; with a float32 master copy under fp16."""
        mb = self.mb
        if mb.dtype == "float16":
            master = make("float32")
            value = mb.g.cast(master, to=mb.dtype)
        else:
            master = value = make(None)
        self.params.append(Param(name, value, master))
        return value

    def param_grad(self, value: Value, grad: Value) -> None:
        old = self.param_grads.get(value.name)
        self.param_grads[value.name] = grad if old is None else self.mb.g.add(old, grad)

    def backward(self, seeds: dict[str, Value]) -> None:
        self.grads.update(seeds)
        for fn in reversed(self._steps):
            fn()


def new_param(mb: ModelBuilder, tape: Tape | None, name: str,
              make: Callable[[str | None], Value]) -> Value:
    """A weight: trainable (through the tape) when training, a plain constant otherwise."""
    return tape.param(name, make) if tape is not None else make(None)


# --------------------------------------------------------------------------- layers
def relu(mb: ModelBuilder, x: Value, tape: Tape | None = None) -> Value:
    g = mb.g
    y = g.relu(x)
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is not None:
                tape.accumulate(x, g.where(g.greater(y, mb.scalar(0.0)), dy, mb.scalar(0.0)))
        tape.on_backward(back)
    return y


def add(mb: ModelBuilder, a: Value, b: Value, tape: Tape | None = None) -> Value:
    """a + b for same-shaped activations (residual connections)."""
    y = mb.g.add(a, b)
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is not None:
                tape.accumulate(a, dy)
                tape.accumulate(b, dy)
        tape.on_backward(back)
    return y


def add_input(mb: ModelBuilder, x: Value, c: Value, tape: Tape | None = None) -> Value:
    """x + c where c is data, not trained (an attention mask): only x gets a gradient."""
    y = mb.g.add(x, c)
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is not None:
                tape.accumulate(x, dy)
        tape.on_backward(back)
    return y


def conv2d(mb: ModelBuilder, x: Value, name: str, cout: int, k: int, stride: int = 1,
           pad: int = 0, tape: Tape | None = None, input_grad: bool = True) -> Value:
    """A bias-less Conv (OIHW weight, He init)."""
    g = mb.g
    cin = int(x.shape[1])
    w = new_param(mb, tape, f"{name}.weight",
                  lambda dt: mb.weight(f"{name}.weight", (cout, cin, k, k), dtype=dt))
    y = g.conv(x, w, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
               name=name)
    if tape is not None:
        tape.on_backward(lambda: _conv_backward(mb, tape, x, w, y, k, stride, pad, input_grad))
    return y


def _conv_backward(mb: ModelBuilder, tape: Tape, x: Value, w: Value, y: Value, k: int,
                   stride: int, pad: int, input_grad: bool) -> None:
    """Conv gradients: data = ConvTranspose(dy, w); weight = a Conv of x by dy (exact).

    The weight gradient dW[o,c,i,j] = sum_{n,p,q} dy[n,o,p,q] x[n,c,s*p+i-pad,s*q+j-pad] is a
    convolution of x^T (C,N,H,W) by dy^T (O,N,P,Q) with dilation = stride; the bottom/right
    padding is trimmed (or the input cropped) so that the result is exactly k x k and the
    cube does exactly the forward's MACs.
    """
    g = mb.g
    dy = tape.grad(y)
    if dy is None:
        return
    h, wd = int(x.shape[2]), int(x.shape[3])
    oh, ow = int(y.shape[2]), int(y.shape[3])
    if input_grad:
        opad = [h - ((oh - 1) * stride + k - 2 * pad), wd - ((ow - 1) * stride + k - 2 * pad)]
        dx = g.conv_transpose(dy, w, kernel_shape=[k, k], strides=[stride, stride],
                              pads=[pad] * 4, output_padding=opad)
        tape.accumulate(x, dx)
    xt = g.transpose(x, perm=[1, 0, 2, 3])
    dyt = g.transpose(dy, perm=[1, 0, 2, 3])
    end_h = k + stride * (oh - 1) - h - pad   # bottom padding that makes the output k tall
    end_w = k + stride * (ow - 1) - wd - pad
    if end_h < 0 or end_w < 0:
        xt = g.slice(xt, mb.ints([0, 0]), mb.ints([h + min(end_h, 0), wd + min(end_w, 0)]),
                     mb.ints([2, 3]))
    pads = [pad, pad, max(end_h, 0), max(end_w, 0)]
    dwt = g.conv(xt, dyt, kernel_shape=[oh, ow], dilations=[stride, stride], pads=pads)
    tape.param_grad(w, g.transpose(dwt, perm=[1, 0, 2, 3]))


def batch_norm(mb: ModelBuilder, x: Value, name: str, gamma: tuple[float, float] = (0.8, 1.2),
               eps: float = 1e-5, tape: Tape | None = None) -> Value:
    """Inference: a BatchNormalization node with seeded statistics. Training (tape given): the
    batch-statistics form decomposed into ReduceMean/Sub/Mul/Sqrt/Div, with its exact gradient."""
    g = mb.g
    c = int(x.shape[1])
    if tape is None:
        scale = mb.uniform(f"{name}.weight", (c,), *gamma)
        bias = mb.weight(f"{name}.bias", (c,), scale=0.05)
        mean = mb.weight(f"{name}.running_mean", (c,), scale=0.05)
        var = mb.uniform(f"{name}.running_var", (c,), 0.8, 1.2)
        return one(g.batch_normalization(x, scale, bias, mean, var, epsilon=eps, name=name))
    shape = (1, c, 1, 1)
    scale = new_param(mb, tape, f"{name}.weight",
                      lambda dt: mb.uniform(f"{name}.weight", shape, *gamma, dtype=dt))
    bias = new_param(mb, tape, f"{name}.bias",
                     lambda dt: mb.weight(f"{name}.bias", shape, scale=0.05, dtype=dt))
    return _normalize(mb, x, [0, 2, 3], scale, bias, eps, tape)


def _normalize(mb: ModelBuilder, x: Value, axes: list[int], scale: Value, bias: Value,
               eps: float, tape: Tape | None) -> Value:
    """(x - mean) / sqrt(var + eps) * scale + bias over `axes`, decomposed, with its gradient."""
    g = mb.g
    mean = g.reduce_mean(x, axes, keepdims=1)
    xc = g.sub(x, mean)
    var = g.reduce_mean(g.mul(xc, xc), axes, keepdims=1)
    inv = g.div(mb.scalar(1.0), g.sqrt(g.add(var, mb.scalar(eps))))
    xhat = g.mul(xc, inv)
    y = g.add(g.mul(xhat, scale), bias)
    if tape is not None:
        red = [a for a in range(x.rank) if scale.shape[a] == 1] if scale.rank == x.rank else \
            list(range(x.rank - scale.rank))

        def back() -> None:
            dy = tape.grad(y)
            if dy is None:
                return
            keep = 1 if scale.rank == x.rank else 0
            tape.param_grad(bias, g.reduce_sum(dy, red, keepdims=keep))
            tape.param_grad(scale, g.reduce_sum(g.mul(dy, xhat), red, keepdims=keep))
            dxhat = g.mul(dy, scale)
            m1 = g.reduce_mean(dxhat, axes, keepdims=1)
            m2 = g.reduce_mean(g.mul(dxhat, xhat), axes, keepdims=1)
            dx = g.mul(inv, g.sub(g.sub(dxhat, m1), g.mul(xhat, m2)))
            tape.accumulate(x, dx)
        tape.on_backward(back)
    return y


def layer_norm(mb: ModelBuilder, x: Value, name: str, eps: float = 1e-12,
               decomposed: bool = False, tape: Tape | None = None) -> Value:
    """LayerNorm over the last axis: the LayerNormalization op, or PyTorch's exported form
    (ReduceMean, Sub, Pow 2, ReduceMean, Add, Sqrt, Div, Mul, Add). Training uses the
    decomposed form with its exact gradient."""
    g = mb.g
    h = int(x.shape[-1])
    scale = new_param(mb, tape, f"{name}.weight",
                      lambda dt: mb.uniform(f"{name}.weight", (h,), 0.9, 1.1, dtype=dt))
    bias = new_param(mb, tape, f"{name}.bias",
                     lambda dt: mb.weight(f"{name}.bias", (h,), scale=0.02, dtype=dt))
    if tape is not None:
        return _normalize(mb, x, [-1], scale, bias, eps, tape)
    if not decomposed:
        return one(g.layer_normalization(x, scale, bias, axis=-1, epsilon=eps, name=name))
    mean = g.reduce_mean(x, [-1], keepdims=1)
    d = g.sub(x, mean)
    var = g.reduce_mean(g.pow(d, mb.scalar(2.0)), [-1], keepdims=1)
    return g.add(g.mul(g.div(d, g.sqrt(g.add(var, mb.scalar(eps)))), scale), bias)


def gelu(mb: ModelBuilder, x: Value, use_op: bool = False, tape: Tape | None = None) -> Value:
    """GELU: PyTorch's exported erf form x * 0.5 * (1 + erf(x / sqrt 2)), or the Gelu op."""
    g = mb.g
    if use_op and tape is None:
        return g.gelu(x)
    e = g.erf(g.div(x, mb.scalar(np.sqrt(2.0))))
    y = g.mul(g.mul(x, g.add(e, mb.scalar(1.0))), mb.scalar(0.5))
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is None:
                return
            # d/dx = 0.5 (1 + erf(x/sqrt2)) + x exp(-x^2/2) / sqrt(2 pi)
            cdf = g.mul(g.add(e, mb.scalar(1.0)), mb.scalar(0.5))
            pdf = g.mul(g.exp(g.mul(g.mul(x, x), mb.scalar(-0.5))),
                        mb.scalar(1.0 / np.sqrt(2.0 * np.pi)))
            tape.accumulate(x, g.mul(dy, g.add(cdf, g.mul(x, pdf))))
        tape.on_backward(back)
    return y


def linear(mb: ModelBuilder, x: Value, name: str, n: int, tape: Tape | None = None) -> Value:
    """x @ W + b over the last axis of x (MatMul + Add, as PyTorch exports nn.Linear)."""
    g = mb.g
    k = int(x.shape[-1])
    w = new_param(mb, tape, f"{name}.weight",
                  lambda dt: mb.weight(f"{name}.weight", (k, n), scale=float(1 / np.sqrt(k)),
                                       dtype=dt))
    b = new_param(mb, tape, f"{name}.bias",
                  lambda dt: mb.weight(f"{name}.bias", (n,), scale=0.02, dtype=dt))
    mm = g.matmul(x, w, name=name)
    y = g.add(mm, b)
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is None:
                return
            lead = [int(d) for d in x.shape[:-1]]
            rows = int(np.prod(lead))
            x2 = g.reshape(x, mb.ints([rows, k]))
            dy2 = g.reshape(dy, mb.ints([rows, n]))
            tape.param_grad(w, g.gemm(x2, dy2, transA=1))
            tape.param_grad(b, g.reduce_sum(dy2, [0], keepdims=0))
            dx2 = g.gemm(dy2, w, transB=1)
            tape.accumulate(x, g.reshape(dx2, mb.ints([*lead, k])))
        tape.on_backward(back)
    return y


def matmul(mb: ModelBuilder, a: Value, b: Value, tape: Tape | None = None) -> Value:
    """Batched a @ b of two activations (attention), with dA = dC B^T and dB = A^T dC."""
    g = mb.g
    c = g.matmul(a, b)
    if tape is not None:
        perm = list(range(a.rank - 2)) + [a.rank - 1, a.rank - 2]

        def back() -> None:
            dc = tape.grad(c)
            if dc is None:
                return
            tape.accumulate(a, g.matmul(dc, g.transpose(b, perm=perm)))
            tape.accumulate(b, g.matmul(g.transpose(a, perm=perm), dc))
        tape.on_backward(back)
    return c


def scale(mb: ModelBuilder, x: Value, factor: float, tape: Tape | None = None) -> Value:
    """x * factor (attention's 1/sqrt(d))."""
    g = mb.g
    y = g.mul(x, mb.scalar(factor))
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is not None:
                tape.accumulate(x, g.mul(dy, mb.scalar(factor)))
        tape.on_backward(back)
    return y


def softmax(mb: ModelBuilder, x: Value, tape: Tape | None = None) -> Value:
    """Softmax over the last axis; gradient p * (dy - sum(dy * p))."""
    g = mb.g
    p = g.softmax(x, axis=-1)
    if tape is not None:
        def back() -> None:
            dp = tape.grad(p)
            if dp is None:
                return
            s = g.reduce_sum(g.mul(dp, p), [-1], keepdims=1)
            tape.accumulate(x, g.mul(p, g.sub(dp, s)))
        tape.on_backward(back)
    return p


def reshape(mb: ModelBuilder, x: Value, shape: Sequence[int], tape: Tape | None = None) -> Value:
    g = mb.g
    y = g.reshape(x, mb.ints(shape))
    if tape is not None:
        def back() -> None:
            dy = tape.grad(y)
            if dy is not None:
                tape.accumulate(x, g.reshape(dy, mb.ints([int(d) for d in x.shape])))
        tape.on_backward(back)
    return y


def transpose(mb: ModelBuilder, x: Value, perm: Sequence[int], tape: Tape | None = None) -> Value:
    g = mb.g
    y = g.transpose(x, perm=list(perm))
    if tape is not None:
        inverse = [int(i) for i in np.argsort(perm)]

        def back() -> None:
            dy = tape.grad(y)
            if dy is not None:
                tape.accumulate(x, g.transpose(dy, perm=inverse))
        tape.on_backward(back)
    return y


def softmax_cross_entropy(mb: ModelBuilder, logits: Value, labels: Value,
                          tape: Tape | None = None) -> Value:
    """Mean cross-entropy of (rows, classes) logits against one-hot labels (log-softmax form);
    its gradient is (softmax - labels) * dloss / rows."""
    g = mb.g
    rows = int(logits.shape[0])
    z = g.sub(logits, g.reduce_max(logits, [1], keepdims=1))
    lse = g.log(g.reduce_sum(g.exp(z), [1], keepdims=1))
    nll = g.reduce_sum(g.mul(labels, g.sub(lse, z)), [1], keepdims=0)
    loss = g.reduce_mean(nll, [0], keepdims=0)
    if tape is not None:
        def back() -> None:
            dloss = tape.grad(loss)
            if dloss is None:
                return
            p = g.softmax(logits, axis=-1)
            tape.accumulate(logits, g.mul(g.sub(p, labels), g.mul(dloss, mb.scalar(1.0 / rows))))
        tape.on_backward(back)
    return loss


# --------------------------------------------------------------------------- optimizers
OPTIMIZERS = ("sgd", "momentum", "adam")


def apply_optimizer(mb: ModelBuilder, tape: Tape, optimizer: str, lr: float = 1e-3,
                    momentum: float = 0.9, betas: tuple[float, float] = (0.9, 0.999),
                    eps: float = 1e-6, weight_decay: float = 0.0) -> list[Value]:
    """Element-wise update of every parameter that received a gradient; returns the new
    parameters and optimizer state (all graph outputs). Updates run on the master copy
    (float32 under float16 compute, as in mixed-precision training)."""
    g = mb.g
    check_choice("optimizer", optimizer, OPTIMIZERS)
    outs: list[Value] = []
    for p in tape.params:
        grad = tape.param_grads.get(p.value.name)
        if grad is None:
            continue
        w = p.master

        def c(v: float, dt: str = w.dtype) -> Value:
            return mb.scalar(v, dt)
        if grad.dtype != w.dtype:
            grad = g.cast(grad, to=w.dtype)
        if weight_decay:
            grad = g.add(grad, g.mul(w, c(weight_decay)))
        shape = [int(d) for d in w.shape]
        if optimizer == "sgd":
            outs.append(g.sub(w, g.mul(grad, c(lr)), name=f"{p.name}.updated"))
        elif optimizer == "momentum":
            v = mb.fill(f"{p.name}.momentum", shape, 0.0, dtype=w.dtype)
            v2 = g.add(g.mul(v, c(momentum)), grad, name=f"{p.name}.momentum.updated")
            outs += [g.sub(w, g.mul(v2, c(lr)), name=f"{p.name}.updated"), v2]
        else:
            m = mb.fill(f"{p.name}.adam_m", shape, 0.0, dtype=w.dtype)
            v = mb.fill(f"{p.name}.adam_v", shape, 0.0, dtype=w.dtype)
            b1, b2 = betas
            m2 = g.add(g.mul(m, c(b1)), g.mul(grad, c(1.0 - b1)),
                       name=f"{p.name}.adam_m.updated")
            v2 = g.add(g.mul(v, c(b2)), g.mul(g.mul(grad, grad), c(1.0 - b2)),
                       name=f"{p.name}.adam_v.updated")
            step = g.div(m2, g.add(g.sqrt(v2), c(eps)))
            outs += [g.sub(w, g.mul(step, c(lr)), name=f"{p.name}.updated"), m2, v2]
    return outs
