"""TBE's prebuilt dynamic reduce kernel runs as a MIX_AIV task on the A2 / A3: its binary holds
a group-reduce tiling case that syncs its cores through FFTS and so sets `enforce_mix_mode`
(reduce_group_schedule.py `_add_build_args`, reduce_tilingcase.py `_calc_dynamic_case`). The
launch type adds no time; msprof reports the vector cores as Block Dim and Mix Block Dim 0."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.lower.dynamic_tiling import mix_binary


def _reduce_graph(op: str) -> asim.Graph:
    g = asim.Graph("reduce")
    x = g.input("x", shape=(4, 256, 384), dtype="float16")
    axes = g.const(np.array([-1], np.int64), name="axes")
    g.output(g.add_node(op, [x, axes], {"keepdims": 0}, name="op")[0])
    return g


def _row(result, op_type: str):
    return next(r for r in result.summary() if r.op_type == op_type)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean"])
def test_a_binary_reduce_is_a_mix_aiv_task_on_vector_cores_only(op):
    binary = asim.simulate(_reduce_graph(op), chip="ascend910b4", kernel_build="binary",
                           fusion=False)
    row = _row(binary, op)
    assert row.task_type == "MIX_AIV"
    assert row.block_dim > 1 and row.mix_block_dim == 0


def test_the_jit_reduce_and_other_binaries_keep_their_task_type():
    jit = asim.simulate(_reduce_graph("ReduceSum"), chip="ascend910b4", kernel_build="jit",
                        fusion=False)
    assert _row(jit, "ReduceSum").task_type == "AI_VECTOR_CORE"
    assert not mix_binary(["Relu"], "ascend910b4")
    assert not mix_binary(["ReduceSum", "Mul"], "ascend910b4")
    assert not mix_binary(["ReduceSum"], "ascend910")
    assert mix_binary(["ReduceMin"], "ascend910c")
