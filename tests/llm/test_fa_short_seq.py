"""FlashAttentionScore at short sequences on a split chip (lower/attention.py module note, "AIV
workspace traffic", "K/V reuse", "Matmul messages"): a tile's AIC scalar work is two KFC
Matmul messages whatever its size, every workspace move of a task crosses the L2, and a kv
head's G query heads re-read its K/V rows from the L2."""

from __future__ import annotations

import math

import ascendsim as asim
import ascendsim.lower.attention as la
from ascendsim.hw import get_chip
from ascendsim.lower.attention import (
    ACC,
    FLASH_GROUP_ELEMS,
    FLASH_RESCALE_ROWS,
    SOFTMAX_STAT_VALUES,
    TASK_KEYS,
    aiv_workspace_moves,
    kfc_scalar_stage,
)
from ascendsim.lower.tiling import api_scalar_cycles


def _gqa(b: int, s: int, h: int = 24, hkv: int = 4, d: int = 128) -> asim.Graph:
    g = asim.Graph("fa")
    q = g.input("q", (b, h, s, d), "float16")
    k = g.input("k", (b, hkv, s, d), "float16")
    v = g.input("v", (b, hkv, s, d), "float16")
    g.output(*g.add_node("FlashAttentionScore", [q, k, v], name="op",
                         attrs={"head_num": h, "scale_value": 1 / math.sqrt(d),
                                "input_layout": "BNSD"}))
    return g


def _kernel_cycles(res) -> int:
    return res.trace.tasks[-1].duration


def test_a_tile_costs_two_matmul_messages_whatever_its_size():
    chip = get_chip("ascend910b4")
    call = 2 * chip.scalar_gm_miss_cycles + api_scalar_cycles(chip, 1, 1)
    for rows, keys in ((48, 35), (64, 64), (128, 128)):
        (instr,) = kfc_scalar_stage(chip, rows, keys, 128, 2).instrs
        assert instr.cycles == 2 * call          # bmm1 and bmm2, one K step each
    # 4096 keys: four tasks of TASK_KEYS keys, two messages each
    (long,) = kfc_scalar_stage(chip, 128, 4 * TASK_KEYS, 128, 2).instrs
    assert long.cycles > 4 * 2 * call


def test_the_workspace_moves_of_a_task():
    chip = get_chip("ascend910b4")
    rows, keys, d = 128, 128, 128
    read, write = aiv_workspace_moves(chip, rows, keys, d, 2, 1, 1)
    stat = rows * SOFTMAX_STAT_VALUES * ACC
    assert read.nbytes == (rows * (keys + d) - FLASH_GROUP_ELEMS
                           - FLASH_RESCALE_ROWS * d) * ACC + stat
    assert write.nbytes == rows * keys * 2 + 2 * stat
    # two AIVs: the same bytes (they load the L2) at twice the rate
    read2, _ = aiv_workspace_moves(chip, rows, keys, d, 2, 2, 1)
    assert read2.nbytes == read.nbytes and read2.bw == 2 * read.bw


def test_short_sequences_cost_the_same_per_tile(monkeypatch):
    """B 1024, 24 heads over 4 kv heads: from S = 35 to 64 a tile is paced by its two Matmul
    messages, so the kernel takes about the same time (CANN's measured calls are flat from 35
    to 128); without the messages the S = 35 kernel is clearly the faster."""
    def ratio() -> float:
        short, longer = (asim.simulate(_gqa(1024, s), "ascend910b4") for s in (35, 64))
        return _kernel_cycles(short) / _kernel_cycles(longer)

    assert abs(ratio() - 1) < 0.1
    monkeypatch.setattr(la, "kfc_scalar_stage",
                        lambda chip, *a: la.scalar_stage(chip, 1))
    assert ratio() < 0.8


def test_grouped_heads_reuse_k_and_v_in_l2():
    """K and V of B 1024 at S = 128 do not fit the 910B4's L2, yet each K/V block is read by
    the G = 6 query heads of its kv head back to back: only the first read misses."""
    res = asim.simulate(_gqa(1024, 128), "ascend910b4")
    notes = "\n".join(res.trace.tasks[-1].notes)
    assert "K/V L2 miss 0.17" in notes
