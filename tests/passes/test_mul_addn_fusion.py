"""MulAddNFusion (MindSpore ir_fusion/mul_addn_fusion.cc): AddN(Mul(x, scalar), y) -> FusedMulAddN,
the weight decay of a training step as one vector task."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim


def _decay(scalar_shape=(), shared=False) -> asim.Graph:
    g = asim.Graph("decay")
    w = g.input("w", (256, 256, 3, 3), "float32")
    d = g.input("d", (256, 256, 3, 3), "float32")
    wd = g.const(np.full(scalar_shape, 1e-4, np.float32))
    m = g.mul(w, wd)
    g.output(g.add(d, m))
    if shared:
        g.output(m)                   # the product is read outside: MindSpore does not fuse
    return g


def _fused(g):
    return [n for n in asim.optimize(g, "ascend910").graph.nodes
            if n.op_type == "FusedOp" and n.attrs.get("pattern") == "MulAddNFusion"]


@pytest.mark.parametrize("scalar_shape", [(), (1,)])
def test_weight_decay_becomes_one_task_with_equal_values(scalar_shape):
    g = _decay(scalar_shape)
    fused = _fused(g)
    assert len(fused) == 1 and fused[0].attrs["display_type"] == "FusedMulAddN"
    assert [n.op_type for n in fused[0].subgraph.nodes] == ["Mul", "Add"]
    rng = np.random.default_rng(5)
    feeds = {n: rng.standard_normal(g.values[n].shape).astype(np.float32) for n in g.inputs}
    opt = asim.optimize(g, "ascend910").graph
    # the subgraph computes the same float32 ops in the same order: equal bit for bit
    np.testing.assert_array_equal(asim.execute(opt, feeds)[opt.outputs[0]],
                                  asim.execute(g, feeds)[g.outputs[0]])


def test_no_fusion_when_the_product_is_read_elsewhere_or_not_by_a_scalar():
    assert _fused(_decay(shared=True)) == []
    g = asim.Graph("tensor_scale")
    w, s, d = (g.input(n, (64, 64), "float32") for n in ("w", "s", "d"))
    g.output(g.add(d, g.mul(w, s)))
    assert _fused(g) == []


def test_fused_task_is_cheaper_than_the_two_and_no_cheaper_than_one_pass():
    """Bound: the fused task reads w and d and writes once, the bytes of the unfused Add alone
    (which reads d and m); the Mul's pass over w and m and its task go. So it is faster than
    the pair and within 10 % of the Add (the product stays in UB)."""
    g = _decay()
    fused = asim.simulate(g, "ascend910", fusion=True)
    plain = asim.simulate(g, "ascend910", fusion=False)
    t_fused = sum(r.task_duration_us for r in fused.summary())
    pair = [r.task_duration_us for r in plain.summary() if r.op_type in ("Mul", "Add")]
    assert len(pair) == 2
    assert t_fused < sum(pair)
    assert t_fused >= 0.9 * max(pair)
