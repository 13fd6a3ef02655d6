"""Reports of real simulations (needs ascendsim.sim): summary vs trace totals, files, explain."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.report import COLUMNS, op_statistic, op_summary
from ascendsim.report.summary import AICORE_TASK_TYPES, CAUSE_COLUMNS, CONFIDENCE_COLUMN

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def conv_res():
    g = asim.models.conv_bn_relu(batch=1, cin=16, cout=16, h=16, w=16)
    return asim.simulate(g, chip="ascend910", fusion=False)


def test_rows_match_tasks(conv_res) -> None:
    rows = op_summary(conv_res.trace)
    assert len(rows) == len(conv_res.trace.tasks) > 0
    for r, t in zip(rows, sorted(conv_res.trace.tasks, key=lambda t: (t.start, t.task_id)),
                    strict=True):
        assert r.task_duration_us == pytest.approx(conv_res.trace.us(t.duration))
        assert r.task_type in (*AICORE_TASK_TYPES, "AI_CPU")
        if r.task_type in AICORE_TASK_TYPES:
            for ratio in (r.aic_mac_ratio, r.aiv_vec_ratio, r.aic_mte2_ratio, r.aiv_mte3_ratio):
                assert 0.0 <= ratio <= 1.0 + 1e-9
            assert r.bound in ("cube", "vector", "memory", "scalar", "launch")


def test_durations_sum_to_total_on_one_stream(conv_res) -> None:
    """One stream, tasks back to back: every cycle of the run is a task or a wait before one."""
    trace = conv_res.trace
    tasks = sorted(trace.tasks, key=lambda t: t.start)
    assert len({t.stream_id for t in tasks}) == 1
    for a, b in zip(tasks, tasks[1:], strict=False):
        assert b.start >= a.end                      # no overlap on one stream
    busy = sum(t.duration for t in tasks)
    assert busy <= trace.total_cycles
    assert busy + sum(t.wait for t in tasks) == pytest.approx(trace.total_cycles, abs=len(tasks))
    stats = op_statistic(trace)
    assert sum(s.ratio_pct for s in stats) == pytest.approx(100.0)
    assert sum(s.total_us for s in stats) == pytest.approx(trace.us(busy))


def test_files_of_a_real_run(conv_res, tmp_path) -> None:
    csv_path, json_path, png_path = (tmp_path / n for n in ("s.csv", "t.json", "t.png"))
    conv_res.write_summary_csv(str(csv_path))
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == [*COLUMNS, *CAUSE_COLUMNS, CONFIDENCE_COLUMN]
    assert len(rows) == len(conv_res.trace.tasks) + 1
    conv_res.write_chrome_trace(str(json_path))
    doc = json.loads(json_path.read_text())
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(conv_res.trace.intervals) + len(conv_res.trace.tasks)
    assert max(e["ts"] + e["dur"] for e in xs) == pytest.approx(conv_res.time_us, rel=1e-6)
    fig = conv_res.plot_timeline(str(png_path))
    assert png_path.read_bytes()[:8] == PNG_MAGIC
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    cores = {iv.core for iv in conv_res.trace.intervals if iv.engine == "aicore"}
    per_core = len(cores) <= 4
    n_pipes = len([p for p in conv_res.chip.pipes])
    expected_core_lanes = len(cores) * n_pipes if per_core else n_pipes
    assert len([lb for lb in labels if not lb.startswith(("AI CPU", "HOST"))]) \
        == expected_core_lanes


def test_explain_real_op(conv_res) -> None:
    slowest = max(op_summary(conv_res.trace), key=lambda r: r.task_duration_us)
    text = conv_res.explain(slowest.op_name)
    assert f"bound: {slowest.bound}" in text
    if slowest.limiting_pipe:
        assert slowest.limiting_pipe in text
    assert any(line.startswith("would help:") for line in text.splitlines())


def test_explain_launch_bound_in_host_mode() -> None:
    """Launched op by op from the host, a small op waits longer for its launch than it runs."""
    g = asim.models.net_basic_fuse()
    res = asim.simulate(g, chip="ascend910", mode="host", fusion=False)
    row = op_summary(res.trace)[0]
    assert row.bound == "launch" and row.task_wait_us > row.task_duration_us
    text = res.explain(row.op_name)
    assert "bound: launch - its stream waited" in text
    assert "while running:" in text and "graph sink" in text


def test_compare_fused_vs_unfused(tmp_path) -> None:
    g = asim.models.net_basic_fuse()
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    unfused = asim.simulate(g, chip="ascend910", inputs={"x": x}, fusion=False)
    fused = asim.simulate(g, chip="ascend910", fusion={"graph_kernel": True}, inputs={"x": x})
    cmp = asim.report.Comparison(unfused, fused)
    assert cmp.outputs_equal is True
    tab = cmp.table()
    assert tab.row("launches")[1] > tab.row("launches")[2]
    assert cmp.speedup > 1.0
    fig = cmp.plot(str(tmp_path / "cmp.png"))
    assert (tmp_path / "cmp.png").read_bytes()[:8] == PNG_MAGIC and len(fig.axes) == 3


def test_split_chip_lanes(tmp_path) -> None:
    """On a 910B the cube cores (AIC) and vector cores (AIV) get their own pipe lanes."""
    res = asim.simulate(asim.models.conv_bn_relu(batch=1, cin=16, cout=16, h=16, w=16),
                        chip="ascend910b", fusion=True)
    fig = res.plot_timeline(str(tmp_path / "b.png"), cores=[0])
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "AIC 0 FIX" in labels and "AIC 0 M" in labels and "AIC 0 V" not in labels
    assert any(lb.startswith("AIV V (") for lb in labels)
    assert any(lb.startswith("AIC M (") for lb in labels)
    doc = asim.report.chrome_trace_dict(res.trace)
    procs = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert "AIC 0" in procs and any(p.startswith("AIV ") for p in procs)


def test_roofline_of_a_real_run(conv_res, tmp_path) -> None:
    from ascendsim.report.roofline import plot_roofline, roofline_points, roofs

    r = roofs(conv_res.trace)
    pts = roofline_points(conv_res.trace)
    assert pts
    for p in pts:   # no task beats its roofs
        assert p["flops_per_s"] <= r["cube fp16"] * 1.0001
        assert p["flops_per_s"] <= p["intensity"] * r["L2"] * 1.01
    plot_roofline(conv_res.trace, str(tmp_path / "roof.png"))
    assert (tmp_path / "roof.png").read_bytes()[:8] == PNG_MAGIC
