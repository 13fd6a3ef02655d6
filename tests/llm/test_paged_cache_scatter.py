"""ScatterPaKvCache: its values (Norm and PA_NZ caches, skipped slots), its shape errors, and
its timing as CANN's kernel moves the data (tokens over cores, in place, the NZ cache's
32-byte bursts)."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.ir.graph import Graph
from ascendsim.ir.tensor import itemsize
from ascendsim.lower.formats import padded_bytes


def _graph(tokens: int, heads: int, dim: int, blocks: int, block_size: int, dtype: str,
           mode: str, slot_dtype: str = "int32") -> Graph:
    g = Graph("scatter")
    width = heads * dim
    piece = 32 // itemsize(dtype)
    cache = ((blocks, width // piece, block_size, piece) if mode == "PA_NZ"
             else (blocks, block_size, heads, dim))
    key = g.input("key", (tokens, heads, dim), dtype)
    kc = g.input("key_cache", cache, dtype)
    slots = g.input("slots", (tokens,), slot_dtype)
    value = g.input("value", (tokens, heads, dim), dtype)
    vc = g.input("value_cache", cache, dtype)
    g.output(*g.add_node("ScatterPaKvCache", [key, kc, slots, value, vc],
                         {"cache_mode": mode}, name="scatter"))
    return g


@pytest.mark.parametrize("mode", ["Norm", "PA_NZ"])
def test_each_token_lands_at_its_slot(mode):
    rng = np.random.default_rng(0)
    g = _graph(5, 2, 16, 3, 4, "float16", mode)
    shape = g.values["key_cache"].shape
    feeds = {"key": rng.standard_normal((5, 2, 16)).astype(np.float16),
             "value": rng.standard_normal((5, 2, 16)).astype(np.float16),
             "key_cache": np.zeros(shape, np.float16), "value_cache": np.zeros(shape, np.float16),
             "slots": np.array([0, 5, -1, 11, 6], np.int32)}
    outs = asim.execute(g, feeds)
    k_out, v_out = (outs[o] for o in g.outputs)
    for t, s in enumerate(feeds["slots"]):
        if s < 0:
            continue
        block, row = divmod(int(s), 4)
        got = (k_out[block, :, row, :] if mode == "PA_NZ" else k_out[block, row]).reshape(-1)
        np.testing.assert_array_equal(got, feeds["key"][t].reshape(-1))
        got_v = (v_out[block, :, row, :] if mode == "PA_NZ" else v_out[block, row]).reshape(-1)
        np.testing.assert_array_equal(got_v, feeds["value"][t].reshape(-1))
    # the skipped token (slot -1) and the slots no token names stay as they were
    assert np.count_nonzero(k_out) == 4 * 2 * 16


def test_a_slot_outside_the_cache_is_an_error_naming_it():
    g = _graph(2, 1, 16, 1, 4, "float16", "Norm")
    shape = g.values["key_cache"].shape
    feeds = {"key": np.ones((2, 1, 16), np.float16), "value": np.ones((2, 1, 16), np.float16),
             "key_cache": np.zeros(shape, np.float16), "value_cache": np.zeros(shape, np.float16),
             "slots": np.array([1, 4], np.int32)}
    with pytest.raises(Exception, match=r"slot_mapping\[1\] = 4 is outside the cache's 4 slots"):
        asim.execute(g, feeds)


def test_a_cache_that_cannot_hold_the_tokens_is_named():
    g = Graph("bad")
    key = g.input("key", (4, 2, 16), "float16")
    kc = g.input("kc", (3, 2, 8, 16), "float16")      # NZ needs H * 2 / 32 = 2 pieces of 16
    slots = g.input("slots", (4,), "int32")
    value = g.input("value", (4, 2, 16), "float16")
    vc = g.input("vc", (3, 3, 8, 16), "float16")
    with pytest.raises(GraphError, match=r"cache 'vc' \(3, 3, 8, 16\) does not hold tokens"):
        g.add_node("ScatterPaKvCache", [key, kc, slots, value, vc], {"cache_mode": "PA_NZ"})
    with pytest.raises(GraphError, match="cache_mode 'NZ' is not one of Norm, PA_NZ"):
        g.add_node("ScatterPaKvCache", [key, kc, slots, value, kc], {"cache_mode": "NZ"})
    short = g.input("short", (3,), "int32")
    with pytest.raises(GraphError, match="not one slot per token"):
        g.add_node("ScatterPaKvCache", [key, kc, short, value, kc], {"cache_mode": "PA_NZ"})


def test_caches_are_written_in_place():
    """The outputs are the caches' own blocks: the memory plan counts each cache once, and
    the task writes only the tokens' bytes."""
    g = _graph(64, 8, 128, 512, 128, "bfloat16", "PA_NZ")
    res = asim.simulate(g, "ascend910b2")
    assert res.memory.by_category["inputs_outputs"] == sum(
        padded_bytes(g.values[v], "ND") for v in g.inputs)
    (task,) = res.trace.tasks
    written = task.traffic.get(("L2", "write"), 0) + task.traffic.get(("DDR", "write"), 0)
    assert written <= 2 * 64 * 8 * 128 * 2 * 1.01


