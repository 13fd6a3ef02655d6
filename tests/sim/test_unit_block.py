"""Block detail inside long tiles (sim/coalesce.py): a core group with few tiles whose tiles are
long K loops (weight gradients, long-K GEMMs) runs as coalesced chunk tiles, and agrees with
tile detail (every k-step an event) within the tolerance of tests/sim/test_detail.py.
"""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower
from ascendsim.sim import COALESCE_MIN, Engine, coalesce
from ascendsim.sim.engine import KERNEL_START_KIND

#: block detail stands for tile detail within this (tests/sim/test_detail.py)
TOL = 0.05
#: block detail of a chunked group runs a few hundred events whatever its K (the prefix, the
#: window's slices, the last chunk), where tile detail steps (or fast-forwards) every k-step
BLOCK_EVENTS = 1500


def _wgrad(xshape, wshape, attrs=None, name="wgrad") -> asim.Graph:
    """The weight gradient (Conv2DBackpropFilter) of a Conv of `xshape` by `wshape`."""
    attrs = attrs or {}
    fwd = asim.Graph("fwd")
    y = fwd.conv(fwd.input("x", xshape, "float16"), fwd.input("w", wshape, "float16"), **attrs)
    g = asim.Graph(name)
    x = g.input("x", xshape, "float16")
    dy = g.input("dy", fwd.values[y.name].shape, "float16")
    g.output(g.conv_backprop_filter(x, dy, filter_shape=list(wshape), name="wgrad", **attrs))
    return g


def _gemm(m, k, n) -> asim.Graph:
    g = asim.Graph("gemm")
    g.output(g.matmul(g.input("a", (m, k), "float16"), g.input("b", (k, n), "float16"),
                      name="mm"))
    return g


#: the weight gradients run on the 910B, whose kernel reduces the whole batch in one K loop
#: per output tile; TBE's on the 910 splits the batch over cores (lower/cube.py
#: tbe_filter_grad_geometry), which leaves each core a short K
WGRAD_CHIP = "ascend910b"


def _groups(graph, op_name, chip="ascend910"):
    program = lower(graph, chip, detail="block")
    task = next(t for t in program.tasks if t.op_name == op_name)
    return [g for ph in task.phases for g in ph.groups]


#: ResNet-50 v1.5 layers whose weight gradient is a few tiles of long K loops at this batch
#: (the batch is the K loop: at a deep baseK a 1x1 needs batch 64, a 3x3 batch 128, to give
#: the chunks block detail coalesces): (name, x shape, w shape, conv attrs)
WGRADS = [
    ("stem_7x7_b32", (32, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2],
                                                         "pads": [3, 3, 3, 3]}),
    ("layer1_1x1_expand_b64", (64, 64, 56, 56), (256, 64, 1, 1), {}),
    ("layer2_3x3_b128", (128, 128, 28, 28), (128, 128, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("layer2_1x1_reduce_b64", (64, 256, 56, 56), (128, 256, 1, 1), {}),
    ("layer3_3x3_b64", (64, 256, 28, 28), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}),
]


@pytest.mark.parametrize("case", WGRADS, ids=lambda c: c[0])
def test_weight_gradient_block_agrees_with_tile(case):
    _, xshape, wshape, attrs = case
    graph = _wgrad(xshape, wshape, attrs)
    groups = _groups(graph, "wgrad", WGRAD_CHIP)
    assert all(g.tiles < COALESCE_MIN for g in groups)
    assert all(coalesce.chunked(g, COALESCE_MIN)[1] for g in groups)
    block = asim.simulate(graph, WGRAD_CHIP, detail="block", fusion=False)
    tile = asim.simulate(graph, WGRAD_CHIP, detail="tile", fusion=False)
    b, t = block.trace.task("wgrad").duration, tile.trace.task("wgrad").duration
    assert abs(b - t) <= TOL * t, f"block {b} vs tile {t} cycles"
    assert block.events <= BLOCK_EVENTS
    # the same bytes at every level (the chunks hold every move of the tiles)
    tb, tt = block.trace.task("wgrad").traffic, tile.trace.task("wgrad").traffic
    for key in (("L1", "write"), ("L0A", "write"), ("L0B", "write"), ("UB", "read")):
        assert tb.get(key, 0) == tt.get(key, 0), key


@pytest.mark.parametrize("shape", [(512, 32768, 512), (1024, 32768, 1024), (256, 65536, 512)],
                         ids=lambda s: "x".join(map(str, s)))
def test_long_k_gemm_block_agrees_with_tile(shape):
    graph = _gemm(*shape)
    assert any(coalesce.chunked(g, COALESCE_MIN)[1] for g in _groups(graph, "mm"))
    block = asim.simulate(graph, detail="block", fusion=False)
    tile = asim.simulate(graph, detail="tile", fusion=False)
    b, t = block.trace.task("mm").duration, tile.trace.task("mm").duration
    assert abs(b - t) <= TOL * t, f"block {b} vs tile {t} cycles"
    assert block.events <= BLOCK_EVENTS


