"""The training steps' backward layers against central finite differences (float64).

Each case builds a small forward with a `Tape`, takes loss = sum(y * r) for a fixed random r,
runs the recorded backward, and compares a few entries of every parameter gradient and of the
input gradient with (loss(w + e) - loss(w - e)) / 2e. This proves the gradient graphs the
training steps are made of (conv via ConvTranspose and a dilated Conv, BN, ReLU, residual Add,
Gemm, attention, LayerNorm, GELU, lookups, cross-entropy) compute true gradients.
"""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.ir.tensor import materialize
from ascendsim.models import blocks
from ascendsim.models.bert import _embeddings, encoder_layer
from ascendsim.models.resnet import _bottleneck

EPS = 1e-6


def _check(build, inputs: dict[str, tuple], probes: int = 3, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    mb = blocks.ModelBuilder("gradcheck", "float64", seed=seed)
    g, tape = mb.g, blocks.Tape(mb)
    xs = {n: g.input(n, shape, dt) for n, (shape, dt) in inputs.items()}
    y = build(mb, xs, tape)
    r = mb.weight("cotangent", y.shape, scale=1.0)
    loss = g.reduce_sum(g.mul(y, r), list(range(y.rank)), keepdims=0) if y.rank else \
        g.mul(y, r)
    tape.backward({y.name: r})             # d(sum(y * r))/dy = r
    g.output(loss)
    wrt = {p.master.name: tape.param_grads[p.value.name] for p in tape.params}
    wrt.update({n: tape.grads[x.name] for n, x in xs.items() if x.dtype == "float64"})
    g.output(*wrt.values())
    g.validate()
    feeds = {n: (rng.standard_normal(s) if dt == "float64" else rng.integers(0, 2, s))
             for n, (s, dt) in inputs.items()}
    got = asim.execute(g, feeds)
    assert wrt, "nothing to check"
    for name, grad in wrt.items():
        in_feeds = name in feeds
        base = feeds[name] if in_feeds else materialize(g.constants[name])
        for flat in rng.choice(base.size, size=min(probes, base.size), replace=False):
            idx = np.unravel_index(flat, base.shape)
            vals = []
            for sign in (1, -1):
                arr = np.array(base, dtype=np.float64, copy=True)
                arr[idx] += sign * EPS
                if in_feeds:
                    vals.append(asim.execute(g, {**feeds, name: arr}, [loss.name])[loss.name])
                else:
                    g.constants[name] = arr
                    vals.append(asim.execute(g, feeds, [loss.name])[loss.name])
            if not in_feeds:
                g.constants[name] = base
            numeric = (float(vals[0]) - float(vals[1])) / (2 * EPS)
            analytic = float(got[grad.name][idx])
            assert analytic == pytest.approx(numeric, rel=1e-4, abs=1e-6), (name, idx)


@pytest.mark.parametrize("k, stride, pad, size", [(3, 2, 1, 7), (3, 1, 1, 5), (1, 2, 0, 6),
                                                  (7, 2, 3, 9)])
def test_conv_batchnorm_relu_gradients(k, stride, pad, size):
    def build(mb, xs, tape):
        y = blocks.conv2d(mb, xs["x"], "conv", 4, k, stride, pad, tape)
        return blocks.relu(mb, blocks.batch_norm(mb, y, "bn", tape=tape), tape)
    _check(build, {"x": ((3, 2, size, size), "float64")})


def test_bottleneck_with_strided_downsample_gradients():
    def build(mb, xs, tape):
        return _bottleneck(mb, xs["x"], "block", 2, 2, tape)
    _check(build, {"x": ((2, 4, 6, 6), "float64")}, probes=2)


def test_encoder_layer_gradients():
    def build(mb, xs, tape):
        return encoder_layer(mb, xs["x"], "layer", heads=2, ffn=12, tape=tape)
    _check(build, {"x": ((2, 3, 8), "float64")}, probes=2)


def test_embedding_lookup_and_cross_entropy_gradients():
    def build(mb, xs, tape):
        e, table = _embeddings(mb, xs["ids"], xs["types"], 6, vocab=5, max_position=6,
                               ln_dec=False, tape=tape)
        flat = blocks.reshape(mb, e, [8, 6], tape)
        logits = blocks.linear(mb, flat, "head", 5, tape)
        labels = mb.g.const(np.eye(5)[[0, 1, 2, 3, 4, 0, 1, 2]], dtype="float64")
        return blocks.softmax_cross_entropy(mb, logits, labels, tape)
    _check(build, {"ids": ((2, 4), "int64"), "types": ((2, 4), "int64")}, probes=4)


def test_masked_attention_gradients():
    def build(mb, xs, tape):
        mask = mb.g.const(np.array([0.0, 0.0, -1e4]).reshape(1, 1, 1, 3), dtype="float64")
        return encoder_layer(mb, xs["x"], "layer", heads=2, ffn=12, tape=tape, mask=mask)
    _check(build, {"x": ((2, 3, 8), "float64")}, probes=2, seed=1)