def test_tokens_split_as_the_kernel_tiling_does():
    """blockFactor = ceil(T / 48) tokens a core on the 910B2's 48 vector cores, usedCoreNum =
    ceil(T / blockFactor): 256 tokens on 43 cores, 6 a core."""
    res = asim.simulate(_graph(256, 1, 256, 300, 16, "float16", "PA_NZ"), "ascend910b2")
    assert any("256 token(s) over 43 core(s), up to 6 a core" in n
               for n in res.trace.tasks[0].notes)


def test_nz_cache_pays_per_burst_and_norm_cache_does_not():
    """The same tokens into a PA_NZ cache (H * 2 / 32 bursts of 32 bytes each) take longer
    than into a Norm cache (one contiguous row), and a chip without the burst figures gives
    both the path rate."""
    nz = asim.simulate(_graph(16, 16, 256, 40, 16, "float16", "PA_NZ"), "ascend910b2")
    nd = asim.simulate(_graph(16, 16, 256, 40, 16, "float16", "Norm"), "ascend910b2")
    chip = asim.load_chip("ascend910b2")
    assert chip.gm_write_burst_cycles and chip.gm_write_bursts_per_cycle
    bursts = 2 * 16 * 256 * 2 // 32                 # per token, one token a core
    assert nz.cycles - nd.cycles >= 0.9 * bursts * chip.gm_write_burst_cycles
    bare = chip.replace(gm_write_burst_cycles=None, gm_write_bursts_per_cycle=None)
    plain = asim.simulate(_graph(16, 16, 256, 40, 16, "float16", "PA_NZ"), bare)
    assert plain.cycles < nz.cycles


def test_burst_cycles_takes_the_slower_of_core_and_chip():
    """A core's burst takes the per-core figure while few cores write, its share of the
    chip-wide rate once many do, and nothing where the chip gives neither figure."""
    from ascendsim.lower.tiling import burst_cycles

    chip = asim.load_chip("ascend910b2").replace(gm_write_burst_cycles=10.0,
                                                 gm_write_bursts_per_cycle=2.0)
    assert burst_cycles(chip, 4) == 10.0
    assert burst_cycles(chip, 48) == 24.0
    bare = chip.replace(gm_write_burst_cycles=None, gm_write_bursts_per_cycle=None)
    assert burst_cycles(bare, 48) == 0.0


def test_nz_head_size_must_be_whole_32_byte_blocks():
    """CANN's tiling refuses an NZ scatter whose head size is not 32-byte aligned."""
    g = Graph("odd")
    key = g.input("key", (4, 2, 8), "float16")         # 8 x 2 B = 16 B a head
    kc = g.input("kc", (3, 1, 8, 16), "float16")
    slots = g.input("slots", (4,), "int32")
    with pytest.raises(GraphError, match="head size of 'key'"):
        g.add_node("ScatterPaKvCache", [key, kc, slots, key, kc], {"cache_mode": "PA_NZ"})


def test_five_dimensional_nz_cache_holds_the_same_bytes():
    """CANN's PA_NZ cache may be given per head, (blocks, heads, head_size * itemsize / 32,
    block_size, 32 / itemsize): the same bytes as the 4-D form, so the same values land."""
    rng = np.random.default_rng(1)
    key = rng.standard_normal((3, 2, 32)).astype(np.float16)
    slots = np.array([4, 1, 7], np.int32)
    results = []
    for shape in ((2, 4, 4, 16), (2, 2, 2, 4, 16)):
        g = Graph("nz")
        k = g.input("key", (3, 2, 32), "float16")
        kc = g.input("key_cache", shape, "float16")
        s = g.input("slots", (3,), "int32")
        g.output(*g.add_node("ScatterPaKvCache", [k, kc, s, k, kc], {"cache_mode": "PA_NZ"}))
        outs = asim.execute(g, {"key": key, "slots": slots,
                                "key_cache": np.zeros(shape, np.float16)})
        results.append(outs[g.outputs[0]].reshape(-1))
        res = asim.simulate(g, "ascend910b2")
        # 2 heads x 32 fp16 = 128 bytes a token: 4 bursts of the key, 4 of the value
        assert any("4 + 4 bursts of 32 B" in n for n in res.trace.tasks[0].notes)
    np.testing.assert_array_equal(results[0], results[1])
    assert np.count_nonzero(results[0]) == 3 * 64
