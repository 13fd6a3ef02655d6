"""Vector costing: instruction counts (not flops) time the V pipe; scalar operands run at the
unary rate; flops (the roofline's work) are unchanged by either rule."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.registry import get_op
from ascendsim.ir.tensor import Value
from ascendsim.lower.lowering import vec_class_of
from ascendsim.lower.vector_seq import SEQUENCES

NBYTES = 16 * 1024


def _one_core(name: str):
    """The chip cut to one AI Core (one AIC + one AIV on split chips), as msKPP measures."""
    chip = get_chip(name)
    return chip.replace(ai_cores=1, aiv_cores=0 if chip.coupled else 1)


def _run(build, chip):
    g = asim.Graph("t")
    build(g)
    return simulate(g, chip, detail="tile", fusion=False)


def _v_busy(res, op: str) -> tuple[int, int]:
    """(busy cycles, instruction count) of the V pipe of task `op` on its first core."""
    task = res.trace.task(op)
    ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "V"]
    first = min(iv.core for iv in ivs)
    mine = [iv for iv in ivs if iv.core == first]
    return sum(iv.duration for iv in mine), len(mine)


def _unary(op: str, dtype: str):
    n = NBYTES // (2 if dtype == "float16" else 4)

    def build(g):
        g.output(getattr(g, op)(g.input("x", (n,), dtype), name="op"))
    return build


def _binary(dtype: str, other_shape, n_shape=None, op: str = "mul"):
    """op(x, y) with x of 16 KB and y a graph input of `other_shape` (None: the float 2.0)."""
    n = NBYTES // (2 if dtype == "float16" else 4)
    shape = n_shape or (n,)

    def build(g):
        x = g.input("x", shape, dtype)
        y = 2.0 if other_shape is None else g.input("y", other_shape, dtype)
        g.output(getattr(g, op)(x, y, name="op"))
    return build


def _close(busy: int, count: int, expected: float, chip) -> None:
    """busy within one minimum-instruction overhead per V instruction of `expected`."""
    slack = chip.vector_min_cycles * count
    assert abs(busy - expected) <= slack, (busy, count, expected)


@pytest.mark.parametrize("chip_name", ["ascend910b", "ascend910"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_exp_is_one_vexp_per_element(chip_name, dtype):
    """16 KB of Exp on one core: bytes / exp rate cycles of V (fp16 64 B/cycle: 256 cycles),
    not twice that (its 2 flops/element are not 2 instructions)."""
    chip = _one_core(chip_name)
    res = _run(_unary("exp", dtype), chip)
    busy, count = _v_busy(res, "op")
    rate = chip.vector_rate("exp", dtype)
    _close(busy, count, NBYTES / rate, chip)
    if chip_name == "ascend910b" and dtype == "float16":
        assert rate == 64
        assert 250 <= busy <= 262


def test_exp_flops_are_unchanged():
    """The roofline's flops keep the registry's 2 per element for Exp, 4 for Sigmoid."""
    chip = _one_core("ascend910b")
    n = NBYTES // 2
    assert _run(_unary("exp", "float16"), chip).trace.task("op").flops == 2 * n
    assert _run(_unary("sigmoid", "float16"), chip).trace.task("op").flops == 4 * n
    res = _run(_binary("float16", None), chip)
    assert res.trace.task("op").flops == n


def test_registry_instruction_counts():
    """vec_passes reads `vec_instrs` (not flops); ops without it fall back to flops/element."""
    x = Value("x", (8, 16), "float16")
    y = Value("y", (8, 16), "float16")
    assert get_op("Exp").vec_passes([x], [x], {}) == 1
    assert get_op("Exp").flops([x], [x], {}) == 2 * x.numel
    assert get_op("Log").vec_passes([x], [x], {}) == 1
    assert get_op("Sigmoid").vec_passes([x], [x], {}) == 4
    assert get_op("Max").vec_passes([x, y, x], [x], {}) == 2
    # Softmax's instructions are its sequence (lower/vector_seq.py), not a registry count
    assert "Softmax" in SEQUENCES and get_op("Softmax").vec_instrs is None
    assert get_op("BatchNormalization").vec_passes([x], [x], {}) == 1
    assert get_op("LRN").vec_passes([x], [x], {"size": 5}) == 12
    # a family without vec_instrs (pooling): its flops per element, rounded, at least 1
    pool = get_op("GlobalAveragePool")
    assert pool.vec_instrs is None
    xp = Value("x", (1, 16, 4, 4), "float16")
    op = Value("o", (1, 16, 1, 1), "float16")
    assert pool.vec_passes([xp], [op], {}) == max(1, round(pool.flops([xp], [op], {}) / 256))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_mul_by_scalar_runs_at_the_unary_rate(dtype):
    """Mul(x, 2.0) is vmuls: bytes / unary rate; Mul(x, y) is vmul: bytes / binary rate."""
    chip = _one_core("ascend910b")
    unary = chip.vector_rate("unary", dtype)
    binary = chip.vector_rate("binary", dtype)
    assert unary == 2 * binary
    busy, count = _v_busy(_run(_binary(dtype, None), chip), "op")
    _close(busy, count, NBYTES / unary, chip)
    n = NBYTES // (2 if dtype == "float16" else 4)
    busy2, count2 = _v_busy(_run(_binary(dtype, (n,)), chip), "op")
    _close(busy2, count2, NBYTES / binary, chip)
    assert busy2 > 1.8 * busy


def test_broadcast_scalar_input_and_other_binary_ops():
    """A one-element graph input broadcast over x counts as a scalar; a row vector does not;
    the rule covers every BINARY-class op (Add, Sub, Max), not only Mul."""
    chip = _one_core("ascend910b")
    shape = (64, 128)                      # 16 KB fp16
    unary, binary = NBYTES / 256, NBYTES / 128
    for op in ("mul", "add", "sub", "max"):
        busy, count = _v_busy(_run(_binary("float16", (1, 1), shape, op), chip), "op")
        _close(busy, count, unary, chip)
    busy, count = _v_busy(_run(_binary("float16", (1, 128), shape), chip), "op")
    _close(busy, count, binary, chip)


def test_vec_class_of_rule():
    """Decided from the input Values: BINARY with one-element others -> unary; other classes
    and same-sized operands keep their class."""
    x = Value("x", (4, 32), "float16")
    s = Value("s", (), "float16")
    one = Value("one", (1, 1), "float16")
    row = Value("row", (1, 32), "float16")
    assert vec_class_of(get_op("Mul"), [x, s]) == "unary"
    assert vec_class_of(get_op("Add"), [one, x]) == "unary"
    assert vec_class_of(get_op("Clip"), [x, s, s]) == "unary"
    assert vec_class_of(get_op("Add"), [x, row]) == "binary"
    assert vec_class_of(get_op("Add"), [x, x]) == "binary"
    assert vec_class_of(get_op("Div"), [x, s]) == "div"      # vdiv has no scalar form here
    assert vec_class_of(get_op("Where"), [x, x, s]) == "ternary"
    assert vec_class_of(get_op("HardSigmoid"), [x]) == "binary"   # one input: no rule


@pytest.mark.parametrize("op, unary", [("sin", 25), ("cos", 28)])
def test_sin_and_cos_issue_tbes_range_reduction_and_polynomial(op, unary):
    """16 KB of fp32 Sin / Cos on one A2 core: TBE's sin/cos_compute_v3 (16 binary and 25 / 28
    unary instructions per element), each at its class's rate, within one minimum-instruction
    overhead per instruction; an order of magnitude above one vexp pass."""
    chip = _one_core("ascend910b").replace(vector_dep_latency_cycles=None)
    res = _run(_unary(op, "float32"), chip)
    busy, count = _v_busy(res, "op")
    want = (16 * NBYTES / chip.vector_rate("binary", "float32")
            + unary * NBYTES / chip.vector_rate("unary", "float32"))
    _close(busy, count, want, chip)
    assert busy > 10 * NBYTES / chip.vector_rate("exp", "float32")
