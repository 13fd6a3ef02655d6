"""CANN's TIK Transpose on the A2 and A3 as kernel paths of lower/vector_seq.py
(opp/built-in/op_impl/ai_core/tbe/impl/dynamic/transpose.py of CANN 8.1.RC1, public copy
leideng/CANN-8.1.RC1 at 4332a01; ops-math's Ascend C Transpose is registered for the 950
only). A permutation that moves the last axis is reordered in UB by vnchwconv, by element
width: `_reorder_s7_b16` passes a 2-byte tile once; `_reorder_s7_b32` and `_reorder_s7_b64`
run a 4- or 8-byte tile as 2-byte lanes through vnchwconv (repeat = the tile's columns, 16
blocks of 32 B each: the whole tile; b64 in two halves), then eight UB-to-UB data_moves of the
columns in bursts of 2 or 4 blocks (the whole tile again), then vnchwconv again (the columns'
repeats, twice that for b64). One that keeps the last axis is strided DMA only (scenarios 9,
1 and 2: `_move_data_s9`, `_move_data_s1`, `_copy_common_s2`), loaded into and stored from one
UB buffer, so a unit's store ends before the next unit's load. Every path writes its output
one GM burst per kept row or tile column (`output_burst_elems`); where the kernel's data
overflows the L2, the bursts whose allocation must first write a dirty line back to HBM
(`l2_writeback_share`) pay the chip's burst figures (`lower.tiling.burst_cycles`), and so
does there every tile row and column off the 32-byte blocks (in the L2 those pace a core at
the per-core figures, `transpose_bursts`); 8-byte data
moves every tile row in and every tile column out as a DMA command of one burst
(`single_burst_moves`), and each of those bursts pays them, in the L2 or not. 1-byte data
takes the kernel's scenario 5 (`_reorder_s5`, int8 case): `_make_ualigned_be_head_of_block_b8_s5`
spreads the unit's bytes one to a 32-byte block with two b8 vnchwconv calls (low and high
halves; repeat = the unit's input blocks, 16 source blocks a repeat of which one holds the
unit), `_reorder_b8_s5_data_move` reorders those blocks with UB-to-UB data_moves of one-block
bursts, and `_make_block_head_be_contiguous_b8_s5` packs them back with two more calls
(repeat = the output blocks); the unit and its reordered copy take half the UB each
(`_get_half_ub`, `_swap`). The run-time tiling (op_tiling transpose.cc, dengguojie/
vue-element-admin at 01b8265) cuts a 2-D swap into units of 46 columns by 41-46 rows whose
rows and columns are each padded to whole blocks, so the calls' repeats exceed the bytes / 32
(`b8_spread_pad`, `b8_pack_pad`). vector_seq takes `TRANSPOSE_PATHS` into its PATHS; other chips
keep the registry's cost fields."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..ir.tensor import Value, itemsize
from .seq_types import A2_A3_CHIPS, OpSequence
from .seq_types import elem as _e
from .vector_rows import norm_perm


def _kept_axes(shape: Sequence[int], perm: Sequence[int]) -> list[int]:
    """The permutation's source axes in output order, size-1 axes dropped."""
    return [p for p in perm if shape[p] != 1]


def _reorders_last_axis(ins: Sequence[Value], attrs: dict, chip_name: str,
                        sizes: tuple[int, ...]) -> bool:
    """Whether the permutation of `ins[0]`, of an element size in `sizes`, moves the last axis
    once size-1 axes are dropped, on an A2 / A3 (where CANN's TIK Transpose runs)."""
    if chip_name not in A2_A3_CHIPS or not ins or itemsize(ins[0].dtype) not in sizes:
        return False
    kept = _kept_axes(ins[0].shape, norm_perm(attrs.get("perm"), len(ins[0].shape)))
    return len(kept) > 1 and kept[-1] != max(kept)


