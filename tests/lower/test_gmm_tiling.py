"""GroupedMatmul's own tiling on the 910B2 (lower/gmm_tiling.py): the base block, L1 steps and
block dim of ops-transformer's grouped_matmul_tiling.cpp, and what the lowering runs with
them."""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.ir import Graph
from ascendsim.lower.gmm_tiling import (
    gmm_attrs,
    gmm_base,
    gmm_steps,
    gmm_tiling_copy_lines,
    gmm_used_cores,
    gmm_walk_lines,
)

CHIP = get_chip("ascend910b2")


def test_base_block_and_steps_of_a_2_byte_grouped_matmul():
    """CalMMTiling: baseN 256, baseK 64 (half of L0B), baseM 128 (L0C over 256 fp32 columns);
    CalcStepKaKb: stepKa 8, stepKb 4 (A and B each 256 KB of L1, double-buffered)."""
    base = gmm_base(CHIP, 2047, 2)
    assert base == (128, 256, 64)
    assert gmm_steps(CHIP, base, 2) == (8, 4)
    assert gmm_base(CHIP, 40, 2)[0] == 48        # fewer rows than baseM: rows rounded to 16


def test_block_dim_counts_the_groups_blocks():
    """CalUsedCoreNum: groups + (M - groups) / baseM blocks along M times N / 256."""
    assert gmm_used_cores(CHIP, 200, 4, 128, 128) == 5
    assert gmm_used_cores(CHIP, 1031, 4, 128, 128) == 12
    assert gmm_used_cores(CHIP, 2047, 8, 2047, 128) == 24
    assert gmm_attrs(CHIP, 256, 8, 32, 512, 1024, 2) == {
        "block_dim": 24, "base_block": [32, 256, 64, 256], "walk_lines": 6 + 6}


def _gmm(rows: int, experts: int, k: int, n: int) -> Graph:
    g = Graph("gmm")
    x = g.input("x", (rows * experts, k), "bfloat16")
    w = g.input("w", (experts, k, n), "bfloat16")
    gl = g.const(np.array([rows * (i + 1) for i in range(experts)], dtype=np.int64), name="gl")
    g.output(g.grouped_matmul(x, w, gl, name="gmm"))
    return g


def test_the_lowering_runs_the_kernels_blocks():
    """8 groups of 256 rows x [1024, 2048]: 8 x 2 x 8 = 128 blocks of 128 x 256 on 24 cores,
    each loading its own A and B (no strip kept across blocks)."""
    r = asim.simulate(_gmm(256, 8, 1024, 2048), "ascend910b2", fusion=False)
    notes = " ".join(n for t in r.trace.tasks for n in t.notes)
    assert "base block m128 x n256 x k64" in notes
    assert "128 tiles over block dim 24" in notes
    assert "no operand kept in L1" in notes


def test_group_walk_lines():
    """Every core reads the int64 group list (8 entries a 64-byte line), one line each of kList
    and nList and the x, weight and y tensor-list descriptors before its first block."""
    assert gmm_walk_lines(4) == gmm_walk_lines(8) == 6
    assert gmm_walk_lines(128) == 16 + 5


def test_tiling_copy_lines():
    """Each core copies gmmBaseParams (152 bytes: 3 lines) and the TCubeTiling (200 bytes at
    offset 152 + 1536: 4 lines) of GMMTilingData; the kernel start holds one line already."""
    assert gmm_tiling_copy_lines() == 3 + 4 - 1


def test_the_group_walk_delays_each_core_by_its_datacache_misses():
    """The tiling copy's 6 and the walk's 6 dependent misses of 211 cycles (the A2's
    scalar_gm_miss_cycles) come before each core's first block: a small grouped matmul (one
    block per core) takes 12 x 211 cycles longer than on the same chip without the figure
    (within 2 %)."""
    g = _gmm(50, 4, 64, 128)
    with_walk = asim.simulate(g, CHIP, fusion=False)
    bare = asim.simulate(g, CHIP.replace(scalar_gm_miss_cycles=None), fusion=False)
    assert abs((with_walk.cycles - bare.cycles) - 12 * 211) <= 0.02 * 12 * 211
