"""RmsNorm on A2 chips as CANN's Ascend C kernel runs it (ops-nn norm/rms_norm): rows longer
than SMALL_REDUCE_NUM (2000) that fit the UB factor take the NORMAL mode, one row per loop step
through single-buffered queues (BUFFER_NUM = 1), rstd on the scalar unit; other rows, other
chips and fused groups keep the double-buffered sequence."""

from __future__ import annotations

import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.registry import get_op
from ascendsim.ir.tensor import Value
from ascendsim.lower import lower
from ascendsim.lower.seq_types import COLUMNS, halving_levels
from ascendsim.lower.tiling import issued_instrs, vec_instrs
from ascendsim.lower.vector_seq import (
    REDUCE,
    part_cycles,
    part_steps,
    repeat_cycles,
    resolve,
    sequence_for,
)


def _graph(rows: int, cols: int, dtype: str) -> asim.Graph:
    g = asim.Graph("rms")
    x = g.input("x", (rows, cols), dtype)
    g.output(g.rms_norm(x, g.input("g", (cols,), dtype), name="op"))
    return g


def _values(rows: int, cols: int, dtype: str, gamma_dtype: str | None = None):
    return [Value("x", (rows, cols), dtype), Value("g", (cols,), gamma_dtype or dtype)]


def _task_stages(program, name: str):
    task = next(t for t in program.tasks if t.op_name == name)
    group = task.phases[0].groups[0]
    return group, group.segments[0].stages


@pytest.mark.parametrize("cols,dtype,normal", [
    (4096, "float16", True), (2048, "bfloat16", True), (8192, "float32", True),
    (1024, "float16", False),           # numColAlign <= 2000: MERGE_N
    (2000, "float16", False),           # exactly SMALL_REDUCE_NUM: MERGE_N
    (12288, "float16", True),           # UB_FACTOR_B16
    (12304, "float16", False),          # past it: SPLIT_D
    (10240, "float32", True), (10248, "float32", False),   # UB_FACTOR_B32
])
def test_mode_follows_the_tiling(cols, dtype, normal):
    seq = sequence_for("RmsNorm", _values(8, cols, dtype), {}, "ND", "ascend910b3")
    assert (seq is not None and seq.row_tile) == normal


def test_only_a2_chips_and_same_dtype_gamma():
    ins = _values(8, 4096, "float16")
    for chip in ("ascend910", "ascend910b_gen1", "ascend310p"):
        assert not sequence_for("RmsNorm", ins, {}, "ND", chip).row_tile
    mixed = _values(8, 4096, "float16", "float32")      # the mixed-dtype branch
    assert not sequence_for("RmsNorm", mixed, {}, "ND", "ascend910b").row_tile


def test_normal_mode_passes_per_row():
    """Per row: Cast up, Mul x*x, the row's reduce tree, Muls by rstd, Cast gamma up (every
    row: rms_norm.h ComputeMulGammaCast), Mul gamma, Cast back; the rstd arithmetic (1/sqrt)
    is scalar, so no per-row vector steps."""
    res = simulate(_graph(64, 4096, "float16"), "ascend910b3", fusion=False)
    text = res.explain("op")
    line = next(x for x in text.splitlines() if "vector sequence" in x)
    named = [item.split(" [")[0] for item in line.split(": ", 2)[-1].split("; ")[0].split(", ")]
    assert named == ["vconv f16->f32", "vmul", "vcadd", "vmuls", "vconv f16->f32 (gamma)",
                     "vmul", "vconv f32->f16"]
    seq = sequence_for("RmsNorm", _values(64, 4096, "float16"), {}, "ND", "ascend910b3")
    assert [s.shape for s in seq.steps].count(REDUCE) == 1
    assert "[per row]" not in line
    # V cycles per row of 4096 fp32 on the 910B3 rates: vconv 64 (64 repeats of 64
    # elements, one a cycle) + vmul 128 + vmuls 64 + vmul 128 + vconv 64 (gamma) + vconv 64,
    # the reduce tree (63 binary folds and one whole-reduce repeat of 7 cycles) 133
    assert "V cycles per tile of 4096 elements: vconv f16->f32 64, vmul 128, vcadd 133, " \
           "vmuls 64, vconv f16->f32 (gamma) 64, vmul 128, vconv f32->f16 64" in text


