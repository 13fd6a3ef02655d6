"""`asim.training_step` on a tiny decoder (2 layers, hidden 64, 4 heads, 2 kv heads; dense and
MoE), on the graph as exported (primitive ops) and on its graph-fused form (RmsNorm,
RotaryMul, SwiGlu, FlashAttentionScore: the model as torch_npu code writes it), whose
backward is made of CANN's gradient kernels.

The fused form comes from `asim.optimize` with UB fusion off: the graph-fusion passes make
the model's fused ops, the training step is built on them, and `simulate` then fuses the
whole step (forward and backward) as GE would.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.autodiff import initial_state, parameters
from ascendsim.ir.tensor import materialize

CHIP = "ascend910b"
TINY = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2}
GRAPH_FUSION_ONLY = {"Switch": {"UBFusion": {"ALL": "off"}}}
BACKWARD_KERNELS = {"RmsNormGrad", "RotaryMulGrad", "SwiGluGrad", "FlashAttentionScoreGrad"}
MOE_BACKWARD = {"MoeInitRoutingV2Grad", "MoeFinalizeRoutingV2Grad", "GroupedMatmul"}


def _decoder(moe: bool, fused: bool, dtype: str):
    g = asim.models.decoder("tiny-moe-1m" if moe else "tiny-gqa-1m", batch=2, seq_len=8,
                            dtype=dtype, **TINY)
    if fused:
        g = asim.optimize(g, CHIP, fusion_switch=GRAPH_FUSION_ONLY).graph
    return g


def _feeds(step, seed=0):
    rng = np.random.default_rng(seed)
    feeds = initial_state(step)
    feeds["input_ids"] = rng.integers(0, 128, size=step.values["input_ids"].shape)
    for name in step.inputs:
        if name.startswith("past_"):
            v = step.values[name]
            feeds[name] = np.zeros(v.shape, v.dtype)
    labels = step.values["labels"]
    onehot = np.zeros(labels.shape, labels.dtype)
    onehot[np.arange(labels.shape[0]), rng.integers(0, labels.shape[1], labels.shape[0])] = 1
    feeds["labels"] = onehot
    return feeds


def _grads(moe: bool, fused: bool):
    """Loss and gradients (param - param_new of an SGD step at lr = 1, float64) by the
    parameter's data (the fusion passes rename RmsNorm's gamma)."""
    g = _decoder(moe, fused, "float64")
    step = asim.training_step(g, "softmax_cross_entropy", "sgd", lr=1.0,
                              mixed_precision=False)
    feeds = _feeds(step)
    params = [o[:-len("_new")] for o in step.outputs if o.endswith("_new")]
    out = asim.execute(step, feeds)
    return step, float(out["loss"]), {p: (feeds[p], feeds[p] - out[f"{p}_new"])
                                      for p in params}


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_fused_and_unfused_decoders_have_the_same_gradients(moe):
    """Same loss and, parameter by parameter, the same gradient in float64 (relative to the
    parameter's largest gradient: 1e-9; the two backward graphs sum the same terms in a
    different order, ~1e-15 apart, and a wrong rule is off by O(1))."""
    fused_step, fused_loss, fused = _grads(moe, True)
    _, plain_loss, plain = _grads(moe, False)
    counts = Counter(n.op_type for n in fused_step.nodes)
    assert BACKWARD_KERNELS <= set(counts)
    if moe:
        assert MOE_BACKWARD <= set(counts)
    assert fused_loss == pytest.approx(plain_loss, rel=1e-12)
    by_data = {(v.shape, v.tobytes()): name for name, (v, _) in plain.items()}
    matched = 0
    for name, (value, grad) in fused.items():
        twin = by_data[(value.shape, value.tobytes())]
        want = plain[twin][1]
        assert np.abs(want).max() > 0, twin
        np.testing.assert_allclose(grad, want, rtol=0, atol=1e-9 * np.abs(want).max(),
                                   err_msg=f"{name} (unfused {twin})")
        matched += 1
    # the same parameters on both sides: the rotary tables and the causal mask are buffers
    assert matched == len(fused) == len(plain)


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_tiny_decoder_training_step_computes_and_simulates(moe, fused):
    """Mixed precision (fp16 compute, fp32 masters), momentum, no loss scaling (the
    exported RMSNorm's Div backward overflows fp16 at a 128 scale: its input, the 0.02-scale
    embeddings, has rms ~0.02; dynamic scaling would skip that step): the step
    executes with a finite loss near ln(vocab) (random weights: logits of about unit
    variance give ln(V) + var/2 on average; 2 rows, so a wide band), moves every parameter,
    and simulates on the 910B."""
    g = _decoder(moe, fused, "float16")
    step = asim.training_step(g, "softmax_cross_entropy", "momentum", lr=0.1,
                              loss_scale=1.0)
    feeds = _feeds(step)
    out = asim.execute(step, feeds)
    loss = float(out["loss"])
    assert np.isfinite(loss) and abs(loss - np.log(128)) < 3.0
    params = [o[:-len("_new")] for o in step.outputs if o.endswith("_new")
              and not o.endswith("_m_new")]
    for p in params:
        assert np.isfinite(out[f"{p}_new"]).all(), p
        assert not np.array_equal(out[f"{p}_new"], feeds[p]), p
    result = asim.simulate(step, CHIP)
    assert result.cycles > 0
    ran = {t.op_type for t in result.trace.tasks}
    if fused:
        assert {"FlashAttentionScore", "FlashAttentionScoreGrad", "RmsNormGrad"} <= ran


def test_fused_training_step_is_faster_on_the_910b():
    """The fused model's step launches fewer kernels and keeps the attention scores on chip
    in both directions: it simulates faster than the exported graph's step (both with the
    default fusion passes on the whole step)."""
    times = {}
    for fused in (False, True):
        step = asim.training_step(_decoder(False, fused, "float16"), optimizer="momentum")
        times[fused] = asim.simulate(step, CHIP).time_us
    assert times[True] < times[False]


def test_attention_backward_lowering_costs_more_than_the_forward():
    """FlashAttentionScoreGrad does 5 GEMMs per key block to the forward's 2: at a
    compute-bound size (1 x 8 heads x 1024 tokens x 128, causal) its task takes 1.5-4x the
    forward's cycles (FlashAttention-2's backward is ~2.5x its forward)."""
    g = asim.Graph("fa")
    q = g.input("q", (1, 8, 1024, 128), "float16")
    k = g.input("k", (1, 8, 1024, 128), "float16")
    v = g.input("v", (1, 8, 1024, 128), "float16")
    y = g.flash_attention_score(q, k, v, scale_value=0.088, head_num=8, causal=1, name="fwd")
    dq, dk, dv = g.flash_attention_score_grad(q, k, v, y, y, scale_value=0.088, head_num=8,
                                              causal=1, name="bwd")
    g.output(dq, dk, dv)
    trace = asim.simulate(g, CHIP, fusion=False).trace
    fwd, bwd = trace.task("fwd"), trace.task("bwd")
    assert 1.5 * fwd.duration < bwd.duration < 4 * fwd.duration
    assert bwd.flops == pytest.approx(fwd.flops * (10 * 128 + 8) / (4 * 128 + 5), rel=1e-6)


def test_decode_step_is_not_trainable():
    """A decode graph (IncreFlashAttention after fusion) cannot be trained: the error names
    the op and node."""
    g = asim.models.decoder("tiny-gqa-1m", batch=1, phase="decode", context_len=4, **TINY)
    g = asim.optimize(g, CHIP, fusion_switch=GRAPH_FUSION_ONLY).graph
    assert any(n.op_type == "IncreFlashAttention" for n in g.nodes)
    with pytest.raises(asim.errors.UnsupportedOpError, match="IncreFlashAttention.*not "
                                                             "differentiable"):
        asim.training_step(g)


def test_rms_norm_training_form_returns_rstd():
    g = _decoder(False, True, "float32")
    step = asim.training_step(g, mixed_precision=False)
    norms = [n for n in step.nodes if n.op_type == "RmsNorm"]
    assert norms and all(len(n.outputs) == 2 for n in norms)
    # RmsNormGrad reads the forward's rstd: no second RmsNorm recomputes it
    assert len(norms) == sum(n.op_type == "RmsNormGrad" for n in step.nodes)
    assert materialize(initial_state(step)[norms[0].inputs[1]]).dtype == np.float32


def test_decoder_tables_are_buffers_not_parameters():
    """The rotary cos/sin tables and the causal mask are fixed tables: a training step never
    trains them, with or without fusion (the fused graph reads them through RotaryMul)."""
    dec = _decoder(moe=False, fused=False, dtype="float32")
    tables = {"rope.cos", "rope.sin", "attention.causal_mask"}
    assert tables <= dec.buffers
    assert not tables & set(parameters(dec))
    fused = _decoder(moe=False, fused=True, dtype="float32")
    assert {"rope.cos", "rope.sin"} <= fused.buffers
    assert not tables & set(parameters(fused))
    assert parameters(dec)        # the weights still are
