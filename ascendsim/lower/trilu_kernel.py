"""The A2 / A3 Tril / Triu kernel: CANN's TIK Trilu, row by row.

On the A2 / A3 the op exists only as a TIK kernel (impl/dynamic/tril.py and triu.py call
`Trilu` of impl/dynamic/trilu.py; no static impl/tril.py; public copy leideng/CANN-8.1.RC1 at
4332a01), so a jit build runs the same kernel as a binary one. What the model takes from it:

- Blocks. `Trilu.__init__` reads `available_aicore_num = tik.Dprofile().get_aicore_num()`
  into the compile info; the kernel loops `for_range(0, used_core_num, block_num=
  used_core_num)` over tasks of whole rows, the run-time tiling setting `used_core_num` and the
  rows a task holds (`elt_num_per_core`). The AI Core count is the chip's `ai_cores` (the
  ini's cube_core_cnt: 24 on the 910B1), not its 48 vector cores. The tiling itself
  (op_tiling, compiled) is not public: the model binds whole rows to min(rows, ai_cores)
  blocks, ceil(rows / blocks) a block (`tiling.split_blocked`).
- One buffer. TILING_MODE_NORMAL (a row of at least 32 bytes that fits the UB less its
  16 KB reserve) zeroes one UB tensor of the task's rows (`__init_zero`, vector_dup), moves
  each row's kept part into it and stores the whole tensor once (`_execute_normal`): the
  UB holds the task's elements once (`VecSpec.ub_elem_bytes` = the element size), no
  double buffering, and only the kept elements are read.
- Row moves one after another. Per row `__move_row` first copies one 32-byte block of that
  tensor to a backup tensor (a UB -> UB data_move), then moves the row's whole 32-byte blocks
  (data_move, when there is one) and its tail (data_move_pad, when the row's end is not
  block-aligned) from GM; the next row's backup copy reads the tensor those moves write, at an
  offset held in a scalar, so TIK's synchronisation makes it wait for them, and the next
  row's moves wait for the copy: each row's one or two GM -> UB moves pay their latency one
  after another (`VecSpec.moves`; the backup copies' own vector cycles are not counted).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from ..ir.tensor import Value, itemsize
from .dynamic_tiling import DynamicSplit
from .seq_types import A2_A3_CHIPS
from .tiling import VecSpec

#: op types run by the TIK Trilu kernel on the A2 / A3
TRILU_OPS = frozenset({"Trilu"})
#: trilu.py Constant.UB_PRESERVED: UB bytes kept back from the kernel's tensors
UB_PRESERVED = 16 * 1024
#: bytes of the block a row's aligned move counts in (Constant.BYTES_PER_BLOCK)
BLOCK_BYTES = 32


def _diagonal(low, node) -> int:
    """The node's diagonal: its optional `k` input when constant, else 0."""
    name = node.inputs[1] if len(node.inputs) > 1 else ""
    k = low.const_value(name) if name else None
    return int(k.reshape(-1)[0]) if k is not None and k.size else 0


def kept(row: int, cols: int, diag: int, upper: bool) -> tuple[int, int]:
    """(elements moved, offset of the first one) of row `row` of a [R, cols] matrix, as
    `_execute_normal` computes move_row_num: Tril keeps columns 0 .. row + diag, Triu
    columns row + diag .. cols - 1."""
    if upper:
        start = max(0, row + diag)
        return max(0, cols - start), min(start, cols)
    return max(0, min(cols, row + diag + 1)), 0


@lru_cache(maxsize=64)
def row_moves(cols: int, rows: int, diag: int, upper: bool, item: int) -> tuple[int, int]:
    """(GM -> UB moves, bytes moved) over the `rows` rows of one matrix: per row with a kept
    part one data_move of its whole 32-byte blocks (if any) and one data_move_pad of the rest
    (if any), counted from the 32-byte block its first kept element falls in. Cached: the
    split and the spec of one node both ask (`trilu_path`), a row at a time in Python."""
    per_block = max(1, BLOCK_BYTES // item)
    moves = nbytes = 0
    for r in range(rows):
        num, off = kept(r, cols, diag, upper)
        if num <= 0:
            continue
        lead = (r * cols + off) % per_block
        total = num + lead
        moves += (total // per_block > 0) + (total % per_block > 0)
        nbytes += total * item
    return moves, nbytes


def trilu_path(low, parts: list, ins: Sequence[Value]) -> tuple[int, int, int] | None:
    """(row length, kept-part bytes, row moves) of one matrix of a lone Trilu on an A2 / A3
    that takes TILING_MODE_NORMAL (module note), else None."""
    if (len(parts) != 1 or parts[0].op_type not in TRILU_OPS or not ins
            or low.chip.name not in A2_A3_CHIPS or len(ins[0].shape) < 2):
        return None
    shape = [int(d) for d in ins[0].shape]
    rows, cols, item = shape[-2], shape[-1], itemsize(ins[0].dtype)
    if not BLOCK_BYTES <= cols * item <= low.chip.ub_bytes - UB_PRESERVED:
        return None
    nd = parts[0]
    moves, nbytes = row_moves(cols, rows, _diagonal(low, nd), bool(nd.attrs.get("upper")), item)
    return cols, nbytes, moves


def trilu_split(low, parts: list, ins: Sequence[Value]) -> DynamicSplit | None:
    """The blocks of the TIK Trilu: whole rows on at most the chip's AI Core count."""
    path = trilu_path(low, parts, ins)
    if path is None:
        return None
    rows = ins[0].numel // path[0]
    blocks = min(rows, low.chip.ai_cores)
    return DynamicSplit(blocks, f"TIK Trilu: {rows} row(s) on {blocks} block(s) (at most the "
                                f"{low.chip.ai_cores} AI Cores, get_aicore_num)", "trilu")


def trilu_spec(low, parts: list, ins: Sequence[Value], spec: VecSpec) -> VecSpec:
    """`spec` as the TIK Trilu runs it (module note), unchanged for any other kernel: whole
    rows per block, one UB tensor of the task's elements (no separate output buffer, no
    vector stage), the kept part read in its row moves."""
    path = trilu_path(low, parts, ins)
    if path is None:
        return spec
    cols, nbytes, moves = path
    per_matrix = math.prod(int(d) for d in ins[0].shape[-2:])
    (_, miss), *rest = spec.inputs
    item = itemsize(ins[0].dtype)
    return replace(spec, row_elems=cols, buffers=1, ub_elem_bytes=float(item), dma_only=True,
                   tile_elems=(low.chip.ub_bytes - UB_PRESERVED) // item,
                   inputs=((nbytes / per_matrix, miss), *rest),
                   moves=(moves / per_matrix, *(0.0,) * len(rest)))
