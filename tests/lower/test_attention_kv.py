"""Fused attention's K/V moves on split chips (lower/attention.py module note): a K or V block
is one ND -> NZ copy of one GM burst per key row, and the rows that miss the L2 are paced at
the chip's per-core read-burst cycles; IncreFlashAttention cuts a (batch, kv head)'s keys over
several cores when there are few such pairs (CANN's split-KV tiling, `kv_splits`)."""

from __future__ import annotations

import math

import pytest

import ascendsim as asim
import ascendsim.lower.attention as la
from ascendsim.lower.attention import (
    SPLIT_KV_GQA_CONTEXT,
    SPLIT_KV_MIN_KEYS,
    SPLIT_KV_SHARE,
    kv_splits,
)


def _ifa(b: int, h: int, hkv: int, t: int, d: int = 128) -> asim.Graph:
    g = asim.Graph("ifa")
    q = g.input("q", (b, h, 1, d), "float16")
    k = g.input("k", (b, hkv, t, d), "float16")
    v = g.input("v", (b, hkv, t, d), "float16")
    g.output(*g.add_node("IncreFlashAttention", [q, k, v], name="op",
                         attrs={"num_heads": h, "num_key_value_heads": hkv,
                                "scale_value": 1 / math.sqrt(d)}))
    return g


def _notes(res) -> str:
    return "\n".join(res.trace.tasks[-1].notes)


def test_split_kv_rule_follows_the_ifa_tiling():
    chip = asim.load_chip("ascend910b4")                 # 40 AIV cores
    # one (batch, kv head) pair, 8 query heads per kv head, 8192 keys: 40 // 1 parts,
    # fewer while a part would hold fewer than 512 keys -> 16
    assert kv_splits(chip, "IncreFlashAttention", 1, 8, 8192, True, 128) == 16
    assert 8192 / 16 >= SPLIT_KV_MIN_KEYS > 8192 / 17
    # a grouped-query call below 2048 keys is not split; a one-head group is
    assert kv_splits(chip, "IncreFlashAttention", 1, 8, SPLIT_KV_GQA_CONTEXT - 1, True,
                     128) == 1
    assert kv_splits(chip, "IncreFlashAttention", 2, 1, 1024, True, 128) == 2
    # enough pairs for the cores: no split; other ops and coupled chips: none
    assert kv_splits(chip, "IncreFlashAttention", math.ceil(SPLIT_KV_SHARE * 40), 8, 8192,
                     False, 128) == 1
    assert kv_splits(chip, "FlashAttentionScore", 1, 8, 8192, True, 128) == 1
    assert kv_splits(asim.load_chip("ascend910"), "IncreFlashAttention", 1, 8, 8192, True,
                     128) == 1


def test_a_split_decode_spreads_the_cache_over_cores(monkeypatch):
    """One sequence, one kv head of 8 query heads, 8192 keys: split into 16 parts it runs on
    16 cores and takes well under half the time one core would."""
    g = _ifa(1, 8, 1, 8192)
    res = asim.simulate(g, "ascend910b4")
    assert "split KV (IFA flash decode)" in _notes(res)
    assert res.trace.tasks[-1].block_dim >= 16
    monkeypatch.setattr(la, "kv_splits", lambda *a, **k: 1)
    one = asim.simulate(g, "ascend910b4")
    assert "split KV" not in _notes(one)
    assert res.cycles < 0.5 * one.cycles


def test_missing_key_rows_are_paced_per_burst():
    """A decode step reads its cold cache once: each of the busiest core's key rows (K and V)
    takes at least the chip's per-core read-burst cycles."""
    chip = asim.load_chip("ascend910b2")
    b, h, t = 16, 32, 1024
    res = asim.simulate(_ifa(b, h, h, t), chip)
    assert "paced at" in _notes(res)
    tiles = math.ceil(b * h / chip.ai_cores)            # (batch, head) tiles on the busiest AIC
    assert res.cycles >= tiles * 2 * t * chip.gm_read_burst_cycles
    bare = asim.simulate(_ifa(b, h, h, t), chip.replace(gm_read_burst_cycles=None))
    assert "paced at" not in _notes(bare)
    assert bare.cycles < res.cycles


@pytest.mark.parametrize("chip", ["ascend910"])
def test_coupled_chips_keep_their_moves(chip):
    assert "paced at" not in _notes(asim.simulate(_ifa(16, 32, 32, 1024), chip))
