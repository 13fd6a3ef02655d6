"""The tiled-work memo (lower/memo.py): a reused tiling gives exactly the simulation a fresh
one gives, and nodes whose inputs meet a different L2 state do not share one."""

from __future__ import annotations

import numpy as np
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


def _instr_tensors(g) -> tuple:
    """(name, size, written) of every move of a group, from its built instructions."""
    from ascendsim.hw.names import GM
    seen: dict = {}
    for sg in g.segments:
        for st in sg.stages:
            for ins in st.head + st.instrs:
                for n, b, _ in ins.tensors:
                    seen.setdefault((n, b, ins.dst == GM), None)
    return tuple(seen)


def test_reused_groups_build_their_instructions_only_when_read(fresh_memo):
    """A reuse keeps its template's group and the new names: its instructions are built when
    `segments` is first read, equal to a fresh tiling's; its tensor names (`gm_tensors`,
    what the engine's L2 bookkeeping reads) match them without building them; a pickled
    program keeps the groups lazy and equal."""
    import pickle

    chip = asim.get_chip("ascend910")
    lazy = lower(_chain(3), chip)
    memo.set_enabled(False)
    fresh = lower(_chain(3), chip)
    reused = [g for t in lazy.tasks for ph in t.phases for g in ph.groups
              if g._base is not None]
    assert reused and all(g._segments is None for g in reused)
    # names, tile counts and pipes come from the template: still nothing built
    assert [g.gm_tensors for g in reused] and all(g._segments is None for g in reused)
    assert all(g.tiles and g.pipes for g in reused)
    assert all(g._segments is None for g in reused)
    back = pickle.loads(pickle.dumps(lazy.tasks))
    for a, b, c in zip(lazy.tasks, fresh.tasks, back):
        for ga, gb, gc in zip(a.phases[0].groups, b.phases[0].groups, c.phases[0].groups):
            assert ga.gm_tensors == gb.gm_tensors == _instr_tensors(gb)
            assert ga == gb and gc == gb and ga.segments == gb.segments
            assert ga.template == gc.template and hash(ga) == hash(gb)
    assert all(g._segments is not None for g in reused)


@pytest.mark.parametrize("build", [
    lambda: asim.models.bert(batch=2, seq_len=64, layers=3, hidden=128, heads=2, ffn=512),
    lambda: _chain(4)])
def test_reused_groups_meet_the_l2_as_a_fresh_lowering(fresh_memo, build):
    """A group reused under other names gives the same L2 reads, writes, roles and sizes to
    the engine (`gm_tensors`) and the same L2 hits, misses and traffic per task as the
    groups a fresh lowering builds."""
    from ascendsim.sim.gm import gm_tensors

    chip = asim.get_chip("ascend910")
    on = lower(build(), chip)
    memo.set_enabled(False)
    off = lower(build(), chip)
    assert gm_tensors(on) == gm_tensors(off)
    run_on, run_off = Engine(on), Engine(off)
    trace_on, trace_off = run_on.run(), run_off.run()
    assert run_on.l2.stats == run_off.l2.stats
    assert [(r.task_id, sorted(r.traffic.items())) for r in trace_on.tasks] == \
        [(r.task_id, sorted(r.traffic.items())) for r in trace_off.tasks]


def _reductions(*axes: int) -> asim.Graph:
    g = asim.Graph("reduce")
    x = g.input("x", (64, 64), "float16")
    g.output(*(g.reduce_sum(x, g.const(np.array([a], np.int64)), keepdims=0) for a in axes))
    return g


def _work(task) -> list:
    """A task's groups without GM tensor names: cores, tiles, every instruction's fields."""
    return [(g.cores, [(sg.count, [(st.pipe, st.units, st.out_bufs,
                                    [(i.pipe, i.kind, i.cycles, i.nbytes, i.src, i.dst, i.bw,
                                      i.hbm) for i in st.head + st.instrs])
                                   for st in sg.stages]) for sg in g.segments])
            for ph in task.phases for g in ph.groups]


def test_node_sequences_are_shared_only_with_the_same_constants():
    """Two ReduceSums of one shape whose constant `axes` differ (rows vs a strided fold)
    resolve their own sequences: each task equals the task of a graph holding it alone,
    and a third with the first's axes reuses the first's."""
    chip = asim.get_chip("ascend910")
    both = lower(_reductions(1, 0, 1), chip).tasks
    alone = [lower(_reductions(a), chip).tasks[0] for a in (1, 0)]
    assert both[0].notes != both[1].notes and _work(both[0]) != _work(both[1])
    for task, want in zip(both, alone + alone[:1]):
        assert task.notes == want.notes and task.flops == want.flops
        assert _work(task) == _work(want)
