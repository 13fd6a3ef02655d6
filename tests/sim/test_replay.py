"""Task replay in the engine (issue 15): with one stream, sunk, tasks run one at a time, so a
task identical to an earlier one (same phases) is replayed from its recorded rows instead of
simulated again. The replayed run must equal the full simulation in every figure."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower
from ascendsim.sim import Engine


def _run(graph: asim.Graph, chip: str, replay: bool, **kw) -> tuple:
    program = lower(graph, chip)
    engine = Engine(program, replay=replay, **kw)
    trace = engine.run()
    return (trace.total_cycles, trace.tasks, trace.intervals, engine.peaks,
            engine.fabric.peak_l2, engine.fabric.peak_hbm), engine.events


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
    full, full_events = _run(graph, chip, replay=False)
    fast, fast_events = _run(graph, chip, replay=True)
    assert fast == full               # cycles, every task record, every interval, peaks
    assert fast_events < full_events  # and it did replay


def test_replay_is_off_where_tasks_can_overlap():
    graph = asim.models.bert(batch=2, seq_len=64, layers=2, hidden=128, heads=2, ffn=512)
    assert not Engine(lower(graph, "ascend910", streams=2), replay=True).replay or \
        lower(graph, "ascend910", streams=2).streams == 1
    assert not Engine(lower(graph, "ascend910"), mode="host", replay=True).replay
