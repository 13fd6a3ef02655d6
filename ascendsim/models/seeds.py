"""The source documents' small examples and the classic fusion patterns.

- `net_basic_fuse` / `net_composite_fuse`: MindSpore's graph-kernel tutorial (seed 000):
  ``mul(x, 2) + 1`` and ``pow(mul(x, 2) + 1, 3)`` on a 4x4 float32 input.
- `matmul_bias_relu` (seed 004: fusing it saves two memory round trips) and `conv_bn_relu`
  (the classic Conv2D + BatchNorm + ReLU fusion).
- `elementwise_chain`: a chain of element-wise ops, for UB / graph-kernel fusion limits.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError
from ..ir.graph import Graph
from .blocks import ModelBuilder, batch_norm, check_positive, conv2d

#: the element-wise ops `elementwise_chain` cycles through (builder, constant operand or None)
CHAIN_OPS: tuple[tuple[str, float | None], ...] = (
    ("mul", 0.5), ("add", 1.0), ("relu", None), ("sub", 0.25), ("mul", 1.5), ("abs", None))


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(shape)
    check_positive(**{f"shape[{i}]": d for i, d in enumerate(shape)})
    return shape


def net_basic_fuse(shape: Sequence[int] = (4, 4), dtype: str = "float32") -> Graph:
    """NetBasicFuse: y = mul(x, 2) + 1 (two basic ops that graph-kernel fusion merges)."""
    mb = ModelBuilder("NetBasicFuse", dtype)
    g = mb.g
    x = g.input("x", _shape(shape), mb.dtype)
    g.output(g.add(g.mul(x, mb.scalar(2.0)), mb.scalar(1.0)))
    return g


def net_composite_fuse(shape: Sequence[int] = (4, 4), dtype: str = "float32") -> Graph:
    """NetCompositeFuse: y = pow(mul(x, 2) + 1, 3) (a composite op, then a Pow joins it)."""
    mb = ModelBuilder("NetCompositeFuse", dtype)
    g = mb.g
    x = g.input("x", _shape(shape), mb.dtype)
    g.output(g.pow(g.add(g.mul(x, mb.scalar(2.0)), mb.scalar(1.0)), mb.scalar(3.0)))
    return g


def matmul_bias_relu(m: int = 256, k: int = 256, n: int = 256, dtype: str = "float16",
                     seed: int = 0) -> Graph:
    """y = relu(x @ W + b): MatMul, Add of a 1-D bias, Relu (seed 004's fusion example)."""
    check_positive(m=m, k=k, n=n)
    mb = ModelBuilder("MatMulBiasRelu", dtype, seed)
    g = mb.g
    x = g.input("x", (m, k), mb.dtype)
    w = mb.weight("fc.weight", (k, n), scale=float(k) ** -0.5)
    b = mb.weight("fc.bias", (n,), scale=0.1)
    g.output(g.relu(g.add(g.matmul(x, w, name="fc"), b)))
    return g


def conv_bn_relu(batch: int = 1, cin: int = 64, cout: int = 64, h: int = 56, w: int = 56,
                 k: int = 3, stride: int = 1, dtype: str = "float16", seed: int = 0) -> Graph:
    """y = relu(batchnorm(conv(x))), 'same' padding for odd k: the classic Conv+BN+ReLU."""
    check_positive(batch=batch, cin=cin, cout=cout, h=h, w=w, k=k, stride=stride)
    if k > h + 2 * (k // 2) or k > w + 2 * (k // 2):
        raise ConfigError(f"k={k}: kernel larger than the padded {h}x{w} input")
    mb = ModelBuilder("ConvBnRelu", dtype, seed)
    g = mb.g
    x = g.input("x", (batch, cin, h, w), mb.dtype)
    y = conv2d(mb, x, "conv", cout, k, stride, k // 2)
    g.output(g.relu(batch_norm(mb, y, "bn")))
    return g


def elementwise_chain(n: int = 1 << 20, length: int = 6, dtype: str = "float16") -> Graph:
    """A chain of `length` element-wise ops on n elements, for fusion-limit studies.

    The first op, an Add, reads the two graph inputs "x" and "y"; the rest cycle through
    CHAIN_OPS (mul 0.5, add 1, relu, sub 0.25, mul 1.5, abs), one input and one output each."""
    check_positive(n=n, length=length)
    mb = ModelBuilder(f"ElementwiseChain{length}", dtype)
    g = mb.g
    x = g.input("x", (n,), mb.dtype)
    y = g.add(x, g.input("y", (n,), mb.dtype))
    for i in range(1, length):
        op, c = CHAIN_OPS[(i - 1) % len(CHAIN_OPS)]
        y = getattr(g, op)(y) if c is None else getattr(g, op)(y, mb.scalar(c))
    g.output(y)
    return g
