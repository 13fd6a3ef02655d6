"""LoopShapeInferencePass: carried shapes iterate to a fixpoint; changing dims widen."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def _loop_graph(grow: bool) -> asim.Graph:
    body = asim.Graph("body")
    body.input("i", (), dtype="int64")
    c = body.input("cond", (), dtype="bool")
    v = body.input("v", (1, 2))
    nv = body.concat(v, np.ones((1, 2), np.float32), axis=0) if grow else body.add(v, 1.0)
    body.output(body.identity(c), nv, body.reduce_sum(v, np.array([0], np.int64), keepdims=0))
    g = asim.Graph("loopg")
    x = g.input("x", (1, 2))
    outs = g.loop(g.const(np.array(3, np.int64)), None, x, body=body)
    g.output(*outs)
    return g


def test_stable_loop_keeps_shapes(same_outputs):
    res = same_outputs(_loop_graph(False))
    assert res.log.counts()["LoopShapeInferencePass"] == (1, 0)
    v_out, scan = res.graph.outputs
    assert res.graph.values[v_out].shape == (1, 2)
    assert res.graph.values[scan].shape == (3, 2)


def test_growing_carried_dim_widens_to_symbolic(opt):
    g = _loop_graph(True)
    v_out = g.outputs[0]
    assert g.values[v_out].shape == (1, 2)         # the registry's single look at the body
    res = opt(g)
    assert res.log.counts()["LoopShapeInferencePass"] == (1, 1)
    shape = res.graph.values[v_out].shape
    assert isinstance(shape[0], str) and shape[1] == 2
    assert res.graph.values[res.graph.outputs[1]].shape == (3, 2)
    out = asim.execute(res.graph, {"x": np.zeros((1, 2), np.float32)})
    assert out[v_out].shape == (4, 2)
