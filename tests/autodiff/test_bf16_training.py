"""A bfloat16 model's training step: under mixed precision it computes in bf16 from float32
masters, so its optimizer state is fp32 (in bf16, Adam's beta2 = 0.999 would be 1.0)."""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.ir.graph import Graph


def _step(dtype: str, mixed: bool):
    g = Graph("mlp")
    x = g.input("x", (8, 16), dtype)
    g.output(g.matmul(x, g.weight("w", (16, 4), dtype, seed=3)))
    step = asim.training_step(g, loss="mse", optimizer="adam", lr=0.01, mixed_precision=mixed)
    feeds = dict(asim.autodiff.initial_state(step))
    feeds["x"] = np.random.default_rng(0).standard_normal((8, 16))
    feeds["labels"] = np.zeros((8, 4))
    return step, asim.execute(step, feeds)


def test_bf16_mixed_precision_keeps_fp32_masters_and_moments() -> None:
    step, out = _step("bfloat16", mixed=True)
    assert step.values["w"].dtype == "float32" and step.values["w_v"].dtype == "float32"
    assert any(n.op_type == "Cast" and n.attrs["to"] == "bfloat16" for n in step.nodes)
    _, ref = _step("float32", mixed=False)
    # inputs, weights and the forward product differ from fp32 by bf16 roundings (2**-8
    # relative each), so gradients agree to a few percent of the largest gradient (entries
    # that are sums of cancelling terms only absolutely), and Adam's v (~ g**2) to twice that
    assert np.all(out["w_v_new"] > 0)
    v, v_ref = out["w_v_new"], ref["w_v_new"]
    assert np.allclose(v, v_ref, rtol=0.1, atol=0.02 * np.abs(v_ref).max())
    assert np.allclose(out["loss"], ref["loss"], rtol=0.02)


def test_bf16_training_step_simulates_on_the_910b() -> None:
    step, _ = _step("bfloat16", mixed=True)
    assert asim.simulate(step, chip="ascend910b").cycles > 0
