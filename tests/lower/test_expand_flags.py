"""`expand_flags` builds a repeating period of a stage's units once and repeats it (issue 15):
its queues must equal the unit-by-unit construction it replaced (kept here as the reference)
for every core group the lowering makes, in tile and block detail, on every chip family."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower
from ascendsim.lower.program import Instr, Segment, Stage, _handoffs, expand_flags


def _reference(segments) -> dict:
    """The unit-by-unit expansion (the form before the speed change)."""
    stages0 = segments[0].stages
    n = len(stages0)
    pipes = [s.pipe for s in stages0]
    queues: dict = {p: [] for p in pipes}
    h_out = [0] * n
    h_in = [0] * n
    tile = 0
    for seg in segments:
        st = seg.stages
        links = [_handoffs(st[j].units, st[j + 1].units) for j in range(n - 1)]
        for _ in range(seg.count):
            for j in range(n):
                q = queues[pipes[j]]
                stage = st[j]
                for u in range(stage.units):
                    waits: list = []
                    sets: list = []
                    allocs: tuple = ()
                    frees: tuple = ()
                    if j > 0 and u % links[j - 1][2] == 0:
                        waits.append((pipes[j - 1], pipes[j], h_in[j] % st[j - 1].slots))
                    if j < n - 1 and u % links[j][1] == 0:
                        if h_out[j] >= stage.slots:
                            waits.append((pipes[j + 1], pipes[j], h_out[j] % stage.slots))
                        allocs = stage.out_bufs
                    instrs = (stage.head + stage.instrs) if u == 0 else stage.instrs
                    if j < n - 1 and (u + 1) % links[j][1] == 0:
                        sets.append((pipes[j], pipes[j + 1], h_out[j] % stage.slots))
                        h_out[j] += 1
                    if j > 0 and (u + 1) % links[j - 1][2] == 0:
                        sets.append((pipes[j], pipes[j - 1], h_in[j] % st[j - 1].slots))
                        frees = st[j - 1].out_bufs
                        h_in[j] += 1
                    last = len(instrs) - 1
                    for k, ins in enumerate(instrs):
                        q.append((ins, tuple(waits) if k == 0 else (),
                                  tuple(sets) if k == last else (),
                                  allocs if k == 0 else (), frees if k == last else (), tile))
            tile += 1
    return queues


def _conv(batch: int) -> asim.Graph:
    g = asim.Graph("conv")
    x = g.input("x", (batch, 256, 28, 28), "float16")
    w = g.weight("w", (256, 256, 3, 3), "float16", seed=0)
    g.output(g.conv(x, w, strides=[1, 1], pads=[1, 1, 1, 1], name="c"))
    return g


@pytest.mark.parametrize("build, chip, detail", [
    (lambda: asim.optimize(asim.models.resnet50_training_step(batch=2)).graph, "ascend910",
     "block"),
    (lambda: asim.models.resnet50(batch=8), "ascend910", "tile"),
    (lambda: _conv(64), "ascend910", "tile"),
    (lambda: _conv(16), "ascend310", "tile"),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=2, seq_len=128, layers=1),
                           "ascend910b").graph, "ascend910b", "block"),
])
def test_expand_flags_equals_the_unit_by_unit_expansion(build, chip, detail):
    program = lower(build(), chip, detail=detail)
    groups = {id(g): g for t in program.tasks for ph in t.phases for g in ph.groups}
    repeated = 0
    for g in groups.values():
        fast = expand_flags(g.segments)
        assert fast == _reference(g.segments)
        repeated += max(st.units for st in g.segments[0].stages) >= 16
    assert repeated > 0          # some stages were long enough to repeat a period


@pytest.mark.parametrize("units", [(1, 1, 1), (1, 40, 1), (3, 48, 6), (64, 64, 2)])
@pytest.mark.parametrize("slots", [(1, 1), (1, 2), (2, 1)])
def test_single_buffered_links_expand_as_unit_by_unit(units, slots):
    """A link of one slot (a kernel with BUFFER_NUM = 1): the producer waits the consumer's
    slot-free flag from its second handoff on, event 0 every time."""
    def stages(tile_units):
        a, b, c = tile_units
        return (Stage("MTE2", (Instr("MTE2", "copy", 5),), a, out_bufs=(("UB", 64),),
                      slots=slots[0]),
                Stage("V", (Instr("V", "vec_binary", 7),), b, out_bufs=(("UB", 64),),
                      slots=slots[1]),
                Stage("MTE3", (Instr("MTE3", "copy", 3),), c))
    segments = (Segment(stages(units), 5), Segment(stages(units), 2))
    fast = expand_flags(segments)
    assert fast == _reference(segments)
    if slots[0] == 1:
        mte2 = [e for e in fast["MTE2"] if e[1]]
        assert all(w[2] == 0 for e in mte2 for w in e[1])
