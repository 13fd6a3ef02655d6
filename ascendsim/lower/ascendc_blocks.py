"""Block counts of Ascend C kernels whose tiling picks its own core count.

On the chips whose built-in vector kernels are Ascend C (no `chip.vector_split_bytes`: the
910B), a lone vector task spreads over as many cores as its GM traffic asks for
(`tiling.split_cores`). Some kernels' host tiling decides the block dim itself, and for small
inputs it can use far fewer cores; `ASCENDC_BLOCKS` holds those rules, one per op type.

SwiGlu (ops-nn activation/swi_glu/op_host/swi_glu_tiling.cpp, `GluSingleTilingCalculator`):
the input is a [rows, 2 * cols] matrix (rows: the dims before `dim`, cols: half of the rest).
The UB holds `max_tile` elements per buffer set (UB / (buffers x 3 queues x dtype size +
working fp32 buffers: 2 for 2-byte dtypes, 1 for fp32), rounded down to a 32-byte block).
A base block of base_rows x base_cols is searched: base_cols starts at the whole row (at most
`max_tile`, or cut to whole 512-byte L2 lines when the row does not fit) and shrinks by one
L2 line at a time, base_rows filling the rest of the tile (at most 4095, DataCopy's block
count); a candidate is kept when it uses more cores (min(tiles, cores)), then fewer tiles,
then larger blocks. With two buffers giving two tiles per core, one buffer is tried and kept
if that gives one tile per core on at least as many cores. A [2, 64, 512] fp32 input (128
rows of 256) gets blocks of 54 x 128: 6 tiles on 6 cores, as compiler-team-ru/pyasc
examples/07_swiglu/README.md measures for torch_npu ("torch_npu 仅 6 核") on a 910B4.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from ..ir.tensor import Value, itemsize

#: DataCopy limits the tiling respects (swi_glu_tiling.cpp): at most 4095 blocks per copy,
#: a block length or stride of at most 65535 (32-byte units when aligned, else bytes)
MAX_BLOCK_COUNT = 4095
MAX_BLOCK_LEN = 65535
#: the UB's 32-byte block and the L2's 512-byte line (the tiling's alignment units)
UB_BLOCK_BYTES = 32
L2_LINE_BYTES = 512
#: the SwiGlu kernel's queues (a, b, out) and its fp32 working buffers per element
SWIGLU_QUEUES = 3


def _align_down(n: int, unit: int) -> int:
    return 0 if unit == 0 or n < unit else n // unit * unit


def _align_up(n: int, unit: int) -> int:
    return 0 if unit == 0 else -(-n // unit) * unit


def _swiglu_search(rows: int, cols: int, size: int, max_tile: int,
                   cores: int) -> tuple[int, int] | None:
    """The SwiGlu tiling's best base block for one buffer count: (cores used, tiles per
    core), or None when no base block is valid."""
    ub_min, line = UB_BLOCK_BYTES // size, L2_LINE_BYTES // size
    aligned = cols % ub_min == 0

    def single_row(c: int) -> bool:   # the stride between rows exceeds DataCopy's limit
        stride = cols * 2 - c
        return stride > MAX_BLOCK_LEN * ub_min if aligned else stride * size > MAX_BLOCK_LEN

    best: tuple[int, int, int, int] | None = None     # (used, -tiles, base size, base tiles)

    def save(r: int, c: int) -> None:
        nonlocal best
        tiles = -(-rows // r) * -(-cols // c)
        cand = (min(tiles, cores), -tiles, r * c, (rows // r) * (cols // c))
        if best is None or cand > best:
            best = cand

    up = min(cols, max_tile, MAX_BLOCK_LEN if aligned else MAX_BLOCK_LEN // size)
    col = _align_down(up, line) if line < up < cols else up
    row_cap = min(rows, MAX_BLOCK_COUNT)
    if single_row(col):
        save(1, col)
    else:
        while True:
            r = min(max_tile // max(_align_up(col, ub_min), 1), row_cap)
            if r < 1 or (r > 1 and single_row(col)):
                break
            if not (r > 1 and single_row(cols % col)):
                save(r, col)
            if col <= line or r >= row_cap:
                break
            col = col - line if col % line == 0 else _align_down(col, line)
    if best is None:
        return None
    used, tiles = best[0], -best[1]
    return used, -(-tiles // used)


def swiglu_blocks(x: Value, attrs: Mapping[str, Any], ub_bytes: int, cores: int) -> int:
    """Cores CANN's SwiGlu tiling uses for input `x` (module note)."""
    shape = [int(d) for d in x.shape]
    split = int(attrs.get("dim", -1)) % len(shape)
    rows, cols = math.prod(shape[:split]), math.prod(shape[split:]) // 2
    size = itemsize(x.dtype)
    tbuf = 1 if size == 4 else 2
    ub_min = UB_BLOCK_BYTES // size

    def search(buffers: int) -> tuple[int, int] | None:
        max_tile = _align_down(ub_bytes // (buffers * SWIGLU_QUEUES * size + tbuf * 4), ub_min)
        return _swiglu_search(rows, cols, size, max_tile, cores) if max_tile else None

    double = search(2)
    if double is None:
        return cores
    if double[1] == 2:
        single = search(1)
        if single is not None and single[1] == 1 and single[0] >= double[0]:
            return single[0]
    return double[0]


#: op type -> its Ascend C tiling's block count: (input value, attrs, UB bytes, cores) -> int
ASCENDC_BLOCKS: dict[str, Callable[[Value, Mapping[str, Any], int, int], int]] = {
    "SwiGlu": swiglu_blocks,
}

__all__ = ["ASCENDC_BLOCKS", "swiglu_blocks"]
