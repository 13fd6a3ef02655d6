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


def test_summary_csv_splits_each_task_span_by_cause(bert, tmp_path) -> None:
    """The op summary CSV's cause columns are the breakdown's per task and add up to the
    task's span from its launch to its last instruction."""
    import csv

    from ascendsim.report.summary import CAUSE_COLUMNS

    r = asim.simulate(bert)
    path = tmp_path / "summary.csv"
    r.write_summary_csv(str(path))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    spans = {t.op_name: r.trace.us(t.end - min(t.launch_start, t.start))
             for t in r.trace.tasks}
    assert len(rows) == len(r.trace.tasks)
    for row in rows:
        total = sum(float(row[c]) for c in CAUSE_COLUMNS)
        assert total == pytest.approx(spans[row["Op Name"]], abs=1e-2), row["Op Name"]
    by_op = {row.name: row for row in r.breakdown().ops}
    first = rows[0]
    assert float(first["compute_us (C)"]) == pytest.approx(by_op[first["Op Name"]].compute_us,
                                                          abs=1e-3)


def test_timeline_colours_by_cause_with_the_breakdown_rule(tmp_path) -> None:
    """color_by="cause": every interval is cut by the breakdown's `cause_of` (the hand-made
    task above: the MTE2 move is read then stall), each cause one colour, named in the key."""
    from matplotlib.colors import to_rgba

    from ascendsim.report.timeline import (
        CAUSE_COLORS,
        cause_lanes,
        plot_timeline,
        timeline_lanes,
    )

    chip = asim.get_chip("ascend910")
    task = TaskRecord(0, 0, "op", "Add", "AI_CORE", start=100, end=200, launch_start=50)
    ivs = [Interval("aicore", 0, "S", 0, "op", 100, 110, kind="kernel_start"),
           Interval("aicore", 0, "MTE2", 0, "op", 110, 150, kind="copy", src="DDR", dst="UB",
                    stall=10),
           Interval("aicore", 0, "V", 0, "op", 130, 160, kind="vec_binary"),
           Interval("aicore", 0, "MTE3", 0, "op", 155, 180, kind="copy", src="UB", dst="L2")]
    trace = Trace(chip, tasks=[task], intervals=ivs, total_cycles=200)
    lanes = cause_lanes(timeline_lanes(trace, aggregate=False))
    got = {(iv.pipe, iv.op, iv.start, iv.end) for lane in lanes for iv in lane.intervals}
    assert got == {("S", "launch", 100, 110), ("MTE2", "read", 110, 140),
                   ("MTE2", "stall", 140, 150), ("V", "compute", 130, 160),
                   ("MTE3", "write", 155, 180)}
    fig = plot_timeline(trace, str(tmp_path / "c.png"), color_by="cause", aggregate=False)
    faces = {tuple(fc) for coll in fig.axes[0].collections for fc in coll.get_facecolors()}
    for cause in ("launch", "read", "stall", "compute", "write"):
        assert to_rgba(CAUSE_COLORS[cause]) in faces, cause
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["C compute", "R read", "W write", "stall L2/HBM", "E launch"]
    assert (tmp_path / "c.png").stat().st_size > 0


def test_aggregated_timeline_by_cause_and_a_bad_colour_name(bert) -> None:
    r = asim.simulate(bert, chip="ascend910b")
    fig = r.plot_timeline(color_by="cause", aggregate=True)
    legend = {t.get_text() for t in fig.axes[0].get_legend().get_texts()}
    assert {"C compute", "R read"} <= legend
    with pytest.raises(asim.AscendSimError, match="color_by='pipe'"):
        r.plot_timeline(color_by="pipe")
