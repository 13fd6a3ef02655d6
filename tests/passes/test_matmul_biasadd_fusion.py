"""MatMulBiasAddFusionPass: 1-D bias joins the MatMul; 2-D "bias" and other uses refused."""

from __future__ import annotations

import numpy as np

import ascendsim as asim


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _g(rng, bias, dtype="float32", extra_use=False, batch=False) -> asim.Graph:
    g = asim.Graph("mmb")
    x = g.input("x", (2, 4, 8) if batch else (4, 8), dtype=dtype)
    m = g.matmul(x, g.const(rng.standard_normal((8, 5)).astype(dtype)))
    g.output(g.add(m, np.asarray(bias, dtype=dtype)))
    if extra_use:
        g.output(m)
    return g


def test_fuses_1d_bias(rng, same_outputs):
    res = same_outputs(_g(rng, np.arange(5)))
    assert op_types(res.graph) == ["MatMul"]
    assert res.log.counts()["MatMulBiasAddFusionPass"] == (1, 1)
    assert "GraphId[0], GraphFusionPass[MatMulBiasAddFusionPass]: pattern=MatMulBiasAddFusion, " \
           "matched_times=1, effected_times=1." in str(res.log).splitlines()


def test_fuses_batched(rng, same_outputs):
    res = same_outputs(_g(rng, np.arange(5), batch=True))
    assert op_types(res.graph) == ["MatMul"]


def test_2d_bias_refused(rng, same_outputs):
    res = same_outputs(_g(rng, np.ones((4, 5))))
    assert op_types(res.graph) == ["MatMul", "Add"]
    assert res.log.counts()["MatMulBiasAddFusionPass"] == (1, 0)
    assert "has rank 2 [4, 5]; MatMulBiasAdd needs a 1-D bias" in res.log.refusals[0].why


def test_broadcast_scalar_refused(rng, same_outputs):
    res = same_outputs(_g(rng, np.ones(1)))
    assert "bias length 1 != output last dim 5" in res.log.refusals[0].why


def test_matmul_output_used_elsewhere_refused(rng, same_outputs):
    res = same_outputs(_g(rng, np.arange(5), extra_use=True))
    assert "has other uses" in res.log.refusals[0].why


def test_fp16_precision_note(rng, same_outputs):
    res = same_outputs(_g(rng, np.arange(5), dtype="float16"), rtol=2e-3, atol=2e-3)
    assert op_types(res.graph) == ["MatMul"]
    assert any("fp32" in n for n in res.log.record("MatMulBiasAddFusionPass").result.notes)
