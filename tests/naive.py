"""Slow, obvious numpy references for kernel tests, one tolerance table, and the shared
hypothesis settings.

References compute in float64 (or Python ints) straight from the ONNX operator definitions,
with loops where a loop is the clearest statement of the definition. Kernels are compared to
them with `assert_close`, whose tolerances come from `TOLERANCE` (one table for every test).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from hypothesis import HealthCheck, settings

#: Shared hypothesis settings: derandomized (same examples every run), small, no deadline
#: (the first example of a test may include a numba compile).
HYPOTHESIS = settings(derandomize=True, max_examples=30, deadline=None, database=None,
                      suppress_health_check=[HealthCheck.too_slow])

#: Absolute/relative tolerance per result dtype, against a float64 reference. fp16 allows a
#: couple of ulps (inputs are fp16, arithmetic is fp32, the result is rounded once);
#: fp32 allows accumulated rounding of small reductions; integers and bools are exact.
TOLERANCE: dict[str, dict[str, float]] = {
    "float16": {"rtol": 2e-3, "atol": 2e-3},
    "float32": {"rtol": 2e-5, "atol": 1e-5},
    "float64": {"rtol": 1e-12, "atol": 1e-12},
}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str | None = None,
                 scale: float = 1.0) -> None:
    """Shapes and dtype equal, values within TOLERANCE[dtype] (times `scale`); NaNs match."""
    actual = np.asarray(actual)
    dtype = dtype or actual.dtype.name
    assert actual.dtype.name == dtype, f"dtype {actual.dtype.name}, expected {dtype}"
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape}, expected {expected.shape}"
    tol = TOLERANCE.get(dtype)
    if tol is None:
        np.testing.assert_array_equal(actual, expected.astype(dtype))
        return
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=tol["rtol"] * scale, atol=tol["atol"] * scale,
                               equal_nan=True)


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: str,
                 low: float = -3.0, high: float = 3.0) -> np.ndarray:
    """Uniform values in [low, high) of `dtype` (integers: the integer range; bool: coin)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


