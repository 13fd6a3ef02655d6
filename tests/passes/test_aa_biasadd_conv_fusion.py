"""AABiasaddConvFusion: bias-less Conv + BiasAdd/per-channel Add -> Conv with bias."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _g(rng, bias_shape=(3, 1, 1), conv_bias=False, use_biasadd=False) -> asim.Graph:
    g = asim.Graph("aa")
    x = g.input("x", (1, 2, 5, 5))
    w = g.const(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    b = g.const(np.ones(3, np.float32)) if conv_bias else None
    c = g.conv(x, w, b, kernel_shape=[3, 3])
    if use_biasadd:
        y = g.bias_add(c, np.arange(3, dtype=np.float32), data_format="NCHW")
    else:
        y = g.add(c, np.arange(np.prod(bias_shape), dtype=np.float32).reshape(bias_shape))
    g.output(y)
    return g


def test_add_of_per_channel_constant_fuses(rng, same_outputs):
    res = same_outputs(_g(rng))
    assert op_types(res.graph) == ["Conv"]
    assert len(res.graph.nodes[0].inputs) == 3
    assert res.log.counts()["AABiasaddConvFusion"] == (1, 1)


def test_biasadd_fuses(rng, same_outputs):
    res = same_outputs(_g(rng, use_biasadd=True))
    assert op_types(res.graph) == ["Conv"]


def test_refused_when_conv_has_bias(rng, same_outputs):
    res = same_outputs(_g(rng, conv_bias=True))
    assert op_types(res.graph) == ["Conv", "Add"]
    assert res.log.counts()["AABiasaddConvFusion"] == (1, 0)
    assert "already has a bias" in res.log.refusals[0].why


def test_refused_when_not_per_channel(rng, same_outputs):
    res = same_outputs(_g(rng, bias_shape=(1, 3, 3, 3)))
    assert op_types(res.graph) == ["Conv", "Add"]
    assert "not one value per output channel" in res.log.refusals[0].why
