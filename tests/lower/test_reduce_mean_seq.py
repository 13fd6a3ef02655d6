"""ReduceMean runs as CANN's TBE reduce_mean_compute writes it (impl/dynamic/reduce_mean.py):
every element scaled by 1/N before the sum, fp16 summed in fp32 between casts."""

import numpy as np

import ascendsim as asim


def _mean_note(dtype: str) -> tuple[str, float]:
    g = asim.Graph("mean")
    x = g.input("x", shape=(64, 1024), dtype=dtype)
    g.output(g.reduce_mean(x, np.array([1], np.int64), keepdims=0))
    res = asim.simulate(g, chip="ascend910b")
    text = res.explain(res.trace.tasks[0].op_name)
    return next(line for line in text.splitlines() if "vector sequence" in line), res.time_us


def test_mean_scales_every_element_before_the_sum():
    line, _ = _mean_note("float32")
    assert line.endswith("vmuls, vcadd [reduce tree at the reduce rate]")


def test_fp16_mean_sums_in_fp32():
    line, _ = _mean_note("float16")
    assert "vconv f16->f32, vmuls, vcadd" in line
    assert line.endswith("vconv f32->f16")
