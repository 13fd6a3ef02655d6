"""Vector ops as instruction sequences (lower/vector_seq.py): each op's sequence shows in
explain(), fp16 norms/softmax pay their fp32 casts, a partial repeat costs a full one, reduce
rates apply only to the reduce steps, LayerNorm stays near its roofline."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import VECTOR_CLASSES, get_chip
from ascendsim.ir.registry import get_op, has_op
from ascendsim.ir.tensor import Value
from ascendsim.lower.vector_seq import (
    REDUCE,
    REPEAT_BYTES,
    SEQUENCES,
    instr_cycles,
    part_cycles,
    reduce_row_cycles,
    resolve,
)


def _one_core(name: str):
    """The chip cut to one AI Core (one AIC + one AIV on split chips): one tile per op here."""
    chip = get_chip(name)
    return chip.replace(ai_cores=1, aiv_cores=0 if chip.coupled else 1)


def _v_busy(res, op: str) -> int:
    """V-pipe busy cycles of task `op` on its first core."""
    task = res.trace.task(op)
    ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "V"]
    first = min(iv.core for iv in ivs)
    return sum(iv.duration for iv in ivs if iv.core == first)


def _graph(op: str, shape, dtype: str) -> asim.Graph:
    g = asim.Graph(f"seq_{op}")
    x = g.input("x", shape, dtype)
    if op == "Softmax":
        y = g.softmax(x, name="op")
    elif op == "LayerNormalization":
        y = g.layer_normalization(x, g.input("g", shape[-1:], dtype),
                                  g.input("b", shape[-1:], dtype), name="op")
    elif op == "RmsNorm":
        y = g.rms_norm(x, g.input("g", shape[-1:], dtype), name="op")
    elif op == "Add":
        y = g.add(x, g.input("y", shape, dtype), name="op")
    elif op == "ReduceSum":
        axes = g.const(np.array([len(shape) - 1], dtype=np.int64), name="axes")
        y = g.reduce_sum(x, axes, keepdims=0, name="op")
    else:
        raise AssertionError(op)
    g.output(y)
    return g


@pytest.mark.parametrize("op,instrs", [
    ("Softmax", ["vcmax", "vbrcb", "vsub", "vconv f16->f32", "vexp", "vcadd", "vbrcb", "vdiv",
                 "vconv f32->f16"]),
    # the A2's LayerNormV3 (layer_norm_v3.py): rstd on the per-row variance
    ("LayerNormalization", ["vconv f16->f32", "vmuls (x/n)", "vcadd (mean)", "vbrcb (mean)",
                            "vsub (x - mean)", "vmul (square)", "vmuls (/n)",
                            "vcadd (variance)", "vadds (+eps)", "vsqrt", "vdiv (1/sqrt)",
                            "vbrcb (rstd)", "vmul (rstd)", "vmul (gamma)", "vadd (beta)",
                            "vconv f32->f16"]),
    # the A2's RmsNorm, MERGE_N isPerformance form: ReduceSumMultiN, mulRepeat's column blocks
    ("RmsNorm", ["vconv f16->f32", "vmul", "vdup", "vadd (column blocks)",
                 "vcadd (whole reduce)", "vmuls", "vadds", "vsqrt", "vdup", "vdiv",
                 "vbrcb (rstd)", "vmul (by rstd)", "vmul (by gamma)", "vconv f32->f16"]),
    ("Add", ["vadd"]),
    ("ReduceSum", ["vconv f16->f32", "vcadd", "vconv f32->f16"]),
])
def test_explain_shows_the_sequence(op, instrs):
    """explain() names the op's vector instructions, in order, with their per-tile cycles."""
    res = simulate(_graph(op, (64, 512), "float16"), "ascend910b", fusion=False)
    text = res.explain("op")
    line = next(x for x in text.splitlines() if "vector sequence" in x)
    # the instructions, then after "; " the kernel path's note where one applies
    named = [item.split(" [")[0] for item in line.split(": ", 2)[-1].split("; ")[0].split(", ")]
    assert named == instrs, line
    assert "V cycles per tile" in text


