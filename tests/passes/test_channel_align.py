"""ChannelAlignFusionPass: pad conv channels to 16 between two convs, when worth it."""

from __future__ import annotations

import numpy as np

import ascendsim as asim

ON = {"Switch": {"GraphFusion": {"ChannelAlignFusionPass": "on"}, "UBFusion": {"ALL": "off"}}}


def _g(rng, c: int, mid_op: str = "sigmoid", group2: int = 1) -> asim.Graph:
    g = asim.Graph("align")
    x = g.input("x", (1, 4, 6, 6))
    w1 = g.const(rng.standard_normal((c, 4, 3, 3)).astype(np.float32))
    b1 = g.const(rng.standard_normal(c).astype(np.float32))
    y = g.conv(x, w1, b1, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = getattr(g, mid_op)(y)          # sigmoid(0) = 0.5: padded channels are not zero
    w2 = g.const(rng.standard_normal((8, c // group2, 1, 1)).astype(np.float32))
    g.output(g.conv(y, w2, kernel_shape=[1, 1], group=group2))
    return g


def test_off_by_default(rng, same_outputs):
    res = same_outputs(_g(rng, 14))
    assert not res.log.record("ChannelAlignFusionPass").ran


def test_pads_to_16_and_keeps_values(rng, same_outputs):
    res = same_outputs(_g(rng, 14), fusion_switch=ON, rtol=1e-4, atol=1e-5)
    assert res.log.counts()["ChannelAlignFusionPass"] == (1, 1)
    mid = res.graph.nodes[1]
    assert res.graph.values[mid.outputs[0]].shape == (1, 16, 6, 6)
    assert res.graph.values[res.graph.outputs[0]].shape == (1, 8, 6, 6)


def test_not_worth_it_refused_with_figures(rng, same_outputs):
    res = same_outputs(_g(rng, 5), fusion_switch=ON)
    assert res.log.counts()["ChannelAlignFusionPass"] == (1, 0)
    assert res.log.refusals[0].why == ("padding 5 -> 16 channels costs 3.20x data, more than "
                                       "the 20% alignment gain")


def test_grouped_conv_refused(rng, same_outputs):
    res = same_outputs(_g(rng, 14, group2=2), fusion_switch=ON)
    assert res.log.refusals[0].why == "grouped convolution"
