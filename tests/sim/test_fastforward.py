"""The steady-state fast-forward of periodic pipe loops (sim/fastforward.py, issue 15): when the
engine's state repeats with a time shift, whole periods are advanced by arithmetic. The result
must equal the stepped simulation in every figure: cycles, every task record, every interval,
buffer and bandwidth peaks; in tile and block detail, sunk, from the host and eager, on one
and two streams, with symmetric core groups or one process set per core, on every chip
family (the 910B's mix kernels overlap two phases)."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower import lower
from ascendsim.sim import Engine, fastforward


def _conv(batch: int = 32) -> asim.Graph:
    g = asim.Graph("conv")
    x = g.input("x", (batch, 256, 28, 28), "float16")
    w = g.weight("w", (256, 256, 3, 3), "float16", seed=0)
    g.output(g.conv(x, w, strides=[1, 1], pads=[1, 1, 1, 1], name="c"))
    return g


def _matmul() -> asim.Graph:
    g = asim.Graph("mm")
    a = g.input("a", (2048, 8192), "float16")
    b = g.weight("b", (8192, 1024), "float16", seed=0)
    g.output(g.matmul(a, b, name="mm"))
    return g


def _branches() -> asim.Graph:
    """Two independent GEMMs and a conv: on two streams they share the fabric."""
    g = asim.Graph("branches")
    for i, (m, k, n) in enumerate([(2048, 8192, 1024), (1024, 4096, 2048)]):
        a = g.input(f"a{i}", (m, k), "float16")
        b = g.weight(f"b{i}", (k, n), "float16", seed=i)
        g.output(g.matmul(a, b, name=f"mm{i}"))
    x = g.input("x", (16, 256, 28, 28), "float16")
    w = g.weight("w", (256, 256, 3, 3), "float16", seed=3)
    g.output(g.conv(x, w, strides=[1, 1], pads=[1, 1, 1, 1], name="c"))
    return g


def _run(graph: asim.Graph, chip: str, ff: bool, detail: str = "block", mode: str = "sink",
         streams: int = 1, symmetric: bool = True) -> tuple:
    program = lower(graph, chip, detail=detail, streams=streams)
    engine = Engine(program, mode=mode, symmetric=symmetric, fast_forward=ff)
    trace = engine.run()
    figures = (trace.total_cycles, trace.tasks, trace.intervals, engine.peaks,
               engine.fabric.peak_l2, engine.fabric.peak_hbm)
    return figures, engine


def _same(graph, chip, **kw) -> tuple[int, int, int]:
    """Assert both forms agree; (jumps, events with, events without)."""
    full, slow = _run(graph, chip, False, **kw)
    fast, eng = _run(graph, chip, True, **kw)
    assert fast[0] == full[0]                   # cycles
    assert fast[1] == full[1]                   # every task record
    assert len(fast[2]) == len(full[2])
    assert fast[2] == full[2]                   # every interval
    assert fast[3:] == full[3:]                 # buffer and L2/HBM peaks
    # the fast path ran, or every period it saw held an L2 access (not skipped: see the
    # module note, "State outside this signature")
    assert eng.ff.jumps > 0 or eng.stateful_accesses > 0
    return eng.ff.jumps, eng.events, slow.events


@pytest.mark.parametrize("chip", ["ascend910", "ascend910b", "ascend310"])
@pytest.mark.parametrize("detail", ["block", "tile"])
def test_fast_forward_equals_stepping_on_gemm_and_conv(chip, detail):
    for build in (_conv, _matmul):
        for mode in ("sink", "host"):
            _, fast_events, slow_events = _same(build(), chip, detail=detail, mode=mode)
            assert fast_events <= slow_events


@pytest.mark.parametrize("kw", [dict(streams=2), dict(streams=2, mode="host"),
                                dict(symmetric=False), dict(mode="eager"),
                                dict(detail="tile", streams=2)])
def test_fast_forward_with_overlapping_tasks_and_per_core_processes(kw):
    _same(_branches(), "ascend910", **kw)


@pytest.mark.parametrize("build, chip, kw", [
    (lambda: asim.models.resnet50(batch=32), "ascend910", {}),
    (lambda: asim.models.resnet50(batch=32), "ascend910", dict(mode="host")),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=4, seq_len=128, layers=1),
                           "ascend910b").graph, "ascend910b", {}),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=4, seq_len=128, layers=1),
                           graph_kernel=True).graph, "ascend910", dict(streams=2)),
])
def test_fast_forward_equals_stepping_on_models(build, chip, kw):
    _same(build(), chip, **kw)


def test_the_module_switch_turns_it_off(monkeypatch):
    program = lower(_matmul(), "ascend910")
    assert Engine(program).ff is not None
    monkeypatch.setattr(fastforward, "ENABLED", False)
    engine = Engine(program)
    assert engine.ff is None
    engine.run()
    # and the API's results are the same either way
    off = asim.simulate(_matmul(), "ascend910", fusion=False)
    monkeypatch.setattr(fastforward, "ENABLED", True)
    on = asim.simulate(_matmul(), "ascend910", fusion=False)
    assert (on.cycles, on.trace.tasks, on.trace.intervals) == \
        (off.cycles, off.trace.tasks, off.trace.intervals)


def test_a_period_with_a_stateful_access_is_not_skipped(monkeypatch):
    """An engine that counts GM accesses with side effects (an L2 cache) gets no jump over a
    period holding one: here every flow counts, so nothing is skipped and all is equal."""
    from ascendsim.sim import engine as engine_module

    transfer = engine_module.Fabric.transfer

    def counted(self, *args, **kwargs):
        owner = counted.engine
        setattr(owner, fastforward.STATEFUL_ACCESSES,
                getattr(owner, fastforward.STATEFUL_ACCESSES, 0) + 1)
        return transfer(self, *args, **kwargs)

    program = lower(_matmul(), "ascend910")
    full = Engine(program, fast_forward=False)
    full_trace = full.run()
    monkeypatch.setattr(engine_module.Fabric, "transfer", counted)
    eng = Engine(program, fast_forward=True)
    counted.engine = eng
    trace = eng.run()
    assert eng.ff.jumps == 0 and getattr(eng, fastforward.STATEFUL_ACCESSES) > 0
    assert (trace.total_cycles, trace.tasks, trace.intervals) == \
        (full_trace.total_cycles, full_trace.tasks, full_trace.intervals)
