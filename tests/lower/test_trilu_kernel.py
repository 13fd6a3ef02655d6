"""The A2 / A3 Trilu runs CANN's TIK kernel (impl/dynamic/trilu.py, lower/trilu_kernel.py):
whole rows on at most the AI Core count (get_aicore_num), the kept part of each row moved from
GM in one or two DMAs (its whole 32-byte blocks, then data_move_pad of the tail), one row after
another, in any build."""

from __future__ import annotations

import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim
from ascendsim.lower.trilu_kernel import kept, row_moves


def _tril(rows: int = 1024, cols: int = 1024, upper: int = 0) -> asim.Graph:
    g = asim.Graph("tril")
    x = g.input("x", shape=(1, rows, cols), dtype="float32")
    g.output(g.add_node("Trilu", [x], {"upper": upper}, name="op")[0])
    return g


def _op(res):
    return next(r for r in res.summary() if r.op_type == "Trilu")


def test_row_moves_count_one_aligned_move_and_one_tail_per_row():
    # rows 0-6 hold under one block (tail only), rows 7, 15, ... end on a block (aligned only)
    moves, nbytes = row_moves(1024, 1024, 0, False, 4)
    assert moves == 7 + 128 + 889 * 2
    assert nbytes == 1024 * 1025 // 2 * 4
    assert kept(3, 8, 0, True) == (5, 3) and kept(3, 8, 0, False) == (4, 0)
    assert row_moves(8, 8, 8, True, 4) == (0, 0)          # Triu above the matrix: nothing kept


@pytest.mark.parametrize("build", ["jit", "binary"])
def test_the_a2_trilu_runs_on_the_ai_cores_its_row_moves_one_after_another(build):
    chip = asim.load_chip("ascend910b1")
    res = asim.simulate(_tril(), chip=chip, kernel_build=build, fusion=False)
    assert _op(res).block_dim == chip.ai_cores == 24
    busy, _ = first_core_busy_and_span(res, pipes=("MTE2",))
    # 43 rows a block, about 1.87 moves a row, each paying the GM -> UB latency
    hit = chip.path_latency_cycles.get("gm", "ub")
    assert busy["MTE2"] >= 43 * 1913 / 1024 * hit


def _notes(res) -> str:
    return " ".join(res.trace.task("op").notes)


def test_other_chips_and_short_rows_keep_the_generic_split():
    a2 = asim.simulate(_tril(), chip="ascend910b1", fusion=False)
    assert "TIK Trilu" in _notes(a2)
    assert "TIK Trilu" not in _notes(asim.simulate(_tril(), chip="ascend910", fusion=False))
    short = asim.simulate(_tril(64, 4), chip="ascend910b1", fusion=False)   # 16-byte rows
    assert "TIK Trilu" not in _notes(short)
