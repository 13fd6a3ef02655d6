"""Runs of plain-timeout instructions on one pipe are waited for as one timeout (issue 15):
between them a pipe waits on no flag, takes or frees no buffer slot, sets no flag and starts
no tile, so their times follow by arithmetic. The run must equal the one-timeout-per-
instruction simulation in every figure, in tile and block detail, sunk and from the host."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower
from ascendsim.lower.program import expand_flags
from ascendsim.sim import Engine, pipe, queues


def _run(graph: asim.Graph, chip: str, detail: str, mode: str) -> tuple:
    program = lower(graph, chip, detail=detail)
    eng = Engine(program, mode=mode)
    trace = eng.run()
    return (trace.total_cycles, trace.tasks, trace.intervals, eng.peaks,
            eng.fabric.peak_l2, eng.fabric.peak_hbm), eng.events


def _one_timeout_each(queue: list) -> list[int]:
    return [0] * len(queue)


@pytest.mark.parametrize("build, chip", [
    (lambda: asim.optimize(asim.models.resnet50_training_step(batch=2)).graph, "ascend910"),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=2, seq_len=64, layers=1),
                           graph_kernel=True).graph, "ascend910"),
    (lambda: asim.optimize(asim.models.resnet50(batch=2), "ascend910b").graph, "ascend910b"),
])
@pytest.mark.parametrize("detail, mode", [("block", "sink"), ("tile", "host")])
def test_merged_timeouts_equal_one_timeout_per_instruction(build, chip, detail, mode,
                                                           monkeypatch):
    graph = build()
    fast, fast_events = _run(graph, chip, detail, mode)
    monkeypatch.setattr(pipe, "timeout_spans", _one_timeout_each)
    slow, slow_events = _run(graph, chip, detail, mode)
    assert fast == slow                   # cycles, every task record and interval, peaks
    assert fast_events < slow_events      # and runs were merged


def test_spans_break_at_flags_buffers_and_tiles():
    """A run never crosses a set or wait flag, a slot alloc/free or a tile boundary."""
    program = lower(asim.models.resnet50(batch=1), "ascend910", detail="tile")
    seen = 0
    for task in program.tasks:
        for ph in task.phases:
            for g in getattr(ph, "groups", ()):
                for queue in expand_flags(g.segments).values():
                    spans = queues.timeout_spans(queue)
                    for k, span in enumerate(spans):
                        if span <= 0:
                            continue
                        j = k + 1
                        while j < len(spans) and spans[j] == -1:
                            j += 1
                        run = queue[k:j]
                        seen += 1
                        assert len(run) >= 2
                        assert span == sum(e[0].cycles for e in run)
                        assert all(not e[2] and not e[4] for e in run[:-1])
                        assert all(not e[1] and not e[3] for e in run[1:])
                        assert len({e[5] for e in run}) == 1
                        assert not any(e[0].shared and e[0].nbytes for e in run)
    assert seen > 0
