"""A jit build's static TBE reduce (CceOp.core_schedule_reduce: no double buffering for a graph
with a reduce) runs its tiles in one UB slot; the atomic split, a keepdims reduce and a reduce
of a middle axis keep the generic double-buffered tiles (lower/dynamic_tiling.py
`static_reduce`)."""
from __future__ import annotations

import numpy as np
import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim


def _sum(shape: tuple[int, ...], axes: list[int], keepdims: int) -> asim.Graph:
    g = asim.Graph("sum")
    x = g.input("x", shape, "float32")
    g.output(g.reduce_sum(x, g.const(np.array(axes, np.int64)), keepdims=keepdims, name="op"))
    return g


def _slots(res) -> str:
    text = res.explain("op")
    return "1 slot" if "1 slot x" in text else "2 slots" if "2 slots x" in text else text


@pytest.mark.parametrize("shape,axes,keepdims,slots", [
    ((4096, 6400), [1], 0, "1 slot"),           # last axis, keepdims off: CceOp, one slot
    ((64, 64, 6400), [-1], 0, "1 slot"),        # leading axes merge (simplify_axis_shape)
    ((4096, 6400), [1], 1, "2 slots"),          # keepdims: ReduceMultiSchedule is tried first
    ((64, 6400, 64), [1], 0, "2 slots"),        # a middle axis: not this schedule's case
])
def test_static_reduce_slots(shape, axes, keepdims, slots):
    res = asim.simulate(_sum(shape, axes, keepdims), chip="ascend910b1", kernel_build="jit",
                        fusion=False, detail="tile")
    assert _slots(res) == slots


def test_single_slot_serialises_load_and_reduce():
    """[4096, 6400] fp32 summed over its rows on the 910B1 in a jit build: a core's span
    holds its MTE2 and V work end to end (no tile's load overlaps the previous tile's sum)."""
    res = asim.simulate(_sum((4096, 6400), [1], 0), chip="ascend910b1", kernel_build="jit",
                        fusion=False, detail="tile")
    busy, span = first_core_busy_and_span(res)
    assert span >= busy["MTE2"] + busy["V"]


def test_atomic_sum_keeps_its_split():
    """A float32 sum to a scalar takes the reduce tiling's atomic split in a jit build too:
    not the CceOp schedule, so its tiles stay as they were."""
    res = asim.simulate(_sum((12288,), [0], 0), chip="ascend910b1", kernel_build="jit",
                        fusion=False, detail="tile")
    assert "atomic path" in res.explain("op")
    assert _slots(res) != "1 slot"
