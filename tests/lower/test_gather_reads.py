"""A Gather reads the rows it gathers, not its whole table (an embedding lookup in a decode
step moves one row per id)."""

from __future__ import annotations

import pytest

import ascendsim as asim


def _lookup(ids: int, chip: str = "ascend910b4") -> asim.Result:
    g = asim.Graph("embedding")
    table = g.input("table", (32000, 4096), "float16")
    g.output(g.gather(table, g.input("ids", (1, ids), "int64"), axis=0, name="embed"))
    return asim.simulate(g, chip, fusion=False)


@pytest.mark.parametrize("ids", [1, 64, 4096])
def test_gather_reads_one_row_per_id(ids: int) -> None:
    task = _lookup(ids).trace.task("embed")
    row = 4096 * 2
    read = task.traffic[("DDR", "read")]
    # the rows (plus the ids and DMA alignment), never the 262 MB table
    assert ids * row <= read <= ids * row + 64 * 1024


def test_one_id_costs_a_small_kernel_not_a_table_scan() -> None:
    one, many = _lookup(1), _lookup(4096)
    assert one.time_us < 10.0                      # was ~290 us: the whole table streamed
    assert many.time_us > 5 * one.time_us          # 4,096 rows (32 MiB) cost more than one


def _bert_gather(rows: int, ids: int = 16384) -> asim.Result:
    g = asim.Graph("embedding")
    table = g.input("table", (rows, 768), "float32")
    g.output(g.gather(table, g.input("ids", (ids,), "int32"), axis=0, name="embed"))
    return asim.simulate(g, "ascend910b_gen1", fusion=False)


def test_tbe_gather_moves_one_row_per_dma_command() -> None:
    # TBE gather_v2_d: a table over half the UB is read one row per copy_gm_to_ubuf, each
    # paying the GM -> UB latency (119 cycles on the 910): 16,384 ids over 30 cores are 547
    # rows per core, >= 65,000 cycles of latency on the first core's MTE2 alone
    res = _bert_gather(21128)
    task = res.trace.task("embed")
    ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "MTE2"]
    first = min(iv.core for iv in ivs)
    assert sum(iv.duration for iv in ivs if iv.core == first) >= 547 * 119
    # BERT-base's word-embedding lookup at batch 128 x 128 (the MindSpore profile of this
    # chip: 154.7 us): 50 MB of rows in and out, each row its own DMA command
    us = res.trace.us(task.duration)
    assert 120.0 <= us <= 190.0


def test_a_table_in_half_the_ub_is_gathered_without_gm_row_moves() -> None:
    # a 2 x 768 fp32 table (6 KB) is copied into the UB once and its rows moved UB -> UB:
    # no per-row GM latency, so the same 16,384 ids take far less than the large table's
    big, small = _bert_gather(21128), _bert_gather(2)
    t_big, t_small = (r.trace.task("embed").duration for r in (big, small))
    assert t_small < 0.6 * t_big


def test_a2_index_gather_of_scattered_elements_pays_one_dma_per_index() -> None:
    # the A2's GatherV2 / Index are the built-in TIK kernels (a table over half the UB is read
    # one row per index): 65,536 fp16 elements picked out of a 512 MB vector are 65,536 DMA
    # commands, not a 128 KB stream. torch_npu's aten._unsafe_index of exactly this took
    # 288 us on a 910B4-1 (flagos-ai/FlagGems #6007; corpus row
    # flaggems-unsafeindex-910b4-1d-268m-65536); the per-command GM -> UB latency (214 cycles
    # on the A2) over 40 cores gives ~1,640 commands per core: >= 210 us at 1.65 GHz
    g = asim.Graph("index")
    x = g.input("x", (268435456,), "float16")
    g.output(g.gather(x, g.input("idx", (65536,), "int64"), axis=0, name="pick"))
    res = asim.simulate(g, "ascend910b4", fusion=False)
    us = res.trace.us(res.trace.task("pick").duration)
    assert 200.0 <= us <= 400.0
