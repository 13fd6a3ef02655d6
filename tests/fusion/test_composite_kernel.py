"""Composite numba kernels generated from fused subgraphs: plans, broadcasting, dtypes, cache."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import assert_same_values, fused, gk_stages, ub_stage

from ascendsim.execute import composite as C
from ascendsim.execute import execute, run_graph
from ascendsim.ir.graph import Graph
from ascendsim.kernels import composite as K


def _kinds(sub: Graph) -> list[str]:
    return ["run" if isinstance(s, C.Run) else s.op_type for s in C.plan(sub).steps]


def test_one_loop_for_an_elementwise_chain_with_broadcasting(rng):
    g = Graph("bc")
    a, b = g.input("a", (3, 1, 5)), g.input("b", (4, 1))
    d = g.mul(g.add(a, b), g.relu(b))
    g.output(g.leaky_relu(g.sub(d, 0.5), alpha=0.2))
    assert _kinds(g) == ["run"]          # relu(b), of shape (4, 1), is computed inline
    A = rng.standard_normal((3, 1, 5)).astype(np.float32)
    B = rng.standard_normal((4, 1)).astype(np.float32)
    (out,) = C.run_subgraph(g, [A, B], run_graph)
    ref = execute(g, {"a": A, "b": B})[g.outputs[0]]
    assert out.shape == (3, 4, 5) and out.dtype == np.float32
    np.testing.assert_array_equal(out, ref)        # per-op float32 rounding: bit-identical


def test_a_smaller_value_needed_later_gets_its_own_loop(rng):
    g = Graph("small")
    x, b = g.input("x", (4, 6)), g.input("b", (6,))
    s = g.exp(g.mul(b, 2.0))                     # shape (6,), also a subgraph output
    g.output(g.add(x, s), s)
    runs = C.plan(g).runs
    assert [[n.op_type for n in r.nodes] for r in runs] == [["Mul", "Exp"], ["Add"]]
    assert [r.loop.shape for r in runs] == [(6,), (4, 6)]
    X, B = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    outs = C.run_subgraph(g, [X, B], run_graph)
    ref = execute(g, {"x": X, "b": B})
    for name, arr in zip(g.outputs, outs):
        np.testing.assert_array_equal(arr, ref[name])


def test_same_shape_chain_is_one_run_storing_only_what_is_read_later(rng):
    g = Graph("chain")
    x = g.input("x", (2, 3, 4))
    m = g.mul(x, 2.0)
    y = g.sigmoid(g.add(m, 1.0))
    g.output(y, m)
    (run,) = C.plan(g).runs
    assert [n.op_type for n in run.nodes] == ["Mul", "Add", "Sigmoid"]
    assert set(run.outputs) == {m.name, y.name}
    X = rng.standard_normal((2, 3, 4)).astype(np.float32)
    outs = C.run_subgraph(g, [X], run_graph)
    ref = execute(g, {"x": X})
    for name, arr in zip(g.outputs, outs):
        np.testing.assert_allclose(arr, ref[name], rtol=1e-6)


@pytest.mark.parametrize("dtype,tol", [("float16", 0), ("float64", 0), ("int64", 0)])
def test_dtypes(rng, dtype, tol):
    g = Graph("dt")
    x, y = g.input("x", (5, 7), dtype), g.input("y", (7,), dtype)
    g.output(g.abs(g.sub(g.mul(x, y), g.add(y, g.const(3, dtype=dtype)))))
    X = (rng.standard_normal((5, 7)) * 4).astype(dtype)
    Y = (rng.standard_normal(7) * 4).astype(dtype)
    (out,) = C.run_subgraph(g, [X, Y], run_graph)
    ref = execute(g, {"x": X, "y": Y})[g.outputs[0]]
    assert out.dtype == np.dtype(dtype) and len(C.plan(g).runs) == 1   # y + 3 inline
    np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=tol,
                               atol=tol)


def test_variadic_and_attribute_operands(rng):
    g = Graph("var")
    x, y, z = (g.input(n, (9,)) for n in "xyz")
    g.output(g.gelu(g.sum(x, y, z), approximate="tanh"))
    (run,) = C.plan(g).runs
    assert run.loop.program[0].variadic and run.loop.program[1].extras == (1.0,)
    feeds = {n: rng.standard_normal(9).astype(np.float32) for n in "xyz"}
    (out,) = C.run_subgraph(g, [feeds[n] for n in "xyz"], run_graph)
    np.testing.assert_allclose(out, execute(g, feeds)[g.outputs[0]], rtol=1e-6, atol=1e-7)


def test_conv_head_runs_its_kernel_and_the_epilogue_is_one_loop(rng):
    g = Graph("cbr")
    x = g.input("x", (1, 3, 6, 6))
    w = g.const(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    g.output(g.add(g.mul(g.relu(g.conv(x, w, pads=[1, 1, 1, 1])), 0.5), 1.0))
    opt = ub_stage(g)
    (node,) = fused(opt.graph)
    assert _kinds(node.subgraph) == ["Conv", "run"]
    assert_same_values(g, opt.graph)


def test_reduce_and_injective_ops_run_between_loops(rng):
    g = Graph("sm")
    x = g.input("x", (4, 16))
    e = g.exp(g.sub(x, g.reduce_max(x, axes=[1], keepdims=1)))
    y = g.div(e, g.reduce_sum(e, axes=[1], keepdims=1))
    g.output(g.reshape(g.mul(y, 3.0), [64]))
    opt = gk_stages(g)
    (node,) = opt.graph.nodes
    assert _kinds(node.subgraph) == ["ReduceMax", "run", "ReduceSum", "run", "Reshape"]
    assert_same_values(g, opt.graph)


def test_ops_without_a_scalar_function_are_not_compiled():
    g = Graph("cmp")
    x = g.input("x", (8,))
    g.output(g.where(g.greater(x, 0.0), x, g.neg(x)))   # bool values: not one compute dtype
    kinds = _kinds(g)
    assert "Greater" in kinds and "Where" in kinds
    X = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_array_equal(C.run_subgraph(g, [X], run_graph)[0], np.abs(X))


def test_compiled_kernels_are_cached_per_signature(rng):
    def build(c: float) -> Graph:
        g = Graph("cache")
        g.output(g.exp(g.mul(g.input("x", (32,)), c)))
        return g

    X = rng.standard_normal(32).astype(np.float32)
    C.run_subgraph(build(2.0), [X], run_graph)
    n = len(K._KERNELS)
    out = C.run_subgraph(build(3.0), [X], run_graph)[0]   # new constant, same program: no compile
    assert len(K._KERNELS) == n
    np.testing.assert_allclose(out, np.exp(X * np.float32(3.0)), rtol=1e-6)
    C.run_subgraph(build(3.0), [X.reshape(32)], run_graph)
    Y = rng.standard_normal((4, 8)).astype(np.float32)
    g2 = Graph("cache2")
    g2.output(g2.exp(g2.mul(g2.input("x", (4, 8)), 2.0)))
    C.run_subgraph(g2, [Y], run_graph)                            # collapses to the same 1-D loop
    assert len(K._KERNELS) == n


def test_composite_chain_helper_matches_numpy(rng):
    x = rng.standard_normal(1000).astype(np.float32)
    ops = [("Mul", (0.5,)), ("Add", (1.0,)), ("Relu", ()), ("Sub", (0.25,))]
    y = C.composite_chain(ops, x)
    ref = np.maximum(x * np.float32(0.5) + np.float32(1.0), 0) - np.float32(0.25)
    np.testing.assert_array_equal(y, ref)


def test_round_f16_is_numpys_float16_rounding(rng):
    """Ties to even, subnormals, overflow to inf, signed zero, nan: as numpy's cast."""
    from numba import njit

    @njit
    def apply(a, out):
        for i in range(a.size):
            out[i] = K.round_f16(a[i])

    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    edge = np.array([0.0, -0.0, 65504, 65519.99, 65520, -65520, 6.1035e-05, 2.9802322e-08,
                     1 + 2**-11, 1 + 3 * 2**-11, 2049.0, np.inf, -np.inf, np.nan], np.float32)
    a = np.concatenate([bits.view(np.float32), edge])
    out = np.empty_like(a)
    apply(a, out)
    with np.errstate(over="ignore"):
        ref = a.astype(np.float16).astype(np.float32)
    same = (out.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(out) & np.isnan(ref))
    assert same.all(), a[~same][:5]


def test_float16_chain_matches_per_op_rounding_bit_for_bit(rng):
    g = Graph("h")
    x = g.input("x", (4096,), "float16")
    g.output(g.sigmoid(g.add(g.mul(g.exp(x), 3.0), x)))
    X = (rng.standard_normal(4096) * 3).astype(np.float16)
    (out,) = C.run_subgraph(g, [X], run_graph)
    np.testing.assert_array_equal(out, execute(g, {"x": X})[g.outputs[0]])
