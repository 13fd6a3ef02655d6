"""Graph-kernel fusion (MindSpore basic + composite): the seeds' examples, dumps, limits."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import assert_same_values, fused, gk_stages, inner_types

from ascendsim.errors import ConfigError
from ascendsim.ir.graph import Graph
from ascendsim.models import net_basic_fuse, net_composite_fuse


def test_net_basic_fuse_is_one_composite_after_basic_fusion(tmp_path):
    g = net_basic_fuse()
    opt = gk_stages(g, dump_dir=tmp_path)
    assert opt.node_counts["initial"] == 2
    assert opt.node_counts["graph_kernel_basic"] == 1
    (node,) = opt.graph.nodes
    assert node.op_type == "FusedOp" and node.attrs["fusion"] == "GraphKernel"
    assert inner_types(node) == ["Mul", "Add"] and node.attrs["display_type"] == "Fused_Mul_Add"
    assert opt.log.counts() == {"BasicOpsFusion": (1, 1), "CompositeOpsFusion": (0, 0)}
    assert_same_values(g, opt.graph)


def test_net_composite_fuse_counts_and_dumps(tmp_path):
    g = net_composite_fuse()
    opt = gk_stages(g, dump_dir=tmp_path)
    # basic fusion: Mul+Add -> one composite, Pow (an AI CPU op) left out: 2 nodes
    assert opt.node_counts == {"initial": 3, "graph_kernel_basic": 2,
                               "graph_kernel_composite": 1}
    (node,) = opt.graph.nodes
    assert inner_types(node) == ["Mul", "Add", "Pow"]
    assert node.attrs["pattern"] == "CompositeOpsFusion"
    dumps = sorted(p.name for p in tmp_path.glob("*.dot"))
    assert len(dumps) == 3 and dumps[0].startswith("00_initial")
    after_basic = (tmp_path / dumps[1]).read_text()
    assert "Fused_Mul_Add" in after_basic and "Pow" in after_basic
    assert "Fused_Mul_Add_Pow" in (tmp_path / dumps[2]).read_text()
    assert_same_values(g, opt.graph)


def test_basic_fusion_alone_leaves_pow_outside():
    g = net_composite_fuse()
    opt = gk_stages(g)
    basic_only = [r for r in opt.log.records if r.name == "BasicOpsFusion"]
    assert basic_only and basic_only[0].result.patterns["BasicOpsFusion"].effected == 1


def test_multi_output_composite():
    g = Graph("mo")
    x = g.input("x", (4, 8))
    m = g.mul(x, 2.0)
    g.output(g.relu(g.add(m, 1.0)), m)      # m is an intermediate AND a graph output
    opt = gk_stages(g)
    (node,) = fused(opt.graph)
    assert len(node.outputs) == 2 and set(node.outputs) == set(g.outputs)
    assert_same_values(g, opt.graph)


def test_composites_never_create_a_cycle():
    g = Graph("cyc")
    x = g.input("x", (8, 8))
    a = g.exp(x)
    mm = g.matmul(a, g.const(np.eye(8, dtype=np.float32)))   # a cube op between them
    g.output(g.add(a, mm))
    opt = gk_stages(g)
    assert not fused(opt.graph)
    assert "cycle" in opt.log.explain()
    assert_same_values(g, opt.graph)


def test_size_limit_splits_composites():
    g = Graph("long")
    v = g.input("x", (16,))
    for i in range(6):
        v = g.add(g.mul(v, 0.5), float(i)) if i % 2 else g.relu(v)
    g.output(v)
    n_ops = len(g.nodes)
    opt = gk_stages(g, graph_kernel_max_ops=4)
    sizes = [len(n.subgraph.nodes) for n in fused(opt.graph)]
    assert sizes == [4, 4]            # 9 ops: 4 + 4, the last one alone (no merge can take it)
    assert len(opt.graph.nodes) == 3
    assert "size limit" in opt.log.explain()
    assert_same_values(g, opt.graph)
    whole = gk_stages(g)
    assert [len(n.subgraph.nodes) for n in fused(whole.graph)] == [n_ops]
    with pytest.raises(ConfigError, match="graph_kernel_max_ops"):
        gk_stages(g, graph_kernel_max_ops=1)


def test_reduce_and_broadcast_join_composites():
    """Softmax written out by hand: reduce, broadcast back, exp, sum, div: one composite."""
    g = Graph("softmax")
    x = g.input("x", (4, 16))
    e = g.exp(g.sub(x, g.reduce_max(x, axes=[1], keepdims=1)))
    g.output(g.div(e, g.reduce_sum(e, axes=[1], keepdims=1)))
    opt = gk_stages(g)
    (node,) = opt.graph.nodes
    assert sorted(inner_types(node)) == ["Div", "Exp", "ReduceMax", "ReduceSum", "Sub"]
    assert_same_values(g, opt.graph)


def test_cube_ops_stay_out_of_composites():
    g = Graph("mm")
    x = g.input("x", (8, 8))
    y = g.matmul(g.relu(g.mul(x, 2.0)), g.const(np.ones((8, 8), np.float32)))
    g.output(g.add(g.relu(y), 1.0))
    opt = gk_stages(g)
    assert [n.op_type for n in opt.graph.nodes] == ["FusedOp", "MatMul", "FusedOp"]
    assert_same_values(g, opt.graph)


def test_shape_parameters_move_inside_the_composite():
    """A Reshape's target shape is a compile-time parameter: it lives in the subgraph's
    constants, so the fused node reads only data and shape inference still works."""
    g = Graph("params")
    x = g.input("x", ("n", 8))
    y = g.add(g.reshape(g.mul(x, 2.0), [-1, 4, 2]), 1.0)
    g.output(g.reduce_sum(y, axes=[2], keepdims=0))
    opt = gk_stages(g)
    (node,) = opt.graph.nodes
    assert node.inputs == ("x",) and len(node.subgraph.constants) == 4
    assert opt.graph.bind(n=3).values[node.outputs[0]].shape == (3, 4)
    assert_same_values(g.bind(n=3), opt.graph.bind(n=3))
