"""CANN's TIK LayerNorm on the first-generation 910 (layer_norm.py `if_tik_support` ->
layer_norm_tik.py): ND data with gamma and beta of x's dtype runs a hand-written kernel, not the
DSL sequence: whole rows per core, rows aligned to 64 elements in UB, sums of x and x*x per row,
the statistics on the per-row values, four row passes (-mean, *rstd, *gamma, +beta), a row too
long for the UB read from GM twice, and on fp16 data gamma's and beta's casts over the tile.
On the A2 chips, bf16 rows of 1024 or 4096 run LayerNormV4's SingleRead kernel (aclnnLayerNorm
`IsV4SocCheck`): whole rows per core, single-buffered."""

from __future__ import annotations

import math

import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.registry import get_op
from ascendsim.ir.tensor import Value
from ascendsim.lower.tiling import issued_instrs, vec_instrs
from ascendsim.lower.vector import rows_per_loop
from ascendsim.lower.vector_seq import (
    LAYER_NORM_TIK_CHIPS,
    LOOP,
    PATHS,
    REDUCE,
    ROW,
    SEQUENCES,
    part_cycles,
    part_steps,
    resolve,
    sequence_for,
)

_CUBE, _TIK16, _TIK, _V4, _V3 = (seq for _, seq in PATHS["LayerNormalization"])


def _ins(shape, dtype: str = "float32", pdtype: str | None = None, axis: int = -1):
    params = tuple(shape[axis % len(shape):])
    return [Value("x", shape, dtype), Value("g", params, pdtype or dtype),
            Value("b", params, pdtype or dtype)]


def _graph(shape, dtype: str) -> asim.Graph:
    g = asim.Graph("ln")
    x = g.input("x", shape, dtype)
    y = g.layer_normalization(x, g.input("g", shape[-1:], dtype),
                              g.input("b", shape[-1:], dtype), name="op")
    g.output(y)
    return g


def _v_busy(res, op: str = "op") -> int:
    task = res.trace.task(op)
    ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "V"]
    first = min(iv.core for iv in ivs)
    return sum(iv.duration for iv in ivs if iv.core == first)


@pytest.mark.parametrize("shape,dtype,pdtype,fmt,chip,path", [
    ((16384, 768), "float32", None, "ND", "ascend910b_gen1", "tik"),
    ((128, 128, 768), "float32", None, "ND", "ascend910", "tik"),
    ((16384, 768), "float16", None, "ND", "ascend910", "tik16"),
    ((1, 200), "float32", None, "ND", "ascend910", "tik"),        # one row, 200 % 16 != 0
    ((1, 768), "float32", None, "ND", "ascend910", "dsl"),        # one row, 768 % 16 == 0
    ((64, 96), "float32", None, "ND", "ascend910", "dsl"),        # row under 128 elements
    ((64, 768), "float16", "float32", "ND", "ascend910", "dsl"),  # gamma not x's dtype
    ((16384, 768), "float16", None, "FRACTAL_NZ", "ascend910", "cube"),
    ((16384, 768), "float32", None, "ND", "ascend910b4", "v3"),   # the A2 runs LayerNormV3
    ((16384, 768), "float32", None, "ND", "ascend310p", "dsl"),   # SoC version Ascend910 only
])
def test_the_tik_kernel_applies_where_cann_takes_it(shape, dtype, pdtype, fmt, chip, path):
    seq = sequence_for("LayerNormalization", _ins(shape, dtype, pdtype), {"axis": -1}, fmt,
                       chip)
    want = {"tik": _TIK, "tik16": _TIK16, "cube": _CUBE, "v3": _V3,
            "dsl": SEQUENCES["LayerNormalization"]}[path]
    assert seq is want


def test_the_chip_table_names_real_chips():
    assert LAYER_NORM_TIK_CHIPS <= set(asim.chips())


