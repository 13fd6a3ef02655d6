"""910B mix kernels overlap their AIC and AIV phases (ascendsim.sim.mix): a MatMul with a
fused element-wise epilogue takes less than its phases one after the other, and no less than
the longer of them."""

import dataclasses

import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.hw.names import TASK_AI_CORE, TASK_AI_VECTOR_CORE, TASK_MIX_AIC
from ascendsim.lower import lower
from ascendsim.lower.program import Program
from ascendsim.sim import Engine
from ascendsim.sim.engine import KERNEL_START_KIND

CHIP = get_chip("ascend910b")


def _mix_task(m: int, k: int, n: int, detail: str):
    """The MIX_AIC task of MatMul(m, k, n) + Relu on the 910B after the default fusions."""
    g = asim.Graph("t")
    a, b = g.input("a", (m, k), "float16"), g.input("b", (k, n), "float16")
    g.output(g.relu(g.matmul(a, b, name="mm"), name="r"))
    prog = lower(asim.optimize(g, CHIP).graph, CHIP, detail=detail)
    return next(t for t in prog.tasks if t.task_type == TASK_MIX_AIC)


def _durations(task, detail: str) -> tuple[int, int, int]:
    """(the mix kernel, its AIC phase alone, its AIV phase alone), each alone on the chip."""
    mix = Engine(Program("mix", CHIP, [dataclasses.replace(task, task_id=0, deps=())],
                         detail=detail)).run()
    aic = dataclasses.replace(task, task_id=0, deps=(), phases=task.phases[:1],
                              task_type=TASK_AI_CORE)
    aiv = dataclasses.replace(task, task_id=1, deps=(0,), phases=task.phases[1:],
                              task_type=TASK_AI_VECTOR_CORE)
    apart = Engine(Program("apart", CHIP, [aic, aiv], detail=detail)).run()
    return mix.tasks[0].duration, apart.tasks[0].duration, apart.tasks[1].duration


#: (shape, the largest mix / (AIC + AIV) allowed): the overlap hides the AIV under the AIC;
#: 2048x512x2048's AIC moves more bytes than it computes, and the AIV's bytes cross the same
#: fabric, so there the gain is small (but the mix is still shorter than the sum).
#: 1536x1024x2048 gives every cube core four of MatMulV3's 128 x 256 basic blocks (96 on 24):
#: the AIV epilogue of each block but the last hides under the next block's mmads. With few
#: blocks per core the last block's epilogue is a large share (1024^3: 32 blocks, 8 cores
#: take two, and the mix can exceed AIC + AIV run apart, whose AIV phase spreads the whole
#: epilogue over every vector core)
CASES = [((256, 256, 256), 0.8), ((1536, 1024, 2048), 0.95), ((2048, 512, 2048), 1.0)]


@pytest.mark.parametrize("shape,most", CASES)
def test_mix_kernel_is_shorter_than_its_phases_in_turn(shape, most):
    """max(AIC, AIV) <= mix < AIC + AIV (each phase alone pays its own kernel start)."""
    task = _mix_task(*shape, "block")
    mix, aic, aiv = _durations(task, "block")
    assert max(aic, aiv) <= mix < aic + aiv, (mix, aic, aiv)
    assert mix <= most * (aic + aiv), (mix, aic, aiv)


def test_mix_kernel_block_and_tile_detail_agree():
    mix_b = _durations(_mix_task(1024, 1024, 1024, "block"), "block")[0]
    mix_t = _durations(_mix_task(1024, 1024, 1024, "tile"), "tile")[0]
    assert abs(mix_b - mix_t) <= 0.05 * mix_t


def _head(blocks: int) -> int:
    """Cycles of a phase's dispatch head on CHIP (engine note, "Kernel start")."""
    return (CHIP.cycles((CHIP.task_dispatch_us or 0.0) * 1e-6)
            + (blocks - 1) * CHIP.cycles((CHIP.block_dispatch_us or 0.0) * 1e-6))


def test_the_aiv_waits_for_the_first_aic_tile_and_ends_after_the_last():
    """In the trace (tile detail), the AIV's first work starts after the AIC's first tile
    has left L0C for the workspace (FIX), and the kernel ends after the AIC's last FIX."""
    task = _mix_task(1024, 1024, 1024, "tile")
    trace = Engine(Program("mix", CHIP, [dataclasses.replace(task, task_id=0, deps=())],
                           detail="tile")).run()
    ivs = [iv for iv in trace.intervals if iv.kind != KERNEL_START_KIND]
    aic = [iv for iv in ivs if iv.core < CHIP.ai_cores]
    aiv = [iv for iv in ivs if iv.core >= CHIP.ai_cores]
    first_fix = min(iv.end for iv in aic if iv.pipe == "FIX")
    assert aic and aiv and min(iv.start for iv in aiv) >= first_fix
    assert trace.tasks[0].end > max(iv.end for iv in aic if iv.pipe == "FIX")
    # each phase's blocks start after its own dispatch head (outside the blocks, by its block
    # count), counted from the task's start
    starts = [iv for iv in trace.intervals if iv.kind == KERNEL_START_KIND]
    t0 = trace.tasks[0].start
    heads = {t0 + _head(len({iv.core for iv in starts if side(iv)}))
             for side in (lambda iv: iv.core < CHIP.ai_cores,
                          lambda iv: iv.core >= CHIP.ai_cores)}
    assert {iv.start for iv in starts} == heads
