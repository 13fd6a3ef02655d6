"""The tiled-work memo (lower/memo.py): a reused tiling gives exactly the simulation a fresh
one gives, and nodes whose inputs meet a different L2 state do not share one."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower, memo
from ascendsim.sim import Engine


@pytest.fixture
def fresh_memo():
    memo.clear()
    yield
    memo.set_enabled(True)
    memo.clear()


def _figures(res: asim.Result) -> tuple:
    return (res.cycles, [(t.op_name, t.start, t.end, tuple(sorted(t.traffic.items())),
                          tuple(sorted(t.pipe_cycles.items()))) for t in res.trace.tasks],
            len(res.trace.intervals))


@pytest.mark.parametrize("build, chip", [
    (lambda: asim.models.bert(batch=2, seq_len=64, layers=3, hidden=128, heads=2, ffn=512),
     "ascend910"),
    (lambda: asim.models.bert_training_step(batch=2, seq_len=64, layers=2), "ascend910"),
    (lambda: asim.models.resnet50(batch=2), "ascend910b"),
])
def test_memo_gives_the_full_simulation_exactly(fresh_memo, build, chip):
    memo.set_enabled(False)
    want = _figures(asim.simulate(build(), chip))
    memo.set_enabled(True)
    got = _figures(asim.simulate(build(), chip))
    assert got == want                       # same cycles, task times, traffic, intervals
    s = memo.stats()
    # repeated layers reuse their tiling (names substituted): far fewer fresh tilings than
    # lowered nodes
    assert s["hits"] > s["misses"] > 0


def _chain(n: int) -> asim.Graph:
    g = asim.Graph("chain")
    v = g.input("x", (64, 1024), "float16")
    for _ in range(n):
        v = g.relu(v)
    g.output(v)
    return g


def test_memo_shares_work_across_gm_tensors_by_slot(fresh_memo):
    """The three Relus have equal specs as numbers (cold miss fractions, sizes), but their
    moves name different GM tensors, which the engine's L2 cache tells apart: the work is
    tiled once and reused with the names substituted (one template), every move names its
    own task's tensors, and the simulated traffic shows the L2 contents they meet."""
    chip = asim.get_chip("ascend910")
    program = lower(_chain(3), chip)
    relus = [t for t in program.tasks if t.op_type == "Relu"]
    assert memo.stats() == {"hits": 2, "misses": 1, "entries": 1}
    groups = [t.phases[0].groups for t in relus]
    assert len({g.template for gs in groups for g in gs}) == 1
    assert groups[0] != groups[1]                   # other names
    for t in relus:
        named = {n for ph in t.phases for g in ph.groups for sg in g.segments
                 for st in sg.stages for ins in st.head + st.instrs for n, _, _ in ins.tensors}
        assert named == {program.aliases.get(v.name, v.name) for v in (*t.inputs, *t.outputs)}
    records = {r.task_id: r for r in Engine(program).run().tasks}
    first, second = records[relus[0].task_id], records[relus[1].task_id]
    assert first.traffic[("DDR", "read")] > second.traffic.get(("DDR", "read"), 0)


def test_memo_keeps_chips_apart(fresh_memo):
    g = _chain(2)
    a = asim.simulate(g, "ascend910", fusion=False).cycles
    slow = asim.get_chip("ascend910").replace(hbm_bandwidth_bytes_per_s=1e11)
    b = asim.simulate(g, slow, fusion=False).cycles
    memo.set_enabled(False)
    assert b == asim.simulate(g, slow, fusion=False).cycles and b > a
