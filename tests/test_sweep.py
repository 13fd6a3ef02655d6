"""Sweeps: grid checks, point identity, reuse of optimised graphs, resume, executors, views."""

from __future__ import annotations

import csv
import pickle
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import ascendsim as asim
from ascendsim.sweep import (
    RESULT_COLUMNS,
    SweepResult,
    chip_key,
    graph_key,
    reads_of,
    recording_chip,
    sweep,
)

GRID = {"hbm_bandwidth_bytes_per_s": [6e11, 1.2e12], "ub_bytes": [128 * 1024, 256 * 1024]}


@pytest.fixture(scope="module")
def small_resnet():
    """A 4-stage ResNet small enough for a few-second sweep; its L2 pass needs no cost model,
    so the passes read only a handful of chip figures (HBM bandwidth is not one of them)."""
    return asim.models.resnet(batch=2, image=32, layers=(1, 1, 1, 1))


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that counts submitted batches (to see what a resumed sweep reruns)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_unknown_grid_field_names_close_matches():
    g = asim.models.matmul_bias_relu()
    with pytest.raises(asim.ConfigError, match=r"'ub_byte'.*did you mean ub_bytes"):
        sweep(g, "ascend910", grid={"ub_byte": [1]}, out=None)


def test_bad_grid_value_is_rejected_by_the_chip():
    g = asim.models.matmul_bias_relu()
    with pytest.raises(asim.ConfigError, match=r"ub_bytes.*must be > 0"):
        sweep(g, "ascend910", grid={"ub_bytes": [0]}, out=None)


def test_graphs_and_chips_pickle(small_resnet):
    """Process pools and Dask pickle both; the copy is the same graph and the same chip."""
    chip = asim.get_chip("ascend910").replace(ub_bytes=128 * 1024)
    assert pickle.loads(pickle.dumps(chip)) == chip
    assert pickle.loads(pickle.dumps(chip)).source("ub_bytes").startswith("U")
    copy = pickle.loads(pickle.dumps(small_resnet))
    assert graph_key(copy) == graph_key(small_resnet)
    assert graph_key(asim.models.resnet(batch=2, image=32, layers=(1, 1, 1, 1))) == \
        graph_key(small_resnet)                       # built twice: same identity
    assert graph_key(asim.models.resnet(batch=4, image=32, layers=(1, 1, 1, 1))) != \
        graph_key(small_resnet)
    assert chip_key(chip) != chip_key(asim.get_chip("ascend910"))


def test_recording_chip_sees_what_the_passes_read(small_resnet):
    rec = recording_chip(asim.get_chip("ascend910"))
    asim.optimize(small_resnet, rec)
    reads = reads_of(rec)
    assert "ub_bytes" in reads                       # UB fusion checks capacity
    assert "l2_bytes" in reads                       # L2 fusion's residency budget
    assert "hbm_bandwidth_bytes_per_s" not in reads  # nothing reached the cost model


def test_reused_graph_gives_the_numbers_of_a_fresh_run(small_resnet, tmp_path):
    with ThreadPoolExecutor(max_workers=1) as pool:
        res = sweep(small_resnet, "ascend910", grid=GRID, fusion=[True, False],
                    executor=pool, out=tmp_path / "s.csv", progress=False)
    assert len(res) == 8 and not res.errors
    assert res.reused >= 2      # points differing only in HBM bandwidth shared a graph
    base = asim.get_chip("ascend910")
    for row in res.rows:
        chip = base.replace(**{k: row[k] for k in GRID})
        fresh = asim.simulate(small_resnet, chip, fusion=row["fusion"])
        assert (row["cycles"], row["tasks"]) == (fresh.cycles, len(fresh.trace.tasks))
        assert row["time_us"] == fresh.time_us


def test_resume_runs_only_missing_points(small_resnet, tmp_path):
    out = tmp_path / "sweep.csv"
    grid = {"hbm_bandwidth_bytes_per_s": [6e11, 1.2e12, 1.8e12]}
    with CountingExecutor() as pool:
        first = sweep(small_resnet, "ascend910", grid=grid, fusion=[False], executor=pool,
                      out=out, progress=False)
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and lines[0].split(",")[:3] == ["point", "graph",
                                                           "hbm_bandwidth_bytes_per_s"]
    out.write_text("\n".join(lines[:2]) + "\n")      # "interrupted" after one point
    with CountingExecutor() as pool:
        again = sweep(small_resnet, "ascend910", grid=grid, fusion=[False], executor=pool,
                      out=out, progress=False)
        assert again.resumed == 1 and pool.submitted >= 1
    assert again.rows == first.rows
    with CountingExecutor() as pool:
        done = sweep(small_resnet, "ascend910", grid=grid, fusion=[False], executor=pool,
                     out=out, progress=False)
        assert pool.submitted == 0 and done.resumed == 3
    with open(out, newline="") as fh:
        assert len(list(csv.reader(fh))) == 4


