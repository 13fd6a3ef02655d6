"""Helpers of the LLM tests: a hand-built attention graph (HF eager form), one fused attention
node, a numpy reference."""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.models.decoder import MASKED, empty_cache


def fused_attention_graph(heads: int, s: int, t: int, prompt: int) -> asim.Graph:
    """One FlashAttentionScore node of `heads` heads, S = `s` queries over `t` keys, D = 128,
    fp16; `prompt` 1: FusedInferAttentionScore's prompt kernel."""
    g = asim.Graph("fa")
    q = g.input("q", (1, heads, s, 128), "float16")
    k = g.input("k", (1, heads, t, 128), "float16")
    v = g.input("v", (1, heads, t, 128), "float16")
    (y,) = g.add_node("FlashAttentionScore", [q, k, v],
                      {"head_num": heads, "scale_value": 128 ** -0.5, "prompt": prompt})
    g.output(y)
    return g


def attention_graph(b: int, h: int, hkv: int, s: int, t: int, d: int, dtype: str = "float16",
                    mask: str | None = "causal", extra_use: bool = False) -> asim.Graph:
    """q (b, h, s, d), k/v (b, hkv, t, d) -> softmax(q k^T / sqrt d + mask) v, with HF's
    repeat_kv (Reshape -> Expand -> Reshape) when h > hkv."""
    g = asim.Graph("attention")
    q = g.input("q", (b, h, s, d), dtype)
    k = g.input("k", (b, hkv, t, d), dtype)
    v = g.input("v", (b, hkv, t, d), dtype)

    def rep(x):
        if h == hkv:
            return x
        x5 = g.reshape(x, np.array([b, hkv, 1, t, d], np.int64))
        x5 = g.expand(x5, np.array([b, hkv, h // hkv, t, d], np.int64))
        return g.reshape(x5, np.array([b, h, t, d], np.int64))

    scores = g.mul(g.matmul(q, g.transpose(rep(k), perm=[0, 1, 3, 2])), 1.0 / np.sqrt(d))
    if mask == "causal":
        vis = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
        m = np.where(vis, 0.0, MASKED).reshape(1, 1, s, t).astype(dtype)
        scores = g.add(scores, m)
    elif mask == "padding":
        m = np.zeros((b, 1, 1, t), dtype)
        m[0, ..., -2:] = MASKED
        scores = g.add(scores, m)
    p = g.softmax(scores, axis=-1)
    g.output(g.matmul(p, rep(v)))
    if extra_use:
        g.output(p)
    return g


def naive_attention(q, k, v, mask=None):
    """float64 reference: softmax(q k^T / sqrt d + mask) v with kv heads repeated."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(-1, keepdims=True)) @ v


def prefill_then_decode(build, ids: np.ndarray, prompt: int) -> np.ndarray:
    """Logits of the prompt (prefill, empty cache, every position) and of each next token
    (decode steps reading the cache the previous step wrote). `build(**kw)` returns the
    decoder graph for `batch`, `seq_len`/`all_logits` or `phase="decode"`/`context_len`."""
    b = ids.shape[0]
    pre = build(batch=b, seq_len=prompt, all_logits=True)
    out = asim.execute(pre, {"input_ids": ids[:, :prompt], **empty_cache(pre)})
    logits = [out["logits"]]
    cache = {n[len("present"):]: out[n] for n in out if n.startswith("present")}
    for pos in range(prompt, ids.shape[1]):
        step = build(batch=b, phase="decode", context_len=pos)
        feeds = {"input_ids": ids[:, pos:pos + 1]}
        for suffix, c in cache.items():
            feeds["past" + suffix] = np.concatenate([c, np.zeros_like(c[:, :, :1])], axis=2)
        o = asim.execute(step, feeds)
        logits.append(o["logits"])
        cache = {n[len("present"):]: o[n] for n in o if n.startswith("present")}
    return np.concatenate(logits, axis=1)
