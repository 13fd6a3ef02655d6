"""Tensor and shape ops (ONNX opset-21 signatures): views, data movement and shape queries.

Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) run no task (unit NONE); data movement
(Transpose, Concat, Split, Slice, Gather, Pad, Expand, Tile, ...) is INJECTIVE work for the
vector unit's MOVE instructions. Shape-giving inputs (Reshape's shape, Slice's bounds, ...)
are read from constants (`needs_const_inputs`); when such an input is not a constant the
affected output dims become fresh symbolic names instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import GraphError
from ...kernels import tensor as kt
from ..registry import (
    Category,
    OpDef,
    Unit,
    VecClass,
    broadcast_shapes,
    register,
    register_grads,
    symbolic_base,
)
from ..tensor import LAYOUTS, storage_dtype


def _zero_flops(ins, outs, attrs) -> int:
    return 0


_fresh = symbolic_base


def _move(op_type: str, infer, kernel, inputs=("x",), attrs=None, needs=(), **kw) -> None:
    register(OpDef(op_type, infer, kernel, Category.INJECTIVE, unit=Unit.VECTOR, inputs=inputs,
                   attrs=attrs or {}, flops=_zero_flops, vec_class=VecClass.MOVE,
                   needs_const_inputs=needs, **kw))


def _view(op_type: str, infer, kernel, inputs=("x",), attrs=None, needs=(), **kw) -> None:
    register(OpDef(op_type, infer, kernel, Category.INJECTIVE, unit=Unit.NONE, inputs=inputs,
                   attrs=attrs or {}, flops=_zero_flops, vec_class=VecClass.MOVE,
                   needs_const_inputs=needs, **kw))


def _ints(a) -> list[int]:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _const_len(v) -> int | None:
    """Length of a 1-D shape-like input from its static shape, if known."""
    if v is None or len(v.shape) != 1 or not isinstance(v.shape[0], int):
        return None
    return v.shape[0]


# ------------------------------------------------------------------ views
def _same(ins, attrs, consts):
    return [(ins[0].shape, ins[0].dtype)]


def _reshape(ins, attrs, consts):
    x = ins[0]
    if consts[1] is None:
        n = _const_len(ins[1])
        if n is None:
            raise GraphError("Reshape target shape has unknown length; make it a constant")
        return [(tuple(f"{_fresh(ins, 'Reshape')}_d{i}" for i in range(n)), x.dtype)]
    return [(kt.reshape_target(x.shape, _ints(consts[1]), attrs["allowzero"],
                               _fresh(ins, "Reshape")), x.dtype)]


def _flatten(ins, attrs, consts):
    x = ins[0]
    axis = kt.flatten_axis(attrs["axis"], len(x.shape))
    return [((kt.sym_prod(x.shape[:axis]), kt.sym_prod(x.shape[axis:])), x.dtype)]


def _squeeze(ins, attrs, consts):
    x = ins[0]
    rank = len(x.shape)
    if len(ins) > 1 and ins[1] is not None:
        if consts[1] is None:
            n = _const_len(ins[1])
            if n is None:
                raise GraphError("Squeeze axes are not a constant")
            return [(tuple(f"{_fresh(ins, 'Squeeze')}_d{i}" for i in range(rank - n)), x.dtype)]
        axes = {kt.norm_axis(a, rank) for a in _ints(consts[1])}
        for a in axes:
            if isinstance(x.shape[a], int) and x.shape[a] != 1:
                raise GraphError(f"cannot squeeze axis {a} of size {x.shape[a]}")
    else:
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    return [(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]


def _unsqueeze(ins, attrs, consts):
    x = ins[0]
    if consts[1] is None:
        n = _const_len(ins[1])
        if n is None:
            raise GraphError("Unsqueeze axes are not a constant")
        return [(tuple(f"{_fresh(ins, 'Unsqueeze')}_d{i}" for i in range(len(x.shape) + n)),
                 x.dtype)]
    axes = _ints(consts[1])
    rank = len(x.shape) + len(axes)
    norm = {kt.norm_axis(a, rank) for a in axes}
    if len(norm) != len(axes):
        raise GraphError(f"repeated axis in {axes}")
    rest = iter(x.shape)
    return [(tuple(1 if i in norm else next(rest) for i in range(rank)), x.dtype)]


_view("Identity", _same, kt.identity, doc="A view: output = input.")
_view("Reshape", _reshape, kt.reshape, inputs=("data", "shape"), attrs={"allowzero": 0},
      needs=(1,))
_view("Flatten", _flatten, kt.flatten, inputs=("input",), attrs={"axis": 1})
_view("Squeeze", _squeeze, kt.squeeze, inputs=("data", "axes?"), needs=(1,))
_view("Unsqueeze", _unsqueeze, kt.unsqueeze, inputs=("data", "axes"), needs=(1,))


#: the least rank a layout needs: FRACTAL_NZ tiles the last two dims, NC1HWC0 splits an NCHW
#: tensor's channels (CANN's TransData takes 4-D NCHW for it)
_LAYOUT_MIN_RANK = {"ND": 0, "FRACTAL_NZ": 2, "NC1HWC0": 4}


def _trans_data(ins, attrs, consts):
    """TransData keeps the values, shape and dtype; only the storage layout changes."""
    x, dst = ins[0], attrs["dst_format"]
    if dst not in LAYOUTS:
        raise GraphError(f"TransData: dst_format {dst!r} is not a layout; valid: "
                         f"{', '.join(LAYOUTS)}")
    if len(x.shape) < _LAYOUT_MIN_RANK[dst]:
        raise GraphError(f"TransData: input '{x.name}' has rank {len(x.shape)}; {dst} needs "
                         f"rank {_LAYOUT_MIN_RANK[dst]} or more")
    return [(x.shape, x.dtype)]


# OPAQUE: CANN never fuses a format conversion into its neighbours
register(OpDef("TransData", _trans_data, kt.identity, Category.OPAQUE, unit=Unit.VECTOR,
               attrs={"dst_format": "ND"}, flops=_zero_flops, vec_class=VecClass.MOVE,
               lowering="trans_data",
               doc="CANN TransData: the input converted to the storage layout dst_format (ND, "
                   "NC1HWC0 or FRACTAL_NZ) from the layout it has; values unchanged"))


# ------------------------------------------------------------------ data movement
def _transpose(ins, attrs, consts):
    x = ins[0]
    rank = len(x.shape)
    perm = attrs["perm"]
    perm = list(range(rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(kt.norm_axis(p, rank) for p in perm) != list(range(rank)):
        raise GraphError(f"perm {perm} is not a permutation of {rank} axes")
    return [(tuple(x.shape[kt.norm_axis(p, rank)] for p in perm), x.dtype)]


def _concat(ins, attrs, consts):
    vals = [v for v in ins if v is not None]
    if not vals:
        raise GraphError("Concat needs at least one input")
    rank = len(vals[0].shape)
    axis = kt.norm_axis(attrs["axis"], rank)
    if len({v.dtype for v in vals}) > 1:
        raise GraphError(f"inputs have different dtypes {sorted({v.dtype for v in vals})}")
    out = list(vals[0].shape)
    for v in vals[1:]:
        if len(v.shape) != rank:
            raise GraphError(f"inputs have ranks {[len(u.shape) for u in vals]}")
        for i, (a, b) in enumerate(zip(out, v.shape)):
            if i != axis and isinstance(a, int) and isinstance(b, int) and a != b:
                raise GraphError(f"input shapes {[u.shape for u in vals]} differ off axis {axis}")
            if i != axis and isinstance(a, str) and isinstance(b, int):
                out[i] = b
    dims = [v.shape[axis] for v in vals]
    out[axis] = sum(dims) if all(isinstance(d, int) for d in dims) else "+".join(map(str, dims))
    return [(tuple(out), vals[0].dtype)]


def _split(ins, attrs, consts):
    x = ins[0]
    rank = len(x.shape)
    axis = kt.norm_axis(attrs["axis"], rank)
    has_split = len(ins) > 1 and ins[1] is not None
    n = attrs["num_outputs"]
    if has_split and consts[1] is None:
        n = _const_len(ins[1])
        if n is None:
            raise GraphError("Split sizes are not a constant")
    dim = x.shape[axis]
    if isinstance(dim, str) or (has_split and consts[1] is None):
        sizes: list = [f"{_fresh(ins, 'Split')}_{i}" for i in range(int(n))]
    else:
        sizes = kt.split_sizes(dim, consts[1] if has_split else None, n)
    return [(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes]


def _slice(ins, attrs, consts):
    x = ins[0]
    rank = len(x.shape)
    if any(ins[i] is not None and consts[i] is None for i in range(1, len(ins))):
        return [(tuple(f"{_fresh(ins, 'Slice')}_d{i}" for i in range(rank)), x.dtype)]
    steps = consts[4] if len(ins) > 4 else None
    out = list(x.shape)
    for axis, s, e, st in kt.slice_axes(rank, consts[1], consts[2],
                                        consts[3] if len(ins) > 3 else None, steps):
        dim = x.shape[axis]
        if isinstance(dim, str):
            full = s == 0 and e >= 2**31 - 1 and st == 1
            out[axis] = dim if full else f"{_fresh(ins, 'Slice')}_d{axis}"
        else:
            out[axis] = kt.slice_params(dim, s, e, st)[3]
    return [(tuple(out), x.dtype)]


def _gather(ins, attrs, consts):
    x, idx = ins[0], ins[1]
    axis = kt.norm_axis(attrs["axis"], len(x.shape))
    if idx.dtype not in ("int32", "int64"):
        raise GraphError(f"indices must be int32 or int64, got {idx.dtype}")
    dim = x.shape[axis]
    if consts[1] is not None and isinstance(dim, int) and np.size(consts[1]):
        flat = np.asarray(consts[1]).reshape(-1)
        bad = flat[(flat < -dim) | (flat >= dim)]
        if bad.size:
            raise GraphError(f"constant indices '{idx.name}' hold {int(bad[0])}, out of range "
                             f"[{-dim}, {dim - 1}] for axis {axis} of '{x.name}' "
                             f"{tuple(x.shape)}")
    return [(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)]


def _gather_elements(ins, attrs, consts):
    kt.norm_axis(attrs["axis"], len(ins[0].shape))
    return [(ins[1].shape, ins[0].dtype)]


def _expand(ins, attrs, consts):
    x = ins[0]
    if consts[1] is None:
        n = _const_len(ins[1])
        if n is None:
            raise GraphError("Expand shape has unknown length; make it a constant")
        target: Sequence = tuple(f"{_fresh(ins, 'Expand')}_d{i}" for i in range(n))
    else:
        target = tuple(_ints(consts[1]))
    return [(broadcast_shapes(x.shape, target), x.dtype)]


def _tile(ins, attrs, consts):
    x = ins[0]
    if consts[1] is None:
        return [(tuple(f"{_fresh(ins, 'Tile')}_d{i}" for i in range(len(x.shape))), x.dtype)]
    reps = _ints(consts[1])
    if len(reps) != len(x.shape):
        raise GraphError(f"repeats {reps} has {len(reps)} values for a rank-{len(x.shape)} input")
    return [(tuple(d * r if isinstance(d, int) else (d if r == 1 else f"{d}*{r}")
                   for d, r in zip(x.shape, reps)), x.dtype)]


def _pad(ins, attrs, consts):
    x = ins[0]
    rank = len(x.shape)
    if attrs["mode"] not in ("constant", "reflect", "edge", "wrap"):
        raise GraphError(f"Pad mode {attrs['mode']!r}; expected constant, reflect, edge or wrap")
    has_axes = len(ins) > 3 and ins[3] is not None
    if consts[1] is None or (has_axes and consts[3] is None):
        return [(tuple(f"{_fresh(ins, 'Pad')}_d{i}" for i in range(rank)), x.dtype)]
    widths = kt.pad_widths(rank, consts[1], consts[3] if has_axes else None)
    out = tuple(d + b + e if isinstance(d, int) else (d if b == e == 0 else f"{d}+{b + e}")
                for d, (b, e) in zip(x.shape, widths))
    return [(out, x.dtype)]


_move("Transpose", _transpose, kt.transpose, inputs=("data",), attrs={"perm": None})
_move("Concat", _concat, kt.concat, inputs=("*inputs",), attrs={"axis": 0})
_move("Split", _split, kt.split, inputs=("input", "split?"),
      attrs={"axis": 0, "num_outputs": None}, needs=(1,), num_outputs="num_outputs",
      doc="Outputs: len(split) when the split input is given, else the num_outputs attribute.")
_move("Slice", _slice, kt.slice_, inputs=("data", "starts", "ends", "axes?", "steps?"),
      needs=(1, 2, 3, 4), builder="slice")
_move("Gather", _gather, kt.gather, inputs=("data", "indices"), attrs={"axis": 0},
      checks_const_inputs=(1,), gathers=(0,))
_move("GatherElements", _gather_elements, kt.gather_elements, inputs=("data", "indices"),
      attrs={"axis": 0}, gathers=(0,))
_move("Expand", _expand, kt.expand, inputs=("input", "shape"), needs=(1,))
_move("Tile", _tile, kt.tile, inputs=("input", "repeats"), needs=(1,))
_move("Pad", _pad, kt.pad, inputs=("data", "pads", "constant_value?", "axes?"),
      attrs={"mode": "constant"}, needs=(1, 3))


def _blocksize(attrs) -> int:
    b = int(attrs["blocksize"])
    if b < 1:
        raise GraphError(f"blocksize must be >= 1, got {b}")
    return b


def _depth_to_space(ins, attrs, consts):
    n, c, h, w = ins[0].shape
    b = _blocksize(attrs)
    if attrs["mode"] not in ("DCR", "CRD"):
        raise GraphError(f"DepthToSpace mode {attrs['mode']!r}; expected DCR or CRD")
    if isinstance(c, int) and c % (b * b):
        raise GraphError(f"channels {c} not divisible by blocksize^2 = {b * b}")
    scale = (lambda d, k: d * k if isinstance(d, int) else f"{d}*{k}")
    div = (lambda d, k: d // k if isinstance(d, int) else f"{d}/{k}")
    return [((n, div(c, b * b), scale(h, b), scale(w, b)), ins[0].dtype)]


def _space_to_depth(ins, attrs, consts):
    n, c, h, w = ins[0].shape
    b = _blocksize(attrs)
    for what, d in (("height", h), ("width", w)):
        if isinstance(d, int) and d % b:
            raise GraphError(f"{what} {d} of '{ins[0].name}' is not divisible by blocksize {b}")
    scale = (lambda d, k: d * k if isinstance(d, int) else f"{d}*{k}")
    div = (lambda d, k: d // k if isinstance(d, int) else f"{d}/{k}")
    return [((n, scale(c, b * b), div(h, b), div(w, b)), ins[0].dtype)]


_move("DepthToSpace", _depth_to_space, kt.depth_to_space, inputs=("input",),
      attrs={"blocksize": 1, "mode": "DCR"})
_move("SpaceToDepth", _space_to_depth, kt.space_to_depth, inputs=("input",),
      attrs={"blocksize": 1, "mode": "DCR"})


# ------------------------------------------------------------------ shapes and constants
def _shape(ins, attrs, consts):
    lo, hi = kt.shape_bounds(len(ins[0].shape), attrs["start"], attrs["end"])
    return [((hi - lo,), "int64")]


def _size(ins, attrs, consts):
    return [((), "int64")]


def _constant_of_shape(ins, attrs, consts):
    v = kt.fill_value(attrs["value"])
    if consts[0] is None:
        n = _const_len(ins[0])
        if n is None:
            raise GraphError("ConstantOfShape shape has unknown length")
        return [(tuple(f"{_fresh(ins, 'ConstantOfShape')}_d{i}" for i in range(n)),
                 v.dtype.name)]
    dims = _ints(consts[0])
    if any(d < 0 for d in dims):
        raise GraphError(f"negative dim in shape {dims}")
    return [(tuple(dims), v.dtype.name)]


def _constant(ins, attrs, consts):
    v = kt.constant_value(attrs)
    return [(v.shape, v.dtype.name)]


def _range(ins, attrs, consts):
    dtypes = {v.dtype for v in ins[:3]}
    if len(dtypes) != 1:
        raise GraphError(f"start, limit and delta have different dtypes {sorted(dtypes)}")
    if any(c is None for c in consts[:3]):
        return [((f"{_fresh(ins, 'Range')}_n",), ins[0].dtype)]
    n = kt.range_length(*(np.asarray(c).reshape(()).item() for c in consts[:3]))
    return [((n,), ins[0].dtype)]


# Shape/Size: known at compile time for static shapes, so they run no task
register(OpDef("Shape", _shape, kt.shape, Category.OPAQUE, unit=Unit.NONE, inputs=("data",),
               attrs={"start": 0, "end": None}, flops=_zero_flops, shape_only_inputs=(0,)))
register(OpDef("Size", _size, kt.size, Category.OPAQUE, unit=Unit.NONE, inputs=("data",),
               flops=_zero_flops, shape_only_inputs=(0,)))
register(OpDef("Constant", _constant, kt.constant, Category.OPAQUE, unit=Unit.NONE, inputs=(),
               attrs={k: None for k in kt.CONSTANT_ATTRS}, flops=_zero_flops))
_move("ConstantOfShape", _constant_of_shape, kt.constant_of_shape, inputs=("input",),
      attrs={"value": None}, needs=(0,))
_move("Range", _range, kt.range_, inputs=("start", "limit", "delta"), needs=(0, 1, 2),
      builder="range")


# ------------------------------------------------------------------ index ops
def _scatter_infer(ins, attrs, consts):
    data, idx, upd = ins[0], ins[1], ins[2]
    if attrs["reduction"] not in ("none", "add", "mul", "max", "min"):
        raise GraphError(f"reduction {attrs['reduction']!r}; expected none, add, mul, max, min")
    if idx.dtype not in ("int32", "int64"):
        raise GraphError(f"indices must be int32 or int64, got {idx.dtype}")
    if upd.dtype != data.dtype:
        raise GraphError(f"updates dtype {upd.dtype} differs from data dtype {data.dtype}")
    return [(data.shape, data.dtype)]


def _gather_nd(ins, attrs, consts):
    data, idx = ins[0], ins[1]
    b, k = int(attrs["batch_dims"]), idx.shape[-1]
    if not isinstance(k, int):
        raise GraphError("the last dim of GatherND indices must be static")
    return [(idx.shape[:-1] + data.shape[b + k:], data.dtype)]


def _trilu(ins, attrs, consts):
    if len(ins[0].shape) < 2:
        raise GraphError(f"Trilu needs rank >= 2, got shape {ins[0].shape}")
    return [(ins[0].shape, ins[0].dtype)]


def _one_hot(ins, attrs, consts):
    idx, vals = ins[0], ins[2]
    axis = kt.norm_axis(attrs["axis"], len(idx.shape) + 1)
    depth = (int(np.asarray(consts[1]).reshape(-1)[0]) if consts[1] is not None
             else f"{_fresh(ins, 'OneHot')}_depth")
    out = list(idx.shape)
    out.insert(axis, depth)
    return [(tuple(out), vals.dtype)]


def _eye_dtype(in_dtype: str, attrs: dict) -> str:
    from .elementwise import ONNX_DTYPES

    code = attrs["dtype"]
    if code is None:
        return in_dtype
    if int(code) not in ONNX_DTYPES:
        raise GraphError(f"dtype code {code} is not supported")
    return ONNX_DTYPES[int(code)]


def _eye_like(ins, attrs, consts):
    if len(ins[0].shape) != 2:
        raise GraphError(f"EyeLike needs a rank-2 input, got shape {ins[0].shape}")
    return [(ins[0].shape, _eye_dtype(ins[0].dtype, attrs))]


def _compress(ins, attrs, consts):
    x = ins[0]
    n = f"{_fresh(ins, 'Compress')}_n"      # the count of true conditions: known at run time
    if attrs["axis"] is None:
        return [((n,), x.dtype)]
    axis = kt.norm_axis(attrs["axis"], len(x.shape))
    return [(x.shape[:axis] + (n,) + x.shape[axis + 1:], x.dtype)]


def _non_zero(ins, attrs, consts):
    return [((max(len(ins[0].shape), 1), f"{_fresh(ins, 'NonZero')}_n"), "int64")]


_move("ScatterElements", _scatter_infer, kt.scatter_elements,
      inputs=("data", "indices", "updates"), attrs={"axis": 0, "reduction": "none"})
_move("ScatterND", _scatter_infer, kt.scatter_nd, inputs=("data", "indices", "updates"),
      attrs={"reduction": "none"}, builder="scatter_nd")
_move("GatherND", _gather_nd, kt.gather_nd, inputs=("data", "indices"),
      attrs={"batch_dims": 0}, builder="gather_nd", gathers=(0,))
_move("Trilu", _trilu, kt.trilu, inputs=("input", "k?"), attrs={"upper": 1})
_move("OneHot", _one_hot, kt.one_hot, inputs=("indices", "depth", "values"),
      attrs={"axis": -1}, needs=(1,))
_move("EyeLike", _eye_like,
      lambda args, attrs: kt.eye_like(
          args, attrs, storage_dtype(_eye_dtype(args[0].dtype.name, attrs))),
      inputs=("input",), attrs={"dtype": None, "k": 0})
_move("Compress", _compress, kt.compress, inputs=("input", "condition"), attrs={"axis": None})
_move("ReverseSequence", _same, kt.reverse_sequence, inputs=("input", "sequence_lens"),
      attrs={"batch_axis": 1, "time_axis": 0})
# NonZero's output length depends on the values: AI CPU work on the chip
register(OpDef("NonZero", _non_zero, kt.non_zero, Category.OPAQUE, unit=Unit.AICPU,
               inputs=("x",), flops=_zero_flops))


# ------------------------------------------------------------------ Resize
def _resize(ins, attrs, consts):
    x = ins[0]
    given = [i for i in (2, 3) if len(ins) > i and ins[i] is not None]
    if any(consts[i] is None for i in given) or not all(isinstance(d, int) for d in x.shape):
        return [(tuple(f"{_fresh(ins, 'Resize')}_d{i}" for i in range(len(x.shape))), x.dtype)]
    get = (lambda i: consts[i] if len(ins) > i else None)
    out, _, _ = kt.resize_plan(x.shape, None, get(2), get(3), attrs)
    return [(tuple(out), x.dtype)]


# interpolation reads a window of inputs per output: SEGMENT, like pooling
register(OpDef("Resize", _resize, kt.resize, Category.SEGMENT, unit=Unit.VECTOR,
               inputs=("X", "roi?", "scales?", "sizes?"),
               attrs={"antialias": 0, "axes": None, "coordinate_transformation_mode":
                      "half_pixel", "cubic_coeff_a": -0.75, "exclude_outside": 0,
                      "extrapolation_value": 0.0, "keep_aspect_ratio_policy": "stretch",
                      "mode": "nearest", "nearest_mode": "round_prefer_floor"},
               needs_const_inputs=(2, 3), vec_class=VecClass.BINARY))


def _center_crop_pad(ins, attrs, consts):
    x = ins[0]
    rank = len(x.shape)
    axes = [kt.norm_axis(a, rank) for a in (attrs["axes"] or range(rank))]
    if consts[1] is None:
        return [(tuple(f"{_fresh(ins, 'CenterCropPad')}_d{i}" if i in axes else d
                       for i, d in enumerate(x.shape)), x.dtype)]
    target = _ints(consts[1])
    if len(target) != len(axes):
        raise GraphError(f"shape has {len(target)} values for {len(axes)} axes")
    out = list(x.shape)
    for a, t in zip(axes, target):
        out[a] = t
    return [(tuple(out), x.dtype)]


_move("CenterCropPad", _center_crop_pad, kt.center_crop_pad, inputs=("input_data", "shape"),
      attrs={"axes": None}, needs=(1,))


# ------------------------------------------------------------------ gradients
# Views and moves route cotangents back to where the elements came from (see ir/vjp.py).
def _reshape_back(ctx, douts):
    return [ctx.reshape(douts[0], ctx.shape(ctx.ins[0]))] + [None] * (len(ctx.ins) - 1)


def _transpose_grad(ctx, douts):
    rank = len(ctx.ins[0].shape)
    perm = ctx.attrs["perm"] or list(range(rank))[::-1]
    return [ctx.g.transpose(douts[0], perm=[int(i) for i in np.argsort(perm)])]


def _concat_grad(ctx, douts):
    """Each input takes its slice of the output's cotangent along the axis."""
    rank = len(ctx.outs[0].shape)
    axis = kt.norm_axis(ctx.attrs["axis"], rank)
    out, start = [], 0
    for i, v in enumerate(ctx.ins):
        size = int(ctx.shape(v)[axis])
        out.append(ctx.g.slice(douts[0], ctx.ints([start]), ctx.ints([start + size]),
                               ctx.ints([axis])) if ctx.needs(i) else None)
        start += size
    return out


