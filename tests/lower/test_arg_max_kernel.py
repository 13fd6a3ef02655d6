"""ArgMax / ArgMin as CANN's TIK ArgMaxV2 runs them (arg_common.py): vcmax / vcmin write each
repeat's (value, index) pair, so the reduce tree cannot fold the row with element-wise max; on
the A2 / A3 a row longer than one segment (8192 elements, 24576 fp16) is bound whole to a core
and loaded one segment at a time through a single buffer."""

from __future__ import annotations

import math

import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.tensor import Value
from ascendsim.lower.vector_seq import (
    REPEAT_BYTES,
    arg_segment,
    reduce_row_cycles,
    repeat_cycles,
    sequence_for,
)


def _graph(shape: tuple[int, ...], dtype: str, op: str = "arg_max") -> asim.Graph:
    g = asim.Graph("arg")
    g.output(getattr(g, op)(g.input("x", shape, dtype), axis=-1, keepdims=0, name="op"))
    return g


def test_index_reduction_never_folds():
    """A 131072-element fp32 row: 2048 vcmax repeats (one pair each), then ceil(2 * 2048 * 4
    / 256) = 64 repeats over the pairs, every one at the vcmax rate; a plain max folds the row
    with 2047 vmax repeats at the binary rate and ends with one vcmax repeat."""
    chip = get_chip("ascend910b")
    whole = repeat_cycles(chip, "reduce_max", "float32")
    k = 131072 * 4 // REPEAT_BYTES
    index = reduce_row_cycles(chip, "reduce_max", "float32", 131072, 4, index=True)
    assert index == pytest.approx((k + math.ceil(2 * k * 4 / REPEAT_BYTES)) * whole)
    fold = reduce_row_cycles(chip, "reduce_max", "float32", 131072, 4)
    assert fold == pytest.approx((k - 1) * repeat_cycles(chip, "binary", "float32") + whole)
    assert index > 3 * fold
    for chip_name in ("ascend910", "ascend910b", "ascend310p"):
        for op in ("ArgMax", "ArgMin"):
            seq = sequence_for(op, [Value("x", (8, 512), "float16")], {"axis": -1}, "ND",
                               chip_name)
            assert [s.index for s in seq.steps] == [True]


@pytest.mark.parametrize("chip,length,dtype,long_row", [
    ("ascend910c", 131072, "bfloat16", True), ("ascend910b", 8193, "float32", True),
    ("ascend910b4", 8192, "float32", False),          # one segment: another mode of the kernel
    ("ascend910b", 24576, "float16", False), ("ascend910b", 24577, "float16", True),
    ("ascend910", 131072, "float16", False),          # not an A2 / A3 chip
])
def test_long_row_path_on_a2_a3_only(chip, length, dtype, long_row):
    """Every last-axis mode of the A2 / A3 TIK kernel is single-buffered in tiles of at most
    one segment (no `thread_num` in arg_common.py's last-axis loops); the long-row path's note
    names the segment loop; another chip folds in its own tiles, double-buffered."""
    seq = sequence_for("ArgMax", [Value("x", (4, length), dtype)], {"axis": -1}, "ND", chip)
    a2 = chip != "ascend910"
    assert (seq.buffers == 1 and seq.tile is not None) == a2
    assert ("TILING_MODE_LAST_OVER_SEGMENT_LEN" in seq.note) == long_row
    strided = sequence_for("ArgMax", [Value("x", (length, 4), dtype)], {"axis": 0}, "ND", chip)
    assert strided.tile is None


def test_a_row_of_one_segment_moves_in_and_reduces_alone():
    """ArgMax over [4096, 6400] fp32 on the 910B1 (one row a tile, TILING_MODE_LAST_LESS_
    SEGMENT_LEN): single-buffered, so a core's span holds its MTE2 and its V work end to end,
    and the task is longer than with the double-buffered tiles the path replaced."""
    res = simulate(_graph((4096, 6400), "float32"), "ascend910b1", fusion=False, detail="tile")
    assert "single-buffered" in res.explain("op")
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["MTE2"] + busy["V"]


def test_long_row_runs_segment_tiles_one_at_a_time_on_a_core_per_row():
    """bf16 [4, 131072] on the 910C: 4 cores (one row each), 16 tiles of 8192 elements each,
    MTE2 and V never overlapping on a core; V per core at least the first vcmax pass, 2048
    repeats at the vcmax fp32 rate (bf16 is computed in fp32)."""
    chip = get_chip("ascend910c")
    res = simulate(_graph((4, 131072), "bfloat16"), "ascend910c", fusion=False, detail="tile")
    text = res.explain("op")
    assert "over 4 core(s), up to 8192 elements per tile" in text
    assert "single-buffered" in text
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["MTE2"] + busy["V"]
    assert busy["V"] >= 2048 * repeat_cycles(chip, "reduce_max", "float32")
    assert arg_segment("bfloat16") == arg_segment("float32") == 8192
    assert arg_segment("float16") == 24576


def test_an_argmax_pays_every_repeat_where_a_max_folds():
    """fp16 [4, 131072] on the 910B: ArgMax and ArgMin cost the same; per core their V work is
    at least 1024 vcmax repeats (128 fp16 each), over three times a ReduceMax's of the same rows
    (which folds them with vmax at the binary rate, on more cores)."""
    chip = get_chip("ascend910b")
    arg = simulate(_graph((4, 131072), "float16"), "ascend910b", fusion=False)
    low = simulate(_graph((4, 131072), "float16", "arg_min"), "ascend910b", fusion=False)
    assert arg.trace.task("op").duration == low.trace.task("op").duration
    cycles = arg.trace.task("op").pipe_cycles["V"]
    assert cycles >= 1024 * repeat_cycles(chip, "reduce_max", "float16")
    g = asim.Graph("max")
    g.output(g.reduce_max(g.input("x", (4, 131072), "float16"), [1], keepdims=0, name="op"))
    folded = simulate(g, "ascend910b", fusion=False).trace.task("op").pipe_cycles["V"]
    assert cycles > 3 * folded
