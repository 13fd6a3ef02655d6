"""CANN's GLU tiling on the A2 / A3: how the Ascend C SwiGlu kernel cuts its rows into tiles.

What the source gives (ops-nn activation/swi_glu, read in jbgztxdy/ops-nn at 732de1d):
op_host/swi_glu_tiling.cpp `GluSingleTilingCalculator` sees the input as `rows` x (2 x `cols`)
(the axes before `dim` and the two halves after it). A tile is `base_rows` x `base_cols` of
each half, at most `maxTileLen` = UB / (bufferNum x 3 queues x the dtype's bytes + the fp32
working buffers: 2 for 2-byte dtypes, 1 for fp32) elements, each row padded to 32 bytes in UB
(`GetBufferNumAndDataLenPerUB`, `CalcUbMaxTileLen`). `CalcOptBaseShape` starts from the
whole half row (at most `maxTileLen`, and when a row needs several tiles, a multiple of 512
bytes), takes as many rows as fit, then narrows `base_cols` by 512 bytes at a time while the
rows do not cover the tensor, and keeps the candidate that uses the most cores, then fewest
tiles, then the largest tile (`SaveOptBaseShape`). With two slots per queue first; where that
leaves two tiles per core and one slot per queue gives one tile per core on as many cores, the
kernel runs single-buffered (`CalcTiling`). The block dim is min(tiles, cores). The kernel
(op_kernel/glu_tiling_kernel.hpp `SWIGLU_SINGLE_PROCESS`) hands tile t to core t mod blocks,
tiles numbered row-tile-major, and moves each half of a tile as one DMA of `base_rows` bursts
(`CaclOneTileCopyParam`). Not ported: the DMA stride limits that force one row per tile
(`MustBeSingleBaseRowLen`, half rows over 2 MB) and the 4095-row cap, which no shape here
reaches."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from ..ir.tensor import Value, itemsize
from .seq_types import A2_A3_CHIPS, OpSequence
from .seq_types import elem as _e

#: bytes of the L2 line a multi-tile row's base column count is a multiple of (L2_CACHE_LINE_SIZE)
PACK_BYTES = 512
#: bytes of the UB block each tile row is padded to (UB_MIN_BLOCK_SIZE)
UB_BLOCK = 32


class GluTiling(NamedTuple):
    """The tiling `glu_tiling` picks: the base tile, the slots per queue, tiles and cores."""

    base_rows: int
    base_cols: int
    buffers: int
    tiles: int
    cores: int


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _search(rows: int, cols: int, item: int, cores: int, ub_bytes: int,
            buffers: int, grad: bool = False) -> GluTiling:
    """`CalcOptTiling` with `buffers` slots per queue (module note); `grad`: the backward
    kernel's queues and working buffers (`glu_pair_bytes`)."""
    per = glu_pair_bytes(item, buffers, grad)
    block = UB_BLOCK // item
    pack = PACK_BYTES // item
    max_tile = max(block, ub_bytes // per // block * block)
    base_cols = min(cols, max_tile)
    if cols > base_cols > pack:
        base_cols -= base_cols % pack
    best: tuple = ()
    while True:
        base_rows = max(1, min(max_tile // (_cdiv(base_cols, block) * block), rows))
        tiles = _cdiv(rows, base_rows) * _cdiv(cols, base_cols)
        used = min(tiles, cores)
        key = (used, -tiles, base_rows * base_cols)
        if not best or key > best[0]:
            best = (key, GluTiling(base_rows, base_cols, buffers, tiles, used))
        if base_cols <= pack or base_rows >= rows:
            return best[1]
        base_cols = base_cols - pack if base_cols % pack == 0 else base_cols // pack * pack


def glu_tiling(rows: int, cols: int, item: int, cores: int, ub_bytes: int,
               grad: bool = False) -> GluTiling:
    """The tiling of a GLU kernel over `rows` x 2 `cols` elements of `item` bytes on `cores`
    vector cores of `ub_bytes` of UB (module note); `grad`: SwiGluGrad's (GLU_FLAG
    SWIGLU_GRAD_SINGLE: five queues, `glu_pair_bytes`)."""
    double = _search(rows, cols, item, cores, ub_bytes, 2, grad)
    if _cdiv(double.tiles, double.cores) == 2:
        single = _search(rows, cols, item, cores, ub_bytes, 1, grad)
        if _cdiv(single.tiles, single.cores) == 1 and single.cores >= double.cores:
            return single
    return double


def glu_shares(t: GluTiling, rows: int, cols: int, blocks: int
               ) -> tuple[tuple[int, int, int], ...]:
    """(task elements per core, cores, tiles per core) of tiling `t` run on `blocks` cores,
    tile k on core k mod blocks; a task element is one element of the input (both halves)."""
    col_tiles = _cdiv(cols, t.base_cols)
    load = [[0, 0] for _ in range(blocks)]
    for k in range(t.tiles):
        r, c = divmod(k, col_tiles)
        height = min(t.base_rows, rows - r * t.base_rows)
        width = min(t.base_cols, cols - c * t.base_cols)
        load[k % blocks][0] += 2 * height * width
        load[k % blocks][1] += 1
    groups = Counter(tuple(x) for x in load if x[1])
    return tuple(sorted(((e, n, k) for (e, k), n in groups.items()), reverse=True))


#: (queues, fp32 working buffers for a 2-byte dtype, for fp32) of the forward and backward
#: GLU kernels (swi_glu_tiling.cpp: XXGLU_TQUE_NUM 3, SWIGLU_TBUF_NUM_BF16 / _HALF 2, _FLOAT
#: 1; XXGLU_BW_TQUE_NUM 5 (a, b, dy in; the two halves of dx out), SWIGLU_BW_TBUF_NUM_BF16 /
#: _HALF 5, _FLOAT 2)
GLU_BUFFERS = {False: (3, 2, 1), True: (5, 5, 2)}


def glu_pair_bytes(item: int, buffers: int, grad: bool = False) -> int:
    """UB bytes per (a, b) pair of a GLU tile (`GetBufferNumAndDataLenPerUB`): `buffers` slots
    of each queue of `item`-byte elements plus the fp32 working buffers (`GLU_BUFFERS`)."""
    queues, narrow, wide = GLU_BUFFERS[grad]
    return buffers * queues * item + (narrow if item == 2 else wide) * 4


def swiglu_grad_ub(dtype: str, buffers: int = 2) -> float:
    """UB bytes per output element of CANN's SwiGluGrad tile: its output dx holds both halves,
    two elements a pair (`glu_pair_bytes` with the backward kernel's buffers: 40 B a pair
    for a 2-byte dtype with two slots, so 20 a dx element)."""
    return glu_pair_bytes(itemsize(dtype), buffers, grad=True) / 2


def swiglu_ub(dtype: str, buffers: int = 2) -> float:
    """UB bytes per output element of CANN's SwiGlu tile (swi_glu_tiling.cpp
    GetBufferNumAndDataLenPerUB: bufferNum (DEFAULT_BUFFER_NUM 2, or 1 where the tiling turns
    double buffering off) x XXGLU_TQUE_NUM 3 queues (a, b, out) x sizeof(dtype), plus
    SWIGLU_TBUF_NUM fp32 working buffers, 2 for fp16/bf16 and 1 for fp32; maxTileLen = UB /
    that): 20 B for a 2-byte dtype, 28 B for fp32, with two slots."""
    return glu_pair_bytes(itemsize(dtype), buffers)


def _a2_fp32(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's Ascend C SwiGlu runs its float32 compute: an A2 / A3 chip, fp32 x."""
    return chip_name in A2_A3_CHIPS and bool(ins) and ins[0].dtype == "float32"


#: the float32 compute (op_kernel/swi_glu_impl.hpp `SwigluVector::Compute`, tiling key 0):
#: Muls(a, -1), Exp, Adds 1, Div of a tile of ones (filled once by Duplicate in
#: InitUbBuffer) by it, Mul by a, Mul by b, each over the tile's output elements (half the
#: task's input elements) behind a PipeBarrier; the 2-byte path (swi_glu_bf16.hpp) divides a
#: itself, one Mul fewer, and is vector_seq's SwiGlu row
_SWIGLU_FP32 = OpSequence(
    (_e("vmuls", "unary", 0.5), _e("vexp", "exp", 0.5), _e("vadds", "unary", 0.5),
     _e("vdiv", "div", 0.5), _e("vmul", "binary", 0.5), _e("vmul", "binary", 0.5)),
    fp32=True, ub_bytes=swiglu_ub, row_bursts="halves",
    note="CANN's Ascend C SwiGlu, float32 (swi_glu_impl.hpp): 1 / (1 + exp(-a)) from a tile "
         "of ones, times a, times b")

SWIGLU_PATHS = ((_a2_fp32, _SWIGLU_FP32),)


def _a2_narrow_grad(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's Ascend C SwiGluGrad runs its 2-byte compute (swi_glu_grad.cpp tiling
    keys 1 and 27, `SwiGluGradBF16`): an A2 / A3 chip, fp16 or bf16 x."""
    return (chip_name in A2_A3_CHIPS and len(ins) > 1
            and ins[1].dtype in ("float16", "bfloat16"))


#: the 2-byte compute (op_kernel/swi_glu_grad_bf16.hpp `Compute`, `ComputeSigLocal`,
#: `ComputeGradN`; jbgztxdy/ops-nn at 732de1d), twenty calls over a tile's pairs (half the
#: task's elements, a task element being one of x's), a PipeBarrier after most: Cast a;
#: Muls, Exp, Adds, Duplicate of ones, Div (the sigmoid); Mul by a; Cast dy, Mul, Cast out
#: (db); Muls, Adds, Mul, Mul, Muls, Add; Cast b, Mul by dy, Mul by b, Cast out (da). The
#: fp32 flag adds the Casts: dy and x (a and b) up, dx (both halves) down
_SWIGLU_GRAD_NARROW = OpSequence(
    (_e("vmuls", "unary", 0.5), _e("vexp", "exp", 0.5),
     _e("vadds", "unary", 0.5), _e("vdup", "unary", 0.5), _e("vdiv", "div", 0.5),
     _e("vmul", "binary", 0.5), _e("vmul", "binary", 0.5), _e("vmuls", "unary", 1.0),
     _e("vadds", "unary", 0.5), _e("vmul", "binary", 1.0), _e("vadd", "binary", 0.5),
     _e("vmul", "binary", 1.0)),
    fp32=True, ub_bytes=swiglu_grad_ub, row_bursts="halves",
    note="CANN's Ascend C SwiGluGrad, 2-byte (swi_glu_grad_bf16.hpp): sigmoid by Exp and "
         "Div, the two halves' gradients in fp32, five Casts a tile; GLU tiling of five "
         "queues")

SWIGLU_GRAD_PATHS = ((_a2_narrow_grad, _SWIGLU_GRAD_NARROW),)
