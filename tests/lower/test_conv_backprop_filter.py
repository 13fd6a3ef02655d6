"""Conv2DBackpropFilter: CANN's one-kernel weight gradient of a group-1 Conv.

The Conv gradient used to build dW as Transpose(x) -> Conv(by Transpose(dy)) -> Transpose: the
same MACs plus three layout kernels the real stack never launches (the MindSpore ResNet-50
profile in Huawei-Performance-Model/Ascend-910B runs one Conv2DBackpropFilter per conv). The
op must equal that chain in value, lower as the chain's Conv (same implicit-GEMM geometry),
and leave the transposes out.
"""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError

# (x shape, filter shape, forward attrs): 1x1, 3x3 padded, strided 1x1 whose last row/column
# the forward never reads (x cropped), the 7x7/2 stem, dilated, 1-D
CASES = {
    "1x1": ((2, 16, 8, 8), (32, 16, 1, 1), {}),
    "3x3_pad": ((2, 8, 9, 9), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    "1x1_s2_cropped": ((2, 8, 9, 9), (16, 8, 1, 1), {"strides": [2, 2]}),
    "stem_7x7_s2": ((1, 3, 20, 20), (16, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    "dilated": ((1, 4, 11, 11), (8, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "1d": ((2, 4, 17), (8, 4, 3), {"strides": [2], "pads": [1, 1]}),
}


def _dy_shape(xs, fs, attrs):
    g = asim.Graph("fwd")
    y = g.conv(g.input("x", xs, "float32"), g.input("w", fs, "float32"),
               kernel_shape=list(fs[2:]), **attrs)
    return tuple(g.values[y.name].shape)


def _reference(x, dy, fs, attrs):
    """dW[m, c, k] = sum_{n, p} dy[n, m, p] * x_pad[n, c, s*p + d*k] in float64."""
    rank = x.ndim - 2
    s = attrs.get("strides", [1] * rank)
    d = attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[i + rank])
                                                           for i in range(rank)])
    dw = np.zeros(fs)
    for k in np.ndindex(*fs[2:]):
        idx = tuple(slice(d[i] * k[i], d[i] * k[i] + s[i] * dy.shape[2 + i], s[i])
                    for i in range(rank))
        patch = xp[(slice(None), slice(None)) + idx]               # (N, C, *P)
        n, m = dy.shape[:2]
        dw[(slice(None), slice(None)) + k] = np.einsum(
            "nmp,ncp->mc", dy.astype(np.float64).reshape(n, m, -1),
            patch.reshape(n, x.shape[1], -1))
    return dw


@pytest.mark.parametrize("case", sorted(CASES))
def test_weight_gradient_op_equals_the_definition(case):
    xs, fs, attrs = CASES[case]
    ys = _dy_shape(xs, fs, attrs)
    rng = np.random.default_rng(7)
    x, dy = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ys).astype(np.float32)
    g = asim.Graph("dw")
    g.output(g.conv_backprop_filter(g.input("x", xs, "float32"), g.input("dy", ys, "float32"),
                                    filter_shape=list(fs), **attrs))
    got = asim.execute(g, {"x": x, "dy": dy})[g.outputs[0]]
    assert got.shape == fs
    # fp32 accumulation of at most N*prod(P) <= 2*81 products of unit normals: 1e-4 relative
    np.testing.assert_allclose(got, _reference(x, dy, fs, attrs), rtol=1e-4, atol=1e-4)


def _conv_grad_graph(xs, fs, attrs, dtype="float16"):
    g = asim.Graph("conv_grad")
    x, w = g.input("x", xs, dtype), g.input("w", fs, dtype)
    y = g.conv(x, w, kernel_shape=list(fs[2:]), **attrs)
    g.output(g.reduce_sum(g.mul(y, y), keepdims=0))
    return g


def test_conv_gradient_emits_one_kernel_and_no_transposes():
    from ascendsim.autodiff.grad import backward

    xs, fs, attrs = CASES["3x3_pad"]
    g = _conv_grad_graph(xs, fs, attrs, "float32")
    grads = backward(g, g.outputs[0], ["w"])
    g.output(grads["w"])
    types = [n.op_type for n in g.nodes]
    assert types.count("Conv2DBackpropFilter") == 1 and "Transpose" not in types
    assert g.producers()[grads["w"].name].op_type == "Conv2DBackpropFilter"


def test_grouped_conv_keeps_the_decomposition():
    from ascendsim.autodiff.grad import backward

    g = _conv_grad_graph((1, 8, 6, 6), (8, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]},
                         "float32")
    grads = backward(g, g.outputs[0], ["w"])
    types = [n.op_type for n in g.nodes]
    assert "Conv2DBackpropFilter" not in types and types.count("Conv") == 2
    assert grads["w"].shape == (8, 4, 3, 3)