def test_fp32_normal_mode_casts_nothing():
    res = simulate(_graph(64, 4096, "float32"), "ascend910b3", fusion=False)
    assert "vconv" not in res.explain("op")


def test_one_row_per_tile_single_buffered_at_most_a_core_per_row():
    chip = get_chip("ascend910b3")
    program = lower(_graph(16, 4096, "float16"), chip)
    group, stages = _task_stages(program, "op")
    assert {s.pipe: s.slots for s in stages if s.pipe in ("MTE2", "V")} == {"MTE2": 1, "V": 1}
    task = next(t for t in program.tasks if t.op_name == "op")
    cores = sum(len(g.cores) for g in task.phases[0].groups)
    assert cores == 16                                  # block dim <= rows (16 of 40 AIV)
    assert sum(sg.count for sg in group.segments) == 1  # one row per core: one tile
    program = lower(_graph(400, 4096, "float16"), chip)
    group, _ = _task_stages(program, "op")
    assert sum(sg.count for sg in group.segments) == 10     # 400 rows / 40 cores


def test_merge_n_rows_per_loop_and_queue_slots():
    """A MERGE_N UB loop holds rowFactor = (UB - 1024) / (numColAlign * 16 + 260) rows
    (rms_norm_tiling.cpp): 128-element fp32 rows, 195584 / 2308 = 84 rows (bf16: as many as
    two slots of the simulated UB hold, at most 84); 4096 rows on the 910B3's 40 cores:
    ceil(4096 / 40) = 103 rows per core, two loops. Its queues
    have depth 1 (rms_norm_base.h BUFFER_NUM = 1); a bf16 x frees its slot right after the
    Cast, so the next load overlaps the compute (two slots in effect), fp32 x holds it until
    the Mul by rstd (one)."""
    program = lower(_graph(4096, 128, "bfloat16"), get_chip("ascend910b3"))
    group, stages = _task_stages(program, "op")
    assert {s.pipe: s.slots for s in stages if s.pipe in ("MTE2", "V")} == {"MTE2": 2, "V": 2}
    _, fp32 = _task_stages(lower(_graph(4096, 128, "float32"), get_chip("ascend910b3")), "op")
    assert {s.pipe: s.slots for s in fp32 if s.pipe in ("MTE2", "V")} == {"MTE2": 1, "V": 1}
    tiles = sum(sg.count for sg in group.segments)
    assert tiles == 2
    res = simulate(_graph(4096, 128, "float32"), "ascend910b3", fusion=False)
    assert "up to 10752 elements per tile" in res.explain("op")     # 84 rows of 128


@pytest.mark.parametrize("shape,perf", [
    ((512, 1024), True), ((513, 1024), False),           # PERFORMANC_DIM_ONE_MAX = 512
    ((16, 8, 1024), True), ((16, 9, 1024), False),       # PERFORMANC_DIM_TWO_MAX = 8
    ((4, 2, 8, 1024), False),                            # rank 4
])
def test_merge_n_performance_form(shape, perf):
    """rms_norm_tiling.cpp isPerformance: fp16/bf16 x of rank 2 (<= 512 rows) or rank 3
    (dims <= 512, <= 8) spread rstd by Brcb, a 32-byte block per row, and multiply by it and
    by gamma one 64-column block at a time (mulRepeat); else the BroadCast API (v220: Brcb,
    then a Copy) writes rstd over the full [rows, numColAlign] tile for whole-tile Muls."""
    ins = [Value("x", shape, "bfloat16"), Value("g", (shape[-1],), "bfloat16")]
    seq = sequence_for("RmsNorm", ins, {}, "ND", "ascend910b")
    at = next(k for k, s in enumerate(seq.steps) if s.instr.startswith("vbrcb"))
    brcb, after = seq.steps[at], seq.steps[at + 1:]
    assert (brcb.shape, brcb.width) == ("row", 8)
    if perf:
        assert [s.shape for s in after] == [COLUMNS, COLUMNS]
    else:
        assert [(s.instr, s.shape) for s in after] == [
            ("vcopy (rstd to rows)", "elem"), ("vmul", "elem"), ("vmul", "elem")]


