"""CANN's LayerNorm cube path (layer_norm.py `_check_vector_to_cube`, layer_norm_cube.py): on an
Ascend910-class chip, fp16 FRACTAL_NZ LayerNorm over a last axis of at most 1024 sums its rows
on the cube, so the vector unit makes four full-shape fp32 passes and two casts instead of the
DSL path's fifteen passes and two reduce trees."""

from __future__ import annotations

import math

import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.registry import get_op
from ascendsim.ir.tensor import Value
from ascendsim.lower.vector_seq import (
    LAYER_NORM_CUBE_CHIPS,
    PATHS,
    REDUCE,
    REPEAT_BYTES,
    ROW,
    SEQUENCES,
    part_cycles,
    resolve,
    sequence_for,
)
from ascendsim.validation.corpus import load_corpus
from ascendsim.validation.workloads import build_op_graph

NZ = "FRACTAL_NZ"
_CUBE = PATHS["LayerNormalization"][0][1]


def _ln_graph(shape, dtype: str, layout: str) -> asim.Graph:
    g = asim.Graph("ln")
    x = g.input("x", shape, dtype, layout)
    y = g.layer_normalization(x, g.input("g", shape[-1:], dtype),
                              g.input("b", shape[-1:], dtype), name="op")
    g.output(y)
    return g


def _v_busy(res, op: str) -> int:
    task = res.trace.task(op)
    ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "V"]
    first = min(iv.core for iv in ivs)
    return sum(iv.duration for iv in ivs if iv.core == first)


@pytest.mark.parametrize("shape,dtype,axis,fmt,chip,cube", [
    ((16384, 768), "float16", -1, NZ, "ascend910b_gen1", True),
    ((128, 128, 768), "float16", -1, NZ, "ascend910", True),
    ((64, 1024), "float16", -1, NZ, "ascend910", True),
    ((512, 768), "float16", -1, NZ, "ascend310p", True),
    ((64, 1040), "float16", -1, NZ, "ascend910", False),     # row longer than 1024
    ((64, 640), "float16", -1, NZ, "ascend910", False),      # not a listed width
    ((64, 128), "float16", -1, NZ, "ascend910", False),      # 128: NZ shape[-4] 8 not listed
    ((64, 384), "float16", -1, NZ, "ascend910", True),
    ((16384, 768), "float32", -1, NZ, "ascend910b_gen1", False),   # fp16 only
    ((16384, 768), "float16", -1, "ND", "ascend910b_gen1", False),  # NZ data only
    ((16384, 768), "float16", -1, NZ, "ascend910b", False),   # not on the A2 910B
    ((16384, 768), "float16", -1, NZ, "ascend310", False),    # nor on the Ascend310
    ((8, 64, 768), "float16", 1, NZ, "ascend910", False),     # last axis only
    ((2, 8, 64, 768), "float16", -1, NZ, "ascend910", False),  # rank 2 or 3 only
])
def test_the_cube_path_applies_where_cann_takes_it(shape, dtype, axis, fmt, chip, cube):
    x = Value("x", shape, dtype)
    seq = sequence_for("LayerNormalization", [x], {"axis": axis}, fmt, chip)
    assert (seq is _CUBE) == cube
    if not cube:
        assert seq is SEQUENCES["LayerNormalization"]


def test_cube_path_sequence_and_cycles():
    """On one core and one tile the V pipe's busy cycles are exactly the parts' cycles: no
    reduce tree, four full-shape fp32 passes at the binary rate (2 cycles per 64 elements),
    two vconvs at one cycle per 64 elements (a repeat counts the fp32 side), and 16-wide
    per-row statistics."""
    chip = get_chip("ascend910b_gen1").replace(ai_cores=1)
    shape = (8, 768)     # one tile
    n = math.prod(shape)
    x, y = Value("x", shape, "float16"), Value("y", shape, "float16")
    parts, _, text = resolve("LayerNormalization", get_op("LayerNormalization"),
                             [x, Value("g", (768,), "float16"), Value("b", (768,), "float16")],
                             [y], {"axis": -1}, 1.0, fmt=NZ, chip_name=chip.name)
    assert "cube path" in text
    assert not [p for p in parts if p.shape == REDUCE]
    full = [p for p in parts if p.shape != ROW]
    assert [p.instr for p in full] == ["vconv f16->f32", "vsub", "vmul", "vmul", "vadd",
                                       "vconv f32->f16"]
    binary = n * 4 / REPEAT_BYTES * REPEAT_BYTES / chip.vector_rate("binary", "float32")
    assert [part_cycles(chip, p, n) for p in full] == [n * 4 / REPEAT_BYTES] + \
        [binary] * 4 + [n * 4 / REPEAT_BYTES]
    stats = [p for p in parts if p.shape == ROW]
    assert len(stats) == 13 and all(p.elems == pytest.approx(16 / 768) for p in stats)
    res = simulate(_ln_graph(shape, "float16", NZ), chip, detail="tile", fusion=False)
    assert _v_busy(res, "op") == sum(part_cycles(chip, p, n) for p in parts)


