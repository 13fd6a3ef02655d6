"""MaxPool with a 3 x 3 window and stride 2 as TBE's max_pool2d_3_3_2_2 template runs it on TBE
chips (lower/pool.py `lower_max_pool`): whole planes a tile while half the UB holds them, blocks
bound to C1 (batch below the cores) or to the batch, four vmax stages a row; a node whose own
block_dim differs from that binding, other windows and other chips keep the generic lowering."""

from __future__ import annotations

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.lower.pool import pool332_tiling

UB = 262144


def _pool(c: int, hw: int, n: int = 2, k: int = 3, s: int = 2, chip: str = "ascend910",
          **attrs):
    g = asim.Graph("mp")
    x = g.input("x", (n, c, hw, hw), "float16")
    y = g.max_pool(x, name="op", kernel_shape=[k, k], strides=[s, s], pads=[0] * 4, **attrs)
    g.output(y)
    return simulate(g, chip, fusion=False).trace.task("op")


def test_tiling_binds_c1_or_the_batch():
    """AlexNet's pools at batch 2 on 32 cores: a 27 x 27 or 13 x 13 plane fits half the UB,
    one plane a tile, C1 = 16 blocks (the profile's block_dim 16); 55 x 55 does not, so the
    tile takes 14 of 27 output rows and C1 = 6 blocks; batch 32 binds the batch."""
    t27 = pool332_tiling(2, 16, 27, 13, 13, 32, UB)
    assert (t27.c1_factor, t27.ho_factor, t27.tiles, t27.blocks, t27.db) == (1, 13, 32, 16, True)
    t13 = pool332_tiling(2, 16, 13, 6, 6, 32, UB)
    assert (t13.tiles, t13.blocks) == (32, 16)
    t55 = pool332_tiling(2, 6, 55, 27, 27, 32, UB)
    assert (t55.ho_factor, t55.tiles, t55.blocks) == (14, 24, 6)
    assert t55.ub <= UB // 2
    big = pool332_tiling(32, 4, 56, 27, 27, 32, UB)
    assert big.blocks == 32


def test_template_is_faster_than_the_whole_reduce_lowering():
    """The template's row vmax stages cost far fewer cycles than the generic lowering's
    whole-reduce passes over the same [2, 256, 27, 27] input (pinned to 15 blocks, so the
    generic lowering runs it, on one block fewer)."""
    tpl = _pool(256, 27)
    generic = _pool(256, 27, block_dim=15)
    assert "TBE max_pool2d_3_3_2_2" in tpl.notes[0] and "16 blocks" in tpl.notes[0]
    assert not any("max_pool2d_3_3_2_2" in n for n in generic.notes)
    assert tpl.duration < 0.8 * generic.duration


def test_other_windows_and_other_block_dims_keep_the_generic_lowering():
    """A 2 x 2 window is not the template's; a node whose block_dim (27) differs from the
    template's binding (6 blocks for [2, 96, 55, 55]) ran another schedule."""
    assert not any("max_pool2d_3_3_2_2" in n for n in _pool(256, 26, k=2).notes)
    assert not any("max_pool2d_3_3_2_2" in n for n in _pool(96, 55, block_dim=27).notes)
    assert any("max_pool2d_3_3_2_2" in n for n in _pool(96, 55).notes)
