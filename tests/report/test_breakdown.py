"""E/R/C/W breakdown by cause (issue 26): one rule, causes add up to each task's span."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.report.breakdown import CAUSES, RULE, task_causes
from ascendsim.sim.trace import Interval, TaskRecord, Trace


@pytest.fixture(scope="module")
def bert():
    return asim.models.bert_encoder_layer(batch=2, seq_len=64, hidden=256, heads=4, ffn=1024)


def test_causes_add_up_to_the_run(bert) -> None:
    r = asim.simulate(bert)
    b = r.breakdown()
    assert b.total.span_us == pytest.approx(r.time_us, rel=1e-9)
    assert sum(b.total.of(c) for c in CAUSES) == pytest.approx(b.total.span_us)
    for row in b.ops:
        assert sum(row.of(c) for c in CAUSES) == pytest.approx(row.span_us)
        assert all(row.of(c) >= 0 for c in CAUSES)
    assert b.rows[0].span_us >= b.rows[-1].span_us
    assert "rule:" in b.table() and b.rule == RULE


def test_fusion_removes_launch_reads_and_writes(bert) -> None:
    unfused = asim.simulate(bert, fusion=False).breakdown().total
    fused = asim.simulate(bert).breakdown().total
    assert fused.launch_us < unfused.launch_us
    assert fused.read_us + fused.write_us < unfused.read_us + unfused.write_us


def test_the_rule_on_a_hand_made_task() -> None:
    chip = asim.get_chip("ascend910")
    task = TaskRecord(0, 0, "op", "Add", "AI_CORE", start=100, end=200, launch_start=50)
    ivs = [
        Interval("aicore", 0, "S", 0, "op", 100, 110, kind="kernel_start"),
        Interval("aicore", 0, "MTE2", 0, "op", 110, 150, kind="copy", src="DDR", dst="UB",
                 stall=10),                                  # read 110-140, stall 140-150
        Interval("aicore", 0, "V", 0, "op", 130, 160, kind="vec_binary"),   # compute wins
        Interval("aicore", 1, "MTE3", 0, "op", 155, 180, kind="copy", src="UB", dst="L2"),
    ]
    trace = Trace(chip, tasks=[task], intervals=ivs, total_cycles=200)
    got = task_causes(trace, task)
    assert got == {"compute": 30, "read": 20, "write": 20, "stall": 0, "launch": 60,
                   "idle": 20}
    assert sum(got.values()) == 150
