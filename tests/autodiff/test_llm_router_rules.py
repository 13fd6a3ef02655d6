"""Gradient rule of MoeGatingTopK (finite differences) and training steps of the decoders the
Hugging Face configs build (latent attention, q/k norm, the routers)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from gradcheck import directional_check

import ascendsim as asim
from ascendsim.autodiff import initial_state

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "llm"))
from test_hf_config import tiny  # noqa: E402

ROUTERS = {
    "softmax_renorm": dict(k=2, renorm=1),
    "softmax_group_max_scaled": dict(k=3, k_group=2, group_count=3, routed_scaling_factor=16.0),
    "sigmoid_group_top2_bias_renorm": dict(k=3, k_group=2, group_count=3, group_select_mode=1,
                                          norm_type=1, renorm=1, routed_scaling_factor=2.5),
    "sigmoid_plain": dict(k=2, norm_type=1),
}


@pytest.mark.parametrize("case", sorted(ROUTERS))
def test_moe_gating_top_k_rule_matches_finite_differences(case):
    attrs = ROUTERS[case]
    rng = np.random.default_rng(0)
    g = asim.Graph("router")
    x = g.input("x0", (5, 9), "float64")
    extra = [g.const(rng.standard_normal(9) * 0.1)] if attrs.get("norm_type") == 1 else []
    g.output(g.moe_gating_top_k(x, *extra, **attrs)[0])
    directional_check(g, {"x0": rng.standard_normal((5, 9))}, seed=0)


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite", "qwen3-30b-a3b",
                                  "mixtral-8x7b"])
def test_config_decoder_training_step_computes_and_simulates(name):
    g = asim.models.decoder(config=tiny(name), batch=2, seq_len=8, dtype="float32")
    step = asim.training_step(g, "softmax_cross_entropy", "sgd", lr=0.1,
                              mixed_precision=False)
    rng = np.random.default_rng(0)
    feeds = initial_state(step)
    feeds["input_ids"] = rng.integers(0, 128, size=step.values["input_ids"].shape)
    for n in step.inputs:
        if n.startswith("past_"):
            v = step.values[n]
            feeds[n] = np.zeros(v.shape, v.dtype)
    labels = step.values["labels"]
    onehot = np.zeros(labels.shape, labels.dtype)
    onehot[np.arange(labels.shape[0]), rng.integers(0, labels.shape[1], labels.shape[0])] = 1
    feeds["labels"] = onehot
    out = asim.execute(step, feeds)
    assert np.isfinite(float(out["loss"]))
    moved = [o for o in step.outputs if o.endswith("_new")
             and not np.array_equal(out[o], feeds[o[:-len("_new")]])]
    assert any("kv_b_proj" in o or "q_norm" in o or "experts" in o for o in moved)
    assert asim.simulate(step, chip="ascend910b").cycles > 0