def test_tik_sequence_fp32_and_fp16():
    """fp32: zeroing, x*x, two reduce trees, ten steps on the per-row values, four full
    passes, no cast. fp16: the input cast, gamma's and beta's casts over the whole tile at
    half an fp32 repeat's cost each (counted on the fp16 side) and the output cast."""
    chip = get_chip("ascend910")
    shape = (64, 768)
    n = math.prod(shape)
    op = get_op("LayerNormalization")
    parts, _, text = resolve("LayerNormalization", op, _ins(shape),
                             [Value("y", shape, "float32")], {"axis": -1}, 1.0,
                             chip_name=chip.name)
    assert "TIK kernel" in text
    assert not [p for p in parts if p.instr.startswith("vconv")]
    assert len([p for p in parts if p.shape == REDUCE]) == 2
    assert len([p for p in parts if p.shape == ROW]) == 10
    full = [p.instr for p in parts if p.shape not in (REDUCE, ROW)]
    assert full == ["vector_dup (zero the tile)", "vmul (x*x)", "vadds (-mean)",
                    "vmuls (rstd)", "vmul (gamma)", "vadd (beta)"]
    parts16, _, _ = resolve("LayerNormalization", op, _ins(shape, "float16"),
                            [Value("y", shape, "float16")], {"axis": -1}, 1.0,
                            chip_name=chip.name)
    casts = [p for p in parts16 if p.instr.startswith("vconv")]
    assert len(casts) == 4
    gamma = next(p for p in casts if "gamma" in p.instr)
    dup = next(p for p in parts16 if p.instr.startswith("vector_dup"))
    assert gamma.count == 1.0 and gamma.dtype == "float32" and dup.dtype == "float16"
    # the gamma cast costs what the input cast costs (both one pass over the tile, its
    # repeats counted on the fp32 side)
    first = next(p for p in casts if p.instr == "vconv f16->f32")
    assert part_cycles(chip, gamma, n) == part_cycles(chip, first, n)


def test_tik_row_passes_are_one_call_per_row():
    """layer_norm_tik.py's SplitN mode issues x*x, x + (-mean), * rstd, * gamma and + beta
    inside `for_range(0, batch_num)` loops, one vector call per row of the tile (the mean and
    rstd read into scalar registers per row): on a tile of 20 rows of 768 each of those five
    parts issues 20 instructions; the zeroing and the statistics stay one call a tile."""
    op = get_op("LayerNormalization")
    shape = (64, 768)
    parts, _, _ = resolve("LayerNormalization", op, _ins(shape),
                          [Value("y", shape, "float32")], {"axis": -1}, 1.0,
                          chip_name="ascend910")
    loops = [p for p in parts if p.shape == LOOP]
    assert [p.instr for p in loops] == ["vmul (x*x)", "vadds (-mean)", "vmuls (rstd)",
                                        "vmul (gamma)", "vadd (beta)"]
    tile = 20 * 768
    assert all(part_steps(p, tile) == 20 for p in loops)
    others = [p for p in parts if p.shape != LOOP]
    assert issued_instrs(parts, tile) == 5 * 20 + sum(part_steps(p, tile) for p in others)


def test_whole_rows_per_core():
    """Rows per core ceil(rows / cores): 7 rows run on 7 cores."""
    res = simulate(_graph((7, 768), "float32"), "ascend910", fusion=False)
    assert res.trace.task("op").block_dim == 7


def test_rows_aligned_to_64_elements():
    """A row of 1000 fp32 elements is laid out on 1024 (64-element alignment), so it costs
    the vector unit what a row of 1024 costs; the DSL sequence pads it to 32 bytes only."""
    v1000 = _v_busy(simulate(_graph((30, 1000), "float32"), "ascend910b_gen1", fusion=False))
    v1024 = _v_busy(simulate(_graph((30, 1024), "float32"), "ascend910b_gen1", fusion=False))
    v960 = _v_busy(simulate(_graph((30, 960), "float32"), "ascend910b_gen1", fusion=False))
    assert v1000 == v1024 > v960


def test_a_row_longer_than_the_tile_is_read_twice():
    """SplitD: the sums pass and the normalising pass each read the row from GM."""
    shape = (4, 40000)
    res = simulate(_graph(shape, "float32"), "ascend910", fusion=False)
    task = res.trace.task("op")
    read = sum(b for (lvl, kind), b in task.traffic.items() if kind == "read")
    assert read >= 2 * math.prod(shape) * 4
    assert "read from GM 2 times" in res.explain("op")


