"""Timeline, comparison and roofline figures: files written, lanes as expected."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from ascendsim.errors import AscendSimError
from ascendsim.report.roofline import plot_roofline, roofline_points, roofs
from ascendsim.report.timeline import plot_comparison, plot_timeline, timeline_lanes
from ascendsim.sim.trace import Trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CORE_PIPES = ["S", "V", "M", "MTE1", "MTE2", "MTE3"]   # ascend910 is coupled: no FIX


def lanes(fig: Figure, i: int = 0) -> list[str]:
    return [t.get_text() for t in fig.axes[i].get_yticklabels()]


def test_timeline_png_one_lane_per_pipe_per_core(small_trace: Trace, tmp_path) -> None:
    path = tmp_path / "timeline.png"
    fig = plot_timeline(small_trace, str(path))
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 10_000
    expected = [f"core {c} {p}" for c in (0, 1) for p in CORE_PIPES] + ["AI CPU", "HOST"]
    assert lanes(fig) == expected
    # every interval drawn: one polygon per interval in the per-core lanes
    drawn = sum(len(c.get_paths()) for c in fig.axes[0].collections
                if c.get_facecolors().shape[0] and c.get_alpha() is None)
    assert drawn == len(small_trace.intervals)
    assert fig.axes[0].get_xlim() == pytest.approx((0.0, 20.0))


def test_timeline_aggregates_32_cores(wide_trace: Trace, tmp_path) -> None:
    fig = plot_timeline(wide_trace, str(tmp_path / "wide.png"))
    assert lanes(fig) == [f"{p} (32 cores)" for p in CORE_PIPES] + ["AI CPU", "HOST"]
    fig = plot_timeline(wide_trace, cores=[0, 31])
    assert lanes(fig)[6:] == ([f"core 0 {p}" for p in CORE_PIPES]
                              + [f"core 31 {p}" for p in CORE_PIPES] + ["AI CPU", "HOST"])
    fig = plot_timeline(wide_trace, aggregate=False)
    assert len(lanes(fig)) == 32 * len(CORE_PIPES) + 2


def test_occupancy_lane_height(wide_trace: Trace) -> None:
    """All 32 cores run M from 4 us to 10 us: the M occupancy lane reaches 100% there."""
    from ascendsim.report.timeline import _occupancy

    m = next(lane for lane in timeline_lanes(wide_trace) if lane.label.startswith("M "))
    times, frac = _occupancy(m.intervals, m.cores)
    assert list(times) == [4000, 10000] and list(frac) == [1.0, 0.0]


def test_timeline_zoom_to_op(small_trace: Trace) -> None:
    fig = plot_timeline(small_trace, op="relu1")
    x0, x1 = fig.axes[0].get_xlim()
    assert 10.8 < x0 < 11.0 and 15.0 < x1 < 15.2
    ls = timeline_lanes(small_trace, op="relu1")
    assert {iv.op for lane in ls for iv in lane.intervals} == {"relu1"}
    fig = plot_timeline(small_trace, window=(0.0, 5.0))
    assert fig.axes[0].get_xlim() == pytest.approx((0.0, 5.0))


def test_timeline_bad_arguments(small_trace: Trace) -> None:
    with pytest.raises(AscendSimError, match="no task for op 'nope'"):
        plot_timeline(small_trace, op="nope")
    with pytest.raises(AscendSimError, match="core 99 does not exist"):
        plot_timeline(small_trace, cores=[99])
    with pytest.raises(AscendSimError, match="end > start"):
        plot_timeline(small_trace, window=(5.0, 1.0))


def test_comparison_figure(small_trace: Trace, wide_trace: Trace, tmp_path) -> None:
    path = tmp_path / "cmp.png"
    fig = plot_comparison(small_trace, wide_trace, str(path))
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert len(fig.axes) == 3
    assert lanes(fig, 0)[0] == "tasks" and lanes(fig, 1)[0] == "tasks"
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim() == pytest.approx((0.0, 20.0))
    assert lanes(fig, 2) == ["Conv2D", "TopK", "Relu"]   # per-op-type bars, largest first


def test_roofline(small_trace: Trace, tmp_path) -> None:
    pts = roofline_points(small_trace)
    assert [p["op"] for p in pts] == ["conv1", "relu1"]       # topk1 (AI CPU) not placed
    r = roofs(small_trace)
    assert r["cube fp16"] == pytest.approx(32 * 1e9 * 2 * 16**3)
    for p in pts:   # nothing can beat the roofline
        assert p["flops_per_s"] <= min(r["cube fp16"], p["intensity"] * r["L2"]) * 1.0001
    path = tmp_path / "roof.png"
    fig = plot_roofline(small_trace, str(path))
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert fig.axes[0].get_xscale() == "log" and "1 without flops" in fig.axes[0].get_title()
