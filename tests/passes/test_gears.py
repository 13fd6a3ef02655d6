"""Dynamic-shape gears: one static graph per gear, a selector, and running a chosen gear."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import optimize
from ascendsim.errors import ConfigError, GraphError
from ascendsim.passes.gears import build_gears


def _dyn() -> asim.Graph:
    g = asim.Graph("dyn")
    x = g.input("x", ("batch", 8))
    w = g.const(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4))
    g.output(g.relu(g.add(g.matmul(x, w), np.ones(4, np.float32))))
    return g


def test_build_gears_binds_each_gear():
    gs = build_gears(_dyn(), gears=[8, 1, 4])
    assert gs.dim == "batch" and gs.gears == [1, 4, 8]
    assert gs.graphs[4].values["x"].shape == (4, 8)
    out = gs.graphs[4].outputs[0]
    assert gs.graphs[4].values[out].shape == (4, 4)
    assert "MapIndex(batch" in gs.selector and "Case(3 static branches)" in gs.selector
    assert gs.select(4) == 4
    with pytest.raises(GraphError, match="no gear serves batch=3"):
        gs.select(3)


def test_optimize_with_gears_runs_a_chosen_gear(rng):
    g = _dyn()
    res = optimize(g, gears=[1, 4, 8], fusion_switch={"Switch": {"UBFusion": {"ALL": "off"}}})
    gs = res.gears
    assert [n.op_type for n in gs.graph_for(4).nodes] == ["MatMul", "Relu"]
    assert gs.results[4].log.graph_id == 1        # one GraphId per gear, as GE numbers graphs
    x = rng.standard_normal((4, 8)).astype(np.float32)
    want = asim.execute(g.bind(batch=4), {"x": x})[g.outputs[0]]
    got = gs.execute({"x": x})[g.outputs[0]]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_gear_selecting_graph_runs_the_matching_branch(rng):
    g = _dyn()
    res = optimize(g, gears=[1, 4, 8], fusion_switch={"Switch": {"UBFusion": {"ALL": "off"}}})
    sel = res.graph
    assert sel.inputs == g.inputs and sel.outputs == g.outputs
    assert [n.op_type for n in sel.nodes] == ["Shape", "Gather", "Equal", "If"]
    assert sel.values["x"].shape == ("batch", 8)
    for n in (1, 4, 8):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        want = asim.execute(g.bind(batch=n), {"x": x})[g.outputs[0]]
        np.testing.assert_allclose(asim.execute(sel, {"x": x})[g.outputs[0]], want, rtol=1e-5)
    with pytest.raises(GraphError, match="shape"):
        asim.execute(sel, {"x": np.zeros((3, 8), np.float32)})


def test_padded_gear_crops_outputs(rng):
    g = _dyn()
    gs = build_gears(g, gears=[2, 8], pad=True)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    assert gs.select(3) == 8
    want = asim.execute(g.bind(batch=3), {"x": x})[g.outputs[0]]
    np.testing.assert_allclose(gs.execute({"x": x})[g.outputs[0]], want, rtol=1e-5)


def test_gear_errors():
    with pytest.raises(ConfigError, match="'seq' is not a symbolic input dim.*batch"):
        build_gears(_dyn(), dim="seq", gears=[1])
    with pytest.raises(ConfigError, match="gears must be positive"):
        build_gears(_dyn(), gears=[0, 2])
