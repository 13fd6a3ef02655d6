"""Timing of the LLM ops: fused attention never moves its scores through HBM, beats the
unfused chain, respects the roofline; the KV-cache append is in place; grouped matmul reads
every expert's weight once."""

from __future__ import annotations

import pytest
from llm_helpers import attention_graph

import ascendsim as asim
from ascendsim.models.decoder import decoder


def _ddr(task) -> int:
    return task.traffic.get(("DDR", "read"), 0) + task.traffic.get(("DDR", "write"), 0)


@pytest.mark.parametrize("chip", ["ascend910b", "ascend910"])
@pytest.mark.parametrize("b,h,hkv,s,t", [(1, 8, 2, 512, 512), (8, 8, 2, 1, 2048)])
def test_fused_attention_traffic_and_speed(chip, b, h, hkv, s, t):
    g = attention_graph(b, h, hkv, s, t, 128, "float16", "causal" if s > 1 else None)
    cmp = asim.compare(g, chip, inputs=None)
    fused = cmp.fused.trace.tasks
    (att,) = [x for x in fused if x.op_type in ("FlashAttentionScore", "IncreFlashAttention")]
    q, k = 2 * b * h * s * 128, 2 * b * hkv * t * 128
    # HBM sees q, k, v and the output at most once each (plus L2 misses of re-reads): never
    # the (b, h, s, t) scores
    assert _ddr(att) <= 2 * (2 * q + 2 * k)
    assert 2 * b * h * s * t > 2 * q or s == 1    # the scores would have been bigger
    assert att.roofline_cycles <= cmp.fused.cycles
    assert cmp.fused.cycles < cmp.unfused.cycles


def test_decode_fused_attention_is_hbm_bound_on_the_cache():
    g = attention_graph(16, 32, 32, 1, 4096, 128, "float16", None)
    res = asim.simulate(g, "ascend910b")
    (att,) = res.trace.tasks
    cache = 2 * 16 * 32 * 4096 * 128 * 2
    assert _ddr(att) >= cache                    # K and V read from HBM once
    hbm = res.chip.hbm_bandwidth_bytes_per_s
    assert res.time_us * 1e-6 >= cache / hbm     # no faster than streaming the cache
    assert res.time_us * 1e-6 <= 1.5 * cache / hbm


def test_decode_attention_reads_only_the_keys_that_exist():
    """A cache of T = 4097 keys (4096 cached + the new token) is not a whole number of key
    blocks: the last block's DMA reads only its rows, so the fused attention's cache reads
    are T keys, not the padded blocks (within the L2-miss rounding)."""
    g = attention_graph(16, 32, 32, 1, 4097, 128, "float16", None)
    (att,) = asim.simulate(g, "ascend910b").trace.tasks
    cache = 2 * 16 * 32 * 4097 * 128 * 2
    reads = att.traffic.get(("DDR", "read"), 0) + att.traffic.get(("L2", "read"), 0)
    assert cache <= reads <= 1.01 * cache + 2 * 16 * 32 * 128 * 2 * 2


def test_kv_cache_append_moves_only_new_tokens():
    g = decoder("tiny-gqa-1m", batch=2, phase="decode", context_len=1000)
    res = asim.simulate(g, "ascend910b")
    app = [x for x in res.trace.tasks if x.op_type == "KvCacheAppend"]
    assert len(app) == 4
    new = 2 * 2 * 1 * 16 * 2                     # batch x kv heads x 1 token x D x fp16
    for x in app:
        assert x.traffic.get(("L2", "write"), 0) + x.traffic.get(("DDR", "write"), 0) <= 2 * new


def test_grouped_matmul_reads_every_expert_once():
    g = decoder("tiny-moe-1m", batch=4, phase="decode", context_len=8)
    res = asim.simulate(g, "ascend910b", fusion=False)
    gmm = [x for x in res.trace.tasks if x.op_type == "GroupedMatmul"]
    assert len(gmm) == 4
    w_gate_up = 4 * 64 * 64 * 2                  # experts x hidden x 2*ffn x fp16
    reads = gmm[0].traffic.get(("DDR", "read"), 0) + gmm[0].traffic.get(("L2", "read"), 0)
    assert reads >= w_gate_up
    assert any("spread evenly" in n for n in gmm[0].notes)


@pytest.mark.parametrize("b,h,hkv,s,t", [(16, 32, 32, 1, 1024), (1, 32, 8, 1024, 1024)])
def test_fused_attention_block_detail_agrees_with_tile(b, h, hkv, s, t):
    """Block detail coalesces the identical query-block tiles; within 5% of tile detail."""
    g = attention_graph(b, h, hkv, s, t, 128, "float16", "causal" if s > 1 else None)
    block = asim.simulate(g, "ascend910b", detail="block")
    tile = asim.simulate(g, "ascend910b", detail="tile")
    assert block.cycles == pytest.approx(tile.cycles, rel=0.05)
