"""A prebuilt dynamic-shape vector kernel (a binary build) pays the chip's
`binary_block_start_us` at each block's start, before its first instruction, on top of the
start every kernel pays; a kernel compiled for its shapes (jit) does not."""

import pytest

import ascendsim as asim
from ascendsim.sim.trace import Interval


def _relu(kernel_build: str, chip) -> tuple[float, list[Interval], int]:
    g = asim.Graph("relu")
    x = g.input("x", (1, 256, 384), "float16")
    g.output(g.relu(x))
    res = asim.simulate(g, chip, fusion=False, mode="host", kernel_build=kernel_build)
    task = res.trace.tasks[0]
    starts = [i for i in res.trace.intervals
              if i.task_id == task.task_id and i.kind == "kernel_start"]
    return res.trace.us(task.duration), starts, task.block_dim


def test_a_binary_vector_kernel_pays_the_prologue_at_each_block_start():
    chip = asim.get_chip("ascend910b4")
    assert chip.binary_block_start_us == pytest.approx(0.30)
    without = chip.replace(binary_block_start_us=0.0)
    _, starts, blocks = _relu("binary", chip)
    _, starts0, blocks0 = _relu("binary", without)
    assert blocks == blocks0 and len(starts) == len(starts0) > 0
    extra = chip.cycles(0.30e-6)
    # every block's start interval is longer by exactly the figure
    assert all((a.end - a.start) - (b.end - b.start) == extra
               for a, b in zip(starts, starts0))


def test_a_jit_kernel_does_not_pay_it():
    chip = asim.get_chip("ascend910b4")
    t_jit, starts, _ = _relu("jit", chip)
    t_jit0, starts0, _ = _relu("jit", chip.replace(binary_block_start_us=0.0))
    assert t_jit == t_jit0
    assert [i.end - i.start for i in starts] == [i.end - i.start for i in starts0]
