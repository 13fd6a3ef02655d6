"""ConvBatchnormFusionPass: BN folded into the conv's weights and bias; refusals."""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.ir.tensor import LazyTensor


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _conv_bn(rng, bias: bool = True, group: int = 1, extra_use: bool = False) -> asim.Graph:
    g = asim.Graph("cbn")
    x = g.input("x", (2, 4, 6, 6))
    w = g.const(rng.standard_normal((6, 4 // group, 3, 3)).astype(np.float32))
    b = g.const(rng.standard_normal(6).astype(np.float32)) if bias else None
    c = g.conv(x, w, b, kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=group)
    y = g.batch_normalization(c, rng.uniform(0.5, 2, 6).astype(np.float32),
                              rng.standard_normal(6).astype(np.float32),
                              rng.standard_normal(6).astype(np.float32),
                              rng.uniform(0.5, 2, 6).astype(np.float32), epsilon=1e-3)
    g.output(g.relu(y))
    if extra_use:
        g.output(c)
    return g


def test_bn_folded_into_conv(rng, same_outputs):
    res = same_outputs(_conv_bn(rng), rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["Conv", "Relu"]
    assert res.log.counts()["ConvBatchnormFusionPass"] == (1, 1)
    conv = res.graph.nodes[0]
    assert isinstance(res.graph.constants[conv.inputs[1]], LazyTensor)


def test_bias_less_and_grouped_conv(rng, same_outputs):
    res = same_outputs(_conv_bn(rng, bias=False, group=2), rtol=1e-4, atol=1e-5)
    assert op_types(res.graph) == ["Conv", "Relu"]


def test_conv_output_used_elsewhere_is_refused(rng, same_outputs):
    res = same_outputs(_conv_bn(rng, extra_use=True))
    assert "BatchNormalization" in op_types(res.graph)
    assert res.log.counts()["ConvBatchnormFusionPass"] == (1, 0)
    assert "also used elsewhere" in res.log.refusals[0].why


def test_non_constant_bn_parameter_is_refused(rng, same_outputs):
    g = asim.Graph("var")
    x = g.input("x", (1, 2, 4, 4))
    s = g.input("s", (2,))
    c = g.conv(x, g.const(np.ones((2, 2, 1, 1), np.float32)), kernel_shape=[1, 1])
    g.output(g.batch_normalization(c, s, np.zeros(2, np.float32), np.zeros(2, np.float32),
                                   np.ones(2, np.float32)))
    res = same_outputs(g)
    assert res.log.counts()["ConvBatchnormFusionPass"] == (1, 0)
    assert "not constant: s" in res.log.refusals[0].why