@pytest.mark.parametrize("row,dtype,rows", [(768, "float32", 20), (768, "float16", 16),
                                           (1000, "float32", 15), (128, "float32", 121)])
def test_tik_rows_per_loop(row, dtype, rows):
    """`_get_each_loop_batch_num` on one thread's half UB (253952 // 2 B): (126976 - 112) //
    ((8 + 4 / 64 [+ 2 for fp16]) x align64(row) + 16) rows a loop."""
    seq = _TIK16 if dtype == "float16" else _TIK
    assert rows_per_loop(seq.row_budget, row, 2 if dtype == "float16" else 4, 253952,
                         seq.row_align_elems) == rows


def test_tik_loads_the_next_tile_after_this_ones_sums():
    """TIK's vec_reduce_add reads each row's sum back on the scalar unit (`set_as` after a V ->
    S wait), so the next tile's load is issued only after this tile's sums: one slot in
    effect despite the two TIK threads. A core's span is at least its load and vector busy
    time, on tiles of the kernel's 20 rows of 768."""
    res = simulate(_graph((30 * 60, 768), "float32"), "ascend910b_gen1", fusion=False,
                   detail="tile")
    assert "one slot in effect" in res.explain("op")
    assert "up to 15360 elements per tile" in res.explain("op")
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["MTE2"] + busy["V"]


# ------------------------------------------------ LayerNormV4 SingleRead on the A2 chips
@pytest.mark.parametrize("shape,dtype,pdtype,chip,v4", [
    ((64, 1024), "bfloat16", None, "ascend910b4", True),
    ((8, 4096), "bfloat16", None, "ascend910b", True),
    ((64, 768), "bfloat16", None, "ascend910b4", False),       # V3
    ((64, 1024), "float16", None, "ascend910b4", False),       # V4 takes bf16 only
    ((64, 1024), "bfloat16", "float32", "ascend910b4", False),  # gamma not bf16
])
def test_the_v4_single_read_applies_where_aclnn_routes_it(shape, dtype, pdtype, chip, v4):
    seq = sequence_for("LayerNormalization", _ins(shape, dtype, pdtype), {"axis": -1}, "ND",
                       chip)
    assert seq is (_V4 if v4 else _V3)


def test_v4_single_read_row_passes_are_one_call_per_row():
    """layer_norm_v4_single_read.h runs x - mean, * rstd, * gamma and + beta in per-row for
    loops (the mean and rstd come back through GetAccVal to the scalar unit): on an A2 chip
    each call waits out the one before (`vector_dep_latency_cycles`), so a tile of 8 rows
    of 1024 pays four per-row calls' waits per row beyond what one call per pass would."""
    chip = get_chip("ascend910b4")
    op = get_op("LayerNormalization")
    shape = (64, 1024)
    parts, _, text = resolve("LayerNormalization", op, _ins(shape, "bfloat16"),
                             [Value("y", shape, "bfloat16")], {"axis": -1}, 1.0,
                             chip_name=chip.name)
    assert "SingleRead" in text
    loops = [p for p in parts if p.shape == LOOP]
    assert [p.instr for p in loops] == ["vadds (-mean)", "vmuls (rstd)", "vmul (gamma)",
                                        "vadd (beta)"]
    tile = 8 * 1024
    (run,) = vec_instrs(chip, parts, tile)
    dep = chip.vector_dep_latency_cycles
    work = sum(part_cycles(chip, p, tile) for p in parts)
    steps = issued_instrs(parts, tile)
    assert steps == 4 * 8 + sum(part_steps(p, tile) for p in parts if p.shape != LOOP)
    assert run.cycles == work + math.ceil(dep * (steps - 1))


def test_v4_single_read_one_row_per_core_single_buffered():
    """Rows <= cores: one row per core; depth-1 queues: on a core with two tiles the span is
    at least the sum of its load and vector busy time."""
    res = simulate(_graph((16, 1024), "bfloat16"), "ascend910b4", fusion=False)
    assert res.trace.task("op").block_dim == 16
    assert "SingleRead" in res.explain("op")
    chip = get_chip("ascend910b4").replace(aiv_cores=1)
    res = simulate(_graph((32, 4096), "bfloat16"), chip, fusion=False, detail="tile")
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["MTE2"] + busy["V"]
