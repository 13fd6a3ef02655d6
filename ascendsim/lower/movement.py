"""Lowering of data movement: format conversion (TransData), views, the in-place KV-cache append.

`ensure` gives a value in the format a consumer needs, inserting one TransData task per
(value, format) (formats.py's note); every other lowering calls it for its operands. A
TransData node of the graph (CANN's op, e.g. in a profiled kernel's row) runs the same task. A view
(`Unit.NONE`: reshape-like ops) is no task at all: its output aliases its input (in ND).
KvCacheAppend writes only the new tokens' bytes into the cache, in place.
"""

from __future__ import annotations

from ..ir.graph import Node
from ..ir.tensor import Value, itemsize
from .context import Lowering, TaskSpec
from .formats import ND, padded_bytes, padded_numel
from .memo import vector_work
from .tiling import VecPart, VecSpec


def ensure(low: Lowering, name: str, fmt: str) -> str:
    """The name of `name` in format `fmt`, inserting one TransData task if needed."""
    have = low.format_of(name)
    if have == "const" or have == fmt or not name:
        return name
    key = (low.root(name), fmt)
    v = low.value(name)
    if key in low.converted:
        new = low.converted[key]
        # the converted value follows the shape seen now (an L2 chain's batch chunk)
        low.set_value(new, Value(new, v.shape, v.dtype, fmt))
        return new
    new = f"{v.name}@{fmt}"
    low.set_value(new, Value(new, v.shape, v.dtype, fmt))
    _convert(low, name, have, fmt, new, f"trans_data_{name}_{have}_to_{fmt}")
    return new


def _convert(low: Lowering, name: str, have: str, fmt: str, new: str, task: str) -> None:
    """One TransData task `task` writing `name` (in `have`) as `new` in `fmt`: a vector
    stream over the larger of the two padded sizes; later consumers of `name` in `fmt` read
    `new` (`low.converted`)."""
    v = low.value(name)
    src_b, dst_b = padded_bytes(v, have), padded_bytes(v, fmt)
    n = max(padded_numel(v, have), padded_numel(v, fmt))
    spec = VecSpec(n, ((src_b / n, low.miss(name, src_b)),), dst_b / n,
                   low.through([new], [fmt]),
                   (VecPart("unary", v.dtype, max(src_b, dst_b) / n, "vec_transdata"),))
    groups, notes = vector_work(low.chip, spec, f"TransData {name}", low.vector_cores())
    low.add_task(TaskSpec(
        task, "TransData", low.vector_task_type(),
        [low.vector_phase(groups)], [name], [new], [have], [fmt], 0,
        notes + [f"format conversion {have} -> {fmt}: {src_b} B -> {dst_b} B"]))
    key = (low.root(name), fmt)
    if key not in low.converted:
        low.converted[key] = new
        low.converted_by_root.setdefault(key[0], []).append(key)


def lower_trans_data(low: Lowering, node: Node) -> None:
    """A TransData node of the graph: the same task `ensure` inserts, under the node's name.
    An input already in dst_format, or a constant (converted offline), costs nothing."""
    src, out = node.inputs[0], node.outputs[0]
    dst = node.attrs["dst_format"]
    have = low.format_of(src)
    if have in ("const", dst):
        low.alias[out] = src
        return
    low.fmt[out] = dst
    _convert(low, src, have, dst, out, node.name)


def lower_view(low: Lowering, node: Node) -> None:
    """A view (`Unit.NONE`): no task; its outputs alias its first input, in ND."""
    src = next((i for i in node.inputs if i), None)
    if src is None:
        return
    if low.format_of(src) not in (ND, "const"):
        src = ensure(low, src, ND)
    for o in node.outputs:
        low.alias[o] = src
        low.fmt[o] = ND


def lower_cache_append(low: Lowering, node: Node) -> None:
    """KvCacheAppend in place: only the new tokens' bytes are read and written."""
    chip = low.chip
    cache, upd = node.inputs[0], ensure(low, node.inputs[1], ND)
    uv = low.value(upd)
    n = max(uv.numel, 1)
    w = itemsize(uv.dtype)
    spec = VecSpec(n, ((w, low.miss(upd, uv.numel * w)),), w,
                   low.through([node.outputs[0]], [ND]),
                   (VecPart("unary", uv.dtype, w, "vec_copy"),))
    groups, notes = vector_work(chip, spec, node.name, low.vector_cores())
    low.add_task(TaskSpec(node.name, node.op_type, low.vector_task_type(),
                          [low.vector_phase(groups)], [cache, upd], list(node.outputs),
                          [ND, ND], [ND], 0,
                          notes + [f"in place: {uv.numel * w} B of new keys/values written at "
                                   f"position {node.attrs.get('position', 0)} of the cache"]))


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"none": lower_view, "cache_append": lower_cache_append,
             "trans_data": lower_trans_data}

__all__ = ["ensure", "lower_view", "lower_cache_append", "LOWERINGS"]
