"""Sliding-window geometry (shared by convolutions and pools) and the pooling kernels.

`resolve_window` turns ONNX window attributes (kernel_shape, strides, dilations, pads,
auto_pad, ceil_mode) into explicit per-axis numbers and the output size; shape inference and
the kernels both use it, so they cannot disagree. Symbolic input dims give a readable
symbolic output dim.

The pool kernels work on 3 spatial axes: 1-D and 2-D inputs are viewed with leading unit axes;
a serial kernel pools one (D, H, W) plane and a parallel loop runs the N*C planes (small
parallel bodies keep numba's compile time down). fp16 is widened to fp32 at the boundary
(numba has no CPU float16), averaged in float64, and rounded once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, prange

from ascendsim.errors import GraphError

from .config import JIT

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class Window:
    """Explicit geometry of a sliding window over n spatial axes."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[Any, ...]          # ints, or strings for symbolic input dims

    def padded3(self) -> tuple:
        """(kernel, strides, dilations, pads_begin) each padded to 3 axes with leading 1/0."""
        lead = 3 - len(self.kernel)
        return ((1,) * lead + self.kernel, (1,) * lead + self.strides,
                (1,) * lead + self.dilations, (0,) * lead + self.pads_begin)

    def geom_array(self) -> np.ndarray:
        """`padded3()` as a (4, 3) int64 array (rows: kernel, strides, dilations, pads_begin)."""
        return np.array(self.padded3(), dtype=np.int64)


def attr_ints(name: str, val: Any, n: int, default: int) -> tuple[int, ...]:
    """An ONNX per-axis int list attribute as a tuple of n ints (absent -> default)."""
    if val is None or (hasattr(val, "__len__") and len(val) == 0):
        return (default,) * n
    vals = tuple(int(v) for v in val)
    if len(vals) != n:
        raise GraphError(f"{name} has {len(vals)} values, expected {n} (one per spatial axis)")
    return vals