@pytest.mark.parametrize("row,levels", [(64, 1), (100, 2), (1024, 5), (2056, 7), (4096, 7),
                                        (4104, 8), (8192, 8)])
def test_halving_levels_count_reduce_sum_half_interval(row, levels):
    """ReduceSumHalfInterval (ops-nn reduce_common.h) sums a row of fp32: the part past the
    largest power of two added onto it, that power halved by Adds down to one 64-element
    repeat, then one WholeReduceSum, each instruction after a PipeBarrier<PIPE_V>."""
    assert halving_levels(row, 64) == levels


@pytest.mark.parametrize("rows,cols,levels", [(8176, 2049, 7), (4096, 8192, 8)])
def test_normal_mode_row_sum_is_its_halving_adds(rows, cols, levels):
    """NORMAL mode (rms_norm.h) sums each row by ReduceSumHalfInterval: its reduce part is
    one dependent instruction per halving level of the 32-byte-aligned row, not one tree."""
    parts, _, _ = resolve("RmsNorm", get_op("RmsNorm"), _values(rows, cols, "float32"),
                          [Value("y", (rows, cols), "float32")], {}, 1.0,
                          chip_name="ascend910b")
    (total,) = [p for p in parts if p.shape == REDUCE]
    assert total.halving and part_steps(total, cols) == levels


@pytest.mark.parametrize("cols,blocks", [(1023, 16), (1024, 16), (769, 13), (128, 2), (67, 2)])
def test_merge_n_sums_rows_one_add_per_column_block(cols, blocks):
    """MERGE_N's row sums (reduce_common.h ReduceSumMultiN): a Duplicate, then one Add per
    64-column block of the row (ceil(numCol / 64), the last one masked), each over every row
    of the loop, one repeat a row, a PipeBarrier<PIPE_V> after each, then one WholeReduceSum:
    the loop's V run waits out each Add (`vector_dep_latency_cycles`) and the scalar unit
    issues each; the cycles are the Adds' repeats, one a row per Add."""
    chip = get_chip("ascend910b")
    parts, _, _ = resolve("RmsNorm", get_op("RmsNorm"), _values(4096, cols, "float16"),
                          [Value("y", (4096, cols), "float16")], {}, 1.0, chip_name="ascend910b")
    adds = next(p for p in parts if p.instr == "vadd (column blocks)")
    rows = 11
    tile = rows * cols    # task elements: the rows as stored
    assert adds.shape == COLUMNS and part_steps(adds, tile) == blocks
    assert part_cycles(chip, adds, tile) == pytest.approx(
        blocks * max(chip.vector_min_cycles, rows * repeat_cycles(chip, "binary", "float32")),
        abs=1)
    others = [p for p in parts if p is not adds]
    assert issued_instrs(parts, tile) == issued_instrs(others, tile) + blocks
    run = vec_instrs(chip, parts, tile)[0].cycles
    without = vec_instrs(chip, others, tile)[0].cycles
    assert run - without == pytest.approx(part_cycles(chip, adds, tile)
                                          + blocks * chip.vector_dep_latency_cycles, abs=1)


