"""Trace intervals are expanded from the engine's rows when first read (issue 15: a BERT-large
step's 1.7M intervals cost time and memory most runs never use); what is read is the same."""

from __future__ import annotations

import pickle

import ascendsim as asim


def test_deferred_intervals_are_complete_and_agree_with_the_total():
    res = asim.simulate(asim.models.resnet50(batch=2), fusion=False)
    trace = res.trace
    ivs = trace.intervals
    assert ivs and all(a.start <= b.start for a, b in zip(ivs, ivs[1:]))
    assert res.cycles == max(max(iv.end for iv in ivs), max(t.end for t in trace.tasks))
    # every AI Core task has intervals, on the cores it ran on
    for t in trace.tasks[:20]:
        if t.on_ai_core:
            assert len({iv.core for iv in trace.intervals_of(t.task_id)}) == t.block_dim


def test_a_trace_pickles_with_its_intervals():
    trace = asim.simulate(asim.models.conv_bn_relu(), fusion=False).trace
    back = pickle.loads(pickle.dumps(trace))
    assert back.intervals == trace.intervals and back == trace
    back.intervals = []                        # still assignable
    assert back.intervals == []
