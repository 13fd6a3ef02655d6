"""The lowering's speed caches give what the plain computations give: every task's traffic
equals `phase_traffic` of its own phases (the cache keys on the core groups' identity), and
a symbolic shape is still refused after static ones were seen."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.lower.lowering import lower, phase_traffic


def test_every_task_traffic_equals_phase_traffic_of_its_phases():
    g = asim.optimize(asim.models.bert_training_step(batch=2, seq_len=64, layers=2),
                      "ascend910").graph
    prog = lower(g, "ascend910", "block")
    shared = 0
    seen: dict[tuple, int] = {}
    for t in prog.tasks:
        assert t.traffic == phase_traffic(t.phases), t.op_name
        key = tuple(id(gr) for ph in t.phases for gr in ph.groups)
        shared += key in seen
        seen[key] = 1
    assert shared > 20          # the cache was hit: tasks share their tiled groups


def test_symbolic_shape_still_refused():
    g = asim.Graph("sym")
    x = g.input("x", ("n", 4))
    g.output(g.relu(x))
    with pytest.raises(GraphError, match="symbolic shape"):
        lower(g, "ascend910", "block")
