"""Sigmoid and Gelu on the A2 / A3 run as CANN's TBE computes write them (CANN 8.1.RC1
impl/dynamic/sigmoid.py `sigmoid_compute`, impl/dynamic/gelu.py `gelu_compute_v2`, both in
their default high_precision mode): a 2-byte float input is cast to fp32, the steps run in
fp32, the result is cast back; other chips keep the registry's derived sequence."""

import pytest

import ascendsim as asim


def _run(op: str, dtype: str, chip: str, n: int = 1 << 20):
    """(sequence note, tiling note, V cycles over all cores) of one element-wise op of `n`
    elements."""
    g = asim.Graph(op)
    x = g.input("x", shape=(n // 1024, 1024), dtype=dtype)
    g.output(g.add_node(op, [x])[0])
    res = asim.simulate(g, chip=chip)
    task = res.trace.tasks[0]
    text = res.explain(task.op_name).splitlines()
    seq = next(s for s in text if "vector sequence" in s)
    tiling = next(s for s in text if "vector tiling" in s)
    v = sum(i.end - i.start for i in res.trace.intervals
            if i.task_id == task.task_id and i.pipe == "V")
    return seq, tiling, v


@pytest.mark.parametrize("op, steps", [
    ("Sigmoid", "vconv f16->f32, vmuls, vexp, vadds, vdiv, vconv f32->f16"),
    ("Gelu", "vconv f16->f32, vmul, vmul, vmuls, vadd, vmuls, vexp, vadds, vdiv, "
             "vconv f32->f16"),
])
def test_fp16_is_computed_in_fp32_on_the_a2(op, steps):
    seq, tiling, v16 = _run(op, "float16", "ascend910b")
    assert "(float16 computed in float32)" in seq and steps in seq
    # the fp32 working buffers size the UB tile: 2 slots x (2 + 2 + 8) B per element
    assert "2 slots x 12 B/element" in tiling and "up to 8192 elements per tile" in tiling
    seq32, _, v32 = _run(op, "float32", "ascend910b")
    assert "vconv" not in seq32
    # the same steps on fp32 data, without the two casts: less V work for the same elements
    assert v16 > v32


def test_other_chips_keep_the_derived_sequence():
    seq, _, _ = _run("Sigmoid", "float16", "ascend910")
    assert "from the registry's cost fields" in seq and "vconv" not in seq
