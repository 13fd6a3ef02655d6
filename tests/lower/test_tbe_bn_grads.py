"""CANN's BatchNorm training kernels on the first-generation 910 (TBE DSL kernels): their
full-shape fp16 inputs cast to fp32, fp32 arithmetic, and the gradients' block split by their
TBE schedules (lower/vector.py `TBE_BLOCKS`, lower/vector_seq.py `_BN_UPDATE_GRAD`,
lower/bn_schedule.py: whole C1 slices per block)."""

from __future__ import annotations

import pytest
from lower_trace_helpers import first_core_busy_and_span

import ascendsim as asim

CHIP = "ascend910b_gen1"


def _bn_grad(op: str, c: int, n: int = 16, hw: int = 14) -> asim.Result:
    g = asim.Graph(op)
    shape = (n, c, hw, hw)
    grads = g.input("grads", shape, "float16", "NC1HWC0")
    x = g.input("x", shape, "float16", "NC1HWC0")
    stats = [g.input(f"s{i}", (c,), "float32") for i in range(5)]
    if op == "BNTrainingUpdateGrad":
        outs = g.bn_training_update_grad(grads, x, stats[0], stats[1], name="op")
    else:
        outs = g.bn_training_reduce_grad(grads, x, *stats, name="op")
    g.output(*(outs if isinstance(outs, (list, tuple)) else [outs]))
    return asim.simulate(g, CHIP, fusion=False)


def _cores(res: asim.Result) -> int:
    task = res.trace.task("op")
    return len({iv.core for iv in res.trace.intervals if iv.task_id == task.task_id})


@pytest.mark.parametrize(("op", "c", "blocks"), [
    # bn_update_grad_schedule: C1 = 64 >= 30 cores cuts C1 over every core; C1 = 16 with a
    # batch of 16 takes the atomic schedule over the batch (block_dim 30 and 16 in the
    # MindSpore ResNet-50 profile of this chip)
    ("BNTrainingUpdateGrad", 1024, 30), ("BNTrainingUpdateGrad", 256, 16),
    # BnGradReduceSchedule splits the batch axis: 16 at C1 = 16 and at C1 = 64 (the profile)
    ("BNTrainingReduceGrad", 1024, 16), ("BNTrainingReduceGrad", 256, 16),
])
def test_tbe_schedule_sets_the_block_count(op: str, c: int, blocks: int) -> None:
    res = _bn_grad(op, c)
    assert _cores(res) == blocks
    assert any(f"{blocks} block(s)" in n for n in res.trace.task("op").notes)


def test_fp16_inputs_are_both_cast_to_fp32() -> None:
    notes = " ".join(_bn_grad("BNTrainingReduceGrad", 256).trace.task("op").notes)
    assert "vconv f16->f32 (x)" in notes and "vconv f16->f32," in notes
    assert "vconv f32->f16" in notes                 # the result back to the grads' dtype
    assert "vbrcb" not in notes                      # statistics read by broadcasting forms


def test_reduce_grad_v_work_is_its_fp32_sequence_on_16_blocks() -> None:
    # [16, 1024, 14, 14] over 16 blocks: 200,704 elements per core; per element three vconv
    # (64 elements a cycle, the fp32 side) and four fp32 binary ops (32 elements per cycle at
    # 128 B/cycle): 0.172 cycles, about 34,500 V cycles per core (the per-channel steps add a
    # few); a V-bound kernel of 38 us at 0.9 GHz, which the profile measures at 40.7 us
    res = _bn_grad("BNTrainingReduceGrad", 1024)
    busy, _ = first_core_busy_and_span(res, "op", ("V",))
    assert 34_000 <= busy["V"] <= 36_500


def test_bn_training_update_computes_y_in_fp32() -> None:
    # TBE bn_training_update: a float16 x is cast to fp32, y = multiplier * x + addend in fp32
    # (two full-shape steps) and cast back; the statistics are per channel
    g = asim.Graph("bnu")
    x = g.input("x", (16, 512, 28, 28), "float16", "NC1HWC0")
    stats = [g.input(f"s{i}", (512,), "float32") for i in range(6)]
    outs = g.bn_training_update(x, *stats, name="op")
    g.output(*outs)
    task = asim.simulate(g, CHIP, fusion=False).trace.task("op")
    notes = " ".join(task.notes)
    assert "float16 computed in float32" in notes
    assert "vconv f16->f32, vmul, vadd" in notes and "vconv f32->f16" in notes
    busy, _ = first_core_busy_and_span(asim.simulate(g, CHIP, fusion=False), "op", ("V",))
    # 6.4 M elements over 30 cores: 214,000 per core at two vconvs (64 per cycle) and two
    # fp32 binary ops (32 per cycle): 0.094 cycles each, about 20,100 V cycles per core
    assert 19_500 <= busy["V"] <= 22_000


def test_update_grad_cut_c1_binds_whole_c1_slices() -> None:
    # bn_update_grad_shedule.py schedule_cut_c1: C1 = 64 split with nparts = 30 gives 21 blocks
    # of 3 slices, one of 1 and 8 with none, all 30 launched; each slice is N = 16 tiles of one
    # 14 x 14 x 16 plane. An even split would give each core 2.13 slices' worth.
    res = _bn_grad("BNTrainingUpdateGrad", 1024)
    task = res.trace.task("op")
    v = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "V"]
    per_core: dict[int, int] = {}
    for iv in v:
        per_core[iv.core] = per_core.get(iv.core, 0) + iv.duration
    assert len(per_core) == 22
    busy = sorted(per_core.values())
    assert busy[-1] == busy[-21] and 2.9 <= busy[-1] / busy[0] <= 3.1
    notes = " ".join(task.notes)
    assert "up to 3136 elements per tile" in notes and "8 launched block(s) with no share" in notes
    even = 3211264 / 30 / 3136 * 600        # about 600 V cycles a plane of fp32 steps
    assert busy[-1] >= 1.3 * even


def test_update_grad_on_fewer_slices_than_cores_keeps_the_batch_split() -> None:
    # C1 = 16 below the 30 cores: the atomic schedule over the batch, no C1 slices
    notes = " ".join(_bn_grad("BNTrainingUpdateGrad", 256).trace.task("op").notes)
    assert "no share" not in notes and "up to 3136 elements per tile" not in notes