def test_chunks_hold_every_instruction_of_the_tiles_once():
    """Per pipe, the chunk tiles hold the tiles' instructions, cycles and bytes exactly once
    (the handoff instructions aside, which do nothing), and every chunk the same loop."""
    group = next(g for g in _groups(_wgrad((64, 256, 56, 56), (128, 256, 1, 1)), "wgrad",
                                    WGRAD_CHIP))
    chunks, is_chunked = coalesce.chunked(group, COALESCE_MIN)
    assert is_chunked and sum(sg.count for sg in chunks) >= coalesce.CHUNKS_MIN

    def totals(segments):
        out = {}
        for sg in segments:
            for st in sg.stages:
                for ins, times in ([(i, st.units) for i in st.instrs]
                                   + [(i, 1) for i in st.head]):
                    if ins.kind == coalesce.HANDOFF_KIND:
                        assert ins.cycles == 0 and ins.nbytes == 0
                        continue
                    acc = out.setdefault(st.pipe, [0, 0, 0])
                    acc[0] += times * sg.count
                    acc[1] += ins.cycles * times * sg.count
                    acc[2] += ins.nbytes * times * sg.count
        return out

    assert totals(chunks) == totals(group.segments)
    assert [st.pipe for st in chunks[0].stages] == list(group.pipes)
    a, b, n = coalesce.loop_stages(group.segments[0].stages)
    for sg in chunks:
        for j in range(a, b + 1):
            assert sg.stages[j].units * n == group.segments[0].stages[j].units


def test_block_trace_of_a_chunked_group():
    """A chunked group shows at most three intervals per pipe per core (the measured prefix,
    the coalesced chunks, the last chunk), no handoff, and the same cube instructions and bytes
    as tile detail."""
    graph = _gemm(512, 32768, 512)
    block = asim.simulate(graph, detail="block", fusion=False)
    tile = asim.simulate(graph, detail="tile", fusion=False)
    ivs = [iv for iv in block.trace.intervals_of(block.trace.task("mm").task_id)
           if iv.core == 0 and iv.kind != KERNEL_START_KIND]
    pipes = {iv.pipe for iv in ivs}
    assert len(ivs) <= 3 * len(pipes)
    assert all(iv.kind != coalesce.HANDOFF_KIND for iv in ivs)
    t_ivs = [iv for iv in tile.trace.intervals_of(tile.trace.task("mm").task_id)
             if iv.core == 0 and iv.kind != KERNEL_START_KIND]
    for pipe in pipes:
        assert sum(iv.count for iv in ivs if iv.pipe == pipe) == sum(
            iv.count for iv in t_ivs if iv.pipe == pipe), pipe
        assert sum(iv.bytes for iv in ivs if iv.pipe == pipe) == sum(
            iv.bytes for iv in t_ivs if iv.pipe == pipe), pipe


def _dirty_then_wgrad(detail: str):
    """A 32 MiB Add whose output (a graph output) lies dirty in L2, then a weight gradient
    whose first reads evict it (the Add is moved right before the weight gradient, after its
    input conversions): the chunked prefix meets the write-backs, the window does not."""
    g = _wgrad((32, 256, 56, 56), (128, 256, 1, 1), name="dirty")
    n = 16 * 1024 * 1024
    g.output(g.add(g.input("a", (n,), "float16"), g.input("b", (n,), "float16"),
                   name="big_add"))
    program = lower(g, "ascend910", detail=detail)
    add = next(t for t in program.tasks if t.op_name == "big_add")
    rest = [t for t in program.tasks if t is not add]
    i = next(i for i, t in enumerate(rest) if t.op_name == "wgrad")
    program.tasks = rest[:i] + [add] + rest[i:]
    trace = Engine(program).run()
    return trace.task("wgrad")


def test_block_agrees_with_tile_when_the_loop_evicts_dirty_lines():
    block, tile = _dirty_then_wgrad("block"), _dirty_then_wgrad("tile")
    for t in (block, tile):
        assert t.traffic[("DDR", "write")] > 1e6          # it writes the Add's lines back
    assert abs(block.duration - tile.duration) <= TOL * tile.duration, \
        f"block {block.duration} vs tile {tile.duration} cycles"


def test_short_loops_and_tile_detail_are_not_chunked():
    """A group whose tiles are short loops keeps its tiles; a group of many tiles keeps its
    own coalescing."""
    for graph, op in ((_gemm(256, 1024, 256), "mm"), (_gemm(4096, 1024, 4096), "mm")):
        for g in _groups(graph, op):
            segments, is_chunked = coalesce.chunked(g, COALESCE_MIN)
            assert not is_chunked and segments is g.segments
