"""Building blocks shared by the model builders: seeded lazy weights and layers.

A `ModelBuilder` wraps a `Graph` with a compute dtype and a base seed. Weights are lazy
constants (`LazyTensor`) whose seed is derived from the weight's name, so the same model built
twice has the same weights, and a full-size model costs no weight memory until values are asked.

The layers build forward (inference) graphs only; training steps are the autodiff transform
of them (`ascendsim.autodiff.training_step`), with each op's gradient rule in the registry.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import LazyTensor, Value, as_storage, dtype_name, storage_dtype

#: dtypes the model builders accept for their compute
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


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
    return as_storage(np.random.default_rng(seed).uniform(lo, hi, shape), dtype)


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
            self._small[key] = self.g.const(np.asarray(value, dtype=storage_dtype(dt)), dtype=dt)
        return self._small[key]

    def ints(self, values: Sequence[int]) -> Value:
        """An int64 1-d constant (shapes, axes, indices), shared by equal uses."""
        key = ("int64", *(int(v) for v in values))
        if key not in self._small:
            self._small[key] = self.g.const(np.asarray(key[1:], dtype=np.int64))
        return self._small[key]


# --------------------------------------------------------------------------- layers
def relu(mb: ModelBuilder, x: Value) -> Value:
    return mb.g.relu(x)


def add(mb: ModelBuilder, a: Value, b: Value) -> Value:
    """a + b for same-shaped activations (residual connections) or an additive mask."""
    return mb.g.add(a, b)


def conv2d(mb: ModelBuilder, x: Value, name: str, cout: int, k: int, stride: int = 1,
           pad: int = 0) -> Value:
    """A bias-less Conv (OIHW weight, He init)."""
    cin = int(x.shape[1])
    w = mb.weight(f"{name}.weight", (cout, cin, k, k))
    return mb.g.conv(x, w, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                     name=name)


def batch_norm(mb: ModelBuilder, x: Value, name: str, gamma: tuple[float, float] = (0.8, 1.2),
               eps: float = 1e-5) -> Value:
    """A BatchNormalization node with seeded statistics (a training step turns it into
    CANN's BNTrainingReduce + BNTrainingUpdate)."""
    c = int(x.shape[1])
    scale = mb.uniform(f"{name}.weight", (c,), *gamma)
    bias = mb.weight(f"{name}.bias", (c,), scale=0.05)
    mean = mb.weight(f"{name}.running_mean", (c,), scale=0.05)
    var = mb.uniform(f"{name}.running_var", (c,), 0.8, 1.2)
    return one(mb.g.batch_normalization(x, scale, bias, mean, var, epsilon=eps, name=name))


def layer_norm(mb: ModelBuilder, x: Value, name: str, eps: float = 1e-12,
               decomposed: bool = False) -> Value:
    """LayerNorm over the last axis: the LayerNormalization op, or PyTorch's exported form
    (ReduceMean, Sub, Pow 2, ReduceMean, Add, Sqrt, Div, Mul, Add)."""
    g = mb.g
    h = int(x.shape[-1])
    scale = mb.uniform(f"{name}.weight", (h,), 0.9, 1.1)
    bias = mb.weight(f"{name}.bias", (h,), scale=0.02)
    if not decomposed:
        return one(g.layer_normalization(x, scale, bias, axis=-1, epsilon=eps, name=name))
    mean = g.reduce_mean(x, [-1], keepdims=1)
    d = g.sub(x, mean)
    var = g.reduce_mean(g.pow(d, mb.scalar(2.0)), [-1], keepdims=1)
    return g.add(g.mul(g.div(d, g.sqrt(g.add(var, mb.scalar(eps)))), scale), bias)


def gelu(mb: ModelBuilder, x: Value, use_op: bool = False) -> Value:
    """GELU: PyTorch's exported erf form x * 0.5 * (1 + erf(x / sqrt 2)), or the Gelu op."""
    g = mb.g
    if use_op:
        return g.gelu(x)
    e = g.erf(g.div(x, mb.scalar(np.sqrt(2.0))))
    return g.mul(g.mul(x, g.add(e, mb.scalar(1.0))), mb.scalar(0.5))


def linear(mb: ModelBuilder, x: Value, name: str, n: int) -> Value:
    """x @ W + b over the last axis of x (MatMul + Add, as PyTorch exports nn.Linear)."""
    k = int(x.shape[-1])
    w = mb.weight(f"{name}.weight", (k, n), scale=float(1 / np.sqrt(k)))
    b = mb.weight(f"{name}.bias", (n,), scale=0.02)
    return mb.g.add(mb.g.matmul(x, w, name=name), b)


def reshape(mb: ModelBuilder, x: Value, shape: Sequence[int]) -> Value:
    return mb.g.reshape(x, mb.ints(shape))


def transpose(mb: ModelBuilder, x: Value, perm: Sequence[int]) -> Value:
    return mb.g.transpose(x, perm=list(perm))