# ----------------------------------------------------------------------------- element-wise
def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, with x / 0 = 0, by Python ints."""
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape, dtype=np.result_type(a, b))
    for idx in np.ndindex(a.shape):
        x, y = int(a[idx]), int(b[idx])
        out[idx] = 0 if y == 0 else (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)
    return out


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    x = np.asarray(x, np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


#: ONNX op type -> float64 reference of its arithmetic (attributes as keyword arguments).
ELEMENTWISE: dict[str, Callable[..., np.ndarray]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.true_divide,
    "Pow": np.power, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x), "Exp": np.exp,
    "Log": np.log, "Neg": np.negative, "Abs": np.abs, "Reciprocal": lambda x: 1 / x,
    "Relu": lambda x: np.maximum(x, 0),
    "LeakyRelu": lambda x, alpha=0.01: np.where(x >= 0, x, alpha * x),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Tanh": np.tanh, "Erf": _erf, "Gelu": gelu,
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal, "Not": np.logical_not, "And": np.logical_and,
    "Or": np.logical_or, "Xor": np.logical_xor, "Max": np.maximum, "Min": np.minimum,
    "Sum": np.add, "Where": np.where,
    "Clip": lambda x, lo=-np.inf, hi=np.inf: np.minimum(np.maximum(x, lo), hi),
    "Floor": np.floor, "Ceil": np.ceil, "Round": np.rint, "Sign": np.sign, "Sin": np.sin,
    "Cos": np.cos, "Softplus": lambda x: np.logaddexp(0, x),
    "Elu": lambda x, alpha=1.0: np.where(x >= 0, x, alpha * np.expm1(x)),
    "Selu": lambda x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875:
        gamma * np.where(x > 0, x, alpha * np.expm1(x)),
    "HardSigmoid": lambda x, alpha=0.2, beta=0.5: np.clip(alpha * x + beta, 0, 1),
    "HardSwish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "PRelu": lambda x, slope: np.where(x >= 0, x, slope * x),
    "IsNaN": np.isnan, "IsInf": np.isinf,
}


def elementwise(op: str, *args: np.ndarray, **attrs: object) -> np.ndarray:
    """Reference of an element-wise op in float64 (ints: exact), n-ary ops folded left."""
    wide = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
            for a in args]
    fn = ELEMENTWISE[op]
    if op in ("Sum", "Max", "Min"):
        out = wide[0]
        for a in wide[1:]:
            out = fn(out, a)
        return out
    with np.errstate(all="ignore"):
        return fn(*wide, **attrs)


# ----------------------------------------------------------------------------- reductions
def reduce(mode: str, x: np.ndarray, axes: Sequence[int] | None, keepdims: bool = True
           ) -> np.ndarray:
    """ReduceX by looping over the kept positions; `axes` None means every axis.

    mode: sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp.
    """
    x = np.asarray(x)
    wide = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    rank = x.ndim
    axes = list(range(rank)) if axes is None else sorted(a % rank for a in axes)
    kept = [i for i in range(rank) if i not in axes]
    out_shape = tuple(1 if i in axes else x.shape[i] for i in range(rank))
    out = np.empty(out_shape, dtype=wide.dtype if mode not in ("mean", "l2", "log_sum",
                                                                "log_sum_exp") else np.float64)
    fns: dict[str, Callable[[np.ndarray], object]] = {
        "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
        "sum_square": lambda v: np.sum(v * v), "l1": lambda v: np.sum(np.abs(v)),
        "l2": lambda v: math.sqrt(np.sum(v * v)), "log_sum": lambda v: math.log(np.sum(v)),
        "log_sum_exp": lambda v: math.log(np.sum(np.exp(v - v.max()))) + v.max()}
    for idx in itertools.product(*(range(x.shape[i]) for i in kept)):
        sel: list[object] = [slice(None)] * rank
        pos: list[int] = [0] * rank
        for i, j in zip(kept, idx):
            sel[i], pos[i] = j, j
        out[tuple(pos)] = fns[mode](wide[tuple(sel)].reshape(-1))
    if not keepdims:
        out = out.reshape(tuple(x.shape[i] for i in kept))
    return out


# ----------------------------------------------------------------------------- normalisation
def softmax(x: np.ndarray, axis: int = -1, log: bool = False) -> np.ndarray:
    x = np.asarray(x, np.float64)
    z = x - x.max(axis=axis, keepdims=True)
    s = np.exp(z).sum(axis=axis, keepdims=True)
    return z - np.log(s) if log else np.exp(z) / s


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None, axis: int = -1,
               epsilon: float = 1e-5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y, Mean, InvStdDev) of ONNX LayerNormalization, statistics over axes [axis, rank)."""
    x = np.asarray(x, np.float64)
    axis %= x.ndim
    red = tuple(range(axis, x.ndim))
    mean = x.mean(axis=red, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=red, keepdims=True)
    inv = 1 / np.sqrt(var + epsilon)
    y = (x - mean) * inv * np.asarray(scale, np.float64)
    if bias is not None:
        y = y + np.asarray(bias, np.float64)
    return y, mean, inv


def batch_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
               var: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
    """Inference BatchNormalization, channel by channel."""
    x = np.asarray(x, np.float64)
    y = np.empty_like(x)
    for c in range(x.shape[1]):
        y[:, c] = (x[:, c] - mean[c]) / math.sqrt(float(var[c]) + epsilon) * scale[c] + bias[c]
    return y


def instance_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5
                  ) -> np.ndarray:
    x = np.asarray(x, np.float64)
    y = np.empty_like(x)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            v = x[n, c]
            y[n, c] = (v - v.mean()) / math.sqrt(v.var() + epsilon) * scale[c] + bias[c]
    return y


def lrn(x: np.ndarray, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0
        ) -> np.ndarray:
    """ONNX LRN: square sum over channels [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    x = np.asarray(x, np.float64)
    channels = x.shape[1]
    y = np.empty_like(x)
    for c in range(channels):
        lo = max(0, c - (size - 1) // 2)
        hi = min(channels - 1, c + math.ceil((size - 1) / 2))
        sq = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        y[:, c] = x[:, c] / (bias + alpha / size * sq) ** beta
    return y
