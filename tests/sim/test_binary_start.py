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


def _transpose(kernel_build: str, chip) -> tuple[float, list[Interval]]:
    g = asim.Graph("transpose")
    x = g.input("x", (1, 256, 384), "float16")
    g.output(g.transpose(x, perm=[0, 2, 1]))
    res = asim.simulate(g, chip, fusion=False, mode="host", kernel_build=kernel_build)
    task = res.trace.tasks[0]
    starts = [i for i in res.trace.intervals
              if i.task_id == task.task_id and i.kind == "kernel_start"]
    return res.trace.us(task.duration), starts


def test_the_a2_tik_transpose_also_reads_its_tiling_into_ub():
    """The prebuilt TIK Transpose of the A2 (lower/dynamic_tiling.py, "Kernel kinds") adds
    `tik_tiling_start_us` to every block's start; a DSL kernel (Relu) and a jit Transpose do
    not."""
    chip = asim.get_chip("ascend910b4")
    assert chip.tik_tiling_start_us == pytest.approx(8.6)
    without = chip.replace(tik_tiling_start_us=0.0)
    t, starts = _transpose("binary", chip)
    t0, starts0 = _transpose("binary", without)
    extra = chip.cycles(8.6e-6)
    assert len(starts) == len(starts0) > 0
    assert all((a.end - a.start) - (b.end - b.start) == extra
               for a, b in zip(starts, starts0))
    assert t - t0 == pytest.approx(8.6, abs=0.01)       # one launch: the blocks start at once
    t_jit, _ = _transpose("jit", chip)
    assert t_jit == _transpose("jit", without)[0]
    _, relu = _relu("binary", chip)[:2]
    _, relu0 = _relu("binary", without)[:2]
    assert [i.end - i.start for i in relu] == [i.end - i.start for i in relu0]


def test_binary_kind_names_the_tik_kernels_on_the_a2_only():
    from ascendsim.lower.dynamic_tiling import binary_kind

    assert binary_kind(["Transpose"], "ascend910b4") == "tik"
    assert binary_kind(["Transpose"], "ascend910b") == "tik"
    assert binary_kind(["Transpose"], "ascend910") == "generic"     # not an A2 / A3
    assert binary_kind(["Relu"], "ascend910b4") == "generic"
    assert binary_kind(["Transpose", "Relu"], "ascend910b4") == "generic"   # a fused kernel


def _bmm(kernel_build: str, chip) -> list[Interval]:
    g = asim.Graph("bmm")
    a = g.input("a", (1, 12, 256, 256), "float16")
    b = g.input("b", (1, 12, 256, 32), "float16")
    g.output(g.matmul(a, b))
    res = asim.simulate(g, chip, fusion=False, mode="host", kernel_build=kernel_build)
    task = res.trace.tasks[0]
    return [i for i in res.trace.intervals
            if i.task_id == task.task_id and i.kind == "kernel_start"]


def test_a_binary_matmul_pays_the_prologue_too():
    """TBE's BatchMatMulV2 / MatMulV2 on the A2 are prebuilt dynamic-shape binaries as well
    (lower/cube.py `cube_binary`): every block of a binary-build MatMul starts
    `binary_block_start_us` later; a jit build does not."""
    chip = asim.get_chip("ascend910b4")
    without = chip.replace(binary_block_start_us=0.0)
    starts, starts0 = _bmm("binary", chip), _bmm("binary", without)
    extra = chip.cycles(0.30e-6)
    assert len(starts) == len(starts0) > 0
    assert all((a.end - a.start) - (b.end - b.start) == extra
               for a, b in zip(starts, starts0))
    jit, jit0 = _bmm("jit", chip), _bmm("jit", without)
    assert [i.end - i.start for i in jit] == [i.end - i.start for i in jit0]
