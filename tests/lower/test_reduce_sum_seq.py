"""ReduceSum runs as CANN's TBE reduce_sum_compute writes it (impl/dynamic/reduce_sum.py):
a float16 input is cast to fp32 before the sum and the result cast back, on every SoC but the
Ascend310."""

import numpy as np

import ascendsim as asim


def _sum(dtype: str, chip: str) -> tuple[str, float, float]:
    """The sequence note, the V cycles per task and the task time of a row sum."""
    g = asim.Graph("sum")
    x = g.input("x", shape=(4096, 384), dtype=dtype)
    g.output(g.reduce_sum(x, np.array([1], np.int64), keepdims=0))
    res = asim.simulate(g, chip=chip)
    task = res.trace.tasks[0]
    text = res.explain(task.op_name)
    line = next(s for s in text.splitlines() if "vector sequence" in s)
    v = sum(i.end - i.start for i in res.trace.intervals
            if i.task_id == task.task_id and i.pipe == "V")
    return line, v, res.trace.us(task.duration)


def test_fp16_sum_is_computed_in_fp32_on_the_a2():
    line, v16, _ = _sum("float16", "ascend910b4")
    assert "(float16 computed in float32)" in line
    assert "vconv f16->f32, vcadd [reduce tree at the reduce rate], vconv f32->f16" in line
    assert "reduce_sum.py" in line
    # the same rows of float32 take the same reduce tree, without the two casts
    line32, v32, _ = _sum("float32", "ascend910b4")
    assert "vconv" not in line32
    assert v16 > v32


def test_fp16_sum_stays_in_fp16_on_the_ascend310():
    line, _, _ = _sum("float16", "ascend310")
    assert "computed in float32" not in line and "vconv" not in line
