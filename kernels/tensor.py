"""Tensor and shape kernels: reshapes, transposes, slices, gathers, pads and friends.

These ops move data and compute nothing, so their kernels are thin numpy calls (numpy's
copy/take/pad loops are already compiled; a numba loop would not be faster). The index math
(reshape targets, slice bounds, pad widths, split sizes) lives here once and is shared by the
kernels and by shape inference in ``ascendsim/ir/ops/tensor.py``; it accepts symbolic (string)
dims where shape inference needs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

INT_BIG = 2**62  # ONNX uses INT64_MAX / INT_MAX as "to the end" in Slice


# ------------------------------------------------------------------ shared index math
def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """A possibly negative axis as 0..rank-1 (ValueError when out of range)."""
    a = int(axis)
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"{what} {a} out of range for rank {rank}")
    return a + rank if a < 0 else a


def sym_prod(dims: Sequence) -> int | str:
    """Product of dims; symbolic factors are kept as a "a*b*12" string."""
    n, syms = 1, []
    for d in dims:
        if isinstance(d, str):
            syms.append(d)
        else:
            n *= int(d)
    if not syms:
        return n
    if n == 0:
        return 0
    return "*".join(syms + ([str(n)] if n != 1 else []))


def reshape_target(in_shape: Sequence, target: Sequence[int], allowzero: int,
                   fresh: str = "reshape") -> tuple:
    """The output shape of Reshape: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out: list = []
    minus = None
    for i, t in enumerate(int(t) for t in target):
        if t == 0 and not allowzero:
            if i >= len(in_shape):
                raise ValueError(f"shape {list(target)} copies dim {i} of a rank-{len(in_shape)} "
                                 f"input")
            out.append(in_shape[i])
        elif t == -1:
            if minus is not None:
                raise ValueError(f"shape {list(target)} has more than one -1")
            minus = i
            out.append(-1)
        elif t < 0:
            raise ValueError(f"shape {list(target)} has negative dim {t}")
        else:
            out.append(t)
    if minus is None:
        if all(isinstance(d, int) for d in (*in_shape, *out)):
            have, want = math.prod(in_shape), math.prod(out)
            if have != want:
                raise ValueError(f"cannot reshape {tuple(in_shape)} ({have} elements) to "
                                 f"{list(target)} ({want} elements)")
        return tuple(out)
    num_int, num_sym = 1, [d for d in in_shape if isinstance(d, str)]
    for d in in_shape:
        if not isinstance(d, str):
            num_int *= int(d)
    den_int, den_sym = 1, []
    for j, d in enumerate(out):
        if j == minus:
            continue
        if isinstance(d, str):
            den_sym.append(d)
        else:
            den_int *= d
    for s in list(den_sym):
        if s in num_sym:
            num_sym.remove(s)
            den_sym.remove(s)
    if den_sym:
        out[minus] = f"{fresh}_d{minus}"
    elif den_int == 0:
        raise ValueError(f"cannot infer -1 in shape {list(target)} with a zero-sized dim")
    elif num_sym:
        out[minus] = sym_prod(num_sym + [num_int // den_int])
    else:
        if num_int % den_int:
            raise ValueError(f"cannot reshape {tuple(in_shape)} ({num_int} elements) to "
                             f"{list(target)}")
        out[minus] = num_int // den_int
    return tuple(out)


def flatten_axis(axis: int, rank: int) -> int:
    """Flatten's axis: in [-rank, rank], negative counting from the back."""
    a = int(axis)
    if not -rank <= a <= rank:
        raise ValueError(f"axis {a} out of range [-{rank}, {rank}]")
    return a + rank if a < 0 else a


def slice_params(dim: int, start: int, end: int, step: int) -> tuple[int, int, int, int]:
    """ONNX Slice clamping for one axis: (start, end, step, length); end -1 means 'before 0'."""
    if step == 0:
        raise ValueError("slice step must not be 0")
    start, end = int(start), int(end)
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start = min(max(start, 0), dim)
        end = min(max(end, 0), dim)
        length = max(0, -(-(end - start) // step))
    else:   # the spec clamps starts to [0, dim - 1] and ends to [-1, dim - 1] here
        start = min(max(start, 0), dim - 1)
        end = min(max(end, -1), dim - 1)
        length = max(0, -(-(start - end) // -step))
    return start, end, step, length


def slice_axes(rank: int, starts, ends, axes, steps) -> list[tuple[int, int, int, int]]:
    """(axis, start, end, step) per sliced axis, axes normalised, steps defaulting to 1."""
    starts = np.asarray(starts).reshape(-1)
    ends = np.asarray(ends).reshape(-1)
    axes = list(range(len(starts))) if axes is None else np.asarray(axes).reshape(-1)
    steps = np.ones(len(starts), np.int64) if steps is None else np.asarray(steps).reshape(-1)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError(f"starts/ends/axes/steps lengths differ: {len(starts)}, {len(ends)}, "
                         f"{len(axes)}, {len(steps)}")
    out = [(norm_axis(a, rank), int(s), int(e), int(st))
           for a, s, e, st in zip(axes, starts, ends, steps)]
    if len({a for a, *_ in out}) != len(out):
        raise ValueError(f"repeated axis in {list(axes)}")
    return out


def pad_widths(rank: int, pads, axes) -> list[tuple[int, int]]:
    """ONNX pads [b_1..b_k, e_1..e_k] over `axes` (default all) -> (before, after) per dim."""
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    axes = list(range(rank)) if axes is None else [norm_axis(a, rank)
                                                   for a in np.asarray(axes).reshape(-1)]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads has {len(pads)} values, expected {2 * len(axes)}")
    widths = [(0, 0)] * rank
    for k, a in enumerate(axes):
        widths[a] = (pads[k], pads[k + len(axes)])
    return widths


def split_sizes(dim: int, split, num_outputs: int | None) -> list[int]:
    """Chunk sizes of Split: the explicit `split`, else ceil-sized chunks (last may be smaller)."""
    if split is not None:
        sizes = [int(s) for s in np.asarray(split).reshape(-1)]
        if sum(sizes) != dim:
            raise ValueError(f"split {sizes} does not sum to dim {dim}")
        return sizes
    if not num_outputs:
        raise ValueError("Split needs the split input or the num_outputs attribute")
    chunk = -(-dim // num_outputs)
    sizes = [min(chunk, max(dim - i * chunk, 0)) for i in range(num_outputs)]
    if sizes and sizes[-1] <= 0 and dim % num_outputs:
        raise ValueError(f"cannot split dim {dim} into {num_outputs} outputs")
    return sizes


def range_length(start: float, limit: float, delta: float) -> int:
    if delta == 0:
        raise ValueError("Range delta must not be 0")
    return max(int(math.ceil((limit - start) / delta)), 0)


# ------------------------------------------------------------------ kernels
def _ints(a) -> list[int]:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def reshape(args: list, attrs: dict) -> list:
    x, shape = args[0], args[1]
    return [x.reshape(reshape_target(x.shape, _ints(shape), attrs.get("allowzero", 0)))]


def identity(args: list, attrs: dict) -> list:
    return [args[0]]


def flatten(args: list, attrs: dict) -> list:
    x = args[0]
    axis = flatten_axis(attrs.get("axis", 1), x.ndim)
    return [x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))]


def squeeze(args: list, attrs: dict) -> list:
    x = args[0]
    axes = None if len(args) < 2 or args[1] is None else tuple(
        norm_axis(a, x.ndim) for a in _ints(args[1]))
    return [np.squeeze(x, axis=axes)]


def unsqueeze(args: list, attrs: dict) -> list:
    x = args[0]
    axes = _ints(args[1])
    rank = x.ndim + len(axes)
    return [np.expand_dims(x, tuple(sorted(norm_axis(a, rank) for a in axes)))]


def transpose(args: list, attrs: dict) -> list:
    perm = attrs.get("perm")
    return [np.ascontiguousarray(np.transpose(args[0], None if perm is None else list(perm)))]


def concat(args: list, attrs: dict) -> list:
    arrs = [a for a in args if a is not None]
    return [np.concatenate(arrs, axis=norm_axis(attrs.get("axis", 0), arrs[0].ndim))]


def split(args: list, attrs: dict) -> list:
    x = args[0]
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    sp = args[1] if len(args) > 1 else None
    sizes = split_sizes(x.shape[axis], sp, attrs.get("num_outputs"))
    cuts = np.cumsum(sizes)[:-1]
    return [np.ascontiguousarray(p) for p in np.split(x, cuts, axis=axis)]


def slice_(args: list, attrs: dict) -> list:
    x = args[0]
    axes = args[3] if len(args) > 3 else None
    steps = args[4] if len(args) > 4 else None
    index = [slice(None)] * x.ndim
    for axis, s, e, st in slice_axes(x.ndim, args[1], args[2], axes, steps):
        s, e, st, _ = slice_params(x.shape[axis], s, e, st)
        index[axis] = slice(s, e if e >= 0 else None, st)
    return [np.ascontiguousarray(x[tuple(index)])]


def gather(args: list, attrs: dict) -> list:
    x, idx = args[0], np.asarray(args[1]).astype(np.int64)
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    dim = x.shape[axis]
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"Gather index out of range [-{dim}, {dim - 1}]")
    return [np.take(x, np.where(idx < 0, idx + dim, idx), axis=axis)]


def shape(args: list, attrs: dict) -> list:
    s = args[0].shape
    lo, hi = shape_bounds(len(s), attrs.get("start", 0), attrs.get("end"))
    return [np.array(s[lo:hi], dtype=np.int64)]


def shape_bounds(rank: int, start: int, end: int | None) -> tuple[int, int]:
    """Shape's start/end clamped to [0, rank] (negative counts from the back)."""
    def clamp(v: int) -> int:
        v = v + rank if v < 0 else v
        return min(max(v, 0), rank)
    return clamp(int(start)), clamp(rank if end is None else int(end))


def size(args: list, attrs: dict) -> list:
    return [np.array(args[0].size, dtype=np.int64)]


def fill_value(value) -> np.ndarray:
    """ConstantOfShape's one-element `value` attribute (default float32 zero)."""
    if value is None:
        return np.zeros(1, np.float32)
    v = np.asarray(value)
    if v.size != 1:
        raise ValueError(f"ConstantOfShape value must have one element, got shape {v.shape}")
    return v.reshape(1)


def constant_of_shape(args: list, attrs: dict) -> list:
    v = fill_value(attrs.get("value"))
    return [np.full(tuple(_ints(args[0])), v[0], dtype=v.dtype)]


CONSTANT_ATTRS = ("value", "value_float", "value_floats", "value_int", "value_ints")


def constant_value(attrs: dict) -> np.ndarray:
    """The tensor a Constant node holds: exactly one of its value attributes is set."""
    given = [k for k in CONSTANT_ATTRS if attrs.get(k) is not None]
    if len(given) != 1:
        raise ValueError(f"Constant needs exactly one of {', '.join(CONSTANT_ATTRS)}; "
                         f"got {given or 'none'}")
    k = given[0]
    dtype = np.float32 if k.startswith("value_float") else (np.int64 if k != "value" else None)
    return np.asarray(attrs[k], dtype=dtype)


def constant(args: list, attrs: dict) -> list:
    return [constant_value(attrs).copy()]


def expand(args: list, attrs: dict) -> list:
    x = args[0]
    out = np.broadcast_shapes(x.shape, tuple(_ints(args[1])))
    return [np.ascontiguousarray(np.broadcast_to(x, out))]


def tile(args: list, attrs: dict) -> list:
    reps = _ints(args[1])
    if len(reps) != args[0].ndim:
        raise ValueError(f"repeats has {len(reps)} values for a rank-{args[0].ndim} input")
    return [np.tile(args[0], reps)]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad(args: list, attrs: dict) -> list:
    x = args[0]
    axes = args[3] if len(args) > 3 else None
    widths = pad_widths(x.ndim, args[1], axes)
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise ValueError(f"Pad mode {mode!r} (expected one of {', '.join(_PAD_MODES)})")
    # negative pads crop first; the positive part is then padded
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(widths))
    x = x[crop]
    pos = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        cv = args[2] if len(args) > 2 and args[2] is not None and np.size(args[2]) else 0
        return [np.pad(x, pos, mode="constant",
                       constant_values=np.asarray(cv).reshape(-1)[0] if np.size(cv) else 0)]
    return [np.pad(x, pos, mode=_PAD_MODES[mode])]


def range_(args: list, attrs: dict) -> list:
    start, limit, delta = (np.asarray(a).reshape(()) for a in args[:3])
    n = range_length(start.item(), limit.item(), delta.item())
    dtype = start.dtype
    return [(start + np.arange(n, dtype=dtype) * delta).astype(dtype)]


def gather_elements(args: list, attrs: dict) -> list:
    x, idx = args[0], np.asarray(args[1]).astype(np.int64)
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    dim = x.shape[axis]
    return [np.take_along_axis(x, np.where(idx < 0, idx + dim, idx), axis=axis)]


def depth_to_space(args: list, attrs: dict) -> list:
    x = args[0]
    n, c, h, w = x.shape
    b = int(attrs["blocksize"])
    if attrs.get("mode", "DCR") == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [np.ascontiguousarray(t.reshape(n, c // (b * b), h * b, w * b))]


def space_to_depth(args: list, attrs: dict) -> list:
    x = args[0]
    n, c, h, w = x.shape
    b = int(attrs["blocksize"])
    t = x.reshape(n, c, h // b, b, w // b, b)
    t = t.transpose(0, 3, 5, 1, 2, 4) if attrs.get("mode", "DCR") == "DCR" else \
        t.transpose(0, 1, 3, 5, 2, 4)
    return [np.ascontiguousarray(t.reshape(n, c * b * b, h // b, w // b))]


# ------------------------------------------------------------------ index ops
def _wrap(idx: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Negative indices count from the end; out-of-range ones are an error naming `what`."""
    idx = np.asarray(idx).astype(np.int64)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"{what} index out of range [-{dim}, {dim - 1}]")
    return np.where(idx < 0, idx + dim, idx)


#: ScatterElements/ScatterND reductions -> numpy's unbuffered in-place ufunc
_SCATTER_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, index: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        out[index] = updates
    elif reduction in _SCATTER_UFUNCS:
        _SCATTER_UFUNCS[reduction].at(out, index, updates)
    else:
        raise ValueError(f"reduction {reduction!r} (expected none, add, mul, max or min)")
    return out


def scatter_elements(args: list, attrs: dict) -> list:
    data, updates = args[0], args[2]
    axis = norm_axis(attrs.get("axis", 0), data.ndim)
    idx = _wrap(args[1], data.shape[axis], "ScatterElements")
    index = list(np.indices(idx.shape, sparse=True))
    index[axis] = idx
    return [_scatter(data.copy(), tuple(index), updates, attrs.get("reduction", "none"))]


def scatter_nd(args: list, attrs: dict) -> list:
    data, indices, updates = args[0], np.asarray(args[1]), args[2]
    k = indices.shape[-1]
    flat = indices.reshape(-1, k)
    cols = tuple(_wrap(flat[:, j], data.shape[j], "ScatterND") for j in range(k))
    upd = updates.reshape((flat.shape[0],) + data.shape[k:])
    return [_scatter(data.copy(), cols, upd, attrs.get("reduction", "none"))]


def gather_nd(args: list, attrs: dict) -> list:
    data, indices = args[0], np.asarray(args[1])
    b = int(attrs.get("batch_dims", 0))
    k = indices.shape[-1]
    batch = int(np.prod(data.shape[:b]))
    d = data.reshape((batch,) + data.shape[b:])
    ind = indices.reshape(batch, -1, k)
    parts = []
    for i in range(batch):
        cols = tuple(_wrap(ind[i, :, j], d.shape[1 + j], "GatherND") for j in range(k))
        parts.append(d[i][cols])
    out = np.stack(parts) if parts else np.zeros((0,) + d.shape[1 + k:], data.dtype)
    return [out.reshape(indices.shape[:-1] + data.shape[b + k:])]


def trilu(args: list, attrs: dict) -> list:
    k = int(np.asarray(args[1]).reshape(())) if len(args) > 1 and args[1] is not None else 0
    fn = np.triu if attrs.get("upper", 1) else np.tril
    return [fn(args[0], k)]


def one_hot(args: list, attrs: dict) -> list:
    depth = int(np.asarray(args[1]).reshape(-1)[0])
    off, on = np.asarray(args[2]).reshape(-1)[:2]
    idx = np.asarray(args[0]).astype(np.int64)
    idx = np.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == np.arange(depth)
    out = np.where(hot, on, off).astype(args[2].dtype)
    return [np.moveaxis(out, -1, norm_axis(attrs.get("axis", -1), idx.ndim + 1))]


def eye_like(args: list, attrs: dict, dtype: str) -> list:
    rows, cols = args[0].shape
    return [np.eye(rows, cols, int(attrs.get("k", 0)), dtype=dtype)]


def compress(args: list, attrs: dict) -> list:
    x, cond = args[0], np.asarray(args[1]).astype(bool)
    axis = attrs.get("axis")
    if axis is None:
        flat = x.reshape(-1)
        return [flat[:len(cond)][cond[:flat.size]]]
    axis = norm_axis(axis, x.ndim)
    keep = np.nonzero(cond[:x.shape[axis]])[0]
    return [np.take(x, keep, axis=axis)]


def reverse_sequence(args: list, attrs: dict) -> list:
    x, lens = args[0], np.asarray(args[1]).astype(np.int64)
    b_axis, t_axis = int(attrs.get("batch_axis", 1)), int(attrs.get("time_axis", 0))
    out = x.copy()
    for b, n in enumerate(lens):
        src = [slice(None)] * x.ndim
        src[b_axis], src[t_axis] = b, slice(0, int(n))
        dst = list(src)
        dst[t_axis] = slice(int(n) - 1, None, -1) if n > 0 else slice(0, 0)
        out[tuple(src)] = x[tuple(dst)]
    return [out]


def non_zero(args: list, attrs: dict) -> list:
    x = np.asarray(args[0])
    x = x.reshape(1) if x.ndim == 0 else x
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


# ------------------------------------------------------------------ Resize
# Note on the algorithm: Resize is separable, so each resized axis is one matrix product
# out = W @ in along that axis, with W (out_len x in_len) built from the source coordinate of
# every output index and the mode's tap coefficients. A source coordinate x is split into
# base = ceil(x) - 1 and ratio = x - base in (0, 1]; tap i reads index base + i (indices
# clamped to the edge), which matches ONNX's "nearest n neighbours, prefer the left" rule.
_RESIZE_MODES = ("nearest", "linear", "cubic")
_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                "asymmetric", "tf_crop_and_resize")


def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _taps(mode: str, ratio: np.ndarray, scale: float, attrs: dict) -> tuple[int, np.ndarray]:
    """(first tap offset, coefficients (out, n)) for source ratios in (0, 1]."""
    r = ratio[:, None]
    if mode == "nearest":
        nm = attrs.get("nearest_mode", "round_prefer_floor")
        exact = r == 1.0
        right = {"round_prefer_floor": r > 0.5, "round_prefer_ceil": r >= 0.5,
                 "floor": exact, "ceil": np.ones_like(r, bool)}.get(nm)
        if right is None:
            raise ValueError(f"nearest_mode {nm!r}")
        return 0, np.concatenate([~right, right], axis=1).astype(np.float64)
    s = min(scale, 1.0) if attrs.get("antialias", 0) else 1.0
    a = float(attrs.get("cubic_coeff_a", -0.75))
    if mode == "linear":
        start = int(np.floor(-1 / s) + 1)
        dist = (np.arange(start, 2 - start) - r) * s
        coef = np.clip(1 - np.abs(dist), 0, 1)
    else:
        start = int(np.floor(-2 / s) + 1)
        coef = _cubic((np.arange(start, 2 - start) - r) * s, a)
    return start, coef / coef.sum(axis=1, keepdims=True)


def _source_coords(mode: str, n_out: int, n_in: int, scale: float, roi) -> np.ndarray:
    y = np.arange(n_out, dtype=np.float64)
    length = scale * n_in
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if length > 1 else np.full(n_out, -0.5)
    if mode == "align_corners":
        return y * (n_in - 1) / (length - 1) if length != 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return y / scale
    lo, hi = roi
    if length == 1:
        return np.full(n_out, (hi - lo) * (n_in - 1) / 2 + lo * (n_in - 1))
    return y * (hi - lo) * (n_in - 1) / (length - 1) + lo * (n_in - 1)


def _resize_matrix(n_in: int, n_out: int, scale: float, roi, attrs: dict) -> tuple:
    """(W, extrapolated mask) of one axis."""
    coord_mode = attrs.get("coordinate_transformation_mode", "half_pixel")
    x = _source_coords(coord_mode, n_out, n_in, scale, roi)
    base = np.ceil(x).astype(np.int64) - 1
    start, coef = _taps(attrs.get("mode", "nearest"), x - base, scale, attrs)
    idx = base[:, None] + start + np.arange(coef.shape[1])
    if attrs.get("exclude_outside", 0):
        coef = np.where((idx < 0) | (idx >= n_in), 0.0, coef)
        total = coef.sum(axis=1, keepdims=True)
        coef = coef / np.where(total == 0, 1.0, total)
    w = np.zeros((n_out, n_in))
    np.add.at(w, (np.repeat(np.arange(n_out), coef.shape[1]), np.clip(idx, 0, n_in - 1).ravel()),
              coef.ravel())
    extra = (x < 0) | (x > n_in - 1) if coord_mode == "tf_crop_and_resize" else None
    return w, extra


def resize_plan(shape: Sequence[int], roi, scales, sizes, attrs: dict
                ) -> tuple[list[int], list[float], list]:
    """Output sizes, per-axis scales and per-axis roi (lo, hi) of Resize."""
    rank = len(shape)
    axes = [norm_axis(a, rank) for a in attrs.get("axes") or range(rank)]
    if attrs.get("mode", "nearest") not in _RESIZE_MODES:
        raise ValueError(f"mode {attrs.get('mode')!r} (expected one of {_RESIZE_MODES})")
    if attrs.get("coordinate_transformation_mode", "half_pixel") not in _COORD_MODES:
        raise ValueError(f"coordinate_transformation_mode "
                         f"{attrs.get('coordinate_transformation_mode')!r}")
    out, scl = list(shape), [1.0] * rank
    rois: list = [(0.0, 1.0)] * rank
    if roi is not None and np.size(roi):
        r = np.asarray(roi, np.float64).reshape(-1)
        for k, a in enumerate(axes):
            rois[a] = (r[k], r[k + len(axes)])
    if sizes is not None and np.size(sizes):
        sz = [int(v) for v in np.asarray(sizes).reshape(-1)]
        ratios = [sz[k] / shape[a] for k, a in enumerate(axes)]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = min(ratios) if policy == "not_larger" else max(ratios)
            ratios = [s] * len(axes)
            sz = [int(s * shape[a] + 0.5) for a in axes]
        for k, a in enumerate(axes):
            out[a], scl[a] = sz[k], ratios[k]
    elif scales is not None and np.size(scales):
        sc = [float(v) for v in np.asarray(scales).reshape(-1)]
        crop = attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize"
        for k, a in enumerate(axes):
            span = rois[a][1] - rois[a][0] if crop else 1.0
            out[a], scl[a] = int(np.floor(sc[k] * shape[a] * span)), sc[k]
    else:
        raise ValueError("Resize needs scales or sizes")
    return out, scl, rois


def resize(args: list, attrs: dict) -> list:
    x = args[0]
    get = (lambda i: args[i] if len(args) > i else None)
    out_shape, scales, rois = resize_plan(x.shape, get(1), get(2), get(3), attrs)
    y = x.astype(np.float64)
    fill = float(attrs.get("extrapolation_value", 0.0))
    for axis, (n_in, n_out) in enumerate(zip(x.shape, out_shape)):
        if n_in == n_out and scales[axis] == 1.0 and rois[axis] == (0.0, 1.0):
            continue
        w, extra = _resize_matrix(n_in, n_out, scales[axis], rois[axis], attrs)
        y = np.moveaxis(np.tensordot(w, np.moveaxis(y, axis, 0), axes=1), 0, axis)
        if extra is not None and extra.any():
            mask = extra.reshape((1,) * axis + (n_out,) + (1,) * (x.ndim - axis - 1))
            y = np.where(mask, fill, y)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        y = np.clip(np.round(y), info.min, info.max)
    return [y.astype(x.dtype)]


def center_crop_pad(args: list, attrs: dict) -> list:
    """Crop (centred, extra element dropped at the end) or zero-pad each axis to `shape`."""
    x = args[0]
    axes = [norm_axis(a, x.ndim) for a in (attrs.get("axes") or range(x.ndim))]
    target = _ints(args[1])
    out_shape, src, dst = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for a, t in zip(axes, target):
        dim, lo = x.shape[a], abs(x.shape[a] - t) // 2
        out_shape[a] = t
        if t < dim:
            src[a] = slice(lo, lo + t)
        elif t > dim:
            dst[a] = slice(lo, lo + dim)
    out = np.zeros(out_shape, x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return [out]