def test_out_file_of_another_sweep_is_refused(small_resnet, tmp_path):
    out = tmp_path / "other.csv"
    out.write_text("point,graph,l2_bytes,fusion\n")
    with pytest.raises(asim.ConfigError, match="other.csv.*has columns"):
        sweep(small_resnet, "ascend910", grid={"ub_bytes": [128 * 1024]}, out=out,
              progress=False)


def _rows(values):
    cols = ["point", "graph", "ub_bytes", "fusion", *RESULT_COLUMNS]
    rows = [{"point": str(i), "graph": "g", "ub_bytes": u, "fusion": f,
             **{c: 0 for c in RESULT_COLUMNS}, "time_us": t, "ddr_bytes": d}
            for i, (u, f, t, d) in enumerate(values)]
    return SweepResult(rows=rows, columns=cols, grid={"ub_bytes": sorted({v[0] for v in values})})


def test_pareto_front_and_plots(tmp_path):
    res = _rows([(1, True, 5.0, 10), (2, True, 4.0, 20), (3, True, 4.5, 5),
                 (1, False, 6.0, 30), (2, False, 3.0, 40), (3, False, 7.0, 50)])
    front = res.pareto("time_us", "ddr_bytes")
    assert [(r["time_us"], r["ddr_bytes"]) for r in front] == [(3.0, 40), (4.0, 20), (4.5, 5)]
    fig = res.plot_heatmap("ub_bytes", "fusion", value="time_us", path=tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 0 and len(fig.axes) == 2   # panel + colorbar
    fig = res.plot_heatmap("ub_bytes", "graph")          # fusion varies: one panel each
    assert len(fig.axes) == 3
    res.plot_pareto("time_us", "ddr_bytes", path=tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
    with pytest.raises(asim.ConfigError, match="unknown sweep column 'speed'"):
        res.plot_heatmap("ub_bytes", "fusion", value="speed")


def test_to_pandas_and_missing_extra(monkeypatch):
    res = _rows([(1, True, 5.0, 10), (2, False, 4.0, 20)])
    pytest.importorskip("pandas")
    df = res.to_pandas()
    assert list(df.columns) == res.columns and df["time_us"].tolist() == [5.0, 4.0]
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(asim.ConfigError, match=r"ascendsim\[sweep\]"):
        res.to_pandas()


@pytest.mark.slow
def test_dask_cluster_matches_the_default_executor(small_resnet, tmp_path):
    """The same points on a 2-worker Dask LocalCluster and on the default process pool give
    identical numbers."""
    distributed = pytest.importorskip("dask.distributed")
    grid = {"hbm_bandwidth_bytes_per_s": [6e11, 1.2e12]}
    local = sweep(small_resnet, "ascend910", grid=grid, fusion=[True, False],
                  out=tmp_path / "local.csv", progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        on_dask = sweep(small_resnet, "ascend910", grid=grid, fusion=[True, False],
                        executor=client.get_executor(), out=tmp_path / "dask.csv",
                        progress=False)
    assert len(local) == 4 and not local.errors and not on_dask.errors
    assert on_dask.rows == local.rows


def test_several_graphs_and_fusion_options(tmp_path):
    graphs = {"mbr": asim.models.matmul_bias_relu(), "cbr": asim.models.conv_bn_relu()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        res = sweep(graphs, "ascend910b", grid={"sink_launch_us": [1.0, 3.0]},
                    fusion=[False, {"graph_kernel": True}], executor=pool,
                    out=tmp_path / "g.csv", progress=False)
    assert [(r["graph"], r["sink_launch_us"], r["fusion"]) for r in res.rows][:4] == [
        ("mbr", 1.0, False), ("mbr", 1.0, {"graph_kernel": True}),
        ("mbr", 3.0, False), ("mbr", 3.0, {"graph_kernel": True})]
    assert len(res) == 8 and len({r["point"] for r in res.rows}) == 8
    slow = {(r["graph"], str(r["fusion"])): r["time_us"] for r in res.rows
            if r["sink_launch_us"] == 3.0}
    fast = {(r["graph"], str(r["fusion"])): r["time_us"] for r in res.rows
            if r["sink_launch_us"] == 1.0}
    assert all(slow[k] > fast[k] for k in fast)       # launches cost more: every graph slower
    assert '{""graph_kernel"": true}' in (tmp_path / "g.csv").read_text()


def test_group_fields_take_dicts_and_resume(tmp_path):
    """A grid over a group field (a dict per value) runs, is written as JSON and resumes."""
    g = asim.models.matmul_bias_relu()
    grid = {"path_bytes_per_cycle": [{"gm_ub": 64}, {"gm_ub": 256}]}
    with ThreadPoolExecutor(max_workers=1) as pool:
        res = sweep(g, "ascend910", grid=grid, fusion=[True], executor=pool,
                    out=tmp_path / "p.csv", progress=False)
    chip = asim.get_chip("ascend910")
    for row in res.rows:
        fresh = asim.simulate(g, chip.replace(path_bytes_per_cycle=row["path_bytes_per_cycle"]))
        assert row["cycles"] == fresh.cycles
    assert '"{""gm_ub"": 64}"' in (tmp_path / "p.csv").read_text()
    again = sweep(g, "ascend910", grid=grid, fusion=[True], out=tmp_path / "p.csv",
                  progress=False)
    assert again.resumed == 2 and again.rows == res.rows


# ------------------------- issue 23: a sweep killed with SIGKILL resumes; corrupt files refused
KILL_GRID = {"hbm_bandwidth_bytes_per_s": [f * 1e11 for f in range(5, 13)]}     # 8 points
KILL_SCRIPT = """
import sys
import ascendsim as asim
from ascendsim.sweep import sweep
sweep(asim.models.resnet50(batch=1), "ascend910", grid={grid!r}, fusion=[False],
      out=sys.argv[1], progress=False)
"""


def _data_lines(path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))[1:]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of a process group is POSIX")
def test_sigkill_mid_run_then_resume_loses_and_repeats_no_point(tmp_path):
    import os
    import signal
    import subprocess
    import time

    out = tmp_path / "killed.csv"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT.format(grid=KILL_GRID),
                             str(out)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and len(_data_lines(out)) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)           # the sweep and its worker processes
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    at_kill = len(_data_lines(out))
    assert 2 <= at_kill < 8
    with ThreadPoolExecutor(max_workers=2) as pool:
        res = sweep(asim.models.resnet50(batch=1), "ascend910", grid=KILL_GRID, fusion=[False],
                    executor=pool, out=out, progress=False)
    lines = _data_lines(out)
    assert res.resumed == at_kill and len(res) == 8 and not res.errors
    assert len(lines) == 8 and len({ln[0] for ln in lines}) == 8          # none lost, none twice
    assert sorted(ln[0] for ln in lines) == sorted(r["point"] for r in res.rows)
    chip = asim.get_chip("ascend910").replace(hbm_bandwidth_bytes_per_s=5e11)
    fresh = asim.simulate(asim.models.resnet50(batch=1), chip, fusion=False)
    row = next(r for r in res.rows if r["hbm_bandwidth_bytes_per_s"] == 5e11)
    assert row["cycles"] == fresh.cycles


def _finished(tmp_path, small_resnet):
    out = tmp_path / "s.csv"
    with CountingExecutor() as pool:
        sweep(small_resnet, "ascend910", grid={"ub_bytes": [128 * 1024, 192 * 1024,
                                                            256 * 1024]},
              fusion=[False], executor=pool, out=out, progress=False)
    return out


def test_a_line_cut_by_a_kill_is_dropped_and_its_point_reruns(tmp_path, small_resnet):
    out = _finished(tmp_path, small_resnet)
    text = out.read_text()
    out.write_text(text[: len(text) - 7])               # the last row, cut mid-number
    grid = {"ub_bytes": [128 * 1024, 192 * 1024, 256 * 1024]}
    with CountingExecutor() as pool:
        again = sweep(small_resnet, "ascend910", grid=grid, fusion=[False], executor=pool,
                      out=out, progress=False)
    assert again.resumed == 2 and pool.submitted == 1 and len(again) == 3
    assert out.read_text() == text                      # rewritten whole, once


@pytest.mark.parametrize("damage, says", [
    (lambda lines: lines[:2] + ["x,y"] + lines[2:], "line 3: 2 fields"),
    (lambda lines: lines + [lines[1]], "line 5: point .* is written twice"),
    (lambda lines: [lines[0], lines[1].replace(lines[1].split(",")[-1], "abc"), *lines[2:]],
     "line 2: l2_write_bytes = 'abc' is not a finite number"),
])
def test_a_corrupt_sweep_file_is_refused_naming_its_line(tmp_path, small_resnet, damage, says):
    out = _finished(tmp_path, small_resnet)
    out.write_text("\n".join(damage(out.read_text().splitlines())) + "\n")
    with pytest.raises(asim.ConfigError, match=f"s.csv' {says}"):
        sweep(small_resnet, "ascend910", grid={"ub_bytes": [128 * 1024, 192 * 1024,
                                                            256 * 1024]},
              fusion=[False], executor=CountingExecutor(), out=out, progress=False)
