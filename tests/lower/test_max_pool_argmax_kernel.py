"""MaxPoolWithArgmax as CANN's TIK kernel runs it on TBE chips (lower/pool.py): bands of
output rows sized by the UB, per-group vmax/vcmpv_eq per window position, one mask store per
window position and band; other shapes and chips keep the generic vector lowering."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.lower.pool import argmax_tiling

UB = 253952
L1 = 1048576


def _pool(k: int, n: int = 1, c: int = 64, hw: int = 20, s: int = 1, dtype: str = "float16",
          chip: str = "ascend910b_gen1"):
    g = asim.Graph("mp")
    x = g.input("x", (n, c, hw, hw), dtype)
    p = k // 2
    y, a = g.max_pool_with_argmax(x, name="op", kernel_shape=[k, k], strides=[s, s],
                                  pads=[p] * 4)
    g.output(y, a)
    return simulate(g, chip, fusion=False).trace.task("op")


def test_bands_follow_the_kernels_cut_h_rule():
    """YOLOv5's SPP pools on 20x20, 256 planes, 30 cores: 13x13 and 9x9 take one output row
    per band (two 16-pixel groups for 20 pixels) over 29 blocks of planes; 5x5 takes bands of
    4 rows (80 pixels, a multiple of 16), so its blocks split planes x bands over 30."""
    k13 = argmax_tiling(20, 20, 20, 20, (13, 13), (1, 1), (6, 6, 6, 6), 256, 30, UB, L1)
    assert (k13.bands, k13.rows, k13.groups, k13.in_rows) == (20, 1, 2, 13)
    assert (k13.units, k13.blocks) == (256, 29)
    k9 = argmax_tiling(20, 20, 20, 20, (9, 9), (1, 1), (4, 4, 4, 4), 256, 30, UB, L1)
    assert (k9.bands, k9.rows, k9.groups) == (20, 1, 2)
    k5 = argmax_tiling(20, 20, 20, 20, (5, 5), (1, 1), (2, 2, 2, 2), 256, 30, UB, L1)
    assert (k5.bands, k5.rows, k5.groups, k5.units, k5.blocks) == (5, 4, 5, 1280, 30)
    # a plane whose whole img2col fits half the UB is one band
    small = argmax_tiling(8, 8, 8, 8, (3, 3), (1, 1), (1, 1, 1, 1), 4, 30, UB, L1)
    assert (small.bands, small.rows, small.groups, small.blocks) == (1, 8, 4, 4)


def test_time_grows_with_window_positions_at_fixed_output():
    """Same 20x20 output, same bands (one row, two groups): the kernel's instructions and
    mask stores are per window position, so 169 positions cost about 169/81 of 81."""
    t9, t13 = _pool(9), _pool(13)
    assert "CANN TIK max_pool_with_argmax" in t13.notes[0]
    assert 1.8 < t13.duration / t9.duration < 2.3


def test_resnet_stem_and_fp32_keep_the_generic_lowering():
    """CANN runs the ResNet-50 stem shape with its own kernel, and the TIK kernel takes
    float16 only: those keep the generic vector sequence."""
    stem = _pool(3, c=64, hw=112, s=2)
    assert not any("TIK" in n for n in stem.notes)
    assert not any("TIK" in n for n in _pool(5, dtype="float32").notes)


@pytest.mark.parametrize("chip", ["ascend910b"])
def test_other_chips_keep_the_generic_lowering(chip):
    assert not any("TIK" in n for n in _pool(5, chip=chip).notes)


def test_every_band_pays_a_store_and_two_instructions_per_group_per_position():
    """4 planes on 4 blocks, one plane per core: 20 bands x 169 positions, each paying at
    least its mask store's latency and, per 16-pixel group, a vmax and a vcmpv_eq of 2
    repeats (binary rate: 4 cycles each)."""
    from ascendsim.hw import get_chip

    chip = get_chip("ascend910b_gen1")
    store = chip.path_latency_cycles.get("ub", "gm")
    floor = 20 * 169 * (2 * 2 * 4 + store)
    t = _pool(13)
    assert floor <= t.duration <= 1.5 * floor


def test_tik_task_keeps_the_simulator_invariants_and_its_roofline(invariants):

    g = asim.Graph("mp")
    x = g.input("x", (2, 64, 20, 20), "float16")
    y, a = g.max_pool_with_argmax(x, name="op", kernel_shape=[5, 5], strides=[1, 1],
                                  pads=[2] * 4)
    g.output(y, a)
    res = simulate(g, "ascend910b_gen1", fusion=False)
    invariants(res)
    t = res.trace.task("op")
    assert t.input_formats[0] == "NC1HWC0" and t.duration >= t.roofline_cycles
