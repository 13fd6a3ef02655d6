"""Regressions for the fusion bugs the random-graph fuzzing of issue 14 found (Found 2, 3),
and the verifier checks that make such a bug fail at the pass that made it."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.execute import composite, execute

X = np.linspace(-2.0, 2.0, 128, dtype=np.float32).reshape(32, 4)


def _view_sibling_graph(view: str) -> asim.Graph:
    """Relu feeding a view (whose consumer writes another shape) and a same-shape sibling."""
    g = asim.Graph(f"gk_{view}")
    r = g.relu(g.input("x", (32, 4), "float32"))
    v = {"reshape": lambda: g.reshape(r, np.array([128])),
         "transpose": lambda: g.transpose(r),
         "concat": lambda: g.concat(r, r, axis=0),
         "reduce": lambda: g.reduce_sum(r, np.array([1]), keepdims=0)}[view]()
    g.output(g.add(v, 1.0), g.exp(r))
    return g


@pytest.mark.parametrize("view", ["reshape", "transpose", "concat", "reduce"])
def test_graph_kernel_view_with_sibling_of_other_shape_executes(view):
    g = _view_sibling_graph(view)
    opt = asim.optimize(g, graph_kernel=True)
    assert any(n.op_type == "FusedOp" for n in opt.graph.nodes)
    want, got = execute(g, {"x": X}), execute(opt.graph, {"x": X})
    for name in g.outputs:
        # the composite loop computes the same float32 ops in the same order: bit-exact
        np.testing.assert_array_equal(got[name], want[name])
    assert asim.simulate(g, fusion={"graph_kernel": True}).cycles > 0


def test_verifier_names_the_pass_and_node_when_a_composite_has_no_loop_plan(monkeypatch):
    # the planner bug of Found 2 put the (32, 4) Exp and the (128,) Add in one loop; with it
    # back, the verifier must stop at the graph-kernel pass, naming it and the fused node
    monkeypatch.setattr(composite, "_joins", lambda sub, run, node: True)
    with pytest.raises(GraphError) as err:
        asim.optimize(_view_sibling_graph("reshape"), graph_kernel=True)
    msg = str(err.value)
    assert "pass 'BasicOpsFusion'" in msg and "fused node 'Fused_Relu_Reshape_Add_Exp" in msg


def test_composite_plan_of_side_by_side_small_shapes_is_one_loop_per_op():
    # (32, 1) and (1, 4) both needed: no loop shape serves both, each gets its own loop
    g = asim.Graph("small")
    a = g.relu(g.input("a", (32, 1), "float32"))
    b = g.exp(g.input("b", (1, 4), "float32"))
    g.output(a, b, g.add(a, b))
    opt = asim.optimize(g, graph_kernel=True)
    feeds = {"a": X[:, :1].copy(), "b": X[:1, :].copy()}
    want, got = execute(g, feeds), execute(opt.graph, feeds)
    for name in g.outputs:
        np.testing.assert_array_equal(got[name], want[name])


def _conv_bias_relu(batch: int = 2) -> asim.Graph:
    g = asim.Graph("conv11")
    x = g.input("x", (batch, 1, 8, 8), "float32")
    w = g.const(np.full((1, 1, 3, 3), 0.5, np.float32))
    b = g.const(np.array([0.25], np.float32))
    g.output(g.relu(g.conv(x, w, b)))
    return g


def _matmul_n1(one_d: bool) -> asim.Graph:
    g = asim.Graph("mm_n1")
    x = g.input("x", (8,) if one_d else (4, 8), "float32")
    w = g.const(np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1))
    g.output(g.relu(g.add(g.matmul(x, w), g.const(np.array([0.5], np.float32)))))
    return g


@pytest.mark.parametrize("make, shape", [
    (_conv_bias_relu, (2, 1, 8, 8)),
    (lambda: _matmul_n1(False), (4, 8)),
    (lambda: _matmul_n1(True), (8,)),
])
def test_one_element_cube_bias_stays_an_input_of_the_fused_node(make, shape):
    g = make()
    opt = asim.optimize(g)
    fused = [n for n in opt.graph.nodes if n.op_type == "FusedOp"]
    assert fused, "the cube op and its epilogue fuse"
    cube_consts = {v for n in fused for inner in n.subgraph.nodes
                   if inner.op_type in ("Conv", "MatMul", "Gemm") for v in inner.inputs
                   if v in g.constants}
    assert cube_consts and all(v in fused[0].inputs for v in cube_consts)
    feeds = {"x": np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)}
    want, got = execute(g, feeds), execute(opt.graph, feeds)
    for name in g.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)  # same ops
    for chip in ("ascend910", "ascend310"):
        assert asim.simulate(g, chip=chip).cycles > 0          # lowering failed before


def test_verifier_rejects_a_cube_reading_its_bias_from_inside_the_subgraph():
    from ascendsim.passes.verify import verify_graph

    opt = asim.optimize(_conv_bias_relu())
    (node,) = [n for n in opt.graph.nodes if n.op_type == "FusedOp"]
    bias = node.subgraph.nodes[0].inputs[2]
    node.subgraph.inputs.remove(bias)
    node.subgraph.constants[bias] = opt.graph.constants[bias]
    broken = asim.Graph("broken")
    broken.values, broken.inputs, broken.outputs = opt.graph.values, opt.graph.inputs, \
        opt.graph.outputs
    broken.constants = opt.graph.constants
    from ascendsim.ir.graph import Node
    broken.nodes = [Node(node.name, node.op_type, tuple(i for i in node.inputs if i != bias),
                         node.outputs, node.attrs, node.subgraph)]
    with pytest.raises(GraphError, match=rf"pass 'P'.*fused node '{node.name}'.*'{bias}'"):
        verify_graph(broken, pass_name="P")


def test_verifier_names_pass_and_node_when_a_fused_output_is_declared_wrongly():
    from ascendsim.ir.tensor import Value
    from ascendsim.passes.verify import verify_graph

    opt = asim.optimize(_view_sibling_graph("reshape"), graph_kernel=True)
    (node,) = [n for n in opt.graph.nodes if n.op_type == "FusedOp"]
    out = node.outputs[0]
    v = opt.graph.values[out]
    opt.graph.values[out] = Value(out, (64, 2), v.dtype)       # the subgraph infers (128,)
    with pytest.raises(GraphError, match=rf"pass 'P'.*fused node '{node.name}'.*'{out}'"):
        verify_graph(opt.graph, pass_name="P")
