"""The graph IR: building, naming, validation and the errors users see."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError, UnsupportedOpError


def test_builder_infers_shapes_and_executes():
    g = asim.Graph("NetBasicFuse")
    x = g.input("x", shape=(4, 4), dtype="float32")
    y = g.add(g.mul(x, 2.0), 1.0)
    g.output(y)
    assert y.shape == (4, 4) and y.dtype == "float32"
    assert [n.op_type for n in g.nodes] == ["Mul", "Add"]
    arr = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = asim.execute(g, {"x": arr})
    np.testing.assert_array_equal(out[y.name], arr * 2 + 1)


def test_multi_edge_between_two_nodes():
    g = asim.Graph()
    x = g.input("x", shape=(3,))
    r = g.relu(x)
    sq = g.mul(r, r)
    g.output(sq)
    mul = g.nodes[-1]
    assert mul.inputs == (r.name, r.name)
    assert len(g.consumers()[r.name]) == 1
    out = asim.execute(g, {"x": np.array([-1.0, 2.0, 3.0], np.float32)})
    np.testing.assert_array_equal(out[sq.name], [0.0, 4.0, 9.0])


def test_broadcast_shape_mismatch_names_node():
    g = asim.Graph()
    a = g.input("a", shape=(2, 3))
    b = g.input("b", shape=(4,))
    with pytest.raises(GraphError, match=r"node 'bad' \(Add\).*broadcast"):
        g.add(a, b, name="bad")


def test_cycle_is_reported_with_node_names():
    g = asim.Graph("loop")
    x = g.input("x", shape=(2,))
    a = g.relu(x, name="A")
    b = g.relu(a, name="B")
    g.output(b)
    # rewire A to read B: a cycle A -> B -> A
    node_a = g.node("A")
    g.nodes[0] = asim.Node("A", "Relu", (b.name,), node_a.outputs, node_a.attrs)
    with pytest.raises(GraphError, match=r"cycle through node\(s\) A, B"):
        g.validate()


def test_dangling_input_and_duplicate_names():
    g = asim.Graph()
    x = g.input("x", shape=(2,))
    g.relu(x, name="r")
    with pytest.raises(GraphError, match="duplicate node name 'r'"):
        g.relu(x, name="r")
    g.nodes.append(asim.Node("ghost", "Relu", ("nowhere",), ("ghost_out",)))
    g.values["ghost_out"] = asim.Value("ghost_out", (2,))
    with pytest.raises(GraphError, match="node 'ghost' .*reads 'nowhere'"):
        g.validate()


def test_unknown_builder_and_op():
    g = asim.Graph()
    with pytest.raises(AttributeError, match="no builder 'frobnicate'"):
        g.frobnicate  # noqa: B018  (the attribute access is what raises)
    with pytest.raises(UnsupportedOpError, match="unsupported op 'Frobnicate'"):
        g.add_node("Frobnicate", [])


def test_unknown_attribute_lists_valid_ones():
    g = asim.Graph()
    x = g.input("x", shape=(2,))
    with pytest.raises(GraphError, match="unknown attribute"):
        g.relu(x, alpha=0.1)


def test_execute_checks_inputs():
    g = asim.Graph("g")
    x = g.input("x", shape=(2, 2))
    g.output(g.relu(x))
    with pytest.raises(GraphError, match="missing input"):
        asim.execute(g, {})
    with pytest.raises(GraphError, match="input 'x' has shape"):
        asim.execute(g, {"x": np.zeros((3, 2), np.float32)})


def test_lazy_weight_costs_nothing_until_used():
    g = asim.Graph()
    w = g.weight("w", (1024, 1024), seed=7)
    assert g.constants["w"]._cache == []
    a = g.const_value(w.name)
    b = asim.ir.LazyTensor.random((1024, 1024), "float32", seed=7, scale=a.std() / 1.0)
    assert a.shape == (1024, 1024) and abs(a.std() - np.sqrt(2 / 1024)) < 1e-3
    assert b.shape == a.shape


def test_symbolic_dims_bind():
    g = asim.Graph()
    x = g.input("x", shape=("batch", 8))
    y = g.relu(x)
    g.output(y)
    assert g.values[y.name].shape == ("batch", 8)
    gb = g.bind(batch=4)
    assert gb.values[y.name].shape == (4, 8)
    assert g.values[y.name].shape == ("batch", 8)


def test_fused_node_keeps_subgraph_and_computes_values():
    g = asim.Graph("fuse")
    x = g.input("x", shape=("n", 4))
    m = g.mul(x, 2.0)
    y = g.relu(g.add(m, 1.0))
    g.output(y)
    ref = asim.execute(g.bind(n=3), {"x": np.full((3, 4), -0.25, np.float32)})[y.name]

    sub = asim.Graph("sub")
    sub.values = {k: v for k, v in g.values.items()}
    sub.constants = dict(g.constants)
    sub.nodes = list(g.nodes)
    sub.inputs, sub.outputs = ["x"], [y.name]
    fused = g.copy()
    fused.nodes = []
    node = fused.add_fused(sub, {"fusion": "UB", "pattern": "test", "display_type": "MulAddRelu"})
    assert node.subgraph is sub and node.op_type == "FusedOp"
    fused.validate()
    out = asim.execute(fused.bind(n=3), {"x": np.full((3, 4), -0.25, np.float32)})[y.name]
    np.testing.assert_array_equal(out, ref)
    assert fused.bind(n=5).values[y.name].shape == (5, 4)
