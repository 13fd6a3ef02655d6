"""Conv2DBackpropEltwise(Eltwise)FusionPass: the ReLU gradient in the data gradient's epilogue.

MindSpore's ResNet-50 training graph on the 910 runs FusionOp_Conv2DBackpropInput_ReluGradV2
and FusionOp_Conv2DBackpropInput_AddN_ReluGradV2 (Huawei-Performance-Model/Ascend-910B
profile, resnet50_16_224_224): the ReLU gradient (here Where(Greater(x, 0), dy, 0)) and the
residual AddN are no tasks of their own.
"""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.autodiff.grad import backward


def _block(residual: bool, dtype: str = "float16") -> asim.Graph:
    """x -> conv0 -> ReLU = h -> conv1 -> ReLU -> conv2 (+ h) -> ReLU -> conv3 -> loss: the
    data gradients meet ReLU gradients; with `residual`, h's gradient is the AddN of conv1's
    data gradient and the residual branch before its ReLU gradient (a bottleneck's input)."""
    g = asim.Graph("block")
    x = g.input("x", (2, 32, 14, 14), dtype)
    ws = [g.input(f"w{i}", (32, 32, 3, 3), dtype) for i in range(4)]

    def conv(v, i):
        return g.conv(v, ws[i], kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    h = g.relu(conv(x, 0))
    b = conv(g.relu(conv(h, 1)), 2)
    b = g.relu(g.add(b, h) if residual else b)
    y = conv(b, 3)
    loss = g.reduce_sum(g.mul(y, y), keepdims=0)
    g.output(loss)
    wrt = ["x", "w0", "w1", "w2", "w3"]
    grads = backward(g, loss.name, wrt)
    for name in wrt:
        g.output(grads[name])
    return g


def _feeds(g: asim.Graph, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    return {n: (0.1 * rng.standard_normal(g.values[n].shape)).astype(g.values[n].dtype)
            for n in g.inputs}


def _fused(g: asim.Graph) -> list:
    opt = asim.optimize(g, "ascend910").graph
    return opt, [n for n in opt.nodes if n.op_type == "FusedOp"
                 and n.attrs.get("pattern", "").startswith("Conv2DBackpropEltwise")]


@pytest.mark.parametrize("residual, pattern, members", [
    (False, "Conv2DBackpropEltwiseFusion", ["ConvTranspose", "Greater", "Where"]),
    (True, "Conv2DBackpropEltwiseEltwiseFusion", ["ConvTranspose", "Add", "Greater", "Where"]),
])
def test_relu_gradient_joins_the_data_gradient_kernel(residual, pattern, members):
    g = _block(residual)
    opt, fused = _fused(g)
    mine = [n for n in fused if n.attrs["pattern"] == pattern]
    assert mine, [n.attrs.get("pattern") for n in opt.nodes if n.op_type == "FusedOp"]
    assert sorted(n.op_type for n in mine[0].subgraph.nodes) == sorted(members)
    # values: the fused node runs its subgraph; fp16 everywhere, so equal bit for bit
    feeds = _feeds(g)
    want = asim.execute(g, feeds)
    got = asim.execute(opt, feeds)
    for name in g.outputs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_no_fusion_without_a_relu_gradient():
    g = asim.Graph("plain")
    x = g.input("x", (2, 32, 14, 14), "float16")
    w = g.input("w", (32, 32, 3, 3), "float16")
    y = g.conv(x, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    loss = g.reduce_sum(g.mul(y, y), keepdims=0)
    g.output(loss)
    g.output(backward(g, loss.name, ["x"])["x"])
    _, fused = _fused(g)
    assert fused == []


def test_fused_kernel_costs_between_the_cube_op_and_the_three_tasks():
    """Bound: the fused task does the ConvTranspose's cube work plus an epilogue over its
    output, so it takes at least the ConvTranspose alone (minus 5 % for operand placement)
    and less than the ConvTranspose + Greater + Where it replaces (no x/dy round trips)."""
    g = _block(False)
    fused = asim.simulate(g, "ascend910", fusion=True)
    unfused = asim.simulate(g, "ascend910", fusion=False)
    rows = [r for r in fused.summary() if r.op_type == "ConvTransposeGreaterWhere"]
    assert len(rows) == 3                 # the ReLU gradients after conv1, conv2, conv3
    t_fused = max(r.task_duration_us for r in rows)
    ct = sorted(r.task_duration_us for r in unfused.summary() if r.op_type == "ConvTranspose")
    vec = [r.task_duration_us for r in unfused.summary() if r.op_type in ("Greater", "Where")]
    assert len(vec) == 2 * 3
    # the conv data gradients all have the same shape (32 -> 32, 3x3, 14x14)
    assert 0.95 * min(ct) <= t_fused < max(ct) + 2 * min(vec)
    assert fused.time_us < unfused.time_us
    assert "Conv2DBackpropEltwiseFusion" in {n.attrs.get("pattern") for n in fused.graph.nodes}