def _split_grad(ctx, douts):
    parts = [d if d is not None else ctx.zeros(ctx.shape(o), o.dtype)
             for d, o in zip(douts, ctx.outs)]
    axis = kt.norm_axis(ctx.attrs["axis"], len(ctx.ins[0].shape))
    return [ctx.g.concat(*parts, axis=axis)] + [None] * (len(ctx.ins) - 1)


def _slice_grad(ctx, douts):
    """Pad the cotangent back to the input's shape (unit steps; zeros where sliced away)."""
    x = ctx.ins[0]
    shape = ctx.shape(x)
    consts = [ctx.const_input(i) if i < len(ctx.ins) and ctx.ins[i] is not None else None
              for i in range(5)]
    if any(ctx.ins[i] is not None and consts[i] is None for i in range(1, len(ctx.ins))):
        raise GraphError(f"Slice '{ctx.node.name}' gradient: starts/ends/axes/steps must be "
                         f"constants")
    before, after = [0] * len(shape), [0] * len(shape)
    for axis, s, e, st in kt.slice_axes(len(shape), consts[1], consts[2], consts[3], consts[4]):
        start, _, step, length = kt.slice_params(shape[axis], s, e, st)
        if step != 1:
            raise GraphError(f"Slice '{ctx.node.name}' gradient: only unit steps, got {step}")
        before[axis], after[axis] = start, shape[axis] - start - length
    return [ctx.g.pad(douts[0], ctx.ints(before + after))] + [None] * (len(ctx.ins) - 1)


