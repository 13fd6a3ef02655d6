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
