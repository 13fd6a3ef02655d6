"""Whole small models through `training_step` in float64 against finite differences.

With SGD at lr = 1 and no weight decay, `<param>_new = param - grad`, so the step's own
outputs give the gradient of its "loss" output; perturbing every parameter along one seeded
random direction and re-running the step's loss checks the whole backward (training
BatchNorm, MaxPool through its argmax, residual adds, the stem's 7x7 conv, cross-entropy; the
BERT encoder's attention, GELU, LayerNorm, lookups and the tied decoder) at once.
"""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.autodiff import initial_state

# A whole network has thousands of ReLU/MaxPool kinks: a step of 1e-5 along a random
# direction moves a few pre-activations across zero (the error shrinks like h, not h^2).
# h = 1e-7 keeps crossings unlikely, and float64 rounding (1e-16 / h) far below 1e-6.
H = 1e-7


def _check_step(step, feeds, seed=0):
    state = initial_state(step)
    params = [o[:-4] for o in step.outputs if o.endswith("_new") and o[:-4] in state
              and "running" not in o]
    feeds = {**state, **feeds}
    out = asim.execute(step, feeds)
    rng = np.random.default_rng(seed)
    dirs = {p: rng.standard_normal(feeds[p].shape) for p in params}
    analytic = sum(float(np.sum((feeds[p] - out[f"{p}_new"]) * dirs[p])) for p in params)

    def loss_at(h):
        moved = {**feeds, **{p: feeds[p] + h * dirs[p] for p in params}}
        return float(asim.execute(step, moved, ["loss"])["loss"])
    numeric = (loss_at(H) - loss_at(-H)) / (2 * H)
    assert analytic == pytest.approx(numeric, rel=1e-6), (analytic, numeric)
    return params


def test_small_resnet_all_stages_training_gradient():
    g = asim.models.resnet(batch=2, image=32, layers=(1, 1, 1, 1), width=8, dtype="float64",
                           num_classes=5)
    step = asim.training_step(g, "softmax_cross_entropy", "sgd", lr=1.0, mixed_precision=False)
    assert {"BNTrainingUpdateGrad", "MaxPoolGradWithArgmax"} <= {n.op_type for n in step.nodes}
    rng = np.random.default_rng(1)
    feeds = {"input": rng.standard_normal((2, 3, 32, 32)), "labels": np.eye(5)[[1, 3]]}
    params = _check_step(step, feeds)
    assert "stem.conv.weight" in params and "stem.bn.bias" in params     # issue 12's defects


@pytest.mark.slow
def test_two_layer_bert_training_gradient():
    step = asim.models.bert_training_step(batch=2, seq_len=6, layers=2, hidden=8, heads=2,
                                          vocab=11, masked=2, dtype="float64", optimizer="sgd",
                                          lr=1.0, weight_decay=0.0)
    rng = np.random.default_rng(2)
    feeds = {"input_ids": rng.integers(0, 11, (2, 6)), "token_type_ids": rng.integers(0, 2, (2, 6)),
             "masked_positions": np.array([1, 4, 7, 11]), "masked_lm_ids": np.array([3, 0, 9, 3])}
    params = _check_step(step, feeds, seed=3)
    assert {"embeddings.word", "embeddings.position", "mlm.decoder.bias"} <= set(params)
