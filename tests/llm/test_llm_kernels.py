"""LLM op kernels against slow numpy references (float64), with tolerances of fp32 math."""

from __future__ import annotations

import numpy as np
import pytest
from llm_helpers import naive_attention

from ascendsim.kernels import llm as kl

#: fp32 kernels vs float64 references on O(1) values: a few ulps of fp32 per reduction step
RTOL, ATOL = 1e-5, 1e-5


def test_rms_norm(rng):
    x = rng.standard_normal((3, 5, 16)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    y, rstd = kl.rms_norm(x, g, 1e-6)
    x64 = x.astype(np.float64)
    r = 1 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, x64 * r * g, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(rstd, r, rtol=RTOL)
    assert rstd.shape == (3, 5, 1) and rstd.dtype == np.float32


def test_rotary_mul_half_mode(rng):
    x = rng.standard_normal((2, 3, 4, 8)).astype(np.float32)
    c = rng.uniform(-1, 1, (1, 1, 4, 8)).astype(np.float32)
    s = rng.uniform(-1, 1, (1, 1, 4, 8)).astype(np.float32)
    rot = np.concatenate([-x[..., 4:], x[..., :4]], axis=-1)
    np.testing.assert_allclose(kl.rotary_mul(x, c, s), x * c + rot * s, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("dim", [-1, 0])
def test_swiglu(rng, dim):
    x = rng.standard_normal((6, 10)).astype(np.float32)
    a, b = np.split(x.astype(np.float64), 2, axis=dim)
    np.testing.assert_allclose(kl.swiglu(x, dim % 2), a / (1 + np.exp(-a)) * b, rtol=RTOL,
                               atol=ATOL)


def test_grouped_matmul(rng):
    x = rng.standard_normal((7, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4, 5)).astype(np.float32)
    ends = np.array([2, 2, 6], np.int64)            # group sizes 2, 0, 4; row 6 in no group
    y = kl.grouped_matmul(x, w, ends)
    want = np.zeros((7, 5))
    want[0:2] = x[0:2] @ w[0]
    want[2:6] = x[2:6] @ w[2]
    np.testing.assert_allclose(y, want, rtol=RTOL, atol=ATOL)


def test_gating_and_routing_round_trip(rng):
    t, e, k, h = 5, 6, 2, 3
    logits = rng.standard_normal((t, e)).astype(np.float32)
    y, idx, row = kl.moe_gating_top_k_softmax(logits, k)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    order = np.argsort(-p, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_allclose(y, np.take_along_axis(p, order, 1), rtol=RTOL)
    np.testing.assert_array_equal(row[:, 1], np.arange(t) + t)      # row_idx = j * T + t
    x = rng.standard_normal((t, h)).astype(np.float32)
    ex, pos, ends = kl.moe_init_routing(x, idx, e)
    assert ends[-1] == t * k and np.all(np.diff(ends) >= 0)
    # every expanded row belongs to the expert whose group holds it, and maps back to x
    starts = np.concatenate([[0], ends[:-1]])
    for tok in range(t):
        for j in range(k):
            r = pos[tok * k + j]
            np.testing.assert_array_equal(ex[r], x[tok])
            assert starts[idx[tok, j]] <= r < ends[idx[tok, j]]
    out = kl.moe_finalize_routing(ex, y, pos)
    np.testing.assert_allclose(out, x * y.sum(1, keepdims=True), rtol=RTOL, atol=ATOL)


def test_kv_cache_append_writes_only_the_slot(rng):
    cache = rng.standard_normal((1, 2, 6, 4)).astype(np.float32)
    upd = rng.standard_normal((1, 2, 2, 4)).astype(np.float32)
    out = kl.kv_cache_append(cache, upd, 3, 2)
    np.testing.assert_array_equal(out[:, :, 3:5], upd)
    np.testing.assert_array_equal(out[:, :, :3], cache[:, :, :3])
    np.testing.assert_array_equal(out[:, :, 5:], cache[:, :, 5:])


@pytest.mark.parametrize("s,t", [(5, 5), (3, 8), (1, 9)])
def test_flash_attention_gqa_causal(rng, s, t):
    q = rng.standard_normal((2, 4, s, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, t, 8)).astype(np.float32)
    v = rng.standard_normal((2, 2, t, 8)).astype(np.float32)
    vis = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
    mask = np.where(vis, 0.0, -np.inf)
    got = kl.flash_attention(q, k, v, None, 1 / np.sqrt(8), causal=True)
    np.testing.assert_allclose(got, naive_attention(q, k, v, mask), rtol=1e-4, atol=1e-5)
    pad = np.zeros((2, 1, 1, t), np.float32)
    pad[1, ..., :2] = -1e9
    got = kl.flash_attention(q, k, v, pad, 1 / np.sqrt(8), causal=False)
    np.testing.assert_allclose(got, naive_attention(q, k, v, pad), rtol=1e-4, atol=1e-5)
