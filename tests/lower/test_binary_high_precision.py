"""The prebuilt binary an aclnn call runs takes the op's high_precision form when it has
one (`lower.vector_seq.BINARY_PATHS`): a float16 RealDiv on the A2 casts its inputs to
fp32, broadcasts and divides there and casts the quotient back, where the shape-compiled
(jit) kernel divides in float16."""

from __future__ import annotations

import ascendsim as asim
from ascendsim.ir.tensor import Value
from ascendsim.lower.vector_seq import sequence_for

CHIP = "ascend910b4"


def _div(rows: int, cols: int, dtype: str = "float16") -> asim.Graph:
    g = asim.Graph("div")
    x = g.input("x", (rows, cols), dtype)
    y = g.input("y", (rows, 1), dtype)
    g.output(*g.add_node("Div", [x, y], name="op"))
    return g


def _run(graph: asim.Graph, build: str) -> asim.Result:
    return asim.simulate(graph, CHIP, kernel_build=build)


def _notes(res: asim.Result) -> str:
    return " ".join(n for t in res.trace.tasks for n in t.notes)


def test_the_binary_path_is_picked_for_float16_only():
    """The path applies to a prebuilt binary of a float16 Div, not to a jit build nor to
    float32 (whose high_precision compute is the plain one)."""
    half = [Value("x", (4, 256), "float16"), Value("y", (4, 1), "float16")]
    full = [Value("x", (4, 256), "float32"), Value("y", (4, 1), "float32")]
    assert sequence_for("Div", half, {}, "ND", CHIP, "binary").fp32
    assert not sequence_for("Div", half, {}, "ND", CHIP, "jit").fp32
    assert not sequence_for("Div", full, {}, "ND", CHIP, "binary").fp32


def test_a_binary_float16_divide_runs_in_fp32():
    """[3072, 256] / [3072, 1] (the cannbot attention-probability shape at one batch): the
    binary's note says fp32, the row broadcast fills fp32 rows, and its vector work grows
    by at least the casts and the doubled divide repeats of the jit kernel's divide."""
    binary, jit = _run(_div(3072, 256), "binary"), _run(_div(3072, 256), "jit")
    assert "float16 computed in float32" in _notes(binary)
    assert "float16 computed in float32" not in _notes(jit)

    def vector(res: asim.Result) -> int:
        op = next(t.task_id for t in res.trace.tasks if t.op_name == "op")
        return max(sum(iv.duration for iv in res.trace.intervals
                       if iv.task_id == op and iv.core == c and iv.pipe == "V")
                   for c in {iv.core for iv in res.trace.intervals if iv.task_id == op})

    chip = asim.load_chip(CHIP)
    rows = -(-3072 // chip.aiv_cores)
    # per row: the fp16 divide's 512 bytes again in fp32 at the div rate, at least
    extra = rows * 512 / chip.vector_rate("div", "float32")
    assert vector(binary) >= vector(jit) + extra
    assert binary.cycles > jit.cycles


def test_a_float32_divide_keeps_its_sequence():
    """A float32 RealDiv's high_precision compute is its plain one: no casts noted."""
    assert "computed in float32" not in _notes(_run(_div(3072, 256, "float32"), "binary"))
