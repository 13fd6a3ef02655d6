"""Tensor/shape ops through the builder: values vs numpy, shape inference (static and
symbolic), registry metadata, and error messages."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from naive import HYPOTHESIS

from ascendsim.errors import GraphError
from ascendsim.execute import execute
from ascendsim.ir.graph import Graph
from ascendsim.ir.registry import Category, Unit, VecClass, get_op


def run(g: Graph, out, **feeds):
    g.output(out)
    return execute(g, feeds)[out.name]


def test_reshape_zero_minus_one_and_allowzero(rng) -> None:
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    g = Graph()
    v = g.input("x", x.shape)
    y = g.reshape(v, [0, -1])
    assert y.shape == (2, 12)
    np.testing.assert_array_equal(run(g, y, x=x), x.reshape(2, 12))
    g2 = Graph()
    e = g2.input("e", (0, 3))
    assert g2.reshape(e, [3, 0], allowzero=1).shape == (3, 0)
    with pytest.raises(GraphError, match=r"Reshape.*cannot reshape \(2, 3, 4\)"):
        g.reshape(v, [5, -1])


def test_reshape_keeps_symbolic_batch() -> None:
    g = Graph()
    v = g.input("x", ("N", 3, 4))
    assert g.reshape(v, [0, -1]).shape == ("N", 12)
    assert g.reshape(v, [-1, 4]).shape == ("N*3", 4)
    assert g.flatten(v, axis=1).shape == ("N", 12)
    assert g.flatten(v, axis=-1).shape == ("N*3", 4)


def test_reshape_like_ops_are_views_and_movers_use_the_vector_unit() -> None:
    for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"):
        d = get_op(op)
        assert d.unit is Unit.NONE and d.category is Category.INJECTIVE
    for op in ("Transpose", "Concat", "Split", "Slice", "Gather", "Pad", "Expand", "Tile"):
        d = get_op(op)
        assert d.unit is Unit.VECTOR and d.category is Category.INJECTIVE
        assert d.vec_class is VecClass.MOVE
    shape = get_op("Shape")
    assert shape.unit is Unit.NONE and shape.category is Category.OPAQUE
    assert get_op("Reshape").needs_const_inputs == (1,)
    assert get_op("Slice").needs_const_inputs == (1, 2, 3, 4)


def test_transpose_default_and_perm(rng) -> None:
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    g = Graph()
    v = g.input("x", x.shape)
    t = g.transpose(v)
    p = g.transpose(v, perm=[1, 0, 2])
    assert t.shape == (4, 3, 2) and p.shape == (3, 2, 4)
    g.output(t, p)
    out = execute(g, {"x": x})
    np.testing.assert_array_equal(out[t.name], x.T)
    np.testing.assert_array_equal(out[p.name], x.transpose(1, 0, 2))
    with pytest.raises(GraphError, match="not a permutation"):
        g.transpose(v, perm=[0, 0, 1])


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [3], [0], [1]), ([-1], [-100], [1], [-1]), ([0, 1], [100, 4], [2, 0], [2, 2]),
    ([2], [0], [-1], [-1]),
])
def test_slice_matches_python_slicing(rng, starts, ends, axes, steps) -> None:
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    index = [slice(None)] * 3
    for s, e, a, step in zip(starts, ends, axes, steps):
        index[a % 3] = slice(s, e if e > -100 else None, step)
    want = x[tuple(index)]
    g = Graph()
    y = g.slice(g.input("x", x.shape), starts, ends, axes, steps)
    assert y.shape == want.shape
    np.testing.assert_array_equal(run(g, y, x=x), want)


def test_gather_negative_indices_and_axis(rng) -> None:
    x = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[0, -1], [2, 1]], np.int64)
    g = Graph()
    y = g.gather(g.input("x", x.shape), g.input("i", idx.shape, "int64"), axis=1)
    assert y.shape == (3, 2, 2)
    g.output(y)
    np.testing.assert_array_equal(execute(g, {"x": x, "i": idx})[y.name],
                                  np.take(x, idx % 4, axis=1))
    with pytest.raises(GraphError, match="out of range"):
        execute(g, {"x": x, "i": np.array([[0, 4], [0, 0]], np.int64)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_and_negative_pads(rng, mode) -> None:
    x = rng.standard_normal((3, 4)).astype(np.float32)
    g = Graph()
    v = g.input("x", x.shape)
    y = g.pad(v, [1, 2, 2, 1], 0.5, mode=mode) if mode == "constant" else \
        g.pad(v, [1, 2, 2, 1], mode=mode)
    assert y.shape == (6, 7)
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    np.testing.assert_array_equal(run(g, y, x=x), np.pad(x, [(1, 2), (2, 1)], mode=mode, **kw))
    g2 = Graph()
    c = g2.pad(g2.input("x", x.shape), [-1, 0], None, [1])     # crop the first column
    assert c.shape == (3, 3)
    np.testing.assert_array_equal(run(g2, c, x=x), x[:, 1:])


def test_split_sizes_and_uneven_num_outputs(rng) -> None:
    x = rng.standard_normal((7, 2)).astype(np.float32)
    g = Graph()
    v = g.input("x", x.shape)
    a, b = g.split(v, [3, 4])
    p, q, r = g.split(v, num_outputs=3)
    assert (a.shape, b.shape) == ((3, 2), (4, 2))
    assert (p.shape, q.shape, r.shape) == ((3, 2), (3, 2), (1, 2))
    g.output(a, b, r)
    out = execute(g, {"x": x})
    np.testing.assert_array_equal(out[b.name], x[3:])
    np.testing.assert_array_equal(out[r.name], x[6:])
    with pytest.raises(GraphError, match="does not sum"):
        g.split(v, [3, 3])


def test_concat_squeeze_unsqueeze_expand_tile(rng) -> None:
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    g = Graph()
    v = g.input("x", x.shape)
    c = g.concat(v, v, axis=-1)
    s = g.squeeze(v, [1])
    s_all = g.squeeze(v)
    u = g.unsqueeze(s, [-1, 0])
    e = g.expand(v, [4, 2, 5, 3])
    t = g.tile(v, [1, 2, 2])
    assert (c.shape, s.shape, s_all.shape, u.shape, e.shape, t.shape) == (
        (2, 1, 6), (2, 3), (2, 3), (1, 2, 3, 1), (4, 2, 5, 3), (2, 2, 6))
    g.output(c, u, e, t)
    out = execute(g, {"x": x})
    np.testing.assert_array_equal(out[c.name], np.concatenate([x, x], -1))
    np.testing.assert_array_equal(out[u.name], x.reshape(1, 2, 3, 1))
    np.testing.assert_array_equal(out[e.name], np.broadcast_to(x, (4, 2, 5, 3)))
    np.testing.assert_array_equal(out[t.name], np.tile(x, (1, 2, 2)))
    with pytest.raises(GraphError, match="cannot squeeze axis 0 of size 2"):
        g.squeeze(v, [0])


def test_shape_constant_of_shape_range_constant() -> None:
    g = Graph()
    v = g.input("x", (2, 3, 4))
    s = g.shape(v, start=1)
    s2 = g.shape(v, start=-2, end=-1)
    assert s.shape == (2,) and s.dtype == "int64" and s2.shape == (1,)
    f = g.constant_of_shape([2, 2], value=np.array([7], np.int32))
    r = g.range(np.float32(1), np.float32(2), np.float32(0.25))
    r2 = g.range(np.int64(10), np.int64(4), np.int64(-3))
    k = g.constant(value_ints=[1, 2, 3])
    assert (f.shape, f.dtype, r.shape, r2.shape, k.dtype) == ((2, 2), "int32", (4,), (2,),
                                                              "int64")
    g.output(s, s2, f, r, r2, k)
    out = execute(g, {"x": np.zeros((2, 3, 4), np.float32)})
    np.testing.assert_array_equal(out[s.name], [3, 4])
    np.testing.assert_array_equal(out[s2.name], [3])
    np.testing.assert_array_equal(out[f.name], np.full((2, 2), 7, np.int32))
    np.testing.assert_allclose(out[r.name], [1.0, 1.25, 1.5, 1.75])
    np.testing.assert_array_equal(out[r2.name], [10, 7])
    np.testing.assert_array_equal(out[k.name], [1, 2, 3])


def test_depth_to_space_round_trips_space_to_depth(rng) -> None:
    x = rng.standard_normal((1, 8, 2, 3)).astype(np.float32)
    for mode in ("DCR", "CRD"):
        g = Graph()
        d = g.depth_to_space(g.input("x", x.shape), blocksize=2, mode=mode)
        back = g.space_to_depth(d, blocksize=2, mode=mode)
        assert d.shape == (1, 2, 4, 6) and back.shape == x.shape
        np.testing.assert_array_equal(run(g, back, x=x), x)


def test_non_constant_shape_inputs_give_symbolic_dims(rng) -> None:
    g = Graph()
    v = g.input("x", (2, 6))
    shape = g.input("s", (2,), "int64")
    y = g.reshape(v, shape)
    assert len(y.shape) == 2 and all(isinstance(d, str) for d in y.shape)
    g2 = Graph()
    e = g2.expand(g2.input("x", (2, 1)), g2.input("s", (3,), "int64"))
    assert len(e.shape) == 3 and isinstance(e.shape[0], str)
    g.output(y)
    out = execute(g, {"x": np.ones((2, 6), np.float32), "s": np.array([3, 4], np.int64)})
    assert out[y.name].shape == (3, 4)


def test_flops_of_data_movement_are_zero() -> None:
    g = Graph()
    v = g.input("x", (4, 4))
    t = g.transpose(v)
    node = g.nodes[-1]
    d = get_op(node.op_type)
    assert d.flops([v], [t], node.attrs) == 0


def test_scatter_gather_nd_one_hot_trilu(rng) -> None:
    data = np.zeros((3, 3), np.float32)
    g = Graph()
    d = g.input("d", (3, 3))
    s = g.scatter_elements(d, np.array([[1, -1]], np.int64), np.array([[5.0, 7.0]], np.float32),
                           axis=1, reduction="add")
    nd = g.gather_nd(s, np.array([[0, 1], [0, 2]], np.int64))
    oh = g.one_hot(np.array([0, -1, 5], np.int64), np.int64(3), np.array([0, 1], np.float32))
    tu = g.trilu(d, np.int64(1), upper=0)
    assert (s.shape, nd.shape, oh.shape, tu.shape) == ((3, 3), (2,), (3, 3), (3, 3))
    g.output(s, nd, oh)
    out = execute(g, {"d": data})
    np.testing.assert_array_equal(out[s.name][0], [0, 5, 7])
    np.testing.assert_array_equal(out[nd.name], [5, 7])
    np.testing.assert_array_equal(out[oh.name], [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    with pytest.raises(GraphError, match="reduction 'sum'"):
        g.scatter_nd(d, np.array([[0]], np.int64), np.ones((1, 3), np.float32), reduction="sum")


def test_value_dependent_outputs_are_symbolic() -> None:
    g = Graph()
    x = g.input("x", (4, 2))
    nz = g.non_zero(x)
    c = g.compress(x, g.input("c", (4,), "bool"), axis=0)
    assert nz.shape[0] == 2 and isinstance(nz.shape[1], str)
    assert isinstance(c.shape[0], str) and c.shape[1] == 2
    assert get_op("NonZero").unit is Unit.AICPU
    g.output(nz, c)
    x_val = np.array([[0, 1], [2, 0], [0, 0], [3, 4]], np.float32)
    out = execute(g, {"x": x_val, "c": np.array([1, 0, 0, 1], bool)})
    np.testing.assert_array_equal(out[nz.name], np.array(np.nonzero(x_val)))
    np.testing.assert_array_equal(out[c.name], x_val[[0, 3]])


def test_resize_nearest_linear_and_shape(rng) -> None:
    x = rng.standard_normal((1, 1, 2, 3)).astype(np.float32)
    g = Graph()
    v = g.input("x", x.shape)
    near = g.resize(v, None, np.array([1, 1, 2, 2], np.float32))
    lin = g.resize(v, None, None, np.array([1, 1, 3, 5], np.int64), mode="linear",
                   coordinate_transformation_mode="align_corners")
    assert near.shape == (1, 1, 4, 6) and lin.shape == (1, 1, 3, 5)
    assert get_op("Resize").category is Category.SEGMENT
    g.output(near, lin)
    out = execute(g, {"x": x})
    np.testing.assert_array_equal(out[near.name], x.repeat(2, axis=2).repeat(2, axis=3))
    # align_corners keeps the corners and interpolates midpoints
    got = out[lin.name][0, 0]
    np.testing.assert_allclose(got[[0, 2]][:, [0, 2, 4]], x[0, 0], rtol=1e-6)
    np.testing.assert_allclose(got[1, 0], x[0, 0, :, 0].mean(), rtol=1e-6)
    with pytest.raises(GraphError, match="mode 'bicubic'"):
        g.resize(v, None, np.array([1, 1, 2, 2], np.float32), mode="bicubic")


@HYPOTHESIS
@given(st.integers(0, 6), st.integers(-9, 9), st.integers(-9, 9),
       st.sampled_from([-3, -2, -1, 1, 2, 3]))
def test_slice_property_matches_python(dim: int, start: int, end: int, step: int) -> None:
    """ONNX Slice clamping equals Python slicing for every start/end/step (ends past the
    front mean 'through index 0' for negative steps, as INT_MIN does in ONNX; a start past the
    front is clamped to index 0 for negative steps too, where Python would give nothing)."""
    x = np.arange(dim * 2, dtype=np.float32).reshape(dim, 2)
    g = Graph()
    y = g.slice(g.input("x", x.shape), [start], [end], [0], [step])
    py_end = None if (step < 0 and end < -dim) else end
    py_start = 0 if (step < 0 and start < -dim) else start
    want = x[py_start:py_end:step]
    assert y.shape == want.shape
    np.testing.assert_array_equal(run(g, y, x=x), want)
