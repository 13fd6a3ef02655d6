"""W8A8 decoders (decoder(quant="w8a8")): DynamicQuant and QuantBatchMatmul values against a
float reference within the quantisation's error, and the 910B's int8 cube making decode
(weight-bandwidth bound) and prefill (compute bound) faster than fp16."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.models.decoder import decoder, empty_cache


def test_dynamic_quant_and_quant_matmul_values(rng):
    x = rng.standard_normal((6, 40)).astype(np.float32)
    w = rng.standard_normal((40, 24)).astype(np.float32) * 0.1
    scale = np.abs(w).max(0) / 127
    wq = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    g = asim.Graph("w8a8")
    xi = g.input("x", x.shape, "float32")
    xq, xs = g.dynamic_quant(xi)
    y = g.quant_batch_matmul(xq, g.const(wq), g.const(scale.astype(np.float32)), xs,
                             output_dtype="float32")
    g.output(y, xq, xs)
    out = asim.execute(g, {"x": x})
    assert out[xq.name].dtype == np.int8
    np.testing.assert_allclose(out[xq.name] * out[xs.name][:, None], x,
                               atol=float(out[xs.name].max()) / 2 + 1e-7)
    ref = x @ w
    assert np.abs(out[y.name] - ref).max() < 0.02 * np.abs(ref).max()


@pytest.mark.parametrize("preset", ["tiny-gqa-1m", "tiny-moe-1m"])
def test_w8a8_decoder_logits_match_float_within_quantisation_error(rng, preset):
    ids = rng.integers(0, 128, (2, 6))
    f = decoder(preset, batch=2, seq_len=6, all_logits=True, dtype="float32")
    q = decoder(preset, batch=2, seq_len=6, all_logits=True, dtype="float32", quant="w8a8")
    a = asim.execute(f, {"input_ids": ids, **empty_cache(f)})["logits"]
    b = asim.execute(q, {"input_ids": ids, **empty_cache(q)})["logits"]
    assert {"DynamicQuant", "QuantBatchMatmul"} <= {n.op_type for n in q.nodes}
    assert np.isfinite(b).all()
    assert np.abs(a - b).max() < 0.1 * np.abs(a).max()
    assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.999


def test_unknown_quant_mode_names_it():
    with pytest.raises(asim.ConfigError, match="quant='w4a4'"):
        decoder(seq_len=2, quant="w4a4")


def test_w8a8_is_faster_on_the_910b_decode_and_prefill():
    """4 layers: the fp16 lm_head (1 GB of Llama-3's 128k vocabulary) stays in every step."""
    def cycles(**kw):
        return asim.simulate(decoder("llama3-8b", layers=4, **kw), chip="ascend910b").cycles
    assert cycles(phase="decode", context_len=1024, quant="w8a8") < \
        0.9 * cycles(phase="decode", context_len=1024)
    assert cycles(seq_len=2048, quant="w8a8") < 0.8 * cycles(seq_len=2048)


def test_w8a8_bfloat16_output_is_rounded_to_bfloat16(rng):
    from ascendsim.ir.tensor import as_storage

    q = decoder(seq_len=4, dtype="bfloat16", quant="w8a8")
    out = asim.execute(q, {"input_ids": rng.integers(0, 128, (1, 4)), **empty_cache(q)})
    logits = out["logits"]
    assert np.isfinite(logits).all()
    np.testing.assert_array_equal(as_storage(logits, "bfloat16"), logits)
