"""Hand-made traces with known intervals and tasks, to test the reports without the simulator.

`small_trace`: one stream, sink mode, three tasks back to back on ascend910 (1 GHz, so 1000
cycles = 1 us):
  conv1  Conv2D  AI_CORE  cores 0-1  1000..11000  cube bound (M busy 6000 of 10000 cycles)
  relu1  Relu    AI_CORE  cores 0-1  11000..15000 memory bound (MTE2 2000 of 4000, 800 stalled)
  topk1  TopK    AI_CPU   aicpu 0    15000..20000
plus host launch intervals. total = 20000 cycles = 20 us = wait 1000 + 10000 + 4000 + 5000.
`wide_trace`: the same conv on all 32 cores, to exercise core aggregation.
"""

from __future__ import annotations

import pytest

from ascendsim.hw import get_chip
from ascendsim.sim.trace import Interval, TaskRecord, Trace

KiB = 1024


def _conv_intervals(task_id: int, cores: range, t0: int, op: str = "conv1") -> list[Interval]:
    out = []
    for c in cores:
        out += [
            Interval("aicore", c, "MTE2", task_id, op, t0, t0 + 2000, "copy", 64 * KiB,
                     "DDR", "L1"),
            Interval("aicore", c, "MTE1", task_id, op, t0 + 2000, t0 + 3000, "copy", 32 * KiB,
                     "L1", "L0A"),
            Interval("aicore", c, "M", task_id, op, t0 + 3000, t0 + 9000, "mmad", count=48),
            Interval("aicore", c, "V", task_id, op, t0 + 9000, t0 + 9500, "copy", 16 * KiB,
                     "L0C", "UB"),
            Interval("aicore", c, "MTE3", task_id, op, t0 + 9500, t0 + 10000, "copy", 16 * KiB,
                     "UB", "DDR"),
        ]
    return out


def _conv_task(task_id: int, block_dim: int, start: int) -> TaskRecord:
    return TaskRecord(
        task_id=task_id, stream_id=0, op_name="conv1", op_type="Conv2D", task_type="AI_CORE",
        start=start, end=start + 10000, launch_start=0, wait=start, block_dim=block_dim,
        input_shapes=("1,17,32,32", "32,17,3,3"), input_dtypes=("float16", "float16"),
        input_formats=("NC1HWC0", "FRACTAL_Z"), output_shapes=("1,32,32,32",),
        output_dtypes=("float16",), output_formats=("NC1HWC0",), flops=2 * 32 * 17 * 9 * 1024,
        traffic={("DDR", "read"): 64 * KiB * block_dim, ("DDR", "write"): 16 * KiB * block_dim,
                 ("L1", "read"): 32 * KiB * block_dim, ("L1", "write"): 64 * KiB * block_dim},
        pipe_cycles={"MTE2": 2000, "MTE1": 1000, "M": 6000, "V": 500, "MTE3": 500},
        roofline_cycles=5000,
        notes=("channels 17 -> 32 padding wastes 47% of cube work",),
    )


def _small() -> Trace:
    chip = get_chip("ascend910")
    ivs = _conv_intervals(0, range(2), 1000)
    for c in range(2):
        ivs += [
            Interval("aicore", c, "MTE2", 1, "relu1", 11000, 13000, "copy", 32 * KiB, "DDR", "UB",
                     stall=800),
            Interval("aicore", c, "V", 1, "relu1", 13000, 14000, "vec_unary", count=8),
            Interval("aicore", c, "MTE3", 1, "relu1", 14000, 15000, "copy", 32 * KiB, "UB",
                     "DDR"),
        ]
    ivs.append(Interval("aicpu", 0, "AICPU", 2, "topk1", 15000, 20000, "compute"))
    for tid, (op, s) in enumerate((("conv1", 0), ("relu1", 500), ("topk1", 1000))):
        ivs.append(Interval("host", 0, "HOST", tid, op, s, s + 500, "launch"))
    relu = TaskRecord(
        task_id=1, stream_id=0, op_name="relu1", op_type="Relu", task_type="AI_CORE",
        start=11000, end=15000, launch_start=500, wait=0, block_dim=2,
        input_shapes=("1,32,32,32",), input_dtypes=("float16",), input_formats=("NC1HWC0",),
        output_shapes=("1,32,32,32",), output_dtypes=("float16",), output_formats=("NC1HWC0",),
        flops=32768, traffic={("DDR", "read"): 64 * KiB, ("DDR", "write"): 64 * KiB},
        pipe_cycles={"MTE2": 2000, "V": 1000, "MTE3": 1000}, roofline_cycles=1500)
    topk = TaskRecord(
        task_id=2, stream_id=0, op_name="topk1", op_type="TopK", task_type="AI_CPU",
        start=15000, end=20000, launch_start=1000, wait=0, block_dim=1,
        input_shapes=("1,1000",), input_dtypes=("float32",), input_formats=("ND",),
        output_shapes=("1,5", "1,5"), output_dtypes=("float32", "int64"),
        output_formats=("ND", "ND"), traffic={("DDR", "read"): 4000, ("DDR", "write"): 80},
        pipe_cycles={"AICPU": 5000})
    return Trace(chip=chip, tasks=[_conv_task(0, 2, 1000), relu, topk], intervals=ivs,
                 total_cycles=20000, detail="block")


@pytest.fixture
def small_trace() -> Trace:
    return _small()


@pytest.fixture
def wide_trace() -> Trace:
    chip = get_chip("ascend910")
    ivs = _conv_intervals(0, range(32), 1000)
    ivs.append(Interval("host", 0, "HOST", 0, "conv1", 0, 500, "launch"))
    return Trace(chip=chip, tasks=[_conv_task(0, 32, 1000)], intervals=ivs, total_cycles=11000)