def auto_pad_of(attrs: dict) -> str:
    """The auto_pad attribute as a checked string (ONNX protobuf gives bytes)."""
    auto_pad = attrs.get("auto_pad") or "NOTSET"
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad not in AUTO_PADS:
        raise GraphError(f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    return auto_pad


def _out_dim(size: Any, pb: int, pe: int, dk: int, s: int, ceil_mode: bool) -> Any:
    if not isinstance(size, int):
        return f"({size}+{pb + pe}-{dk})//{s}+1"
    span = size + pb + pe - dk
    if span < 0:
        raise GraphError(f"window of extent {dk} does not fit input size {size} padded by "
                         f"{pb}+{pe}")
    out = -(-span // s) + 1 if ceil_mode else span // s + 1
    if ceil_mode and (out - 1) * s >= size + pb:
        out -= 1  # the last window would start in the end padding only
    return out


def resolve_window(spatial: Sequence[Any], kernel: Sequence[int], attrs: dict,
                   ceil_mode: bool = False) -> Window:
    """Explicit strides/dilations/pads and output size for ONNX window attributes."""
    n = len(spatial)
    kernel = tuple(int(k) for k in kernel)
    if len(kernel) != n:
        raise GraphError(f"kernel_shape {list(kernel)} has {len(kernel)} values, expected {n}")
    if any(k < 1 for k in kernel):
        raise GraphError(f"kernel_shape {list(kernel)} must be >= 1")
    strides = attr_ints("strides", attrs.get("strides"), n, 1)
    dil = attr_ints("dilations", attrs.get("dilations"), n, 1)
    if any(v < 1 for v in strides + dil):
        raise GraphError(f"strides {list(strides)} and dilations {list(dil)} must be >= 1")
    auto_pad = auto_pad_of(attrs)
    dk = tuple((k - 1) * d + 1 for k, d in zip(kernel, dil))
    if auto_pad == "NOTSET":
        pads = attr_ints("pads", attrs.get("pads"), 2 * n, 0)
        pb, pe = pads[:n], pads[n:]
        if any(p < 0 for p in pads):
            raise GraphError(f"pads {list(pads)} must be >= 0")
    elif auto_pad == "VALID":
        pb = pe = (0,) * n
    else:
        pbl, pel = [], []
        for size, s, k in zip(spatial, strides, dk):
            if not isinstance(size, int):
                pbl.append(0)
                pel.append(0)
                continue
            total = max(0, (-(-size // s) - 1) * s + k - size)
            small, big = total // 2, total - total // 2
            pbl.append(small if auto_pad == "SAME_UPPER" else big)
            pel.append(big if auto_pad == "SAME_UPPER" else small)
        pb, pe = tuple(pbl), tuple(pel)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-size // s) if isinstance(size, int) else f"ceil({size}/{s})"
                    for size, s in zip(spatial, strides))
    else:
        out = tuple(_out_dim(size, b, e, k, s, ceil_mode)
                    for size, b, e, k, s in zip(spatial, pb, pe, dk, strides))
    return Window(kernel, strides, dil, tuple(pb), tuple(pe), out)


def as_3d(x: np.ndarray) -> np.ndarray:
    """View (N, C, *spatial) with 1..3 spatial axes as (N*C, D, H, W)."""
    spatial = x.shape[2:]
    return x.reshape((x.shape[0] * x.shape[1],) + (1,) * (3 - len(spatial)) + spatial)


# ----------------------------------------------------------------------------- kernels
@njit(**JIT)
def _max_plane(x, geom, out, idx, col_major, offset):
    """Max over each window of one (D, H, W) plane; idx = offset + flat index of the max."""
    kd, kh, kw = geom[0, 0], geom[0, 1], geom[0, 2]
    sd, sh, sw = geom[1, 0], geom[1, 1], geom[1, 2]
    dd, dh, dw = geom[2, 0], geom[2, 1], geom[2, 2]
    pd, ph, pw = geom[3, 0], geom[3, 1], geom[3, 2]
    d_in, h_in, w_in = x.shape
    od, oh, ow = out.shape
    for z, y, xo in np.ndindex(od, oh, ow):
        best = -np.inf
        arg = -1
        for a, b, e in np.ndindex(kd, kh, kw):
            iz, iy, ix = z * sd - pd + a * dd, y * sh - ph + b * dh, xo * sw - pw + e * dw
            if 0 <= iz < d_in and 0 <= iy < h_in and 0 <= ix < w_in and \
                    (x[iz, iy, ix] > best or arg < 0):
                best = x[iz, iy, ix]
                arg = (ix * h_in + iy) * d_in + iz if col_major else (iz * h_in + iy) * w_in + ix
        out[z, y, xo] = best
        idx[z, y, xo] = offset + arg


@njit(parallel=True, **JIT)
def _max_pool(x, geom, out, idx, col_major):
    """Max pooling of (N*C, D, H, W) planes, in parallel over planes."""
    plane = x.shape[1] * x.shape[2] * x.shape[3]
    for c in prange(x.shape[0]):
        _max_plane(x[c], geom, out[c], idx[c], col_major, c * plane)


@njit(**JIT)
def _avg_plane(x, geom, ends, include_pad, out):
    """Mean over each window of one plane; with include_pad the divisor counts pads up to ends."""
    kd, kh, kw = geom[0, 0], geom[0, 1], geom[0, 2]
    sd, sh, sw = geom[1, 0], geom[1, 1], geom[1, 2]
    dd, dh, dw = geom[2, 0], geom[2, 1], geom[2, 2]
    pd, ph, pw = geom[3, 0], geom[3, 1], geom[3, 2]
    d_in, h_in, w_in = x.shape
    od, oh, ow = out.shape
    for z, y, xo in np.ndindex(od, oh, ow):
        acc = 0.0
        cnt = 0
        padded = 0
        for a, b, e in np.ndindex(kd, kh, kw):
            iz, iy, ix = z * sd - pd + a * dd, y * sh - ph + b * dh, xo * sw - pw + e * dw
            if iz < ends[0] and iy < ends[1] and ix < ends[2]:
                padded += 1
                if 0 <= iz < d_in and 0 <= iy < h_in and 0 <= ix < w_in:
                    acc += x[iz, iy, ix]
                    cnt += 1
        div = padded if include_pad else cnt
        out[z, y, xo] = acc / div if div > 0 else 0.0


@njit(parallel=True, **JIT)
def _avg_pool(x, geom, ends, include_pad, out):
    """Average pooling of (N*C, D, H, W) planes, in parallel over planes."""
    for c in prange(x.shape[0]):
        _avg_plane(x[c], geom, ends, include_pad, out[c])


@njit(parallel=True, **JIT)
def _global_pool(x, is_max, out):
    """Mean or max over the last axis of (rows, size), accumulating in out's dtype."""
    for r in prange(x.shape[0]):
        acc = -np.inf if is_max else 0.0
        for i in range(x.shape[1]):
            v = x[r, i]
            if is_max:
                if v > acc or np.isnan(v):
                    acc = v
            else:
                acc += v
        out[r] = acc if is_max else acc / x.shape[1]


# ----------------------------------------------------------------------------- wrappers
def _work(x: np.ndarray) -> np.ndarray:
    """fp16 (and ints) computed in fp32, float64 stays float64."""
    return np.ascontiguousarray(x, dtype=np.float64 if x.dtype == np.float64 else np.float32)


def _window(x: np.ndarray, attrs: dict) -> Window:
    return resolve_window(x.shape[2:], attrs["kernel_shape"], attrs, bool(attrs.get("ceil_mode")))


def max_pool_with_indices(x: np.ndarray, attrs: dict) -> tuple[np.ndarray, np.ndarray]:
    """MaxPool values and ONNX Indices (flat over N*C*spatial; storage_order 1 = column-major)."""
    win = _window(x, attrs)
    out_shape = x.shape[:2] + win.out
    xw = as_3d(_work(x))
    out = np.empty((xw.shape[0],) + (1,) * (3 - len(win.out)) + win.out, dtype=xw.dtype)
    idx = np.empty(out.shape, dtype=np.int64)
    _max_pool(xw, win.geom_array(), out, idx, int(attrs.get("storage_order", 0)) == 1)
    return out.reshape(out_shape).astype(x.dtype, copy=False), idx.reshape(out_shape)


def max_pool(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of MaxPool: Y, and Indices when num_outputs is 2."""
    return list(max_pool_with_indices(args[0], attrs))[:int(attrs.get("num_outputs", 1))]


def average_pool(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of AveragePool; the divisor follows count_include_pad as ONNX Runtime."""
    x = args[0]
    win = _window(x, attrs)
    xw = as_3d(_work(x))
    lead = 3 - len(win.out)
    # windows are clipped to the padded input: pads count, positions past the end pad do not
    ends = np.array((1,) * lead + tuple(s + e for s, e in zip(x.shape[2:], win.pads_end)),
                    dtype=np.int64)
    out = np.empty((xw.shape[0],) + (1,) * lead + win.out, dtype=xw.dtype)
    _avg_pool(xw, win.geom_array(), ends, bool(attrs.get("count_include_pad", 0)), out)
    return [out.reshape(x.shape[:2] + win.out).astype(x.dtype, copy=False)]


def _global(x: np.ndarray, is_max: bool) -> np.ndarray:
    xw = _work(x).reshape(x.shape[0] * x.shape[1], -1)
    out = np.empty(xw.shape[0], dtype=xw.dtype)
    _global_pool(xw, is_max, out)
    return out.reshape(x.shape[:2] + (1,) * (x.ndim - 2)).astype(x.dtype, copy=False)


def global_average_pool(args: list, attrs: dict) -> list[np.ndarray]:
    return [_global(args[0], False)]


def global_max_pool(args: list, attrs: dict) -> list[np.ndarray]:
    return [_global(args[0], True)]
