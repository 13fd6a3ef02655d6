"""GroupedMatmul's A8W8 form (int8 x and weight, per expert and channel scale, per-token
scale): exact integer products dequantised per row, and bad operands named."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim


def _graph(t=12, k=32, n=24, e=3, x_dtype="int8", scale_shape=None):
    g = asim.Graph("gmm_a8w8")
    x = g.input("x", (t, k), x_dtype)
    w = g.input("w", (e, k, n), "int8")
    gl = g.input("gl", (e,), "int64")
    sc = g.input("scale", scale_shape or (e, n), "float32")
    pt = g.input("pt", (t,), "float32")
    g.output(g.grouped_matmul(x, w, gl, sc, pt, output_dtype="float32", name="gmm"))
    return g


def test_a8w8_grouped_matmul_dequantises_a_float_reference():
    rng = np.random.default_rng(0)
    t, k, n, e = 12, 32, 24, 3
    xf = rng.standard_normal((t, k)).astype(np.float32)
    wf = rng.standard_normal((e, k, n)).astype(np.float32) / np.sqrt(k)
    gl = np.array([5, 9, 12])
    xs = np.abs(xf).max(axis=1) / 127
    ws = np.abs(wf).max(axis=1) / 127                       # (E, N)
    xq = np.round(xf / xs[:, None]).astype(np.int8)
    wq = np.round(wf / ws[:, None, :]).astype(np.int8)
    out = asim.execute(_graph(), {"x": xq, "w": wq, "gl": gl, "scale": ws.astype(np.float32),
                                  "pt": xs.astype(np.float32)})
    y = next(iter(out.values()))
    ref = np.concatenate([xf[a:b] @ wf[i] for i, (a, b) in
                          enumerate(zip([0, 5, 9], gl))])
    # the exact integer products dequantised: the float reference within int8 rounding
    # (half a step of x and of w per product, ~1% of the output's norm)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.02
    exact = np.concatenate([(xq[a:b].astype(np.int64) @ wq[i].astype(np.int64))
                            * ws[i][None, :] * xs[a:b, None]
                            for i, (a, b) in enumerate(zip([0, 5, 9], gl))])
    np.testing.assert_allclose(y, exact, rtol=1e-6)


def test_a8w8_grouped_matmul_bad_operands_are_named():
    with pytest.raises(asim.GraphError, match="int8 x and weight.*float16 'x'"):
        _graph(x_dtype="float16")
    with pytest.raises(asim.GraphError, match=r"scale 'scale' \(3, 7\) is not \(E, N\)"):
        _graph(scale_shape=(3, 7))
