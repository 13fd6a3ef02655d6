"""ConstantFuseSamePass: duplicate constants merge by value (dtype and shape too); bytes saved."""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.ir.tensor import LazyTensor


def test_equal_constants_merge_and_report_bytes(same_outputs):
    g = asim.Graph("dups")
    x = g.input("x", (4, 4))
    w1 = g.const(np.eye(4, dtype=np.float32) * 2, name="w1")
    w2 = g.const(np.eye(4, dtype=np.float32) * 2, name="w2")
    # the same bytes as another dtype: kept (CANN keys on dtype and shape too)
    w3 = g.const((np.eye(4, dtype=np.float32) * 2).view(np.int32), name="w3")
    xi = g.input("xi", (4, 4), dtype="int32")
    y = g.add(g.matmul(x, w1), g.matmul(x, w2))
    g.output(y, g.add(xi, w3))
    res = same_outputs(g)
    assert {"w1", "w3"} <= set(res.graph.constants) and "w2" not in res.graph.constants
    rec = res.log.record("ConstantFuseSamePass")
    assert rec.result.bytes_saved == 64
    assert res.log.bytes_saved == 64
    assert any("64 bytes" in n for n in rec.result.notes)


def test_same_shape_different_bytes_not_merged(same_outputs):
    g = asim.Graph("nd")
    x = g.input("x", (3,))
    g.output(g.add(g.mul(x, np.array([1, 2, 3], np.float32)), np.array([1, 2, 4], np.float32)))
    res = same_outputs(g)
    assert res.log.counts()["ConstantFuseSamePass"] == (0, 0)


def test_large_lazy_weights_merge_without_materialising(opt):
    g = asim.Graph("lazy")
    x = g.input("x", (1, 512))
    a = g.weight("a", (512, 512), seed=7)
    b = g.weight("b", (512, 512), seed=7)       # same maker: identical weights
    g.output(g.add(g.matmul(x, a), g.matmul(x, b)))
    res = opt(g)
    assert res.log.bytes_saved == 512 * 512 * 4
    kept = res.graph.constants["a"]
    assert isinstance(kept, LazyTensor) and not kept._cache
