"""RmsNormGrad on A2 chips as CANN's Ascend C kernel runs it (ops-nn norm/rms_norm_grad,
RmsNormGradSplitNHighPrecision): rows of at most 640 aligned elements take ComputeSmallD,
rowFactor rows a UB loop with one dgamma Add per row; longer rows up to 6080 elements one row
a loop step, the next row's load waiting on this row's sum; everything in fp32."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.tensor import Value
from ascendsim.lower import lower
from ascendsim.lower.rms_norm_paths import rms_norm_grad_mode
from ascendsim.lower.seq_types import LOOP
from ascendsim.lower.vector import rows_per_loop
from ascendsim.lower.vector_seq import SeqPart, part_cycles, part_steps, sequence_for


def _values(rows: int, cols: int, dtype: str) -> list[Value]:
    return [Value("dy", (rows, cols), dtype), Value("x", (rows, cols), dtype),
            Value("rstd", (rows, 1), "float32"), Value("g", (cols,), dtype)]


def _graph(rows: int, cols: int, dtype: str) -> asim.Graph:
    g = asim.Graph("rms_grad")
    ins = [g.input(v.name, v.shape, v.dtype) for v in _values(rows, cols, dtype)]
    dx, dgamma = g.add_node("RmsNormGrad", ins, name="op")
    g.output(dx, dgamma)
    return g


@pytest.mark.parametrize("cols,dtype,mode", [
    (128, "bfloat16", "SMALL_D"), (640, "float16", "SMALL_D"),   # SMALLD_THRESHOLD 640
    (648, "float16", "ROW"), (1024, "bfloat16", "ROW"),
    (6080, "float32", "ROW"),                                    # UB_SPLIT_N's 6080
    (6096, "float32", ""),                                       # split D: not modelled
    (636, "float32", "SMALL_D"), (644, "float32", "ROW"),        # fp32 aligns to 8
])
def test_mode_follows_the_tiling(cols, dtype, mode):
    assert rms_norm_grad_mode(_values(8, cols, dtype), "ND", "ascend910b4") == mode


def test_only_a2_chips():
    for chip in ("ascend910", "ascend310p"):
        assert rms_norm_grad_mode(_values(8, 128, "float16"), "ND", chip) == ""
        assert sequence_for("RmsNormGrad", _values(8, 128, "float16"), {}, "ND", chip) is None


def test_small_d_rows_per_loop():
    """CalcSmallDBufferSize: (195584 - colAlign * 10) / (colAlign * 24 + 268) rows: 58 rows
    of 128, 12 of 640 (the A2's 196608-byte UB)."""
    seq = sequence_for("RmsNormGrad", _values(8, 128, "bfloat16"), {}, "ND", "ascend910b4")
    assert rows_per_loop(seq.row_budget, 128, 2, 196608) == 58
    assert rows_per_loop(seq.row_budget, 640, 2, 196608) == 12


def test_loop_part_issues_one_call_per_row():
    """A LOOP part over rows of 128 fp32 on a tile of 58 rows: 58 instructions of two
    repeats each, where an ELEM part would be one of 116."""
    chip = get_chip("ascend910b4")
    part = SeqPart("vadd", "binary", "float32", 4, LOOP, 1.0, 128)
    assert part_steps(part, 58 * 128) == 58
    per_call = max(chip.vector_min_cycles, 2 * 256 / chip.vector_rate("binary", "float32"))
    assert part_cycles(chip, part, 58 * 128) == pytest.approx(58 * per_call, abs=1)


def test_small_d_tile_and_per_row_adds_in_explain():
    res = simulate(_graph(4096, 128, "bfloat16"), "ascend910b4", fusion=False)
    text = res.explain("op")
    assert "up to 7424 elements per tile" in text                # 58 rows of 128
    assert "vadd (dgamma) [one call per row]" in text


def test_row_mode_one_row_a_tile_single_slot():
    program = lower(_graph(400, 1024, "bfloat16"), get_chip("ascend910b4"))
    task = next(t for t in program.tasks if t.op_name == "op")
    group = task.phases[0].groups[0]
    stages = group.segments[0].stages
    assert {s.pipe: s.slots for s in stages if s.pipe in ("MTE2", "V")} == {"MTE2": 1, "V": 1}
    # 400 rows / 40 cores, then the dgamma atomic add (`atomic_row_tail`)
    assert sum(sg.count for sg in group.segments) == 10 + 1


@pytest.mark.parametrize("cols,ranges", [(128, 1), (1024, 8)])
def test_dgamma_atomic_adds_serialise_on_one_gm_row(cols, ranges):
    """Every core ends with one atomic DataCopyPad of its fp32 dgamma row into the same GM
    row (CopyDgammaOut); requests of the cores in one 512-byte range are served one after
    another: the store pays (cores + ranges - 1) UB -> GM latencies, and the kernel takes
    at least that much longer than its rows alone."""
    chip = get_chip("ascend910b4")
    program = lower(_graph(4096, cols, "bfloat16"), chip)
    task = next(t for t in program.tasks if t.op_name == "op")
    groups = task.phases[0].groups
    cores = sum(len(g.cores) for g in groups)
    assert cores == 40
    for g in groups:
        tail = g.segments[-1]
        assert tail.count == 1
        (store,) = next(s for s in tail.stages if s.pipe == "MTE3").instrs
        assert store.nbytes == cols * 4
        lat = chip.path_latency_cycles.get("ub", "gm")
        assert store.cycles == round(lat * (cores + ranges - 1))


def test_per_row_adds_cost_more_than_one_instruction_per_tile():
    """The short-row kernel's dgamma Adds, one a row, each wait out the one before: the
    same shape's V time exceeds that of the same sequence with one Add over the tile by at
    least the latency of the extra calls."""
    chip = get_chip("ascend910b4")
    res = simulate(_graph(4096, 128, "float32"), "ascend910b4", fusion=False)
    rows_per_core = -(-4096 // 40)
    extra_calls = rows_per_core - -(-rows_per_core // 58)
    v = res.trace.task("op").pipe_cycles["V"]
    assert v >= extra_calls * chip.vector_dep_latency_cycles
