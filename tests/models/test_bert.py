"""BERT encoders: structure, MACs, laziness, op/decomposed forms, reference values, training."""

from math import erf

import numpy as np
import pytest
from models_helpers import count, cube_macs, feeds, materialised

import ascendsim as asim

SMALL = dict(batch=2, seq_len=8, layers=2, hidden=64, heads=4, vocab=32, dtype="float32")


def _layer_macs(b, s, h, ffn):
    return b * (4 * s * h * h + 2 * s * s * h + 2 * s * h * ffn)


def test_bert_large_full_size_structure_is_shape_only():
    g = asim.models.bert_large(batch=32, seq_len=512)
    g.validate()
    assert materialised(g) == 0
    assert count(g, "MatMul") == 24 * 8       # Q, K, V, QK^T, PV, out, FFN in, FFN out
    assert count(g, "Softmax") == 24 and count(g, "Erf") == 24 and count(g, "Gelu") == 0
    assert count(g, "LayerNormalization") == 2 * 24 + 1
    assert count(g, "Gather") == 3
    assert count(g, "Transpose") == 24 * 4 and count(g, "Reshape") == 24 * 4
    assert g.values["input_ids"].shape == (32, 512) and g.values["input_ids"].dtype == "int64"
    out = g.values[g.outputs[0]]
    assert out.shape == (32, 512, 1024) and out.dtype == "float16"
    assert g.values["embeddings.word"].shape == (30522, 1024)
    assert cube_macs(g) == 24 * _layer_macs(32, 512, 1024, 4096)


def test_bert_base_sizes():
    g = asim.models.bert_base(batch=4, seq_len=128)
    assert count(g, "MatMul") == 12 * 8
    assert g.values[g.outputs[0]].shape == (4, 128, 768)
    assert cube_macs(g) == 12 * _layer_macs(4, 128, 768, 3072)


def test_forms_options_change_the_ops_not_the_values():
    erf_ln = asim.models.bert(**SMALL)
    op_dec = asim.models.bert(**SMALL, gelu="op", layer_norm="decomposed")
    assert count(op_dec, "Gelu") == 2 and count(op_dec, "Erf") == 0
    assert count(op_dec, "LayerNormalization") == 0 and count(op_dec, "Pow") == 2 * 2 + 1
    f = feeds(erf_ln)
    a = asim.execute(erf_ln, f)[erf_ln.outputs[0]]
    b = asim.execute(op_dec, f)[op_dec.outputs[0]]
    assert a.shape == (2, 8, 64) and np.isfinite(a).all()
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # same graph twice -> same values, bit for bit
    np.testing.assert_array_equal(a, asim.execute(asim.models.bert(**SMALL), f)[erf_ln.outputs[0]])


