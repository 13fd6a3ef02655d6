"""Lowering of data movement: format conversion (TransData), views, the in-place KV-cache append.

`ensure` gives a value in the format a consumer needs, inserting one TransData task per
(value, format) (formats.py's note); every other lowering calls it for its operands. A
TransData node of the graph (CANN's op, e.g. in a profiled kernel's row) runs the same task. A view
(`Unit.NONE`: reshape-like ops) is no task at all: its output aliases its input (in ND).
KvCacheAppend writes only the new tokens' bytes into the cache, in place; ScatterPaKvCache
writes each token into a paged cache at its slot, in place, as CANN's kernel moves it.
"""

from __future__ import annotations

from ..ir.graph import Node
from ..ir.tensor import Value, itemsize
from .context import Lowering, TaskSpec
from .formats import ND, padded_bytes, padded_numel
from .memo import vector_work
from .program import CoreGroup, Instr, Segment, Stage
from .tiling import (
    VecPart,
    VecSpec,
    burst_cycles,
    cdiv,
    gm_read,
    gm_write,
    vector_scalar_stage,
)


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


#: ScatterPaKvCache: the bytes of a 32-byte DataCopy block, an NZ cache column's piece
NZ_PIECE_BYTES = 32
#: ScatterPaKvCache: UB bytes its tiling keeps back from the full-load test
SCATTER_UB_RESERVE = 1024


def _scatter_tile(chip, pairs: list[tuple[Instr, Instr]], slots: int) -> tuple[Stage, ...]:
    """One ScatterPaKvCache tile: the queue work on the scalar unit, the loads, the stores."""
    ub = sum(load.nbytes for load, _ in pairs)
    return (vector_scalar_stage(chip, 2 * len(pairs), 2 * len(pairs), 0),
            Stage("MTE2", tuple(p[0] for p in pairs), out_bufs=(("UB", ub),), slots=slots),
            Stage("MTE3", tuple(p[1] for p in pairs)))


def _token_segments(chip, rows: list[int], copies) -> tuple[list[Segment], str]:
    """One token's tiles and their mode: key and value within the UB less 1 KB (fully load),
    a tile for the key and one for the value, each in its own queue of depth 1 (two
    TQueBind), so the next token's key load waits only for this token's key store: two
    handoff slots taken in turn; else chunks of half the UB, double-buffered, the key's then
    the value's. `copies(nbytes, src)` gives the load and store of `nbytes` of input `src`
    (0: key, 1: value)."""
    if sum(rows) <= chip.ub_bytes - SCATTER_UB_RESERVE:
        return ([Segment(_scatter_tile(chip, [copies(rows[src], src)], 2), 1)
                 for src in (0, 1)],
                "fully load: the key and the value each in a queue of depth 1")
    chunk = chip.ub_bytes // 2 // NZ_PIECE_BYTES * NZ_PIECE_BYTES
    token = []
    for src, nbytes in enumerate(rows):
        full, tail = divmod(nbytes, chunk)
        if full:
            token.append(Segment(_scatter_tile(chip, [copies(chunk, src)], 2), full))
        if tail:
            token.append(Segment(_scatter_tile(chip, [copies(tail, src)], 2), 1))
    return token, f"not fully load: chunks of {chunk} B, double-buffered"


def lower_paged_cache_scatter(low: Lowering, node: Node) -> None:
    """ScatterPaKvCache as CANN's Ascend C kernel runs it on the A2 (ops-transformer
    attention/scatter_pa_kv_cache: op_host/scatter_pa_kv_cache_tiling.cpp, op_kernel/
    scatter_pa_kv_cache_normal_nz_fully_load.h and _not_fully_load.h): tokens in blocks of
    ceil(T / cores) per core (usedCoreNum = ceil(T / blockFactor), the last core the rest);
    per token the scalar unit reads the slot (GetValue; not charged beyond each tile's queue
    work), then the token's key and value are each copied GM -> UB in one contiguous
    DataCopy and UB -> GM into the cache. A PA_NZ cache
    takes each as H * itemsize / 32 bursts of 32 bytes at the block-size stride, paced by the
    chip's scattered-write burst cost (`burst_cycles`); a Norm (ND) cache one contiguous
    row. Key and value together within the UB (less 1 KB): a tile each, in queues of depth 1
    (fully load, two TQueBind); otherwise chunks of half the UB, double-buffered, the key's
    then the value's. Every token is timed; a negative slot, which the kernel skips, is not
    known before the run."""
    chip = low.chip
    key, k_cache, slots, value, v_cache = node.inputs[:5]
    key, value = ensure(low, key, ND), ensure(low, value, ND)
    kv, vv = low.value(key), low.value(value)
    tokens = max(kv.shape[0], 1)
    rows = [kv.numel // tokens * itemsize(kv.dtype), vv.numel // tokens * itemsize(vv.dtype)]
    nz = node.attrs.get("cache_mode") == "PA_NZ"
    factor = cdiv(tokens, low.vector_cores())
    used = cdiv(tokens, factor)
    per_burst = burst_cycles(chip, used) if nz else 0.0
    through = low.through(list(node.outputs), [ND, ND])
    misses = [low.miss(key, tokens * rows[0]), low.miss(value, tokens * rows[1])]

    def copies(nbytes: int, src: int) -> tuple[Instr, Instr]:
        bursts = nbytes // NZ_PIECE_BYTES if nz else 0
        return (gm_read(chip, "MTE2", "UB", nbytes, misses[src]),
                gm_write(chip, "MTE3", "UB", nbytes, through, bursts=bursts,
                         per_burst=per_burst))

    token, mode = _token_segments(chip, rows, copies)
    groups, core = [], 0
    for k, ncores in ((factor, used - 1), (tokens - factor * (used - 1), 1)):
        if ncores:
            groups.append(CoreGroup(tuple(range(core, core + ncores)), tuple(token * k)))
            core += ncores
    bursts = f"{rows[0] // NZ_PIECE_BYTES} + {rows[1] // NZ_PIECE_BYTES} bursts of 32 B, " \
             f"{per_burst:.1f} cycles each" if nz else "one contiguous row each"
    low.add_task(TaskSpec(
        node.name, node.op_type, low.vector_task_type(), [low.vector_phase(groups)],
        [key, k_cache, slots, value, v_cache], list(node.outputs), [ND] * 5, [ND, ND], 0,
        [f"{tokens} token(s) over {used} core(s), up to {factor} a core; {mode}",
         f"per token: key {rows[0]} B and value {rows[1]} B in, out to the "
         f"{node.attrs.get('cache_mode')} cache as {bursts}; in place"]))


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"none": lower_view, "cache_append": lower_cache_append,
             "trans_data": lower_trans_data, "paged_cache_scatter": lower_paged_cache_scatter}

__all__ = ["ensure", "lower_view", "lower_cache_append", "lower_paged_cache_scatter",
           "LOWERINGS"]
