"""How a row-wise vector op's rows are found (`OpSequence.rows` names a rule): each rule
takes the op's inputs, attributes and a constant lookup and gives (L, inner): the elements
of one reduced row and the run of elements after the reduced axes (1: the row is
contiguous). Kept apart from the instruction sequences (`vector_seq`) that name them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.tensor import Value


def norm_axis(axis: Any, rank: int) -> int:
    """An axis attribute (None: the last) as a non-negative index into `rank` axes."""
    a = int(axis if axis is not None else -1)
    return a + rank if a < 0 else a


def norm_perm(perm: Any, rank: int) -> list[int]:
    """A Transpose `perm` attribute (None: the axes reversed, ONNX's default) as non-negative
    indices into `rank` axes."""
    if perm is None:
        return list(range(rank))[::-1]
    return [norm_axis(p, rank) for p in perm]


def _rows_axis(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """One `axis` attribute: rows of shape[axis], inner = the elements after it."""
    shape = [int(d) for d in ins[0].shape]
    if not shape:
        return 1, 1
    a = norm_axis(attrs.get("axis", -1), len(shape))
    return shape[a], math.prod(shape[a + 1:])


def _rows_from_axis(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """LayerNormalization: rows over the axes [axis, rank)."""
    shape = [int(d) for d in ins[0].shape]
    if not shape:
        return 1, 1
    return math.prod(shape[norm_axis(attrs.get("axis", -1), len(shape)):]), 1


def _rows_gamma(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """RmsNorm: rows over the trailing axes gamma spans."""
    return (max(int(ins[1].numel), 1) if len(ins) > 1 else int(ins[0].shape[-1])), 1


def _rows_last_gamma(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """RmsNormGrad (dy, x, rstd, gamma): rows over the trailing axes gamma, its last input,
    spans."""
    return max(int(ins[-1].numel), 1), 1


def _rows_spatial(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """InstanceNormalization: one row per (sample, channel) over the spatial axes."""
    return math.prod(int(d) for d in ins[0].shape[2:]), 1


def _rows_axes(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """Reduce*: the constant `axes` input (absent or empty: every axis). Rows when the last
    axis is reduced (the reduced axes read as one row); else a strided reduction whose inner
    run is the elements after the last reduced axis."""
    shape = [int(d) for d in ins[0].shape]
    rank = len(shape)
    if not rank:
        return 1, 1
    axes_v = const(ins[1].name) if len(ins) > 1 and ins[1] is not None else None
    axes = [int(a) for a in np.asarray(axes_v).ravel()] if axes_v is not None else []
    if not axes:
        if attrs.get("noop_with_empty_axes"):
            return 1, 1
        axes = list(range(rank))
    axes = sorted({a + rank if a < 0 else a for a in axes})
    length = math.prod(shape[a] for a in axes)
    return length, (1 if axes[-1] == rank - 1 else math.prod(shape[axes[-1] + 1:]))


def _rows_channels(ins: Sequence[Value], attrs: dict, const: Callable) -> tuple[int, int]:
    """BatchNorm statistics of [N, C, H, W]: one row per channel over N, H and W, strided
    (on NC1HWC0 data the channel's C0 lane stays innermost)."""
    shape = [int(d) for d in ins[0].shape]
    if len(shape) < 2:
        return max(math.prod(shape), 1), 1
    return math.prod(shape) // max(shape[1], 1), 16


def row_on_blocks(row_bytes: int, block: int, mode: str) -> bool:
    """Whether a kernel lays each contiguous row of `row_bytes` on 32-byte blocks of its own
    in UB, so that its DMAs move the row as one GM burst (`OpSequence.row_bursts` `mode`;
    `block`: the UB block bytes). "rows" / "rows_out": any row not a whole number of blocks
    (Ascend C's DataCopyPad rows). "norm", TBE's NORM-pattern kernels with the reduced axis
    innermost (softmax_v2) on the A2 / A3: the common schedule storage-aligns every UB row
    (norm_schedule.py `NormNormalSchedule._calc_storage_align`: axis -2 to a block, compute
    align on v220), and a short row (at most 128 elements) goes to the reduce-transpose case
    (op_tiling norm.cc `IsNeedReduceTranspose`), whose vnchwconv takes its 16 source rows at
    32-byte aligned UB addresses (Ascend C TransDataTo5HD: srcLocalList 32B-aligned; CANN
    8.0.RC1 API reference atlasascendc_api_07_0193): only rows that pack whole into blocks
    (their bytes divide a block: 2 fp16, 4 fp32) can be read contiguously and transposed
    in place; every other row not a whole number of blocks is laid one to a block row
    (an inference from those two sources: the emitter itself is compiled code)."""
    if row_bytes % block == 0:
        return False
    return mode != "norm" or block % row_bytes != 0


#: how a row-wise op's rows are found: (inputs, attrs, constant lookup) -> (L, inner)
ROW_RULES: dict[str, Callable[..., tuple[int, int]]] = {
    "axis": _rows_axis, "from_axis": _rows_from_axis, "gamma": _rows_gamma,
    "last_gamma": _rows_last_gamma, "spatial": _rows_spatial, "axes": _rows_axes,
    "channels": _rows_channels}


__all__ = ["ROW_RULES", "norm_axis", "row_on_blocks"]
