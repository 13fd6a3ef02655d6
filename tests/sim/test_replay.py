"""Task replay in the engine (issue 15): with one stream, sunk, tasks run one at a time, so a
task identical to an earlier one (same phases) is replayed from its recorded rows instead of
simulated again. The replayed run must equal the full simulation in every figure. With the
L2 cache in the engine a task's timing depends on the L2 contents it meets, so the key holds
the whole cache with the task's tensors by role, and a replay replays the cache's transition
(`replay_key`, `L2Cache.state`)."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower
from ascendsim.sim import Engine


def _run(graph: asim.Graph, chip: str, replay: bool, **kw) -> tuple:
    program = lower(graph, chip)
    engine = Engine(program, replay=replay, **kw)
    trace = engine.run()
    st = trace.l2
    l2 = (st.read_bytes, st.hit_bytes, st.miss_bytes, st.write_bytes, st.writeback_bytes,
          st.flush_bytes, st.dropped_bytes)
    return (trace.total_cycles, trace.tasks, trace.intervals, engine.peaks,
            engine.fabric.peak_l2, engine.fabric.peak_hbm, st.flush_cycles,
            st.peak_resident), l2, engine.events


@pytest.mark.parametrize("build, chip", [
    (lambda: asim.optimize(asim.models.bert(batch=2, seq_len=128, layers=3, hidden=256,
                                            heads=4, ffn=1024)).graph, "ascend910"),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=2, seq_len=64, layers=2),
                           graph_kernel=True).graph, "ascend910"),
    (lambda: asim.optimize(asim.models.resnet50_training_step(batch=4)).graph, "ascend910"),
    (lambda: asim.optimize(asim.models.resnet50(batch=2), "ascend910b").graph, "ascend910b"),
])
def test_replayed_run_equals_the_full_simulation(build, chip):
    graph = build()
    full, full_l2, full_events = _run(graph, chip, replay=False)
    fast, fast_l2, fast_events = _run(graph, chip, replay=True)
    assert fast == full               # cycles, every task record, every interval, peaks
    # L2 byte totals: a replay adds the recorded task's deltas (float sums in another order)
    assert fast_l2 == pytest.approx(full_l2, rel=1e-9)
    assert fast_events < full_events  # and it did replay


def test_identical_tasks_meeting_different_l2_contents_are_not_replayed():
    """Three identical Relus on one 8 MB tensor: the first reads it from HBM, the next meet it
    in L2; replaying the first's timing for the others would be wrong (the L2 state is in the
    key, so they are simulated)."""
    g = asim.Graph("chain")
    v = g.input("x", (2048, 2048), "float16")
    for _ in range(3):
        v = g.relu(v)
    g.output(v)
    full, _, _ = _run(g, "ascend910", replay=False)
    fast, _, _ = _run(g, "ascend910", replay=True)
    assert fast == full
    relus = [r for r in full[1] if r.op_type == "Relu"]
    assert relus[0].traffic[("DDR", "read")] > relus[1].traffic.get(("DDR", "read"), 0)
    assert relus[0].end - relus[0].start != relus[1].end - relus[1].start


def test_replay_is_off_where_tasks_can_overlap():
    graph = asim.models.bert(batch=2, seq_len=64, layers=2, hidden=128, heads=2, ffn=512)
    assert not Engine(lower(graph, "ascend910", streams=2), replay=True).replay or \
        lower(graph, "ascend910", streams=2).streams == 1
    assert not Engine(lower(graph, "ascend910"), mode="host", replay=True).replay