def test_fp16_softmax_pays_the_casts():
    """fp16 Softmax (CANN's softmax_v2): max and x - max in fp16, then a vconv to fp32, exp,
    sum and divide in fp32, and a vconv back; each vconv costs one cycle per 64 elements (a
    repeat counts 256 bytes of the fp32 side: vconv_part). One tile on one core: the V pipe's busy
    cycles are exactly the parts' cycles, casts included; an fp32 Softmax has no vconv."""
    chip = _one_core("ascend910b")
    shape = (32, 128)
    n = math.prod(shape)
    x, y = Value("x", shape, "float16"), Value("y", shape, "float16")
    # an A2 NORM kernel's rows that fit the UB reduce by "entire_reduce" (SeqPart.entire)
    parts, _, _ = resolve("Softmax", get_op("Softmax"), [x], [y], {"axis": -1}, 1.0,
                          entire_reduce=True)
    names = [p.instr for p in parts]
    assert names[3] == "vconv f16->f32" and names[-1] == "vconv f32->f16"
    assert [p.dtype for p in parts[:3]] == ["float16"] * 3
    assert {p.dtype for p in parts[4:-1]} == {"float32"}
    casts = [part_cycles(chip, p, n) for p in parts if p.instr.startswith("vconv")]
    assert casts == [max(chip.vector_min_cycles, n * 4 / REPEAT_BYTES)] * 2
    half = simulate(_graph("Softmax", shape, "float16"), chip, detail="tile", fusion=False)
    assert "float16 computed in float32" in half.explain("op")
    # each step after the first also waits out the step before it (vector_dep_latency_cycles)
    dep = math.ceil(chip.vector_dep_latency_cycles * (len(parts) - 1))
    assert _v_busy(half, "op") == sum(part_cycles(chip, p, n) for p in parts) + dep
    full = simulate(_graph("Softmax", shape, "float32"), chip, detail="tile", fusion=False)
    assert "vconv" not in full.explain("op")


def test_a_dependent_vector_step_waits_out_the_one_before():
    """A sequence of k vector steps costs its parts plus (k - 1) completion latencies
    (vector_dep_latency_cycles, measured on the A2: a 32-repeat Add takes 22 + 2 x 32 cycles);
    without the figure only the parts; the first generation 910 has none."""
    chip = _one_core("ascend910b")
    assert chip.vector_dep_latency_cycles == 20
    g = _graph("Softmax", (32, 128), "float32")
    x, y = Value("x", (32, 128), "float32"), Value("y", (32, 128), "float32")
    parts, _, _ = resolve("Softmax", get_op("Softmax"), [x], [y], {"axis": -1}, 1.0)
    with_dep = _v_busy(simulate(g, chip, detail="tile", fusion=False), "op")
    without = _v_busy(simulate(g, chip.replace(vector_dep_latency_cycles=None), detail="tile",
                               fusion=False), "op")
    assert len(parts) > 2 and with_dep - without == 20 * (len(parts) - 1)
    assert get_chip("ascend910b_gen1").vector_dep_latency_cycles is None


def test_a_partial_repeat_costs_a_full_one():
    """One repeat is 256 B: 256 one-byte elements cost one repeat, 257 cost two (the tail is a
    masked full repeat); on a one-core tile, 1025 fp16 elements cost 9 vadd repeats, 1024
    cost 8 (2 cycles each at the binary rate)."""
    chip = get_chip("ascend910b")
    rep = REPEAT_BYTES / chip.vector_rate("binary", "int8")
    assert instr_cycles(chip, "binary", "int8", 256, 1) == max(chip.vector_min_cycles, rep)
    assert instr_cycles(chip, "binary", "int8", 257, 1) == max(chip.vector_min_cycles, 2 * rep)
    one = _one_core("ascend910b")
    busy = {}
    for n in (1024, 1025):
        res = simulate(_graph("Add", (n,), "float16"), one, detail="tile", fusion=False)
        busy[n] = _v_busy(res, "op")
    assert busy[1024] == 8 * rep
    assert busy[1025] == 9 * rep


