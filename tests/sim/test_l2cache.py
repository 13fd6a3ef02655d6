"""The L2 as a cache in the simulation (ascendsim/sim/l2cache.py): hits decided when a move
starts, capacity shared by streams, dirty data written back on eviction and at the end."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.sim.l2cache import L2Cache, _lost_share

CHIP = "ascend910"                      # 32 MB of L2
L2 = get_chip(CHIP).l2_bytes
MB = 1 << 20


def relu_chain(n: int, length: int = 2, name: str = "chain") -> asim.Graph:
    g = asim.Graph(name)
    x = g.input("x", (n,), "float16")
    for i in range(length):
        x = g.relu(x, name=f"r{i + 1}")
    g.output(x)
    return g


def gm(task, level, direction):
    return task.traffic.get((level, direction), 0)


def test_a_tensor_written_then_read_soon_after_hits():
    n = 1 << 20                                   # 2 MB, far below L2
    res = asim.simulate(relu_chain(n), CHIP, fusion=False)
    r1, r2 = res.trace.task("r1"), res.trace.task("r2")
    assert gm(r1, "DDR", "read") == 2 * n         # the graph input comes from HBM
    assert gm(r2, "DDR", "read") == 0             # r1's output is still in L2
    assert gm(r2, "L2", "read") == 2 * n
    assert gm(r1, "DDR", "write") == gm(r2, "DDR", "write") == 0   # nothing evicted


def test_a_stream_bigger_than_l2_evicts_and_writes_back_dirty_data():
    n = 32 << 20                                  # 64 MB per tensor, twice L2
    res = asim.simulate(relu_chain(n, 3), CHIP, fusion=False)
    st = res.trace.l2
    hbm_writes = sum(gm(t, "DDR", "write") for t in res.trace.tasks)
    # every HBM write is an evicted dirty byte (rounding: one byte per task)
    assert hbm_writes == pytest.approx(st.writeback_bytes, abs=len(res.trace.tasks))
    assert st.writeback_bytes > 0
    # nothing is overwritten, so every byte written reaches HBM once (evicted or flushed)
    # unless its tensor died in L2 first (r1's and r2's outputs once read: GE reuses them)
    assert st.writeback_bytes + st.flush_bytes + st.dropped_bytes == pytest.approx(
        st.write_bytes, rel=1e-9)
    assert st.dropped_bytes < st.writeback_bytes
    assert st.write_bytes == 3 * 2 * n
    # LRU with a 64 MB scan through 32 MB: the producer's output is gone when read back
    for name in ("r2", "r3"):
        assert gm(res.trace.task(name), "DDR", "read") == 2 * n
    assert st.peak_resident <= L2


def test_two_streams_share_the_capacity():
    """Two independent chains, each of whose working set fits in L2 alone, run on two
    streams: together they overflow L2 and lose hits the same chains get alone."""
    n = 7 << 20                                   # 14 MB per tensor
    alone = asim.simulate(relu_chain(n), CHIP, fusion=False)
    assert alone.trace.l2.hit_bytes == 2 * n       # r2 reads r1's output from L2

    g = asim.Graph("two")
    for b in "ab":
        x = g.input(f"x{b}", (n,), "float16")
        g.output(g.relu(g.relu(x, name=f"{b}1"), name=f"{b}2"))
    both = asim.simulate(g, CHIP, fusion=False, streams=2)
    tr = both.trace
    assert {tr.task("a1").stream_id, tr.task("b1").stream_id} == {0, 1}
    # the chains interleave: each one's first op runs before the other's second
    assert tr.task("b1").start < tr.task("a2").start
    assert tr.task("a1").start < tr.task("b2").start
    assert tr.l2.hit_bytes < 2 * alone.trace.l2.hit_bytes
    assert tr.l2.writeback_bytes > 0
    assert tr.l2.peak_resident <= L2


def test_the_end_of_graph_flush_writes_back_what_is_dirty():
    n = 1 << 20
    res = asim.simulate(relu_chain(n), CHIP, fusion=False)
    st = res.trace.l2
    assert st.writeback_bytes == 0
    # the graph's output and r1's dead output are still dirty in L2: no later intermediate
    # reused r1's block (r2 is a graph output), and nothing drops a dead line unwritten
    assert st.flush_bytes == 4 * n
    assert st.dropped_bytes == 0
    hbm_bw = get_chip(CHIP).hbm_bandwidth_bytes_per_s / get_chip(CHIP).clock_hz
    # the flush crosses HBM after the last task: at least its bytes at HBM bandwidth
    assert st.flush_cycles >= st.flush_bytes / hbm_bw


def test_a_dead_tensor_is_overwritten_in_l2_only_by_a_tensor_reusing_its_block():
    """r1's output dies once r2 has read it; r3 (an intermediate) takes its block and its
    writes overwrite r1's dirty lines in L2, which never reach HBM. r2's and r3's outputs die
    later but r4 is a graph output (the user's block, reusing none): their lines stay dirty
    to the flush."""
    n = 1 << 20                                   # 2 MB per tensor, far below L2
    st = asim.simulate(relu_chain(n, 4), CHIP, fusion=False).trace.l2
    assert st.write_bytes == 4 * 2 * n
    assert st.dropped_bytes == 2 * n              # r1's output, overwritten by r3's
    assert st.writeback_bytes == 0                # nothing evicted
    assert st.flush_bytes == 3 * 2 * n            # r2's, r3's dead outputs and the graph's
    # every byte written either reaches HBM or is overwritten in L2
    assert st.writeback_bytes + st.flush_bytes + st.dropped_bytes == st.write_bytes
    # r3's bytes take r1's lines: the input, r2, r3 and r4 resident at the peak, not five
    assert st.peak_resident == 4 * 2 * n


def test_dead_lines_unreused_are_written_back_when_evicted():
    """A dead tensor is not dropped: with no intermediate to reuse its block, its dirty
    lines age to the LRU end and reach HBM when a read's fills evict them."""
    cache = L2Cache(4 * MB)
    cache.write(0, "a", 2 * MB, 2 * MB, reuse=True)
    cache.retire("a")
    assert cache.resident("a") == 2 * MB and cache.dirty("a") == 2 * MB
    miss, evicted = cache.read(1, "w", 3 * MB, 3 * MB, 1.0)   # a weight, not a reused block
    assert miss == 3 * MB
    assert evicted == 1 * MB                      # the oldest (dead) bytes go, written back
    assert cache.stats.dropped_bytes == 0
    cache.write(2, "b", 1 * MB, 1 * MB, reuse=True)   # b takes a's block: overwritten in L2
    assert cache.stats.dropped_bytes == 1 * MB
    assert cache.resident("a") == 0
    assert cache.used == pytest.approx(4 * MB)


@pytest.mark.parametrize("detail", ["block", "tile"])
def test_cycles_and_l2_figures_are_deterministic(detail):
    g = asim.Graph("two")
    for b in "ab":
        x = g.input(f"x{b}", (5 << 20,), "float16")
        g.output(g.relu(g.relu(x, name=f"{b}1"), name=f"{b}2"))
    runs = [asim.simulate(g, CHIP, fusion=False, streams=2, detail=detail) for _ in range(2)]
    assert runs[0].cycles == runs[1].cycles
    assert runs[0].trace.l2 == runs[1].trace.l2
    assert [t.traffic for t in runs[0].trace.tasks] == [t.traffic for t in runs[1].trace.tasks]


@pytest.mark.parametrize("n", [1 << 20, 32 << 20])
def test_block_and_tile_detail_agree_with_the_cache(n):
    block = asim.simulate(relu_chain(n, 3), CHIP, fusion=False, detail="block")
    tile = asim.simulate(relu_chain(n, 3), CHIP, fusion=False, detail="tile")
    assert block.cycles == pytest.approx(tile.cycles, rel=0.05)
    assert block.trace.l2.miss_bytes == pytest.approx(tile.trace.l2.miss_bytes, rel=0.05)


def test_a_weight_read_by_two_layers_hits_the_second_time():
    """Residency crosses tasks whatever their order: the second MatMul reading the same
    weight finds it in L2 (the lowering no longer decides this)."""
    g = asim.Graph("shared_w")
    w = g.const(np.ones((256, 256), np.float16), "w")
    a = g.input("a", (256, 256), "float16")
    g.output(g.matmul(g.matmul(a, w, name="m1"), w, name="m2"))
    res = asim.simulate(g, CHIP, fusion=False)
    m1, m2 = res.trace.task("m1"), res.trace.task("m2")
    assert gm(m1, "DDR", "read") > 0
    assert gm(m2, "DDR", "read") == 0


# ----------------------------------------------------------------------------- the cache alone
def test_lru_evicts_the_oldest_tensor_and_writes_back_its_dirty_bytes():
    c = L2Cache(100)
    assert c.write(0, "a", 60, 60) == 0           # a: 60 dirty
    miss, wb = c.read(1, "b", 30, 30, 1.0)        # b: 30 clean, filled
    assert (miss, wb) == (30, 0)
    assert c.read(2, "a", 60, 60, 1.0) == (0, 0)  # a is resident: a hit, a becomes newest
    wb = c.write(3, "c", 40, 40)                  # 130 > 100: b (oldest, clean) goes first
    assert wb == 0
    assert c.resident("b") == 0
    wb = c.write(4, "d", 50, 50)                  # then a, the oldest now: 50 of its 60 dirty
    assert wb == pytest.approx(50)
    assert c.resident("a") == pytest.approx(10) and c.dirty("a") == pytest.approx(10)
    assert c.flush() == pytest.approx(10 + 40 + 50)
    assert c.stats.writeback_bytes + c.stats.flush_bytes == pytest.approx(150)


def test_a_task_own_fills_do_not_count_as_hits_of_its_first_pass():
    c = L2Cache(1000)
    # one pass over 100 bytes in 4 moves: every byte misses once
    assert sum(c.read(7, "t", 100, 25, 1.0)[0] for _ in range(4)) == pytest.approx(100)
    c.end_task(7)
    assert c.read(8, "t", 100, 100, 1.0)[0] == 0  # the next task finds it all


def test_a_scan_keeps_a_resident_input_only_while_the_room_below_it_lasts():
    """LRU's cliff counts the task's other allocations: with 40 bytes below a resident 60-byte
    tensor and 80 bytes of output to write as it is scanned, half of it is read before the
    room is gone; the rest is evicted ahead of the scan and missed."""
    def cache():
        c = L2Cache(100)
        c.read(0, "x", 40, 40, 1.0)               # x: 40 clean, the oldest
        c.write(1, "a", 60, 60)                   # a: 60 dirty, resident whole
        c.end_task(0), c.end_task(1)
        return c
    assert cache().read(2, "a", 60, 60, 1.0, others=0.0)[0] == 0
    assert cache().read(2, "a", 60, 60, 1.0, others=30.0)[0] == 0     # 30 <= 40: all kept
    assert cache().read(2, "a", 60, 60, 1.0, others=80.0)[0] == pytest.approx(30)


def test_the_lost_share_of_a_scan():
    assert _lost_share(0, 0, 0) == 0              # fully resident, nothing allocated
    assert _lost_share(50, 0, 10) == 1            # its own misses overflow the room: all lost
    assert _lost_share(10, 20, 40) == 0           # everything fits below it
    assert _lost_share(10, 30, 20) == pytest.approx(0.5)
    shares = [_lost_share(10, o, 40) for o in range(0, 400, 10)]
    assert shares == sorted(shares) and 0 <= shares[0] and shares[-1] < 1


def test_two_warm_inputs_of_half_the_l2_each_are_not_both_kept():
    """Add(relu(x0), relu(x1)) with each tensor half the L2: r1 is resident when the Add
    starts, but the Add's misses of r0 and its output's lines take the room below r1 (x1's
    fills) as it scans r1, so the Add reads from HBM all of r0 and a part of r1: more than
    r0 alone (what a tensor-level LRU that makes r1 newest at each touch would give), and not
    more than both inputs (line-level LRU: about both)."""
    n = 8 << 20                                   # 16 MB fp16 per tensor, half of L2
    g = asim.Graph("add_of_two_warm")
    a = g.relu(g.input("x0", (n,), "float16"), name="r0")
    b = g.relu(g.input("x1", (n,), "float16"), name="r1")
    g.output(g.add(a, b, name="sum"))
    res = asim.simulate(g, CHIP, fusion=False)
    add = res.trace.task("sum")
    assert 1.25 * 2 * n < gm(add, "DDR", "read") <= 2 * 2 * n
    assert gm(add, "L2", "read") + gm(add, "DDR", "read") == pytest.approx(2 * 2 * n)


def test_a_capacity_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="L2 capacity"):
        L2Cache(0)
