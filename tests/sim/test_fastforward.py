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


def _conv(batch: int = 16) -> asim.Graph:
    """A 3x3 convolution wide enough (2048 input channels: 128 Cin1 slices) that a tile's
    feature map takes several GM->L1 loads (lower/l1_chunks.py): a K loop to skip."""
    g = asim.Graph("conv")
    x = g.input("x", (batch, 2048, 7, 7), "float16")
    w = g.weight("w", (512, 2048, 3, 3), "float16", seed=0)
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
               engine.fabric.peak_l2, engine.fabric.peak_hbm, trace.l2, engine.gm_traffic)
    return figures, engine


def _same(graph, chip, jumps: bool = True, **kw) -> tuple[int, int, int]:
    """Assert both forms agree and (`jumps`) that the fast path skipped periods holding L2
    accesses (replayed on the cache); (jumps, events with, events without)."""
    full, slow = _run(graph, chip, False, **kw)
    fast, eng = _run(graph, chip, True, **kw)
    assert fast[0] == full[0]                   # cycles
    assert fast[1] == full[1]                   # every task record
    assert len(fast[2]) == len(full[2])
    assert fast[2] == full[2]                   # every interval
    assert fast[3:6] == full[3:6]               # buffer and L2/HBM peaks
    assert fast[6] == full[6]                   # L2 stats (floats, bit for bit)
    assert fast[7] == full[7]                   # every task's GM bytes per level
    if jumps:
        assert eng.ff.jumps > 0 and eng.ff.replayed > 0
        assert eng.events < slow.events
    return eng.ff.jumps, eng.events, slow.events


@pytest.mark.parametrize("chip", ["ascend910", "ascend910b", "ascend310"])
@pytest.mark.parametrize("detail", ["block", "tile"])
def test_fast_forward_equals_stepping_on_gemm_and_conv(chip, detail):
    for build in (_conv, _matmul):
        # (the 910B's GEMM in block detail: its few tiles of 512-step K loops run as
        # coalesced chunk tiles, sim/coalesce.py, which leave no loop to skip)
        jumps = not (chip == "ascend910b" and detail == "block" and build is _matmul)
        for mode in ("sink", "host"):
            _same(build(), chip, jumps=jumps, detail=detail, mode=mode)


@pytest.mark.parametrize("kw", [dict(streams=2), dict(streams=2, mode="host"),
                                dict(symmetric=False), dict(mode="eager"),
                                dict(detail="tile", streams=2)])
def test_fast_forward_with_overlapping_tasks_and_per_core_processes(kw):
    _same(_branches(), "ascend910", **kw)


@pytest.mark.parametrize("build, chip, kw, jumps", [
    (lambda: asim.models.resnet50(batch=32), "ascend910", {}, False),
    (lambda: asim.models.resnet50(batch=32), "ascend910", dict(mode="host"), False),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=4, seq_len=128, layers=1),
                           "ascend910b").graph, "ascend910b", {}, True),
    (lambda: asim.optimize(asim.models.bert_training_step(batch=4, seq_len=128, layers=1),
                           graph_kernel=True).graph, "ascend910", dict(streams=2), True),
])
def test_fast_forward_equals_stepping_on_models(build, chip, kw, jumps):
    """(ResNet-50 on the 910: its convolutions load a tile's feature map in a few whole
    Cin1-slice loads, lower/l1_chunks.py, which leaves no loop long enough to skip; the
    result must still be the stepped one.)"""
    _same(build(), chip, jumps=jumps, **kw)


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
    from ascendsim.sim.fabric import Fabric

    transfer = Fabric.transfer

    def counted(self, *args, **kwargs):
        owner = counted.owner
        setattr(owner, fastforward.STATEFUL_ACCESSES,
                getattr(owner, fastforward.STATEFUL_ACCESSES, 0) + 1)
        return transfer(self, *args, **kwargs)

    program = lower(_matmul(), "ascend910")
    full = Engine(program, fast_forward=False)
    full_trace = full.run()
    monkeypatch.setattr(Fabric, "transfer", counted)
    eng = Engine(program, fast_forward=True)
    counted.owner = eng.gm        # (the counter is the GM accounting's, sim/gm.py)
    trace = eng.run()
    assert eng.ff.jumps == 0 and getattr(eng.gm, fastforward.STATEFUL_ACCESSES) > 0
    assert (trace.total_cycles, trace.tasks, trace.intervals) == \
        (full_trace.total_cycles, full_trace.tasks, full_trace.intervals)


def test_an_l2_copy_answers_as_the_cache_and_leaves_it_alone():
    """The fast-forward's dry run: a copy gives the same results as the cache it copies,
    access after access, and changes nothing in it."""
    from dataclasses import replace

    from ascendsim.sim.l2cache import L2Cache

    l2 = L2Cache(1000)
    l2.read(1, "a", 600, 300.0, 1.0)
    l2.write(1, "b", 300, 300.0)
    l2.log = []
    copy = l2.copy()
    before = (l2.state({}), l2.used, replace(l2.stats),
              {n: dict(ln.fills) for n, ln in l2.lines.items()})
    assert copy.log is None and copy.stats == l2.stats and copy.stats is not l2.stats
    results = [copy.read(1, "a", 600, 200.0, 1.0), copy.read(2, "c", 500, 500.0, 0.5),
               copy.write(2, "b", 300, 100.0)]
    assert (l2.state({}), l2.used, l2.stats,
            {n: dict(ln.fills) for n, ln in l2.lines.items()}) == before
    assert l2.log == []
    assert [l2.read(1, "a", 600, 200.0, 1.0), l2.read(2, "c", 500, 500.0, 0.5),
            l2.write(2, "b", 300, 100.0)] == results
    assert l2.state({}) == copy.state({}) and l2.stats == copy.stats and l2.used == copy.used
