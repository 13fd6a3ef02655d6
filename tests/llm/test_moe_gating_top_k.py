"""MoeGatingTopK (the routers of Mixtral, Qwen3-MoE, DeepSeek V2/V3) against a numpy
reference written from the HF modeling code, and its cost in the generic vector lowering."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim


def reference(x, bias, k, k_group, groups, mode, norm, renorm, scale):
    """HF DeepseekV3TopkRouter / DeepseekV2MoEGate / Mixtral routing, float64."""
    x = np.asarray(x, np.float64)
    if norm == 0:
        s = np.exp(x - x.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
    else:
        s = 1 / (1 + np.exp(-x))
    c = s + (0 if bias is None else bias)
    t, e = x.shape
    if groups > 1:
        g = c.reshape(t, groups, e // groups)
        gs = np.sort(g, -1)[..., -2:].sum(-1) if mode == 1 else g.max(-1)
        keep = np.argsort(-gs, -1, kind="stable")[:, :k_group]
        m = np.zeros((t, groups), bool)
        np.put_along_axis(m, keep, True, 1)
        c = np.where(np.repeat(m, e // groups, 1), c, -np.inf)
    idx = np.argsort(-c, -1, kind="stable")[:, :k]
    w = np.take_along_axis(s, idx, 1)
    if renorm:
        w = w / (w.sum(-1, keepdims=True) + 1e-20)
    return w * scale, idx, s


CASES = {
    "mixtral_softmax_renorm": dict(k=2, k_group=1, groups=1, mode=0, norm=0, renorm=1,
                                   scale=1.0, bias=False),
    "deepseek_v2_group_max": dict(k=3, k_group=2, groups=4, mode=0, norm=0, renorm=0,
                                  scale=16.0, bias=False),
    "deepseek_v3_sigmoid_bias": dict(k=4, k_group=2, groups=4, mode=1, norm=1, renorm=1,
                                     scale=2.5, bias=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_matches_reference(rng, case):
    p = CASES[case]
    x = rng.standard_normal((7, 16))
    bias = rng.standard_normal(16) * 0.2 if p["bias"] else None
    g = asim.Graph("router")
    xi = g.input("x", x.shape, "float64")
    extra = [g.const(bias)] if bias is not None else []
    y, idx, s = g.moe_gating_top_k(xi, *extra, k=p["k"], k_group=p["k_group"],
                                   group_count=p["groups"], group_select_mode=p["mode"],
                                   norm_type=p["norm"], renorm=p["renorm"],
                                   routed_scaling_factor=p["scale"])
    g.output(y, idx, s)
    out = asim.execute(g, {"x": x})
    w, ri, rs = reference(x, bias, p["k"], p["k_group"], p["groups"], p["mode"], p["norm"],
                          p["renorm"], p["scale"])
    np.testing.assert_array_equal(out[idx.name], ri)
    np.testing.assert_allclose(out[y.name], w, rtol=1e-12)
    np.testing.assert_allclose(out[s.name], rs, rtol=1e-12)


@pytest.mark.parametrize("attrs,msg", [
    (dict(k=9), "1 <= k <= E"),
    (dict(k=2, group_count=3), "group_count=3"),
    (dict(k=5, group_count=4, k_group=1), "k_group=1"),
    (dict(k=2, norm_type=2), "norm_type 2"),
])
def test_bad_attributes_are_graph_errors(attrs, msg):
    g = asim.Graph("router")
    x = g.input("x", (3, 8), "float32")
    with pytest.raises(asim.GraphError, match=msg):
        g.moe_gating_top_k(x, **attrs)


def test_router_costs_vector_work_on_the_910b():
    g = asim.Graph("router")
    x = g.input("x", (256, 256), "float16")
    b = g.const(np.zeros(256, np.float16))
    y, idx, _ = g.moe_gating_top_k(x, b, k=8, k_group=4, group_count=8, group_select_mode=1,
                                   norm_type=1, renorm=1, routed_scaling_factor=2.5)
    g.output(y, idx)
    res = asim.simulate(g, chip="ascend910b")
    task = next(t for t in res.trace.tasks if t.op_type == "MoeGatingTopK")
    assert task.end > task.start and task.pipe_cycles