def _moves_last_axis(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's TIK Transpose on an A2 / A3 reorders the data in UB with vnchwconv: a
    2-, 4- or 8-byte dtype whose permutation, size-1 axes dropped, moves the last axis."""
    return _reorders_last_axis(ins, attrs, chip_name, (2, 4, 8))


def _byte_moves_last_axis(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's TIK Transpose on an A2 / A3 reorders 1-byte data by scenario 5 (module
    note): an int8 / uint8 / bool permutation that, size-1 axes dropped, moves the last axis."""
    return _reorders_last_axis(ins, attrs, chip_name, (1,))


def _keeps_last_axis(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's TIK Transpose on an A2 / A3 moves whole rows by strided DMA only: a
    permutation that, size-1 axes dropped, keeps the last axis and moves another."""
    if chip_name not in A2_A3_CHIPS or not ins:
        return False
    kept = _kept_axes(ins[0].shape, norm_perm(attrs.get("perm"), len(ins[0].shape)))
    return kept[-1:] == [max(kept, default=-1)] and kept != sorted(kept)


#: rows of the moved axis a vnchwconv tile writes per output burst (transpose.py ROW_UNIT,
#: the scenario 7 and 11 copy-out: one burst per tile column)
ROW_UNIT = 128


def output_burst_elems(shape: Sequence[int], perm: Sequence[int]) -> int:
    """Elements of the output's contiguous run the kernel writes as one GM burst: the trailing
    axes the permutation keeps in place (size-1 axes dropped) when it keeps the last axis
    (scenarios 9, 1 and 2 write a row a burst), else one tile column of up to `ROW_UNIT` rows
    of the axis that becomes the last."""
    kept = _kept_axes(shape, perm)
    if not kept:
        return 1
    if kept[-1] != max(kept):
        return max(min(ROW_UNIT, int(shape[kept[-1]])), 1)
    run = 1
    for i, p in enumerate(reversed(kept)):
        if p != max(kept) - i:
            break
        run *= int(shape[p])
    return run


def merged_transpose(shape: Sequence[int], perm: Sequence[int]
                     ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`shape` and `perm` of a transpose with its size-1 axes dropped and every run of axes
    that stays adjacent and in order merged into one (the form the TIK tiling decides on)."""
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    index = {a: i for i, a in enumerate(kept)}
    sizes = [int(shape[a]) for a in kept]
    runs: list[list[int]] = []
    for a in (index[a] for a in perm if shape[a] != 1):
        if runs and runs[-1][-1] + 1 == a:
            runs[-1].append(a)
        else:
            runs.append([a])
    order = sorted(range(len(runs)), key=lambda r: runs[r][0])
    merged = tuple(math.prod(sizes[a] for a in runs[r]) for r in order)
    return merged, tuple(order.index(r) for r in range(len(runs)))


#: Transpose, 8-byte data: the one scenario 7 model (`Model002_b64`) takes an [N, C, R] split
#: whose columns reach this many and whose rows reach this many per core
B64_MIN_COLS = 16
#: Transpose, 8-byte data: columns of a tile (`Model002_b64` maxCol: the vnchwconv tile's 256
#: halves over 4) and rows of a tile (maxRow)
B64_MAX_COL = 64
B64_MAX_ROW = 128
#: Transpose, 8-byte data: elements of a 32-byte block (`Split`, `SplitColByFactor`)
B64_BLOCK = 4


def transpose_ncrs(shape: Sequence[int], perm: Sequence[int]) -> list[tuple[int, int]]:
    """(column volume, row volume) of each [N, col, row] view the scenario 7 tiling weighs
    for a last-axis Transpose (op_tiling transpose.cc at 01b8265, `DispatchNCR`), size-1 axes
    dropped and adjacent axes merged first (`merged_transpose`): the columns are a run of the
    input's trailing axes (from axis i to the last, i >= 1), the rows the axes the output puts
    after the last of those columns; a view whose columns end the output has no rows and is
    skipped. In the order the tiling lists them (longest column run first)."""
    merged, order = merged_transpose(shape, perm)
    dim = len(merged)
    views = []
    for i in range(1, dim):
        last = max(order.index(a) for a in range(i, dim))
        if last >= dim - 1:
            continue
        cols = math.prod(merged[i:])
        rows = math.prod(merged[order[j]] for j in range(last + 1, dim))
        views.append((cols, rows))
    return views


def _b64_tiles(length: int, share: int, most: int) -> tuple[int, int]:
    """(tiles, elements moved) of an axis part of `share` elements cut into tiles of at most
    `most` (`SplitColByFactor` / `SplitRowByFactor`, not fat-to-thin): whole 32-byte blocks
    of the part in tiles of min(most, that), and where blocks are left a last tile stepped
    back onto a whole block (`backStepLeft` / `backStepUp`)."""
    whole = share - share % B64_BLOCK
    per = min(most, whole)
    loops = whole // per
    tail = share - loops * per + ((B64_BLOCK - share % B64_BLOCK) % B64_BLOCK)
    return loops + (tail > 0), loops * per + tail


def b64_transpose_moves(shape: Sequence[int], perm: Sequence[int], cores: int
                        ) -> tuple[int, int, int] | None:
    """(elements, tile-row loads, tile-column stores) of the busiest core of the A2's 8-byte
    TIK Transpose that moves the last axis, or None where scenario 7 does not take it (then
    the tiling falls back to scenario 5, not modelled here). For 8-byte data the tiling weighs
    one model, `Model002_b64` (op_tiling transpose.cc at 01b8265, `MakeNCRDecision`,
    fp16Times 4): the first view (`transpose_ncrs`) of at least B64_MIN_COLS columns and
    B64_MIN_COLS rows a core splits its rows over every core (`Split`: ceil(rows / cores)
    rounded up to a block); each core cuts its columns into tiles of B64_MAX_COL and its rows
    into tiles of B64_MAX_ROW. The kernel loads each tile row and stores each tile column as
    a command of its own (lower/transpose_paths.py `single_burst_moves`)."""
    view = next(((c, r) for c, r in transpose_ncrs(shape, perm)
                 if c >= B64_MIN_COLS and r >= B64_MIN_COLS * cores), None)
    if view is None:
        return None
    cols, rows = view
    share = math.ceil(math.ceil(rows / cores) / B64_BLOCK) * B64_BLOCK   # `Split`
    col_tiles, col_moved = _b64_tiles(cols, cols, B64_MAX_COL)
    row_tiles, _ = _b64_tiles(rows, share, B64_MAX_ROW)
    return share * cols, share * col_tiles, col_moved * row_tiles


def single_burst_moves(shape: Sequence[int], perm: Sequence[int], item: int, cores: int
                       ) -> tuple[float, float] | None:
    """(input elements, output elements) each one-burst DMA command of the A2's 8-byte
    Transpose moves on its busiest core, where the permutation moves the last axis; None for
    any other.

    The kernel sends 1-, 2- and 4-byte data through its pad loops, a tile's rows in and its
    columns out as a few `data_move_pad` commands of many bursts, and 8-byte data
    (`b8_times` == EPB8) through the plain loops: one `data_move` of one burst per tile row in
    (`_copy_in_major_col_major_row`) and one per tile column out
    (`_copy_out_major_col_major_row`), each after its scalar address chain (`_get_src_addr_s7`,
    `_update_tuple`; impl/dynamic/transpose.py, leideng/CANN-8.1.RC1 at 4332a01,
    `_major_col_process_s7`). The tiles are the run-time tiling's (`b64_transpose_moves` on
    `cores` cores): its rows are every axis the output puts after the tile's columns, so a
    tile column goes out as one run of up to B64_MAX_ROW rows however short the output's
    last axis. Where that tiling does not take the shape, a tile row of up to B64_MAX_COL
    elements and a tile column of the output's last axis (up to ROW_UNIT)."""
    kept = _kept_axes(shape, perm)
    if item != 8 or len(kept) < 2 or kept[-1] == max(kept):
        return None
    moves = b64_transpose_moves(shape, perm, cores)
    if moves is not None:
        elems, loads, stores = moves
        return elems / loads, elems / stores
    return (float(min(int(shape[max(kept)]), B64_MAX_COL)),
            float(output_burst_elems(shape, perm)))


def l2_writeback_share(in_bytes: float, out_bytes: float, l2_bytes: float) -> float:
    """Share of a kernel's output bursts that must wait for a dirty line's write-back to HBM:
    an LRU L2 that starts empty takes the first `l2_bytes` of the kernel's reads and writes
    into free lines; every later allocation evicts the oldest line, dirty (a written output
    line) in the output's share of the traffic, and a line whose dirty data must reach GM
    first (Ascend C best practices, "Setting a Proper L2 CacheMode": the old data is written
    back before the new data enters the L2) sends that burst's wait to HBM. 0 when the
    kernel's data fits the L2."""
    total = in_bytes + out_bytes
    if total <= l2_bytes or total <= 0:
        return 0.0
    return (1.0 - l2_bytes / total) * out_bytes / total


def transpose_bursts(l2_bytes: float, perm_attr, main: Value, outs: Sequence[Value], n: int,
                     cores: int, off_block: tuple[float, float] = (0.0, 0.0)) -> dict:
    """The VecSpec `bursts` / `out_bursts` of the A2's TIK Transpose of `main` into `outs`
    (`lower.vector.row_bursts` "transpose"; `n` task elements, `cores` vector cores): every
    one-burst DMA of 8-byte data (`single_burst_moves`), else one per output run
    (`output_burst_elems`) for the share whose line must first be written back to HBM
    (`l2_writeback_share`, `l2_bytes` of L2); every tile row in and tile column out that starts
    or ends inside a block (`off_block`: elements per input and per output burst, 0 for a side
    of whole blocks, `lower.dynamic_tiling.off_block_bursts`) pays a burst: where the data fit
    the L2 at the per-core burst figures (`core_paced_bursts`), past the L2, where those
    bursts reach HBM, at the chip's burst figures as the write-back bursts do (the written
    off-block columns include the write-back share's, so the larger count); {} otherwise."""
    shape = [int(d) for d in main.shape]
    perm = norm_perm(perm_attr, main.rank)
    single = single_burst_moves(shape, perm, itemsize(main.dtype), cores)
    if single is not None:
        return {"bursts": (main.numel / single[0] / n,), "out_bursts": main.numel / single[1] / n}
    in_bytes = main.numel * itemsize(main.dtype)
    out_bytes = sum(v.numel * itemsize(v.dtype) for v in outs)
    share = l2_writeback_share(in_bytes, out_bytes, l2_bytes)
    if share <= 0 and any(off_block):
        ins_b, out_b = (main.numel / e / n if e else 0.0 for e in off_block)
        return {"bursts": (ins_b,), "out_bursts": out_b, "core_paced_bursts": True}
    if share <= 0 or not main.rank:
        return {}
    written_back = main.numel / output_burst_elems(shape, perm) / n * share
    if any(off_block):
        ins_b, out_b = (main.numel / e / n if e else 0.0 for e in off_block)
        return {"bursts": (ins_b,), "out_bursts": max(out_b, written_back)}
    return {"out_bursts": written_back}


def _wide_moves_last_axis(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """`_moves_last_axis` for a 4- or 8-byte dtype (`TRANSPOSE_WIDE`)."""
    return _reorders_last_axis(ins, attrs, chip_name, (4, 8))


TRANSPOSE_NOTE = ("CANN's TIK Transpose on the A2 / A3 (impl/dynamic/transpose.py; ops-math's "
                  "Ascend C kernel is registered for the 950 only): each UB tile is reordered "
                  "by vnchwconv, 16 x 16 blocks at a time, half the UB in and half out, no "
                  "double buffering; in a binary build its core split and its run-time tiling "
                  "read into UB (lower/dynamic_tiling.py, chip tik_tiling_start_us)")
#: the reorder of a 4- or 8-byte tile (module note): two vnchwconv passes over its bytes and
#: one UB-to-UB copy, charged at the unary (vcopy) rate; pypto's A2/A3 pipe model (hicann/pypto
#: cost_model/simulation_ca/A2A3/model/pipe.cpp `CalcMovUbUb`) gives a cycle a burst, 2-4 times
#: that for these 64- and 128-byte bursts, small beside the two vnchwconv passes
TRANSPOSE_WIDE = (_e("vnchwconv", "transpose", 2.0), _e("data_move (UB->UB)", "unary"))

#: lanes of a b8 vnchwconv repeat (16 source blocks of 32 B), of which the scenario 5 unit
#: fills one: each call reads 16 bytes of UB per byte of the unit
B8_LANES = 16
#: UB bytes a byte of the unit takes in scenario 5: a 32-byte block
B8_BLOCK_BYTES = 32
#: UB bytes per byte of the unit: its block in each half of the UB
B8_UB_BYTES = 2 * B8_BLOCK_BYTES
#: Transpose, 1-byte data: the A2 / A3 vector core's UB in 32-byte blocks (the tiling's
#: `ubSize`; chip ub_bytes 196,608) and the KB its scenario 5 keeps back (transpose.h
#: UB_RESERVED_KB)
B8_UB_BLOCKS = 6144
B8_UB_RESERVED_KB = 4
#: Transpose, 1-byte data: steps `CalcLeftVol` tries below the square root (LOOP_FOR_UB_PADDING)
#: and times `CalcDstBorrowAxisIndex` may shorten the destination step (ELE_NUM_PER_BLOCK_B16)
_B8_VOL_TRIES = 10
_B8_STEP_CUTS = 16


def _b8_unit_side() -> int:
    """Rows = columns of the scenario 5 unit of a 1-byte Transpose that moves its last axis
    (op_tiling transpose.cc at 01b8265, `CalcLeftVol`): half the UB less the reserve, in
    blocks (`CalcVnchwconvPartialUbSize`: 3,008), each byte of the unit a block of its own;
    the largest side v at most the square root with v x align32(v) within that, less one."""
    room = (B8_UB_BLOCKS * B8_BLOCK_BYTES - B8_UB_RESERVED_KB * 1024) // B8_BLOCK_BYTES // 2
    for i in range(_B8_VOL_TRIES):
        vol = math.isqrt(room) - i
        if vol * math.ceil(vol / B8_BLOCK_BYTES) * B8_BLOCK_BYTES <= room:
            return max(vol - 1, 1)
    return 1


def _b8_units(length: int, step: int, cut_tail: bool) -> list[int]:
    """Sizes of the units one axis of `length` is cut into at `step` (`CalcSrcBorrowAxisIndex`:
    loops of the step and a tail); `cut_tail`: the destination axis's rule
    (`CalcDstBorrowAxisIndex`), which shortens the step while the tail is a part of a block."""
    loop, tail = length // step, length % step
    for _ in range(_B8_STEP_CUTS if cut_tail else 0):
        if not 0 < tail < B8_BLOCK_BYTES or step <= 1:
            break
        step -= 1
        loop, tail = length // step, length % step
    return [step] * loop + ([tail] if tail else [])


def _b8_swap(ins: Sequence[Value], attrs: dict) -> tuple[int, int] | None:
    """(rows, columns) of a 1-byte Transpose that is a 2-D swap once size-1 axes are dropped
    and runs kept in order are merged, both sides at least the unit's; None for any other
    (their borrowed axes are not modelled: no padding charged)."""
    if not ins or not ins[0].rank:
        return None
    merged, order = merged_transpose([int(d) for d in ins[0].shape],
                                     norm_perm(attrs.get("perm"), ins[0].rank))
    side = _b8_unit_side()
    if order != (1, 0) or min(merged) < side:
        return None
    return merged[0], merged[1]


def b8_spread_pad(ins: Sequence[Value], attrs: dict) -> float:
    """Repeats of scenario 5's spread calls over the input's bytes / 32: a call's repeat count
    is the unit's input blocks (`_make_ualigned_be_head_of_block_b8_s5`), every unit row of
    `step` columns copied in as a burst of whole blocks (`CalcBorrowBurstLen`), so an [R, C]
    swap spreads R x the blocks of its column units (module note)."""
    return _b8_padded_share(ins, attrs, 1, cut_tail=False)


def b8_pack_pad(ins: Sequence[Value], attrs: dict) -> float:
    """Repeats of scenario 5's pack calls over the output's bytes / 32: the unit's output
    blocks (`_make_block_head_be_contiguous_b8_s5`), every unit column of the destination
    step in whole blocks, so an [R, C] swap packs C x the blocks of its row units."""
    return _b8_padded_share(ins, attrs, 0, cut_tail=True)


def _b8_padded_share(ins: Sequence[Value], attrs: dict, side: int, cut_tail: bool) -> float:
    """Whole 32-byte blocks of the units along side `side` (0 rows, 1 columns) of a 1-byte
    2-D swap over that side's bytes; 1.0 where the swap is not modelled (`_b8_swap`)."""
    swap = _b8_swap(ins, attrs)
    if swap is None:
        return 1.0
    units = _b8_units(swap[side], _b8_unit_side(), cut_tail=cut_tail)
    return sum(math.ceil(u / B8_BLOCK_BYTES) for u in units) * B8_BLOCK_BYTES / swap[side]


#: the int8 reorder of scenario 5 (module note): two b8 vnchwconv calls to spread and two to
#: pack at `transpose_b8`, each reading B8_LANES bytes per byte of the unit, their repeats in
#: whole blocks of the unit's rows and columns (`b8_spread_pad`, `b8_pack_pad`), and the
#: UB-to-UB copy of one 32-byte block per byte, charged at the unary rate as TRANSPOSE_WIDE's
TRANSPOSE_BYTE = (_e("vnchwconv (b8, spread)", "transpose_b8", 2.0, spread=B8_LANES,
                     pad=b8_spread_pad),
                  _e("vnchwconv (b8, pack)", "transpose_b8", 2.0, spread=B8_LANES,
                     pad=b8_pack_pad),
                  _e("data_move (UB->UB, a block per byte)", "unary", spread=B8_BLOCK_BYTES))

TRANSPOSE_PATHS = (
    (_keeps_last_axis, OpSequence(
        (), buffers=1, row_bursts="transpose",
        note="CANN's TIK Transpose on the A2 / A3 keeping the last axis (scenarios 9, 1, 2: "
        "_move_data_s9 / _s1 / _copy_common_s2): strided DMA only, one UB buffer, each "
        "kept row one GM burst")),
    (_byte_moves_last_axis, OpSequence(
        TRANSPOSE_BYTE, buffers=1, row_bursts="transpose",
        ub_bytes=lambda dtype, slots: B8_UB_BYTES,
        note=TRANSPOSE_NOTE + "; 1-byte data by scenario 5: each byte spread to a 32-byte "
        "block by b8 vnchwconv, the blocks reordered by UB-to-UB moves and packed back "
        "(_reorder_s5, int8 case)")),
    (_wide_moves_last_axis, OpSequence(
        TRANSPOSE_WIDE, buffers=1, row_bursts="transpose",
        note=TRANSPOSE_NOTE + "; 4- and 8-byte data reordered as 2-byte lanes in two "
        "vnchwconv passes with a UB-to-UB copy between them "
        "(_reorder_s7_b32 / _b64)")),
    (_moves_last_axis, OpSequence((_e("vnchwconv", "transpose"),), buffers=1,
                                  row_bursts="transpose", note=TRANSPOSE_NOTE)),
)

__all__ = ["B64_MAX_COL", "B8_BLOCK_BYTES", "B8_LANES", "B8_UB_BYTES",
           "ROW_UNIT", "TRANSPOSE_BYTE", "TRANSPOSE_NOTE", "TRANSPOSE_PATHS", "TRANSPOSE_WIDE",
           "b64_transpose_moves", "l2_writeback_share", "merged_transpose", "output_burst_elems",
           "single_burst_moves", "transpose_bursts", "transpose_ncrs"]
