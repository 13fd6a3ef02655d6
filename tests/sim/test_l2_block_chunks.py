"""The engine's L2 cache under block detail and batch-split L2 chains (issue 11 item 1).

- Block detail meets a cache whose state changes during an op: a loop's second call starts by
  evicting the first call's dirty output (each read and write of its first tiles writes a
  dirty byte back), later only its own. Its block-detail time agrees with tile detail (the
  prefix's contention does not cap the window; the window's slices meet the L2 as it is).
- A batch chunk of an L2 chain names what it writes inside the chain as its own, so the
  cache drops each chunk's dead intermediate after its last reader in that chunk.
"""

import ascendsim as asim
from ascendsim.hw.names import GM
from ascendsim.lower import lower

#: block detail stands for tile detail within this (tests/sim/test_detail.py)
TOL = 0.05


def _two_transposes() -> asim.Graph:
    """Two calls of one 48 MiB ConfusionTranspose on the same input (more than the 32 MiB L2
    of the first-generation 910B): the second meets the first's output dirty in L2."""
    g = asim.Graph("loop")
    x = g.input("x", (256, 128, 12, 64), "float16")
    y0 = g.add_node("Transpose", [x], {"perm": (0, 2, 1, 3)}, name="call0")[0]
    y1 = g.add_node("Transpose", [x], {"perm": (0, 2, 1, 3)}, name="call1")[0]
    g.output(y0, y1)
    return g


def test_block_agrees_with_tile_when_an_op_evicts_a_previous_dirty_output():
    g = _two_transposes()
    runs = {d: asim.simulate(g, "ascend910b_gen1", fusion=False, detail=d)
            for d in ("block", "tile")}
    second = {d: next(t for t in r.trace.tasks if t.op_name == "call1")
              for d, r in runs.items()}
    err = abs(second["block"].duration - second["tile"].duration) / second["tile"].duration
    assert err <= TOL, f"call1 block {second['block'].duration} vs tile " \
                       f"{second['tile'].duration} cycles"
    # it writes the previous output back: about as many HBM write bytes as it writes
    out = 256 * 128 * 12 * 64 * 2
    for t in second.values():
        assert 0.9 * out <= t.traffic[("DDR", "write")] <= 1.2 * out
    # HBM-bound: at least 80 % of the chip's HBM bandwidth (reads + write-backs)
    chip = runs["block"].chip
    hbm = t.traffic[("DDR", "read")] + t.traffic[("DDR", "write")]
    rate = hbm / chip.seconds(second["block"].duration)
    assert rate >= 0.8 * chip.hbm_bandwidth_bytes_per_s


def _tensors(task) -> tuple[set[str], set[str]]:
    reads, writes = set(), set()
    for ph in task.phases:
        for grp in ph.groups:
            for sg in grp.segments:
                for st in sg.stages:
                    for ins in st.head + st.instrs:
                        for name, _, _ in ins.tensors:
                            (writes if ins.dst == GM else reads).add(name)
    return reads, writes


def test_batch_chunks_of_an_l2_chain_own_their_intermediates():
    # without the conv double-in fusion (the Add + ReLU in the conv's epilogue) the 310P's L2
    # fusion splits ResNet-50 b8's bottleneck chains into batch chunks; with it, none pays off
    chip = asim.get_chip("ascend310p")
    switch = {"Switch": {"UBFusion": {"TbeConvDoubleInFusionPass": "off"}}}
    graph = asim.optimize(asim.models.resnet50(batch=8), chip, fusion_switch=switch).graph
    prog = lower(graph, chip)
    chunked = [t for t in prog.tasks if "#" in t.op_name]
    assert len(chunked) >= 8, "the 310P's L2 fusion splits ResNet-50 b8 into batch chunks"
    own = 0
    for t in chunked:
        chunk = t.op_name.rsplit("#", 1)[1]
        reads, writes = _tensors(t)
        # a chunk reads and writes only its own chunk's intermediates (or whole values:
        # weights, the chain's inputs and outputs, named without a chunk)
        for name in reads | writes:
            if "#" in name:
                assert name.rsplit("#", 1)[1] == chunk, f"{t.op_name} touches {name}"
        own += sum(1 for n in writes if n.endswith(f"#{chunk}"))
    assert own >= len(chunked) // 2


def test_dead_chunk_intermediates_are_dropped_not_written_back():
    """The chunks' intermediates die in L2: the cache drops more dirty bytes than it writes
    back on ResNet-50 b8 on the 310P."""
    res = asim.simulate(asim.models.resnet50(batch=8), "ascend310p", detail="block")
    l2 = res.trace.l2
    assert l2.dropped_bytes > l2.writeback_bytes > 0
