"""Gradient rules of the LLM ops against central finite differences in float64 (gradcheck.py:
h = 1e-5, relative tolerance 1e-6 of the directional derivative: the difference quotient is
exact to ~1e-10 in float64, so 1e-6 leaves room for the inputs' conditioning while any wrong
term, e.g. a missing rstd factor or a transposed rotation, is off by O(1)).

Inputs are continuous draws (no ties in the router's top-k, so the picked experts do not
change under a 1e-5 step); the routing ops' integer outputs get no cotangent.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import directional_check

import ascendsim as asim
from ascendsim.errors import GraphError, UnsupportedOpError


def _check(build, shapes, seed=0, wrt=None):
    rng = np.random.default_rng(seed)
    g = asim.Graph("llm_rule")
    xs = [g.input(f"x{i}", s, "float64") for i, s in enumerate(shapes)]
    g.output(build(g, *xs))
    feeds = {f"x{i}": rng.standard_normal(s) for i, s in enumerate(shapes)}
    return directional_check(g, feeds, wrt=wrt, seed=seed)


def _rms(g, x, gamma):
    return g.rms_norm(x, gamma, epsilon=1e-6)


def _rms_stats(g, x, gamma):
    return g.rms_norm(x, gamma, epsilon=1e-6, num_outputs=2)[0]


def _rms_two_axes(g, x, gamma):
    return g.rms_norm(x, gamma, epsilon=1e-6)


def _rotary(g, x, c, s):
    return g.rotary_mul(x, c, s)


def _swiglu_mid(g, x):
    return g.swi_glu(x, dim=1)


def _gmm(g, x, w):
    groups = g.const(np.array([2, 2, 5, 7], dtype=np.int64))   # an empty group (2..2)
    return g.grouped_matmul(x, w, groups)


def _moe(g, x, logits):
    """The routing chain as the decoder builds it: router -> dispatch -> experts -> combine."""
    scales, idx, _ = g.moe_gating_top_k_softmax(logits, k=2)
    ex, pos, groups = g.moe_init_routing(x, idx, num_experts=3)
    w = g.const(np.random.default_rng(7).standard_normal((3, 4, 4)))
    return g.moe_finalize_routing(g.grouped_matmul(ex, w, groups), scales, pos)


def _gating(g, logits):
    return g.moe_gating_top_k_softmax(logits, k=3)[0]


def _init_routing(g, x):
    idx = g.const(np.array([[0, 2], [1, 0], [2, 1], [0, 1]], dtype=np.int32))
    return g.moe_init_routing(x, idx, num_experts=3)[0]


def _finalize(g, ex, scales):
    pos = g.const(np.array([3, 0, 6, 1, 5, 2, 4, 7], dtype=np.int32))
    return g.moe_finalize_routing(ex, scales, pos)


def _append(g, cache, upd):
    return g.kv_cache_append(cache, upd, position=2)


def _attention(causal, mask=False, heads=4, kv=2, s=3, t=5):
    def build(g, q, k, v):
        extra = []
        if mask:
            m = np.random.default_rng(3).standard_normal((1, 1, s, t))
            extra = [g.const(m)]
        return g.flash_attention_score(q, k, v, *extra, scale_value=0.4, head_num=heads,
                                       causal=int(causal))
    return build, [(2, heads, s, 4), (2, kv, t, 4), (2, kv, t, 4)]


CASES = {
    "rms_norm": (_rms, [(3, 5, 8), (8,)]),
    "rms_norm_with_rstd_output": (_rms_stats, [(4, 6), (6,)]),
    "rms_norm_two_axes": (_rms_two_axes, [(3, 2, 4), (2, 4)]),
    "rotary_mul_broadcast_tables": (_rotary, [(2, 3, 4, 6), (1, 1, 4, 6), (1, 1, 4, 6)]),
    "rotary_mul_full_tables": (_rotary, [(2, 5, 4), (2, 5, 4), (2, 5, 4)]),
    "swiglu_last": (lambda g, x: g.swi_glu(x), [(3, 8)]),
    "swiglu_mid_axis": (_swiglu_mid, [(2, 6, 3)]),
    "grouped_matmul": (_gmm, [(7, 3), (4, 3, 5)]),
    "moe_gating_top_k_softmax": (_gating, [(5, 6)]),
    "moe_init_routing": (_init_routing, [(4, 3)]),
    "moe_finalize_routing": (_finalize, [(8, 3), (4, 2)]),
    "moe_chain": (_moe, [(5, 4), (5, 3)]),
    "kv_cache_append": (_append, [(2, 2, 6, 4), (2, 2, 3, 4)]),
    "flash_attention_gqa_causal": _attention(True),
    "flash_attention_gqa_full": _attention(False),
    "flash_attention_mha_additive_mask": _attention(False, mask=True, heads=2, kv=2),
    "flash_attention_causal_prefill_after_context": _attention(True, s=2, t=6),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_llm_rule_matches_finite_differences(case):
    build, shapes = CASES[case]
    _check(build, shapes)


def test_kv_cache_append_gradient_splits_the_window():
    """d update = the window of d cache; the overwritten rows of the old cache get 0."""
    g = asim.Graph("append")
    cache = g.input("cache", (1, 1, 5, 2), "float64")
    upd = g.input("upd", (1, 1, 2, 2), "float64")
    y = g.kv_cache_append(cache, upd, position=1)
    loss = g.reduce_sum(g.mul(y, g.const(np.arange(10.0).reshape(1, 1, 5, 2))), [0, 1, 2, 3],
                        keepdims=0)
    g.output(y, loss)
    gg = asim.grad(g, loss, ["cache", "upd"])
    out = asim.execute(gg, {"cache": np.zeros((1, 1, 5, 2)), "upd": np.zeros((1, 1, 2, 2))})
    weights = np.arange(10.0).reshape(1, 1, 5, 2)
    want_cache = weights.copy()
    want_cache[:, :, 1:3] = 0.0
    np.testing.assert_array_equal(out["cache_grad"], want_cache)
    np.testing.assert_array_equal(out["upd_grad"], weights[:, :, 1:3])


def test_grouped_matmul_backward_is_grouped_matmul():
    """The backward of GroupedMatmul is two GroupedMatmuls (dx: weight^T; dweight: group_type
    2), no dense per-expert expansion."""
    g = asim.Graph("gmm")
    x = g.input("x", (6, 3), "float64")
    w = g.const(np.ones((2, 3, 4)), name="w")
    y = g.grouped_matmul(x, w, g.const(np.array([4, 6], dtype=np.int64)))
    loss = g.reduce_sum(y, [0, 1], keepdims=0)
    g.output(loss)
    gg = asim.grad(g, loss, ["x", "w"])
    gmms = [n for n in gg.nodes if n.op_type == "GroupedMatmul"]
    assert sorted(int(n.attrs["group_type"]) for n in gmms) == [0, 0, 2]


def test_incre_flash_attention_is_not_differentiable():
    g = asim.Graph("decode")
    q = g.input("q", (1, 4, 1, 8), "float64")
    k = g.input("k", (1, 2, 6, 8), "float64")
    v = g.input("v", (1, 2, 6, 8), "float64")
    y = g.incre_flash_attention(q, k, v, num_heads=4, num_key_value_heads=2, scale_value=0.3,
                                name="decode_attn")
    loss = g.reduce_sum(y, [0, 1, 2, 3], keepdims=0)
    g.output(loss)
    with pytest.raises(UnsupportedOpError, match=r"IncreFlashAttention.*decode_attn.*not "
                                                  r"differentiable.*FlashAttentionScore"):
        asim.grad(g, loss, ["q"])


def test_attention_mask_computed_from_a_trained_value_is_refused():
    g = asim.Graph("mask")
    q = g.input("q", (1, 2, 3, 4), "float64")
    m = g.input("m", (1, 1, 3, 3), "float64")
    y = g.flash_attention_score(q, q, q, m, scale_value=0.5, head_num=2, name="fa")
    loss = g.reduce_sum(y, [0, 1, 2, 3], keepdims=0)
    g.output(loss)
    with pytest.raises(GraphError, match=r"FlashAttentionScore 'fa'.*atten_mask 'm'"):
        asim.grad(g, loss, ["q", "m"])


def test_flash_attention_grad_equals_unfused_attention_grad():
    """The fused backward (FlashAttentionScoreGrad) equals the gradient of the unfused
    attention graph (MatMul, Mul, Add mask, Softmax, MatMul with repeated kv heads) to
    float64 rounding (1e-10 relative: same math, different summation order)."""
    rng = np.random.default_rng(5)
    b, h, kv, s, t, d = 2, 4, 2, 3, 5, 4
    feeds = {"q": rng.standard_normal((b, h, s, d)), "k": rng.standard_normal((b, kv, t, d)),
             "v": rng.standard_normal((b, kv, t, d))}
    r = rng.standard_normal((b, h, s, d))

    def run(fused: bool):
        g = asim.Graph("att")
        q, k, v = (g.input(n, feeds[n].shape, "float64") for n in ("q", "k", "v"))
        if fused:
            y = g.flash_attention_score(q, k, v, scale_value=0.5, head_num=h, causal=1)
        else:
            rep = [g.reshape(g.expand(g.reshape(a, [b, kv, 1, t, d]), [b, kv, h // kv, t, d]),
                             [b, h, t, d]) for a in (k, v)]
            mask = np.where(np.arange(t)[None, :] <= np.arange(s)[:, None] + t - s, 0.0, -1e9)
            sc = g.add(g.mul(g.matmul(q, g.transpose(rep[0], perm=[0, 1, 3, 2])),
                             g.const(np.asarray(0.5))), g.const(mask))
            y = g.matmul(g.softmax(sc, axis=-1), rep[1])
        loss = g.reduce_sum(g.mul(y, g.const(r)), [0, 1, 2, 3], keepdims=0)
        g.output(loss)
        out = asim.execute(asim.grad(g, loss, ["q", "k", "v"]), feeds)
        return [out[f"{n}_grad"] for n in ("q", "k", "v")]

    for got, want in zip(run(True), run(False)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_rotary_tables_get_no_gradient_work_when_not_trained():
    """Cotangent of x only: RotaryMulGrad runs with need_backward=0 (4 vector instructions
    per element instead of 7) and dx still matches finite differences."""
    build = _rotary
    g = asim.Graph("rot")
    x = g.input("x", (2, 3, 4), "float64")
    rng = np.random.default_rng(2)
    tables = [g.const(rng.standard_normal((1, 4))) for _ in range(2)]
    g.output(build(g, x, *tables))
    directional_check(g, {"x": rng.standard_normal((2, 3, 4))}, wrt=["x"])
    gg = asim.grad(g, g.outputs[-1], ["x"])
    node = next(n for n in gg.nodes if n.op_type == "RotaryMulGrad")
    assert node.attrs["need_backward"] == 0