def _gather_grad(ctx, douts):
    """Scatter-add of the cotangent rows into zeros of the table's shape (ScatterND add,
    the gather's axis moved to the front)."""
    g, (data, idx) = ctx.g, ctx.ins
    shape = ctx.shape(data)
    rank = len(shape)
    axis = kt.norm_axis(ctx.attrs["axis"], rank)
    dy = douts[0]
    irank = len(idx.shape)
    if axis:
        # dy is data.shape[:axis] + idx.shape + data.shape[axis+1:]: move idx dims to the front
        perm = (list(range(axis, axis + irank)) + list(range(axis))
                + list(range(axis + irank, len(dy.shape))))
        dy = g.transpose(dy, perm=perm)
    front = [shape[axis]] + [d for i, d in enumerate(shape) if i != axis]
    pos = g.where(g.less(idx, ctx.scalar(0, idx.dtype)),
                  g.add(idx, ctx.scalar(shape[axis], idx.dtype)), idx)
    table = g.scatter_nd(ctx.zeros(front, data.dtype), g.unsqueeze(pos, ctx.ints([-1])), dy,
                         reduction="add")
    if axis:
        inverse = list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))
        table = g.transpose(table, perm=inverse)
    return [table, None]


def _pad_grad(ctx, douts):
    """Constant-mode Pad: the cotangent sliced back to the input's region (negative pads
    crop: the cropped elements get zeros); the constant value's is the sum of the cotangent
    over the padded positions (its whole sum less the input region's)."""
    if ctx.attrs["mode"] != "constant":
        raise GraphError(f"Pad '{ctx.node.name}' gradient: only constant mode, got "
                         f"{ctx.attrs['mode']!r}")
    x = ctx.ins[0]
    shape = ctx.shape(x)
    pads = ctx.const_input(1)
    axes = ctx.const_input(3) if len(ctx.ins) > 3 and ctx.ins[3] is not None else None
    if pads is None or (len(ctx.ins) > 3 and ctx.ins[3] is not None and axes is None):
        raise GraphError(f"Pad '{ctx.node.name}' gradient: pads and axes must be constants")
    widths = kt.pad_widths(len(shape), pads, axes)
    g, dy = ctx.g, douts[0]
    starts = [max(b, 0) for b, _ in widths]
    ends = [starts[i] + d + min(b, 0) + min(e, 0) for i, (d, (b, e)) in
            enumerate(zip(shape, widths))]
    dx = g.slice(dy, ctx.ints(starts), ctx.ints(ends), ctx.ints(list(range(len(shape)))))
    out: list = [None] * len(ctx.ins)
    if len(ctx.ins) > 2 and ctx.ins[2] is not None and ctx.needs(2):
        every = ctx.ints(list(range(len(shape))))
        dc = g.sub(g.reduce_sum(dy, every, keepdims=0), g.reduce_sum(dx, every, keepdims=0))
        out[2] = ctx.reshape(dc, ctx.shape(ctx.ins[2]))
    if any(b < 0 or e < 0 for b, e in widths):
        back = [max(-b, 0) for b, _ in widths] + [max(-e, 0) for _, e in widths]
        dx = g.pad(dx, ctx.ints(back))
    out[0] = dx
    return out


def _expand_grad(ctx, douts):
    return [ctx.unbroadcast(douts[0], ctx.ins[0]), None]


register_grads({
    "Identity": _reshape_back, "TransData": _reshape_back, "Reshape": _reshape_back,
    "Flatten": _reshape_back,
    "Squeeze": _reshape_back, "Unsqueeze": _reshape_back,
    "Transpose": _transpose_grad, "Concat": _concat_grad, "Split": _split_grad,
    "Slice": _slice_grad, "Gather": _gather_grad, "Expand": _expand_grad, "Pad": _pad_grad,
})