def _ln(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * w + b


def test_encoder_layer_matches_a_numpy_reference(rng):
    b, s, h, heads = 2, 6, 32, 4
    g = asim.models.bert_encoder_layer(batch=b, seq_len=s, hidden=h, heads=heads,
                                       dtype="float32")
    g.validate()
    assert g.values[g.outputs[0]].shape == (b, s, h)
    x = rng.standard_normal((b, s, h)).astype(np.float32)
    W = g.const_value

    def lin(v, name):
        return v @ W(f"layer0.{name}.weight") + W(f"layer0.{name}.bias")

    def split(v):
        return v.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)
    q, k, v = (split(lin(x, f"attention.{n}")) for n in ("query", "key", "value"))
    sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(h // heads)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
    y = _ln(lin(ctx, "attention.output") + x, W("layer0.attention.ln.weight"),
            W("layer0.attention.ln.bias"), 1e-12)
    inner = lin(y, "intermediate")
    inner = inner * 0.5 * (1 + np.vectorize(erf)(inner / np.sqrt(2)))
    ref = _ln(lin(inner, "output") + y, W("layer0.output.ln.weight"),
              W("layer0.output.ln.bias"), 1e-12)
    out = asim.execute(g, {"x": x})[g.outputs[0]]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_small_bert_fp16_runs_finite():
    g = asim.models.bert(**{**SMALL, "dtype": "float16"})
    out = asim.execute(g, feeds(g))[g.outputs[0]]
    assert out.dtype == np.float16 and np.isfinite(out).all()
    assert np.abs(out.astype(np.float32).mean(-1)).max() < 0.5    # LayerNorm output


def test_training_step_full_width_shapes_and_cost():
    """Two BERT-large-wide layers at seq 512 (the 24-layer graph has the same layer pattern)."""
    g = asim.models.bert_training_step(batch=32, seq_len=512, layers=2)
    g.validate()
    assert materialised(g) == 0
    assert g.outputs[0] == "loss" and g.values["loss"].shape == ()
    assert g.values["masked_positions"].shape == (32 * 76,)
    # Adam: every parameter updated with m and v (fp32 master weights), the step counter and
    # the dynamic loss scale
    params = [o[:-4] for o in g.outputs if o.endswith("_new") and f"{o[:-4]}_m" in g.inputs]
    assert len(g.outputs) == 1 + 3 * len(params) + 3
    assert g.outputs[-3:] == ["step_new", "loss_scale_new", "good_steps_new"]
    assert count(g, "ApplyAdam") == len(params) and count(g, "NPUGetFloatStatus") == 1
    assert count(g, "LayerNormXBackprop") == count(g, "LayerNormBetaGammaBackprop") == 2 * 2 + 2
    assert g.values["layer1.intermediate.weight_new"].shape == (1024, 4096)
    assert g.values["embeddings.word_new"].dtype == "float32"
    # each layer's MatMuls run three times (forward, data and weight gradients)
    layer = _layer_macs(32, 512, 1024, 4096)
    assert 3 * 2 * layer < cube_macs(g) < 3 * 2 * layer * 1.6    # + the MLM head


def test_small_training_step_runs_and_adam_updates():
    g = asim.models.bert_training_step(**SMALL, masked=3, lr=1e-2, weight_decay=0.0)
    g.validate()
    f = feeds(g)
    out = asim.execute(g, f)
    assert all(np.isfinite(v).all() for v in out.values())
    assert float(out["loss"]) == pytest.approx(np.log(32), rel=0.5)
    assert float(out["step_new"]) == 1.0
    lr_t = 1e-2 * np.sqrt(1 - 0.999) / (1 - 0.9)           # ApplyAdam's bias correction
    for name in ("layer0.attention.query.weight", "embeddings.word", "mlm.decoder.bias",
                 "layer1.output.ln.weight"):
        w, m, v = (out[f"{name}{s}_new"] for s in ("", "_m", "_v"))
        grad = m / 0.1                                     # m' = (1 - b1) g from m = 0
        np.testing.assert_allclose(v, 0.001 * grad * grad, rtol=1e-3, atol=1e-12)
        np.testing.assert_allclose(w, f[name] - lr_t * m / (np.sqrt(v) + 1e-6),
                                   rtol=1e-4, atol=1e-6)
        assert np.abs(m).max() > 0


def test_large_builders_default_to_float16_and_the_training_step_signature():
    g = asim.models.bert_encoder_layer()
    assert g.values["x"].shape == (32, 512, 1024) and g.values["x"].dtype == "float16"
    with pytest.raises(asim.ConfigError, match="optimizer"):
        asim.models.bert_large_training_step(optimizer="adagrad")


def test_attention_mask_hides_masked_tokens():
    g = asim.models.bert(**SMALL, attention_mask=True)
    plain = asim.models.bert(**SMALL)
    assert g.values["attention_mask"].shape == (2, 1, 1, 8)
    assert count(g, "Add") == count(plain, "Add") + 2          # one mask Add per layer
    f = feeds(plain)
    zero = np.zeros((2, 1, 1, 8), np.float32)
    out = g.outputs[0]
    np.testing.assert_allclose(asim.execute(g, {**f, "attention_mask": zero})[out],
                               asim.execute(plain, f)[plain.outputs[0]], rtol=1e-5, atol=1e-6)
    mask = zero.copy()
    mask[0, ..., -1] = -10000.0                                 # batch 0 ignores its last token
    changed = {**f, "input_ids": f["input_ids"].copy()}
    changed["input_ids"][0, -1] = (f["input_ids"][0, -1] + 1) % 16
    a = asim.execute(g, {**f, "attention_mask": mask})[out]
    b = asim.execute(g, {**changed, "attention_mask": mask})[out]
    np.testing.assert_allclose(a[0, :-1], b[0, :-1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(a[0, -1], b[0, -1])
    layer = asim.models.bert_encoder_layer(batch=1, seq_len=4, hidden=16, heads=2,
                                           attention_mask=True)
    assert layer.inputs == ["x", "attention_mask"]