def test_cube_path_is_cheaper_than_the_vector_path():
    """Per fp32 repeat the cube path costs about 9 cycle units (4 binary at 2, two vconvs at
    0.5) against about 14 for the ND op, which on this chip is CANN's TIK kernel (zeroing and
    casts at 0.5, x*x, gamma and beta at 2, vadds and vmuls at 1, two reduce trees at about 2,
    gamma's and beta's whole-tile casts at 0.5) and 31 for the DSL sequence (8 binary and 2 exp
    passes at 2, 7 unary at 1, two reduce trees): on BERT-base's [16384, 768] at least 1.3x
    less V time per core than the ND op, which is not on the cube path."""
    chip = "ascend910b_gen1"
    shape = (16384, 768)
    cube = simulate(_ln_graph(shape, "float16", NZ), chip, fusion=False)
    vec = simulate(_ln_graph(shape, "float16", "ND"), chip, fusion=False)
    assert "cube path" in cube.explain("op") and "cube path" not in vec.explain("op")
    assert "TIK kernel" in vec.explain("op")
    assert _v_busy(vec, "op") >= 1.3 * _v_busy(cube, "op")
    # the NZ graph input is read in place: no TransData task before the op
    assert cube.trace.tasks[0].op_type == "LayerNormalization"
    assert cube.trace.tasks[0].input_formats[0] == NZ


def test_the_chip_table_names_real_chips():
    assert LAYER_NORM_CUBE_CHIPS <= set(asim.chips())


def test_validation_rows_declare_their_formats():
    """A LayerNorm row stated on FRACTAL_NZ data is simulated on NZ data (the cube path on the
    first-generation 910); a transpose row keeps ND inputs (CANN's ConfusionTransposeD reads
    NZ in place, which the lowering's Transpose does not model)."""
    rows = {r.id: r for r in load_corpus()}
    ln = build_op_graph(rows["hpm-bert-0008"])
    assert ln.values[ln.inputs[0]].layout == NZ
    tr = build_op_graph(rows["hpm-bert-0006"])
    assert tr.values[tr.inputs[0]].layout == "ND"
    res = simulate(ln, rows["hpm-bert-0008"].chip, fusion=False)
    assert "cube path" in res.explain("op")


def _cube_task(shape, chip: str = "ascend910b_gen1"):
    from ascendsim.lower import lower
    program = lower(_ln_graph(shape, "float16", NZ), get_chip(chip))
    return next(t for t in program.tasks if t.op_name == "op")


def test_cube_path_runs_16_row_groups_single_buffered():
    """layer_norm_cube_schedule.py tiles the UB by one 16-row group (CUB_matrix
    [k, 1, 16, 16]), binds the row groups to cores (block_dim = min(groups, cores)) and never
    calls its `_double_buffer`: each tile holds 16 x 768 elements, every stage has one slot,
    and 4 groups run on 4 cores."""
    task = _cube_task((16384, 768))
    groups = task.phases[0].groups
    assert sum(len(g.cores) for g in groups) == 30
    tiles = sum(len(g.cores) * sum(sg.count for sg in g.segments) for g in groups)
    assert tiles == 16384 // 16                  # one tile per 16-row group
    stages = groups[0].segments[0].stages
    assert {s.pipe: s.slots for s in stages if s.pipe in ("MTE2", "V")} == {"MTE2": 1, "V": 1}
    small = _cube_task((64, 768))
    assert sum(len(g.cores) for g in small.phases[0].groups) == 4
    # the ND path is the TIK kernel (layer_norm_tik.py): also one slot in effect, its next
    # tile loaded after this tile's row sums are read back on the scalar unit, on its own
    # tiles of 16 rows of 768 fp16 (half the UB per TIK thread)
    from ascendsim.lower import lower
    program = lower(_ln_graph((16384, 768), "float16", "ND"), get_chip("ascend910b_gen1"))
    nd = next(t for t in program.tasks if t.op_name == "op")
    assert all(s.slots == 1 for s in nd.phases[0].groups[0].segments[0].stages
               if s.pipe in ("MTE2", "V"))


def test_cube_path_serialises_load_compute_store():
    """With one slot a core's span is at least its MTE2 plus V busy time (the next group's
    load waits for this group's compute); double buffering would overlap them."""
    res = simulate(_ln_graph((16384, 768), "float16", NZ), "ascend910b_gen1", fusion=False,
                   detail="tile")
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["V"] + busy["MTE2"]