def _decomposed(xs, ys, fs, attrs, dtype):
    """The chain the Conv gradient built before: Transpose(x) conv Transpose(dy), Transpose."""
    g = asim.Graph("dw_decomposed")
    xt = g.transpose(g.input("x", xs, dtype), perm=[1, 0, 2, 3])
    dyt = g.transpose(g.input("dy", ys, dtype), perm=[1, 0, 2, 3])
    pads = attrs.get("pads", [0, 0, 0, 0])
    dwt = g.conv(xt, dyt, kernel_shape=list(ys[2:]), pads=pads)
    g.output(g.transpose(dwt, perm=[1, 0, 2, 3]))
    return g


def test_one_kernel_costs_the_chains_conv_and_saves_its_transposes():
    # a ResNet-50 stage-3 3x3 conv's weight gradient at batch 8 on the 910
    xs, fs, attrs = (8, 256, 14, 14), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}
    ys = (8, 256, 14, 14)
    g = asim.Graph("dw")
    g.output(g.conv_backprop_filter(g.input("x", xs, "float16"), g.input("dy", ys, "float16"),
                                    filter_shape=list(fs), **attrs))
    one = asim.simulate(g, "ascend910", fusion=False)
    chain = asim.simulate(_decomposed(xs, ys, fs, attrs, "float16"), "ascend910", fusion=False)
    kernel = [r for r in one.summary() if r.op_type == "Conv2DBackpropFilter"]
    conv = [r for r in chain.summary() if r.op_type == "Conv"]
    assert len(kernel) == 1 and len(conv) == 1
    # the same MACs as the chain's Conv (M = C*kh*kw, K = N*Ho*Wo, N = M), but TBE's kernel
    # splits the batch over cores (lower/cube.py tbe_filter_grad_geometry): its time stays
    # within 1.5x of the Conv's either way
    assert kernel[0].flops == conv[0].flops == 2 * 8 * 14 * 14 * 256 * 256 * 9
    ratio = kernel[0].task_duration_us / conv[0].task_duration_us
    assert 1 / 1.5 < ratio < 1.5
    # the chain also pays its three transposes (each at least a pass over its tensor)
    transposes = sum(r.task_duration_us for r in chain.summary() if r.op_type == "Transpose")
    assert transposes > 0
    assert one.time_us < chain.time_us - 0.9 * transposes
    assert "read in place" in one.explain(g.nodes[0].name)


@pytest.mark.parametrize("filter_shape, match", [
    ([16, 8, 3], "filter_shape"),                 # rank differs from X
    ([16, 4, 3, 3], "X channels 8 does not match 4"),
    ([32, 8, 3, 3], "dY channels 16 does not match 32"),
    ([16, 8, 5, 5], "not the forward output"),
])
def test_bad_filter_shape_is_named(filter_shape, match):
    g = asim.Graph("bad")
    x = g.input("x", (2, 8, 9, 9), "float32")
    dy = g.input("dy", (2, 16, 9, 9), "float32")
    with pytest.raises(GraphError, match=match):
        g.conv_backprop_filter(x, dy, filter_shape=filter_shape, pads=[1, 1, 1, 1])


def test_tbe_weight_gradient_splits_the_batch_and_adds_float32_partials():
    """On the 910 (TBE) each of the batch's cores reduces its own sample into a whole dW and
    adds it into the float32 output (the schedule's batch_dim split with atomic writes): the
    kernel writes at least batch x dW x 4 bytes, where the chain's Conv writes dW once."""
    xs, fs, attrs = (8, 256, 14, 14), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}
    g = asim.Graph("dw")
    g.output(g.conv_backprop_filter(g.input("x", xs, "float16"),
                                    g.input("dy", (8, 256, 14, 14), "float16"),
                                    filter_shape=list(fs), **attrs))
    res = asim.simulate(g, "ascend910", fusion=False)
    name = g.nodes[0].name
    task = res.trace.task(name)
    writes = sum(v for (level, kind), v in task.traffic.items() if kind == "write")
    assert writes >= 8 * 256 * 256 * 9 * 4
    assert "batch 8 split over 8 cores" in res.explain(name)
    # the 910B's kernel is not TBE's: no batch split there
    res_b = asim.simulate(g, "ascend910b", fusion=False)
    assert "split over" not in res_b.explain(name)
