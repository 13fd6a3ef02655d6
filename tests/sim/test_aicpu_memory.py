"""The AI CPU on the memory system (ascendsim.lower.aicpu, ascendsim.sim.aicpu): its reads and
writes are flows of the shared fabric, its compute rate comes from its op class."""

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.ir.registry import get_op
from ascendsim.lower.aicpu import aicpu_class

CHIP = get_chip("ascend910")
N = 1 << 20


def _pow_graph(busy: bool) -> asim.Graph:
    """Pow (an AI CPU op) on N fp32 elements; with `busy`, an independent 128M-element fp16
    Add on the AI Cores that streams HBM at the same time (two streams)."""
    g = asim.Graph("t")
    x, y = g.input("x", (N,), "float32"), g.input("y", (N,), "float32")
    g.output(g.pow(x, y, name="p"))
    if busy:
        a, b = g.input("a", (1 << 27,), "float16"), g.input("b", (1 << 27,), "float16")
        g.output(g.add(a, b, name="add"))
    return g


def _run(chip, busy: bool):
    res = simulate(_pow_graph(busy), chip, fusion=False, streams=2)
    return res, res.trace.task("p")


def _steps(res, task) -> dict:
    return {iv.kind: iv for iv in res.trace.intervals_of(task.task_id)}


def test_the_ai_cpu_bytes_cross_hbm_in_the_trace():
    """The Pow task shows a read of both inputs (DDR -> AICPU) and a write of its output
    (AICPU -> DDR) on the AI CPU lane, at most at one AI CPU's bandwidth, between its launch
    and its compute; the task's traffic counts them as DDR bytes."""
    res, task = _run(CHIP, busy=False)
    steps = _steps(res, task)
    assert list(steps) == ["launch", "read", "compute", "write"]
    read, write = steps["read"], steps["write"]
    assert (read.bytes, read.src, read.dst) == (2 * 4 * N, "DDR", "AICPU")
    assert (write.bytes, write.src, write.dst) == (4 * N, "AICPU", "DDR")
    per_cycle = CHIP.ai_cpu_memory_bytes_per_s / CHIP.clock_hz
    assert read.duration >= read.bytes / per_cycle - 1
    assert steps["launch"].end <= read.start and read.end <= steps["compute"].start
    assert task.traffic[("DDR", "read")] == 2 * 4 * N
    assert task.traffic[("DDR", "write")] == 4 * N


def test_the_ai_cpu_slows_when_the_ai_cores_saturate_hbm():
    """With HBM at 200 GB/s (a what-if: 32 AI Cores streaming at once then get ~6 GB/s each,
    below one AI CPU's 20 GB/s), Pow's read while the Add runs takes longer than alone, and
    the Add is slowed a little too: they share HBM. Its compute is not affected."""
    slow = CHIP.replace(hbm_bandwidth_bytes_per_s=2e11)
    alone_res, alone = _run(slow, busy=False)
    both_res, both = _run(slow, busy=True)
    a, b = _steps(alone_res, alone), _steps(both_res, both)
    assert b["read"].duration > 2 * a["read"].duration
    assert b["compute"].duration == a["compute"].duration
    assert both.duration > alone.duration
    add_alone = simulate(_add_only(), slow, fusion=False).trace.task("add")
    assert both_res.trace.task("add").duration > add_alone.duration


def test_with_hbm_headroom_the_ai_cpu_keeps_its_own_bandwidth():
    """On the built-in 910 (1148 GB/s HBM), the AI Cores' fair share of HBM stays above one
    AI CPU's cap, so the concurrent Add does not slow Pow's read (max-min fair sharing)."""
    alone_res, alone = _run(CHIP, busy=False)
    both_res, both = _run(CHIP, busy=True)
    assert _steps(both_res, both)["read"].duration == _steps(alone_res, alone)["read"].duration


def _add_only() -> asim.Graph:
    g = asim.Graph("t")
    a, b = g.input("a", (1 << 27,), "float16"), g.input("b", (1 << 27,), "float16")
    g.output(g.add(a, b, name="add"))
    return g


def test_compute_rate_follows_the_op_class():
    """Pow computes as a transcendental op, NonZero and DropOutGenMask as index ops; the
    compute interval is work items / (class rate x AI CPU clock)."""
    assert aicpu_class(get_op("Pow")) == "transcendental"
    assert aicpu_class(get_op("NonZero")) == "index"
    assert aicpu_class(get_op("DropOutGenMask")) == "index"
    res, task = _run(CHIP, busy=False)
    items = max(N, task.flops)
    rate = CHIP.ai_cpu_op_elements_per_cycle.transcendental
    expect = CHIP.cycles(items / (rate * CHIP.ai_cpu_clock_hz))
    assert _steps(res, task)["compute"].duration == expect
    faster = CHIP.replace(ai_cpu_op_elements_per_cycle={"transcendental": 2 * rate})
    res2, task2 = _run(faster, busy=False)
    assert _steps(res2, task2)["compute"].duration == CHIP.cycles(
        items / (2 * rate * CHIP.ai_cpu_clock_hz))