def test_merge_n_pays_no_reduce_tree_per_instruction():
    """MERGE_N's instructions cover every row of a loop: 4096 fp32 rows of 64 (86 a core, one
    loop) cost fewer V cycles than one-row instructions would (seven a row, each at least
    vector_min_cycles, and the row's reduce at least one whole-reduce repeat)."""
    chip = get_chip("ascend910b")
    res = simulate(_graph(4096, 64, "float32"), "ascend910b", fusion=False)
    task = res.trace.task("op")
    rows_per_core = -(-4096 // 48)
    per_row = 7 * chip.vector_min_cycles + repeat_cycles(chip, "reduce", "float32")
    assert task.pipe_cycles["V"] < rows_per_core * per_row


def test_single_buffering_serialises_load_compute_store():
    """One slot: the next row's load waits for this row's compute, the compute for the
    previous row's store, so a core takes about V + MTE2 per row, not max(V, MTE2); block
    detail (coalesced rows) gives the same kernel time as tile detail."""
    res = simulate(_graph(400, 4096, "float16"), "ascend910b3", fusion=False, detail="tile")
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["V"] + busy["MTE2"]
    block = simulate(_graph(400, 4096, "float16"), "ascend910b3", fusion=False)
    assert block.time_us == pytest.approx(res.time_us, rel=0.1)


def test_row_tiles_give_whole_rows_to_each_core():
    """A row-tiled kernel's rows are not split between cores, and cores take blockFactor =
    ceil(rows / cores) rows each (rms_norm_tiling.cpp): 50 rows of 4096 on the 910B3's 40
    vector cores run on ceil(50 / 2) = 25 cores of two rows; 100 rows on ceil(100 / 3) = 34
    cores, 33 of three rows and the last of the one row left."""
    def split(rows: int) -> list[tuple[int, int]]:
        program = lower(_graph(rows, 4096, "float16"), get_chip("ascend910b3"))
        task = next(t for t in program.tasks if t.op_name == "op")
        return sorted((sum(sg.count for sg in g.segments), len(g.cores))
                      for g in task.phases[0].groups)
    assert split(50) == [(2, 25)]
    assert split(100) == [(1, 1), (3, 33)]


def _cores(rows: int, cols: int, dtype: str, chip: str) -> int:
    program = lower(_graph(rows, cols, dtype), get_chip(chip))
    task = next(t for t in program.tasks if t.op_name == "op")
    return sum(len(g.cores) for g in task.phases[0].groups)


@pytest.mark.parametrize("rows,cols,dtype,cores", [
    (1, 16384, "bfloat16", 1),      # SPLIT_D: one row, one core (the bytes would take 6)
    (32, 1152, "bfloat16", 32),     # MERGE_N: a core per row (the bytes would take 9)
    (32, 16384, "bfloat16", 32),    # SPLIT_D: a core per row (the bytes would take 48)
    (100, 128, "float16", 34),      # ceil(100 / 48) = 3 rows per core: 34 cores
])
def test_every_mode_binds_whole_rows_to_cores(rows, cols, dtype, cores):
    """MERGE_N and SPLIT_D rows are bound to cores as NORMAL ones are (rms_norm_tiling.cpp
    blockFactor = ceil(rows / AIV cores), useCoreNum = ceil(rows / blockFactor)): the kernel
    runs on min(rows, 48) vector cores of the 910B2, whatever the bytes, and no row is split
    between cores."""
    assert _cores(rows, cols, dtype, "ascend910b") == cores


def test_a_long_row_stays_on_one_core():
    """SPLIT_D: a 16384-element bf16 row is one core's work on the 910B2 (the kernel loops
    over the row on that core), while the 910 generation's TBE kernel splits an fp16 row of
    the same length by bytes."""
    one = simulate(_graph(1, 16384, "bfloat16"), "ascend910b", fusion=False)
    other = simulate(_graph(1, 16384, "float16"), "ascend910", fusion=False)
    assert one.trace.task("op").block_dim == 1
    assert other.trace.task("op").block_dim > 1


def test_other_chips_split_rows_by_bytes():
    """The 910 generation's TBE RmsNorm is a VectorSchedule: one core per KB, rows or not."""
    assert _cores(1, 16384, "float16", "ascend910") > 1


@pytest.mark.parametrize("cols,dtype,mode", [
    (12288, "bfloat16", "NORMAL"),     # UB_FACTOR_B16 counts 2-byte elements, bf16 included
    (11264, "bfloat16", "NORMAL"),     # within 10241..12288: NORMAL, not SPLIT_D
    (12304, "bfloat16", "SPLIT_D"),    # past UB_FACTOR_B16
    (12288, "float16", "NORMAL"),
    (10240, "float32", "NORMAL"), (10248, "float32", "SPLIT_D"),   # UB_FACTOR_B32
    (2000, "bfloat16", "MERGE_N"), (2016, "bfloat16", "NORMAL"),   # SMALL_REDUCE_NUM
    (2000, "float32", "MERGE_N"), (2008, "float32", "NORMAL"),
])
def test_the_lowering_picks_the_mode_from_the_stored_dtype(cols, dtype, mode):
    """rms_norm_tiling.cpp picks the mode from x's dtype as stored (UB_FACTOR_B16 = 12288
    elements for fp16 and bf16, UB_FACTOR_B32 = 10240 for fp32; numColAlign rounds to 32
    bytes of that dtype), though a bf16 row computes in fp32: the lowered task names it."""
    res = simulate(_graph(4, cols, dtype), "ascend910b", fusion=False)
    note = res.explain("op")
    named = {"NORMAL": "NORMAL mode", "SPLIT_D": "SPLIT_D mode"}
    for m, text in named.items():
        assert (text in note) == (m == mode), (m, note)


def test_mixed_dtype_short_rows_take_merge_n():
    """CalMixDtypeTiling (fp16/bf16 x, fp32 gamma): rows of at most 2000 elements aligned to 16
    take MERGE_N, never its isPerformance form (set in the same-dtype branch only)."""
    short = sequence_for("RmsNorm", _values(64, 1024, "bfloat16", "float32"), {}, "ND",
                         "ascend910b")
    assert "MERGE_N" in short.note and "isPerformance" not in short.note
    long = sequence_for("RmsNorm", _values(64, 4096, "bfloat16", "float32"), {}, "ND",
                        "ascend910b")
    assert "MERGE_N" not in long.note and long.whole_rows


def test_bf16_normal_mode_casts_gamma_once_per_row():
    """bf16 NORMAL: x cast up, gamma cast up with every row (its only cast: the kernel keeps
    gamma in bf16 in UB), y cast back; 4096-element rows on the 910B3: 64 cycles each (64
    repeats of 64 elements)."""
    res = simulate(_graph(64, 4096, "bfloat16"), "ascend910b3", fusion=False)
    line = next(x for x in res.explain("op").splitlines() if "V cycles per tile" in x)
    assert line.count("vconv") == 3
    assert "vconv bf16->f32 (gamma) 64" in line


@pytest.mark.parametrize("cols,waits", [(2049, True), (8192, False)])
def test_normal_rows_wait_for_the_scalar_round_trip(cols, waits):
    """NORMAL reads each row's sum on the scalar unit (V_S) and only then issues the rest of
    the row, its store and the next load: the V stage of a row ends with a wait of the
    scalar work (two TQue transfers, the two vector instructions after the reduction, the
    reduction's completion) less the vector work of those two instructions, where that is
    positive (fp32 rows of 2049: about 120 cycles a row); at 8192 the instructions after the
    reduction outlast the scalar work and the wait is a cycle."""
    chip = get_chip("ascend910b2")
    group, stages = _task_stages(lower(_graph(48 * 4, cols, "float32"), chip), "op")
    v = next(s for s in stages if s.pipe == "V")
    wait = [i for i in v.instrs if i.kind == "wait_scalar"]
    assert len(wait) == 1
    scalar = (chip.vector_dep_latency_cycles + 2 * chip.vector_tile_scalar_cycles_per_queue
              + 2 * chip.vector_tile_scalar_cycles_per_vec_instr)
    if waits:
        assert 0.3 * scalar < wait[0].cycles < scalar
    else:
        assert wait[0].cycles == 1
