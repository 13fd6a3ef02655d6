"""Chrome trace JSON structure, explain() text, Comparison table."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import Result
from ascendsim.errors import AscendSimError
from ascendsim.report import Comparison, chrome_trace_dict, explain, write_chrome_trace
from ascendsim.sim.trace import Trace


def test_chrome_trace_structure(small_trace: Trace, tmp_path) -> None:
    path = tmp_path / "trace.json"
    write_chrome_trace(small_trace, str(path))
    doc = json.loads(path.read_text())
    evs = doc["traceEvents"]
    assert isinstance(evs, list)
    for e in evs:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int)
    xs = [e for e in evs if e["ph"] == "X"]
    for e in xs:
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] > 0 and e["ts"] >= 0
    # every interval and every task is one event
    assert len(xs) == len(small_trace.intervals) + len(small_trace.tasks)
    procs = {e["pid"]: e["args"]["name"] for e in evs
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(procs.values()) == ["AI CPU", "AI Core 0", "AI Core 1", "Host",
                                      "Task Scheduler"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
               if e["ph"] == "M" and e["name"] == "thread_name"}
    core0 = next(p for p, n in procs.items() if n == "AI Core 0")
    assert {n for (p, _), n in threads.items() if p == core0} == {"V", "M", "MTE1", "MTE2",
                                                                 "MTE3"}
    # every X event sits on a named thread of a named process
    for e in xs:
        assert e["pid"] in procs and (e["pid"], e["tid"]) in threads
    mte2 = next(e for e in xs if threads[(e["pid"], e["tid"])] == "MTE2"
                and e["name"] == "relu1")
    assert mte2["ts"] == pytest.approx(11.0) and mte2["dur"] == pytest.approx(2.0)
    assert mte2["args"]["bytes"] == 32 * 1024 and mte2["args"]["path"] == "DDR -> UB"
    assert mte2["args"]["stall_us"] == pytest.approx(0.8)
    assert mte2["args"]["op_type"] == "Relu"
    task = next(e for e in xs if e["cat"] == "task" and e["name"] == "conv1")
    assert task["args"]["bound"] == "cube" and task["args"]["notes"]
    assert task["args"]["input_shapes"] == "1,17,32,32;32,17,3,3"
    assert task["args"]["traffic_bytes"]["DDR read"] == 2 * 64 * 1024
    assert doc["otherData"]["total_us"] == pytest.approx(20.0)


def test_chrome_trace_dict_is_json_serialisable(wide_trace: Trace) -> None:
    d = chrome_trace_dict(wide_trace)
    assert len({e["pid"] for e in d["traceEvents"]}) == 32 + 2   # 32 cores, host, scheduler
    json.dumps(d)
    few = chrome_trace_dict(wide_trace, cores=[0, 5])
    names = {e["args"]["name"] for e in few["traceEvents"] if e["name"] == "process_name"}
    assert names == {"AI Core 0", "AI Core 5", "Host", "Task Scheduler"}
    assert sum(e["ph"] == "X" for e in few["traceEvents"]) == 2 * 5 + 1 + 1


def test_explain_cube_bound(small_trace: Trace) -> None:
    text = explain(small_trace, "conv1")
    lines = text.splitlines()
    assert 3 <= len(lines) <= 10
    assert lines[0].startswith("conv1 (Conv2D, AI_CORE, 2 cores): 10.00 us")
    assert "bound: cube" in text and "limiting pipe is cube (M), busy 60%" in text
    assert "padding wastes 47%" in text           # the lowering note
    assert lines[-1].startswith("would help:")


def test_explain_memory_bound_with_stall(small_trace: Trace) -> None:
    text = explain(small_trace, "relu1")
    assert "bound: memory" in text and "MTE2" in text
    assert "stalls on shared L2/HBM bandwidth: MTE2 0.80 us per core" in text
    assert "fuse" in text.splitlines()[-1]


def test_explain_aicpu_and_errors(small_trace: Trace) -> None:
    assert "bound: aicpu" in explain(small_trace, "topk1")
    with pytest.raises(AscendSimError, match="no task for op 'nope'.*conv1"):
        explain(small_trace, "nope")


def test_explain_finds_fused_member(small_trace: Trace) -> None:
    from dataclasses import replace

    fused = replace(small_trace.tasks[0], op_name="conv1_relu1", op_type="FusedConvRelu",
                    fused_ops=("conv1", "relu1"))
    tr = Trace(small_trace.chip, [fused], small_trace.intervals, 20000)
    text = explain(tr, "relu1")
    assert text.startswith("'relu1' was fused into 'conv1_relu1' (FusedConvRelu) with conv1")


def _result(trace: Trace, outputs=None) -> Result:
    g = asim.Graph("tiny")
    x = g.input("x", shape=(4,), dtype="float32")
    g.output(g.relu(x))
    return Result(graph=g, chip=trace.chip, trace=trace, outputs=outputs)


def test_comparison(small_trace: Trace, wide_trace: Trace, tmp_path) -> None:
    y = np.arange(4, dtype=np.float32)
    cmp = Comparison(_result(small_trace, {"y": y}), _result(wide_trace, {"y": y + 1e-7}))
    assert cmp.speedup == pytest.approx(20000 / 11000)
    assert cmp.outputs_equal is True
    tab = cmp.table()
    assert tab.headers == ["metric", "unfused", "fused", "unfused/fused"]
    assert tab.row("launches")[1:3] == [3, 1]
    assert tab.row("time (us)")[1:3] == pytest.approx([20.0, 11.0])
    assert tab.row("DDR write (MB)")[2] == pytest.approx(32 * 16 * 1024 / 1e6)
    assert tab.row("  Conv2D (us)")[1:3] == pytest.approx([10.0, 10.0])
    assert tab.row("outputs equal")[1] is True
    text = str(tab)
    assert "1.82x faster" in text.splitlines()[0]
    fig = cmp.plot(str(tmp_path / "cmp.png"))
    assert len(fig.axes) == 3 and (tmp_path / "cmp.png").stat().st_size > 0


def test_comparison_outputs_differ(small_trace: Trace) -> None:
    y = np.arange(4, dtype=np.float32)
    cmp = Comparison(_result(small_trace, {"y": y}), _result(small_trace, {"y": y + 0.5}))
    assert cmp.outputs_equal is False and cmp.max_abs_diff == pytest.approx(0.5)
    assert Comparison(_result(small_trace), _result(small_trace)).outputs_equal is None
    shapes_only = Comparison(_result(small_trace), _result(small_trace)).table()
    assert shapes_only.row("outputs equal")[1] == "not checked"
    assert "pass inputs=" in shapes_only.footer          # the verdict says why, under the table


def test_explain_names_the_kernel_start_of_a_tiny_op():
    """A 16-element Relu on the 910 is mostly its block's fixed start (kernel_start_us on pipe
    S): explain says so and advises more work per launch, not shape alignment."""
    g = asim.Graph("tiny")
    x = g.input("x", shape=(16,), dtype="float16")
    g.output(g.relu(x))
    res = asim.simulate(g, "ascend910")
    text = res.explain(res.trace.tasks[0].op_name)
    chip = res.trace.chip
    assert "scalar bound (the blocks' kernel start)" in text
    assert f"kernel start: {chip.kernel_start_us:.2f} us per block" in text
    assert "kernel_start_us" in text and "align shapes" not in text


def test_explain_names_the_dispatch_outside_the_blocks():
    """On the A2 a tiny kernel's blocks start after the dispatch head (task_dispatch_us, outside
    the blocks, on no pipe): explain names it with its share."""
    g = asim.Graph("tiny")
    x = g.input("x", shape=(16,), dtype="float16")
    g.output(g.relu(x))
    res = asim.simulate(g, "ascend910b", icache="warm")
    task = res.trace.tasks[0]
    text = res.explain(task.op_name)
    chip = res.trace.chip
    assert f"dispatch: {chip.task_dispatch_us:.2f} us before its blocks start" in text
    assert "task_dispatch_us" in text
