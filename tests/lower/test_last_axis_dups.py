"""A last-axis broadcast (`lower.vector.last_axis_dups`): an operand [..., 1]
broadcast along rows of more than `LAST_DUP_LIMIT` elements is materialised by one
`vector_dup` a row, each issued by the scalar unit (TBE's broadcast schedule), so the kernel
pays at least the chip's per-instruction issue cost for every row of its busiest core."""

from __future__ import annotations

import math

import pytest

import ascendsim as asim
import ascendsim.lower.vector as lv

NOTE = "last-axis broadcast"


def _div(rows: int, cols: int, divisor: tuple[int, ...] | None = None,
         dtype: str = "float16") -> asim.Graph:
    g = asim.Graph("div")
    x = g.input("x", (rows, cols), dtype)
    y = g.input("y", divisor or (rows, 1), dtype)
    g.output(*g.add_node("Div", [x, y], name="op"))
    return g


def _run(graph: asim.Graph, chip: str = "ascend910b4") -> asim.Result:
    return asim.simulate(graph, chip)


def _noted(res: asim.Result) -> bool:
    return any(NOTE in n for t in res.trace.tasks for n in t.notes)


def test_long_rows_are_broadcast_row_by_row(monkeypatch):
    """40,000 rows of 32 halves on the 910B4's 40 vector cores: the busiest core's 1,000
    rows each issue a vector_dup, so its scalar unit alone is busy 1,000 x the issue cost,
    most of which the plain kernel (5 MB of moves) does not hide."""
    rows, cols = 40000, 32
    chip = asim.load_chip("ascend910b4")
    res = _run(_div(rows, cols))
    assert _noted(res)
    monkeypatch.setattr(lv, "LAST_DUP_LIMIT", 1 << 30)
    plain = _run(_div(rows, cols))
    assert not _noted(plain)
    issue = math.ceil(rows / chip.aiv_cores) * chip.vector_tile_scalar_cycles_per_vec_instr
    assert res.cycles >= issue
    assert res.cycles - plain.cycles >= 0.5 * issue


def test_rows_that_stream_hide_part_of_the_issue(monkeypatch):
    """Rows of 256 halves move 16x the bytes a row: the per-row issue still lengthens the
    kernel, by less than it costs (it overlaps the moves)."""
    res = _run(_div(12288, 256))
    monkeypatch.setattr(lv, "LAST_DUP_LIMIT", 1 << 30)
    assert _run(_div(12288, 256)).cycles < res.cycles


@pytest.mark.parametrize("cols", [4, 16])
def test_rows_up_to_the_limit_keep_the_plain_sequence(cols):
    assert cols <= lv.LAST_DUP_LIMIT
    assert not _noted(_run(_div(4096, cols)))


def test_a_scalar_or_full_operand_is_not_broadcast_row_by_row():
    assert not _noted(_run(_div(4096, 256, divisor=(1,))))
    assert not _noted(_run(_div(4096, 256, divisor=(4096, 256))))


def test_coupled_chips_dup_row_by_row_too(monkeypatch):
    """The first-generation 910's static TBE broadcast intrinsic (`broadcast_for_tensor`: a
    reg_mov and a vector_dup per call) takes the same per-row dups: the note, and a longer
    kernel than the plain sequence on the same chip."""
    res = _run(_div(40000, 32), "ascend910")
    assert _noted(res)
    monkeypatch.setattr(lv, "LAST_DUP_LIMIT", 1 << 30)
    assert _run(_div(40000, 32), "ascend910").cycles < res.cycles


def test_each_broadcast_operand_pays_its_own_dups():
    g = asim.Graph("where")
    cond = g.input("cond", (4096, 256), "bool")
    a = g.input("a", (4096, 1), "float16")
    b = g.input("b", (4096, 1), "float16")
    g.output(*g.add_node("Where", [cond, a, b], name="op"))
    res = _run(g)
    note = next(n for t in res.trace.tasks for n in t.notes if NOTE in n)
    assert "of 2 operand(s)" in note
