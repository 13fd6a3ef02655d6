"""The pieces vector instruction sequences are written in (lower/vector_seq.py module note):
the four step shapes, one step, its constructors, a whole kernel path's sequence
(`OpSequence`, with its TBE NORM schedule), the 2-byte float dtypes an fp32 sequence casts up.
Kernel-path modules (layer_norm_paths.py, rms_norm_paths.py) write their sequences with them
without importing the sequence table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: step shapes (vector_seq module note)
ELEM, REDUCE, ROW, LOOP, COLUMNS = "elem", "reduce", "row", "loop", "columns"
#: 2-byte float dtypes an fp32 sequence casts up
NARROW_FLOATS = ("float16", "bfloat16")
#: the A2 and A3 chips (CANN SocVersion ASCEND910B: the 910B1..B4; ASCEND910_93: the 910C,
#: whose kernels CANN builds from the same dav-c220 sources): the chips the A2 kernel paths
#: of lower/vector_seq.py and lower/layer_norm_paths.py apply to
A2_A3_CHIPS = frozenset({"ascend910b", "ascend910b1", "ascend910b3", "ascend910b4",
                         "ascend910c"})


@dataclass(frozen=True)
class Step:
    """One instruction of a sequence: its name, the chip rate class, its shape, how many;
    `width`: values a ROW step writes per row (a Brcb writes each row's value to a 32-byte
    block: 8 fp32), or elements a LOOP step's call covers when more than 1 (else the row);
    `index`: a REDUCE step that returns each row's position as well as its value (an
    argmax), so it cannot fold the row with element-wise max (module note of
    lower/vector_seq.py, reduce tree); `convert`: a vconv between a 2-byte float and fp32,
    whose repeats count the fp32 side (lower/vector_seq.py `vconv_part`); `spread`: UB
    bytes each of an ELEM step's instructions passes per byte of the op's data (1; more where
    the data fills only part of what each repeat reads, as one of a b8 vnchwconv's 16 source
    blocks); `pad`: a kernel's own padding of the data it passes, a factor on the op's elements
    computed from (the op's inputs as stored in GM, its attrs) (None: 1), where the kernel
    counts an instruction's repeats in whole blocks of a unit whose rows are not whole
    blocks (the 1-byte Transpose's vnchwconv calls, lower/transpose_paths.py)."""

    instr: str
    vclass: str
    shape: str = ELEM
    count: float = 1.0
    width: int = 1
    index: bool = False
    convert: bool = False
    spread: int = 1
    halving: bool = False
    pad: Callable[[Sequence[Any], dict], float] | None = None


def elem(instr: str, vclass: str, count: float = 1.0, spread: int = 1,
         pad: Callable[[Sequence[Any], dict], float] | None = None) -> Step:
    """An instruction over every element of the op (`spread`, `pad`: see Step)."""
    return Step(instr, vclass, ELEM, count, spread=spread, pad=pad)


def conversion(instr: str, count: float = 1.0) -> Step:
    """A vconv between a 2-byte float and fp32 over every element of the op (`Step.convert`)."""
    return Step(instr, "unary", ELEM, count, convert=True)


def reduction(instr: str, vclass: str = "reduce", index: bool = False,
              halving: bool = False) -> Step:
    """A reduction along the op's reduced axis (a reduce tree per row); `index`: it returns
    the position of each row's result too (Step.index); `halving`: the tree is a kernel's
    own halving Adds, each a separate instruction waiting out the one before
    (`halving_levels`)."""
    return Step(instr, vclass, REDUCE, index=index, halving=halving)


def halving_levels(row: int, per_repeat: int) -> int:
    """Dependent instructions of a row sum of `row` elements by halving Adds (ops-nn
    reduce_common.h `ReduceSumHalfInterval`): the part past the largest power of two added
    onto it, that power halved by Adds down to one repeat (`per_repeat` elements), then one
    WholeReduceSum."""
    if row <= per_repeat:
        return 1
    body = 1 << (row.bit_length() - 1)
    return int(row > body) + (body // per_repeat).bit_length()


def row_loop(instr: str, vclass: str = "binary", width: int = 1) -> Step:
    """One instruction per reduced row over that row's elements (`width` > 1: over that many
    elements of it, a call on the row's statistic): a kernel's own for loop over its rows,
    each call a separate instruction that waits out the one before."""
    return Step(instr, vclass, LOOP, width=width)


def column_blocks(instr: str, vclass: str = "binary") -> Step:
    """One instruction per 256-byte column block of the reduced row (a partial last block a
    masked one), each over every row of the tile, one repeat a row, each waiting out the one
    before: a kernel's for loop over the row's column blocks (ops-nn reduce_common.h
    `ReduceSumMultiN`'s Adds, rms_norm_merge_n.h `mulRepeat`'s Muls), so a row of k blocks
    counts k steps whatever the rows."""
    return Step(instr, vclass, COLUMNS)


def per_row(instr: str, vclass: str = "unary", width: int = 1) -> Step:
    """An instruction on the per-row statistics, `width` values per reduced row."""
    return Step(instr, vclass, ROW, width=width)


def entire_reduce_repeats(k: int, per_repeat: int) -> int:
    """Whole-reduce repeats of TBE's "entire_reduce" of a row of `k` repeats: each level
    writes a partial per repeat it reads, `per_repeat` partials fill one repeat (a vcmax /
    vcmin partial is a (value, index) pair), the next level whole-reduces them, until one
    repeat is left (lower/vector.py `norm_entire_reduce`)."""
    total, reps = k, k
    while reps > 1:
        reps = -(-reps // per_repeat)
        total += reps
    return total


__all__ = ["A2_A3_CHIPS", "COLUMNS", "ELEM", "LOOP", "NARROW_FLOATS", "NormSchedule", "OpSequence",
           "REDUCE", "entire_reduce_repeats",
           "ROW", "Step", "column_blocks", "conversion", "elem", "per_row", "reduction", "row_loop"]


@dataclass(frozen=True)
class NormSchedule:
    """How TBE's NORM-pattern schedule (tbe/dsl unify_schedule/vector/norm) runs a kernel whose
    reduced rows are bound to cores (`OpSequence.norm`, `lower.vector.kernel_pipeline`).

    A row stays in UB (the common schedule) when its length, aligned to 32 bytes, is at most
    (UB - `temp_bytes`) / `live` / the bytes of the widest dtype it computes in
    (norm_tilingcase `calc_coexisting_quantities_and_temp_buffer_size`: `live` row-sized
    tensors coexist, `temp_bytes` of reduce scratch; op_tiling norm.cc `IsNeedWorkspace`).
    A longer row takes the workspace schedule (norm_schedule.py `NormWorkspaceSchedule`): a
    tensor consumed on both sides of a reduction is written to a GM workspace and read back,
    each stage a loop over the row's UB chunks; the input is read `input_reads` times, the
    workspace tensor (in the compute dtype) written once and read `ws_reads` times.
    A reduction over an axis that is not innermost (R A, the block split on A) keeps R times
    at least 8 blocks of the inner axes in the UB, or takes the same workspace schedule
    (op_tiling norm.cc `IsNeedWorkspace`, NORM_BLOCKS_NUMBER; lower.vector.norm_strided).
    Double buffering is only enabled for a shape fixed at compile time (norm_tilingcase
    `_gen_const_tiling_case`; norm.cc never sets it): a prebuilt dynamic-shape kernel
    (`Lowering.kernel_build` "binary") runs its chunks single-buffered."""

    live: int
    temp_bytes: int
    input_reads: int
    ws_reads: int


@dataclass(frozen=True)
class OpSequence:
    """An op's vector instructions; `fp32`: computes in float32 (casts 2-byte floats up
    before step `cast_at`, the steps before it run in the input's dtype, and back after the
    last); `rows`: how the reduced rows are found (a key of `vector_rows.ROW_RULES`);
    `conversion`: the op is one vconv from its input's dtype to its output's (Cast, costed by
    `vconv_part`); `stat_width`: values
    per row the ROW steps work on (1; 16 where the statistics come from the cube as 16-wide
    fractal columns); `note`: what `explain` adds about the kernel path; `buffers`: the
    kernel's UB slots per queue (its BUFFER_NUM; 1 serialises the load, compute and store of
    consecutive tiles); `row_tile`: the kernel loops over its rows this many at a time
    (0: tiles as large as the UB allows); `whole_rows`: the kernel binds whole rows to
    cores, one core per row at most, on min(rows, cores) cores whatever the bytes
    (`tiling.vector_work`); `row_reads`: GM reads of the main input per element when one of
    those rows does not fit a UB tile (the kernel passes over the row in UB-sized chunks
    once per reduction and once more to write the result; 1: the row is read once);
    `row_align_elems`: the kernel lays each row out on a multiple of this many elements in
    UB (0: on the chip's 32-byte UB blocks), and every step pays that padding; `head_loop`:
    the kernel binds whole lines to cores and loops over the heads of each UB
    step of lines, one strided load, sequence and store per head (`HEAD_LOOPS`: how the
    lines and heads are found; `tiling.vector_work`); `row_budget`: (UB bytes reserved,
    bytes per 32-byte-aligned column, bytes per row) from which such a kernel's tiling
    sizes its rows per UB loop, and optionally UB bytes reserved per aligned column
    (`lower.vector.rows_per_loop`; (): as the UB allows);
    `recast`: the kernel casts its row-sized second input (gamma) from 2 bytes to fp32
    again for every row it works on; `narrow_slots`: the slots per queue in effect when the
    main input is a 2-byte float (0: `buffers`): a kernel whose single input slot is freed
    right after x's Cast to fp32, its scalar unit issuing ahead without waiting on the
    vector pipe, loads the next tile while this one computes, as with two slots;
    `ub_bytes`: UB bytes per element of the first output over all queue slots and working
    buffers, by that output's dtype and the slots per queue, where an Ascend C kernel's
    tiling divides the UB by its own count (`lower.vector.kernel_ub`; None: the generic
    split); `norm`: a TBE NORM-pattern
    kernel's UB fit rule, workspace traffic and double buffering (`NormSchedule`; with
    `whole_rows`, in place of `row_reads`); `tile`: the kernel's own tile, elements of the main
    input by its dtype, at most as the UB allows (None: as the UB allows); `row_bursts`: how
    the kernel's DMAs cut its rows into GM bursts ("rows": one burst per row that is not a
    whole number of 32-byte blocks; "rows_out": so, and one per output row whatever its
    alignment; "halves": one per half row read, one per row written; "norm": as "rows" for a
    TBE NORM kernel's rows that do not pack whole into a block (`vector_rows.row_on_blocks`);
    "": one burst per move; `lower.vector.row_bursts`); `round_trip`: the kernel reads each
    row's reduction back on the scalar unit (a V_S wait per row) and only then issues the
    rest of the row, its store and the next row's load, so that load waits for the longer of
    the vector steps after the reduction and that scalar work
    (`lower.tiling.round_trip_cycles`); `atomic_row`: bytes per row element of a row every
    core adds atomically into one GM row at its end (RmsNormGrad's fp32 dgamma: 4; 0: none;
    `lower.tiling.atomic_row_tail`)."""

    steps: tuple[Step, ...]
    fp32: bool = False
    rows: str = ""
    conversion: bool = False
    cast_at: int = 0
    stat_width: int = 1
    note: str = ""
    buffers: int = 2
    row_tile: int = 0
    whole_rows: bool = False
    row_reads: int = 1
    row_align_elems: int = 0
    head_loop: str = ""
    row_budget: tuple[float, ...] = ()
    recast: bool = False
    narrow_slots: int = 0
    ub_bytes: Callable[[str, int], float] | None = None
    norm: NormSchedule | None = None
    tile: Callable[[str], int] | None = None
    row_bursts: str = ""
    round_trip: bool = False
    atomic_row: int = 0