def test_reduce_rate_only_for_the_reduce_steps():
    """A row sum of 768 fp32 (12 repeats) is 11 binary folds and ONE vcadd repeat per row:
    slowing the chip's vcadd rate by 2x adds one repeat's worth per row, not 12 (the old model
    charged every byte at the reduce rate); the element-wise vmul of ReduceSumSquare never
    pays it."""
    chip = get_chip("ascend910b")
    k = 768 * 4 // REPEAT_BYTES
    whole = REPEAT_BYTES / chip.vector_rate("reduce", "float32")
    fold = (k - 1) * REPEAT_BYTES / chip.vector_rate("binary", "float32")
    assert reduce_row_cycles(chip, "reduce", "float32", 768, 4) == pytest.approx(fold + whole)
    slow = chip.replace(vector_op_bytes_per_cycle=chip.vector_op_bytes_per_cycle.__class__(
        **{**vars(chip.vector_op_bytes_per_cycle),
           "reduce_fp32": chip.vector_op_bytes_per_cycle.reduce_fp32 / 2}))
    assert reduce_row_cycles(slow, "reduce", "float32", 768, 4) == pytest.approx(
        fold + 2 * whole)
    # ReduceSumSquare: the vmul is element-wise at the binary rate, only vcadd is a reduce step
    x = Value("x", (16, 768), "float32")
    out = Value("y", (16,), "float32")
    parts, _, _ = resolve("ReduceSumSquare", get_op("ReduceSumSquare"), [x], [out], {},
                          1.0, None)
    assert [(p.instr, p.vclass, p.shape) for p in parts] == [
        ("vmul", "binary", "elem"), ("vcadd", "reduce", REDUCE)]
    # a strided reduction (axis 0) folds with vadd and has no whole-reduce step at all
    axes = Value("axes", (1,), "int64")
    parts, _, _ = resolve("ReduceSum", get_op("ReduceSum"), [x, axes], [Value("y", (768,),
                          "float32")], {}, 1.0, lambda name: np.array([0]))
    assert [p.vclass for p in parts] == ["binary"]


def test_layer_norm_near_its_roofline():
    """fp16 LayerNorm [16384, 768] (BERT-base) within 5x of its roofline on the 910B2 and the
    first-generation 910 (about 8x when every pass ran at the reduce rate): its vector work is
    CANN's TBE sequence in fp32 (15 element-wise steps, two casts, two reduce trees per row),
    vector-bound, so above the memory roofline but by less than the old 8 reduce passes."""
    g = _graph("LayerNormalization", (16384, 768), "float16")
    for chip in ("ascend910b", "ascend910b_gen1"):
        task = simulate(g, chip, fusion=False).trace.task("op")
        # the roofline with the output counted at HBM as well (the simulated L2 keeps the
        # output and the trace's roofline leaves it out: it reaches HBM after the task)
        c = get_chip(chip)
        hbm = 2 * 16384 * 768 * 2 / (c.hbm_bandwidth_bytes_per_s / c.clock_hz)
        roof = max(task.roofline_cycles, hbm)
        assert 1.5 * roof <= task.duration <= 5.0 * roof, chip


def test_fused_ub_op_concatenates_its_members_sequences():
    """A UB-fused Add -> Relu -> Softmax issues every member's instructions in one task."""
    g = asim.Graph("fused")
    x = g.input("x", (64, 1024), "float16")
    y = g.relu(g.add(x, g.input("b", (64, 1024), "float16"), name="a"), name="r")
    g.output(g.softmax(y, name="sm"))
    res = simulate(g, "ascend910", fusion=True)
    task = next(t for t in res.trace.tasks if "sm" in t.fused_ops)
    notes = " | ".join(task.notes)
    pos = [notes.find(s) for s in ("a (Add): vector sequence: vadd",
                                   "r (Relu): vector sequence: vrelu", "sm (Softmax)")]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), notes


def test_the_sequence_table_is_consistent():
    """Every op in the table is registered and every step names a chip instruction class."""
    chip = get_chip("ascend910")
    for op, seq in SEQUENCES.items():
        assert has_op(op), op
        for step in seq.steps:
            assert step.vclass in VECTOR_CLASSES, (op, step)
            assert chip.vector_rate(step.vclass, "float32") > 0
