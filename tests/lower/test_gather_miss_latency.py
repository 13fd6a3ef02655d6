"""A gather's per-row GM reads that miss the L2 pay the chip's `gm_row_miss_latency_cycles`
(`lower.tiling.gm_read`), weighted by the move's miss fraction; a stream's moves and chips
without the figure keep the path latency."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower.tiling import gm_read


def test_row_moves_pay_the_miss_latency_by_miss_fraction():
    chip = asim.load_chip("ascend910b4")
    hit = chip.path_latency_cycles.get("gm", "ub")
    miss_lat = chip.gm_row_miss_latency_cycles
    assert miss_lat and miss_lat > hit
    rows = 24
    for miss in (0.0, 0.5, 1.0):
        ins = gm_read(chip, "MTE2", "UB", rows * 2048, miss, moves=rows)
        assert ins.cycles == round((hit + miss * (miss_lat - hit)) * rows)


def test_streams_and_chips_without_the_figure_keep_the_path_latency():
    chip = asim.load_chip("ascend910b4")
    hit = chip.path_latency_cycles.get("gm", "ub")
    assert gm_read(chip, "MTE2", "UB", 32768, 1.0).cycles == round(hit)
    bare = chip.replace(gm_row_miss_latency_cycles=None)
    assert gm_read(bare, "MTE2", "UB", 8 * 2048, 1.0, moves=8).cycles == round(hit * 8)


@pytest.mark.parametrize("chip", ["ascend910", "ascend310"])
def test_chips_with_a_miss_derate_have_no_row_miss_latency(chip):
    assert asim.load_chip(chip).gm_row_miss_latency_cycles is None
