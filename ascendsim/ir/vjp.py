"""The context a gradient rule (`OpDef.grad`) builds in: the forward node, its input and output
Values, the graph the backward ops go into, and small helpers the rules share (constants,
unbroadcasting).

A rule is called as ``rule(ctx, douts) -> dins``: `douts[i]` is the cotangent of output i (or
None when no gradient reaches it), `dins[i]` the cotangent of input i (or None: no gradient,
e.g. an index or a shape input). Rules may skip inputs whose `ctx.needs(i)` is False.
Cotangents have the shape and dtype of the value they belong to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GraphError
from .graph import Graph, Node, static_shape
from .tensor import LazyTensor, Value


@dataclass
class VJP:
    """One node's gradient context (see module doc)."""

    g: Graph
    node: Node
    ins: list[Value | None]
    outs: list[Value]
    wanted: Sequence[bool]
    forward: dict[str, Node] = field(default_factory=dict)   # value -> its forward producer
    _small: dict = field(default_factory=dict)

    @property
    def attrs(self) -> dict[str, Any]:
        return self.node.attrs

    def needs(self, i: int) -> bool:
        """Whether input i's cotangent is asked for (it leads to a value being differentiated)."""
        return i < len(self.wanted) and self.wanted[i]

    def producer(self, value: str) -> Node | None:
        """The forward node that made `value` (None for inputs and constants)."""
        return self.forward.get(value) if self.forward else self.g.producer(value)

    def shape(self, v: Value) -> tuple[int, ...]:
        return static_shape(v, f"{self.node.op_type} '{self.node.name}' gradient: value")

    def const_input(self, i: int) -> np.ndarray | None:
        """The data of input i when it is a constant, else None."""
        name = self.node.inputs[i] if i < len(self.node.inputs) else ""
        return self.g.const_value(name) if name else None

    def scalar(self, value: float, dtype: str) -> Value:
        """A shared 0-d constant."""
        key = ("s", dtype, float(value))
        if key not in self._small:
            self._small[key] = self.g.const(value, dtype=dtype)
        return self._small[key]

    def ints(self, values: Sequence[int]) -> Value:
        """A shared int64 1-d constant (shapes, axes, pads)."""
        key = ("i", *(int(v) for v in values))
        if key not in self._small:
            self._small[key] = self.g.const(np.asarray(key[1:], dtype=np.int64))
        return self._small[key]

    def zeros(self, shape: Sequence[int], dtype: str) -> Value:
        """A lazy constant of zeros (built only when values are asked for)."""
        return self.g.const(LazyTensor.full(tuple(int(d) for d in shape), dtype, 0.0))

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        shape = tuple(int(d) for d in shape)
        return v if tuple(v.shape) == shape else self.g.reshape(v, self.ints(shape))

    def unbroadcast(self, dv: Value, like: Value) -> Value:
        """Sum `dv` (the cotangent of a broadcast result) down to the shape of `like`
        (ReduceSum over the broadcast axes, Reshape to drop the leading ones)."""
        target = self.shape(like)
        have = self.shape(dv)
        if have == target:
            return dv
        lead = len(have) - len(target)
        if lead < 0:
            raise GraphError(f"{self.node.op_type} '{self.node.name}' gradient: cotangent "
                             f"{have} has lower rank than operand '{like.name}' {target}")
        axes = list(range(lead)) + [lead + i for i, d in enumerate(target)
                                    if d == 1 and have[lead + i] != 1]
        out = self.g.reduce_sum(dv, self.ints(axes), keepdims=1) if axes else dv
        return self.reshape(out, target)

    def sum_to_channel(self, dv: Value, axis: int = 1) -> Value:
        """Sum over every axis but `axis` to a 1-d (C,) value."""
        rank = len(self.shape(dv))
        axes = [a for a in range(rank) if a != axis % rank]
        return self.g.reduce_sum(dv, self.ints(axes), keepdims=0)

    def channel(self, v: Value, rank: int, axis: int = 1) -> Value:
        """A (C,) value reshaped to broadcast along `axis` of a rank-`rank` tensor."""
        shape = [1] * rank
        shape[axis] = int(v.shape[0])
        return self.reshape(v, shape)


__all__ = ["VJP"]
