"""ONNX import of a tiny decoder with a KV cache (past key/value inputs, present outputs), as
HF exporters write it: the cache grows by Concat, attention is MatMul/Mul/Add/Softmax/MatMul.
The model file is written here with onnx.helper; values are checked against numpy, for a
prefill and for a decode step that reads the prefill's cache, and after fusion."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ascendsim as asim
from ascendsim.frontend.onnx import load_onnx

H, HEADS, D, VOCAB = 16, 2, 8, 32
F = TensorProto.FLOAT


def _weights(rng):
    w = {n: rng.standard_normal(s).astype(np.float32) * 0.3 for n, s in
         [("emb", (VOCAB, H)), ("wq", (H, H)), ("wk", (H, H)), ("wv", (H, H)), ("wo", (H, H)),
          ("lm", (H, VOCAB))]}
    return w


def _model(w, s: int, past: int):
    """One attention layer + LM head; inputs ids (1, s), past_key/past_value (1, HEADS, past,
    D); outputs logits (1, s, VOCAB), present_key/present_value (1, HEADS, past + s, D)."""
    t = past + s
    vis = np.arange(t)[None, :] <= np.arange(s)[:, None] + past
    mask = np.where(vis, 0.0, -1e9).astype(np.float32).reshape(1, 1, s, t)
    inits = [numpy_helper.from_array(v, n) for n, v in w.items()] + [
        numpy_helper.from_array(np.array([1, s, HEADS, D], np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([1, s, H], np.int64), "hidden_shape"),
        numpy_helper.from_array(np.array(1 / np.sqrt(D), np.float32), "scale"),
        numpy_helper.from_array(mask, "mask")]
    n = helper.make_node
    nodes = [n("Gather", ["emb", "input_ids"], ["x"], axis=0)]
    for p in ("q", "k", "v"):
        nodes += [n("MatMul", ["x", f"w{p}"], [f"{p}_lin"]),
                  n("Reshape", [f"{p}_lin", "heads_shape"], [f"{p}_4d"]),
                  n("Transpose", [f"{p}_4d"], [f"{p}_h"], perm=[0, 2, 1, 3])]
    nodes += [n("Concat", ["past_key", "k_h"], ["present_key"], axis=2),
              n("Concat", ["past_value", "v_h"], ["present_value"], axis=2),
              n("Transpose", ["present_key"], ["k_t"], perm=[0, 1, 3, 2]),
              n("MatMul", ["q_h", "k_t"], ["scores"]),
              n("Mul", ["scores", "scale"], ["scaled"]),
              n("Add", ["scaled", "mask"], ["masked"]),
              n("Softmax", ["masked"], ["probs"], axis=-1),
              n("MatMul", ["probs", "present_value"], ["ctx"]),
              n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              n("Reshape", ["ctx_t", "hidden_shape"], ["ctx_h"]),
              n("MatMul", ["ctx_h", "wo"], ["attn"]),
              n("Add", ["x", "attn"], ["res"]),
              n("MatMul", ["res", "lm"], ["logits"])]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "tiny_kv_decoder",
        [vi("input_ids", TensorProto.INT64, [1, s]), vi("past_key", F, [1, HEADS, past, D]),
         vi("past_value", F, [1, HEADS, past, D])],
        [vi("logits", F, [1, s, VOCAB]), vi("present_key", F, [1, HEADS, t, D]),
         vi("present_value", F, [1, HEADS, t, D])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(w, ids, pk, pv):
    """float64 numpy forward of the same model."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    x = w["emb"][ids]                                              # (1, s, H)
    s = ids.shape[1]

    def heads(a):
        return a.reshape(1, s, HEADS, D).transpose(0, 2, 1, 3)
    q, k, v = heads(x @ w["wq"]), heads(x @ w["wk"]), heads(x @ w["wv"])
    k, v = np.concatenate([pk, k], 2), np.concatenate([pv, v], 2)
    t = k.shape[2]
    sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    sc = np.where(np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s), sc, -np.inf)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(1, s, H)
    return (x + ctx @ w["wo"]) @ w["lm"], k, v


@pytest.mark.parametrize("fused", [False, True])
def test_onnx_decoder_with_kv_cache_prefill_then_decode(tmp_path, rng, fused):
    w = _weights(rng)
    ids = rng.integers(0, VOCAB, (1, 5))
    # prefill 4 tokens after a cache of 2 (an earlier chunk), then decode 1 token
    pk0 = rng.standard_normal((1, HEADS, 2, D)).astype(np.float32)
    pv0 = rng.standard_normal((1, HEADS, 2, D)).astype(np.float32)
    path = tmp_path / "prefill.onnx"
    path.write_bytes(_model(w, 4, 2).SerializeToString())
    g = load_onnx(str(path))
    assert [g.values[o].shape for o in g.outputs] == [(1, 4, VOCAB), (1, HEADS, 6, D),
                                                      (1, HEADS, 6, D)]
    if fused:
        g = asim.optimize(g, "ascend910b").graph
        assert any(n.op_type == "FlashAttentionScore" and n.attrs["causal"] == 1
                   for n in g.nodes)
    out = asim.execute(g, {"input_ids": ids[:, :4], "past_key": pk0, "past_value": pv0})
    want, wk, wv = _reference(w, ids[:, :4], pk0, pv0)
    # fp32 graph vs float64 numpy: sums of 8-16 products of O(1) values
    np.testing.assert_allclose(out["logits"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["present_key"], wk, rtol=1e-5, atol=1e-5)
    step = load_onnx(_model(w, 1, 6))
    if fused:
        step = asim.optimize(step, "ascend910b").graph
        assert any(n.op_type == "IncreFlashAttention" for n in step.nodes)
    o2 = asim.execute(step, {"input_ids": ids[:, 4:], "past_key": out["present_key"],
                             "past_value": out["present_value"]})
    want2, _, _ = _reference(w, ids[:, 4:], out["present_key"], out["present_value"])
    np.testing.assert_allclose(o2["logits"], want2, rtol=1e-4, atol=1e-4)
    assert o2["present_value"].shape == (1, HEADS, 7, D)
