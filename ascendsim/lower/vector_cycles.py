"""Cycles of resolved vector instruction-sequence parts (lower/vector_seq.py module note:
repeats and masks, the reduce tree, the step shapes): `SeqPart`, one resolved instruction of a
task; `part_cycles`, its V-pipe cycles on a tile; `part_steps`, the instructions it issues
there, each waiting out the one before (a LOOP part one per row of the tile, a COLUMNS part
one per 256-byte column block of the row)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .seq_types import COLUMNS, LOOP, REDUCE, halving_levels
from .seq_types import entire_reduce_repeats as _entire_repeats

#: bytes one vector repeat works on (S: Ascend C API reference, RepeatReduceSum/WholeReduceSum:
#: "the vector unit reads 256 contiguous bytes per iteration"; HC31/VENG 2048-bit vector)
REPEAT_BYTES = 256


@dataclass(frozen=True)
class SeqPart:
    """One resolved instruction of a task: `elems` elements (ELEM), input elements (REDUCE,
    COLUMNS) or rows (ROW) per element of the task, in a dtype of `item` bytes; REDUCE and
    COLUMNS rows hold `row` elements. `count` instructions of this kind."""

    instr: str
    vclass: str
    dtype: str
    item: int
    shape: str
    elems: float
    row: int = 0
    count: float = 1.0
    index: bool = False
    entire: bool = False
    halving: bool = False


def repeat_cycles(chip: Any, vclass: str, dtype: str) -> float:
    """Cycles one repeat (256 B) of an instruction class takes at its steady rate."""
    return REPEAT_BYTES / chip.vector_rate(vclass, dtype)


def instr_cycles(chip: Any, vclass: str, dtype: str, elems: float, item: int) -> float:
    """One instruction over `elems` elements of `item` bytes: its repeats (a partial repeat
    is a masked full one) at the class rate, at least `chip.vector_min_cycles`."""
    if elems <= 0:
        return 0.0
    reps = math.ceil(elems * item / REPEAT_BYTES - 1e-9)
    return max(chip.vector_min_cycles, reps * repeat_cycles(chip, vclass, dtype))


def reduce_row_cycles(chip: Any, vclass: str, dtype: str, row: int, item: int,
                      index: bool = False, entire: bool = False) -> float:
    """Cycles of the reduce tree of one row of `row` elements (module note): the cheaper of
    fold-then-whole-reduce and whole-reduce-then-final-pass; an `index` reduction only the
    latter, over (value, index) pairs; an `entire` one that, level by level (module note)."""
    k = max(1, math.ceil(row * item / REPEAT_BYTES - 1e-9))
    whole = repeat_cycles(chip, vclass, dtype)
    if k == 1:
        return whole
    if entire:
        pairs = 2 if vclass == "reduce_max" else 1      # vcmax / vcmin partials: pairs
        return _entire_repeats(k, REPEAT_BYTES // item // pairs) * whole
    if index:
        return k * whole + math.ceil(2 * k * item / REPEAT_BYTES) * whole
    fold = (k - 1) * repeat_cycles(chip, "binary", dtype) + whole
    twice = k * whole + math.ceil(k * item / REPEAT_BYTES) * whole
    return min(fold, twice)


def part_steps(part: SeqPart, tile_elems: float) -> int:
    """Instructions one resolved part issues on a tile of `tile_elems` task elements: its
    count, that many per row of the tile for a LOOP part, per 256-byte column block of the
    row for a COLUMNS part, per halving level (`halving_levels`) for a halving reduce."""
    calls = max(1, math.ceil(part.count - 1e-9))
    if part.shape == LOOP:
        calls *= max(1, math.ceil(part.elems * tile_elems / max(part.row, 1) - 1e-9))
    if part.shape == COLUMNS:
        calls *= max(1, math.ceil(part.row * part.item / REPEAT_BYTES - 1e-9))
    if part.halving:
        calls *= halving_levels(part.row, REPEAT_BYTES // part.item)
    return calls


def part_cycles(chip: Any, part: SeqPart, tile_elems: float) -> int:
    """V-pipe cycles of one resolved part on a tile of `tile_elems` task elements."""
    n = part.elems * tile_elems
    if part.shape == LOOP:
        rows = max(1, math.ceil(n / max(part.row, 1) - 1e-9))
        return math.ceil(part.count * rows
                         * instr_cycles(chip, part.vclass, part.dtype, part.row, part.item)
                         - 1e-9)
    if part.shape == COLUMNS:
        rows = math.ceil(n / max(part.row, 1) - 1e-9)
        return math.ceil(part_steps(part, tile_elems) * max(
            chip.vector_min_cycles, rows * repeat_cycles(chip, part.vclass, part.dtype)) - 1e-9)
    if part.shape == REDUCE:
        rows = n / max(part.row, 1)
        cyc = max(chip.vector_min_cycles,
                  rows * reduce_row_cycles(chip, part.vclass, part.dtype, part.row, part.item,
                                           part.index, part.entire))
    else:
        cyc = instr_cycles(chip, part.vclass, part.dtype, n, part.item)
    return math.ceil(part.count * cyc - 1e-9)


__all__ = ["REPEAT_BYTES", "SeqPart", "instr_cycles", "part_cycles", "part_steps",
           "reduce_row_cycles", "repeat_cycles"]
