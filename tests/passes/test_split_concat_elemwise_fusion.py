"""SplitConcatElemwiseFusionPass: f(Concat(conv_a, conv_b)) -> Concat(f(conv_a), f(conv_b))."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _g(rng, second_is_conv: bool = True) -> asim.Graph:
    g = asim.Graph("split")
    x = g.input("x", (1, 3, 5, 5))
    a = g.conv(x, g.const(rng.standard_normal((4, 3, 1, 1)).astype(np.float32)),
               kernel_shape=[1, 1])
    b = g.conv(x, g.const(rng.standard_normal((2, 3, 1, 1)).astype(np.float32)),
               kernel_shape=[1, 1]) if second_is_conv else g.sigmoid(x)
    g.output(g.relu(g.concat(a, b, axis=1)))
    return g


def test_split_so_each_half_follows_its_conv(rng, same_outputs):
    res = same_outputs(_g(rng))
    assert sorted(op_types(res.graph)) == ["Concat", "Conv", "Conv", "Relu", "Relu"]
    assert op_types(res.graph)[-1] == "Concat"
    assert res.graph.outputs == _g(rng).outputs
    assert res.log.counts()["SplitConcatElemwiseFusionPass"] == (1, 1)


def test_refused_without_cube_neighbour(rng, same_outputs):
    res = same_outputs(_g(rng, second_is_conv=False))
    assert op_types(res.graph)[-1] == "Relu"
    assert "no neighbour to fuse the split part with" in res.log.refusals[0].why
