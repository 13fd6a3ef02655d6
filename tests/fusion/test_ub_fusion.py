"""UB fusion: the four categories, their limits, the rule sets, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import assert_same_values, fused, inner_types, ub_stage

from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip
from ascendsim.ir.graph import Graph
from ascendsim.passes.fusion_rules import RULE_SETS, get_rules
from ascendsim.passes.partition import FusionGraph, ub_working_set
from ascendsim.passes.ub_fusion import AutomaticUbFusion


def _conv_input(g: Graph, c: int = 4):
    x = g.input("x", (1, c, 8, 8))
    w = g.const(np.random.default_rng(1).standard_normal((c, c, 3, 3)).astype(np.float32) * .2)
    return g.conv(x, w, pads=[1, 1, 1, 1])


def test_conv_eltwise_takes_three_and_the_fourth_starts_a_new_group():
    g = Graph("conv4")
    y = _conv_input(g)
    y = g.sigmoid(g.add(g.mul(g.relu(y), 2.0), 1.0))
    g.output(y)
    opt = ub_stage(g)
    groups = fused(opt.graph)
    assert [inner_types(n) for n in groups] == [["Conv", "Relu", "Mul", "Add"]]
    assert groups[0].attrs["fusion"] == "UB"
    assert groups[0].attrs["pattern"] == "TbeConvElemwiseFusion"
    assert [n.op_type for n in opt.graph.nodes] == ["FusedOp", "Sigmoid"]
    assert opt.log.counts()["TbeConvElemwiseFusionPass"] == (1, 1)
    assert_same_values(g, opt.graph)


def test_conv_eltwise_ops_must_be_single_input():
    """A non-scalar bias is a broadcast operand, hence a second input: the conv group ends."""
    g = Graph("convbias")
    y = _conv_input(g)
    b = g.const(np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1))
    g.output(g.relu(g.add(y, b)))
    opt = ub_stage(g)
    assert [n.op_type for n in opt.graph.nodes][0] == "Conv"
    assert [inner_types(n) for n in fused(opt.graph)] == [["Add", "Relu"]]
    assert opt.log.counts()["TbeConvElemwiseFusionPass"] == (0, 0)
    assert_same_values(g, opt.graph)


def _chain(n_ops: int, shape=(64,)) -> Graph:
    g = Graph(f"chain{n_ops}")
    v = g.add(g.input("x", shape), g.input("y", shape))
    ops = [lambda t: g.mul(t, 0.5), g.relu, lambda t: g.sub(t, 0.25), g.exp, g.abs, g.neg,
           lambda t: g.add(t, 3.0)]
    for i in range(n_ops - 1):
        v = ops[i % len(ops)](v)
    g.output(v)
    return g


def test_six_op_eltwise_chain_splits_five_plus_one():
    g = _chain(6)
    opt = ub_stage(g)
    groups = fused(opt.graph)
    assert [len(n.subgraph.nodes) for n in groups] == [5]
    assert groups[0].subgraph.nodes[0].op_type == "Add"   # the two-input head
    assert [n.op_type for n in opt.graph.nodes] == ["FusedOp", "Abs"]
    assert opt.log.counts()["TbeEltwiseFusionPass"] == (1, 1)
    assert_same_values(g, opt.graph)


def test_twelve_op_chain_splits_five_five_two():
    g = _chain(12)
    opt = ub_stage(g)
    assert [len(n.subgraph.nodes) for n in fused(opt.graph)] == [5, 5, 2]
    assert_same_values(g, opt.graph)


def test_cann8_rule_set_changes_the_grouping():
    g = _chain(6)
    opt = ub_stage(g, rules="cann8")
    assert [len(n.subgraph.nodes) for n in fused(opt.graph)] == [6]
    g7 = _chain(7)
    assert [len(n.subgraph.nodes) for n in fused(ub_stage(g7, rules="cann8").graph)] == [6]
    assert_same_values(g, opt.graph)


def test_only_the_first_eltwise_op_may_have_several_inputs():
    g = Graph("twoheads")
    x, y, z = (g.input(n, (32,)) for n in "xyz")
    v = g.relu(g.add(x, y))
    v = g.exp(g.mul(v, z))         # a second two-input op starts a new group
    g.output(v)
    opt = ub_stage(g)
    assert [inner_types(n) for n in fused(opt.graph)] == [["Add", "Relu"], ["Mul", "Exp"]]
    assert_same_values(g, opt.graph)


def _reduce_then(n_after: int) -> Graph:
    g = Graph(f"reduce{n_after}")
    v = g.reduce_sum(g.input("x", (8, 16)), axes=[1], keepdims=1)
    ops = [lambda t: g.mul(t, 0.5), g.relu, lambda t: g.add(t, 1.0), g.sqrt, g.neg, g.exp]
    for i in range(n_after):
        v = ops[i](v)
    g.output(v)
    return g


def test_reduce_plus_five_eltwise_splits_four_plus_one():
    g = _reduce_then(5)
    opt = ub_stage(g)
    groups = fused(opt.graph)
    assert [inner_types(n) for n in groups] == [["ReduceSum", "Mul", "Relu", "Add", "Sqrt"]]
    assert groups[0].attrs["pattern"] == "TbeReduceElemwiseFusion"
    assert [n.op_type for n in opt.graph.nodes] == ["FusedOp", "Neg"]
    assert_same_values(g, opt.graph)


def test_reduce_cann8_takes_five_after():
    g = _reduce_then(6)
    opt = ub_stage(g, rules="cann8")
    assert [len(n.subgraph.nodes) for n in fused(opt.graph)] == [6]
    assert [n.op_type for n in opt.graph.nodes] == ["FusedOp", "Exp"]
    assert_same_values(g, opt.graph)


def test_reduce_takes_eltwise_before_it_within_the_total():
    g = Graph("pre")
    v = g.exp(g.mul(g.input("x", (8, 16)), 0.5))
    v = g.relu(g.reduce_sum(v, axes=[1], keepdims=1))
    g.output(v)
    opt = ub_stage(g)
    assert [inner_types(n) for n in fused(opt.graph)] == [["Mul", "Exp", "ReduceSum", "Relu"]]
    assert_same_values(g, opt.graph)


def test_segment_plus_eltwise():
    g = Graph("pool")
    v = g.max_pool(g.input("x", (1, 4, 8, 8)), kernel_shape=[2, 2], strides=[2, 2])
    g.output(g.add(g.relu(v), 1.0))
    opt = ub_stage(g)
    groups = fused(opt.graph)
    assert [inner_types(n) for n in groups] == [["MaxPool", "Relu", "Add"]]
    assert groups[0].attrs["pattern"] == "TbeSegmentElemwiseFusion"
    assert_same_values(g, opt.graph)


def test_multi_consumer_intermediate_is_refused_and_counted():
    g = Graph("multi")
    y = _conv_input(g)
    r = g.relu(y)
    g.output(g.add(r, y))            # the conv output is also read outside the Conv+Relu group
    opt = ub_stage(g)
    assert opt.log.counts()["TbeConvElemwiseFusionPass"] == (1, 0)
    why = opt.log.explain()
    assert "multi-consumer" in why and "intermediate 'Conv" in why
    assert not any(n.op_type == "Conv" for f in fused(opt.graph) for n in f.subgraph.nodes)
    assert_same_values(g, opt.graph)


def test_graph_output_intermediate_is_refused():
    g = Graph("outmid")
    a = g.exp(g.input("x", (16,)))
    g.output(g.relu(a), a)
    opt = ub_stage(g)
    assert opt.log.counts()["TbeEltwiseFusionPass"] == (1, 0)
    assert "graph output" in opt.log.explain()
    assert not fused(opt.graph)


def test_fusing_a_diamond_through_an_outside_op_is_a_cycle():
    """Automatic UB fusion (cann8) would merge Exp and Add, but a Transpose outside the group
    sits on a path between them."""
    g = Graph("diamond")
    a = g.exp(g.input("x", (8, 8)))
    t = g.transpose(a, perm=[1, 0])
    g.output(g.add(a, t))
    opt = ub_stage(g, rules="cann8", passes=(AutomaticUbFusion,))
    assert opt.log.counts()["AutomaticUbFusion"][1] == 0
    assert "cycle" in opt.log.explain()
    assert not fused(opt.graph)
    fg = FusionGraph(g)
    assert "cycle" in fg.creates_cycle(fg.members([g.nodes[0], g.nodes[2]]))
    assert fg.creates_cycle(fg.members(g.nodes)) is None


def test_automatic_ub_fusion_only_in_cann8():
    g = Graph("auto")
    x, y = g.input("x", (16,)), g.input("y", (16,))
    a, b = g.exp(x), g.neg(y)
    g.output(g.add(a, b))           # a join: no chain pattern takes all three
    seed = ub_stage(g, passes=(AutomaticUbFusion,))
    assert not fused(seed.graph)
    assert "no automatic UB fusion" in seed.log.explain()
    cann8 = ub_stage(g, rules="cann8", passes=(AutomaticUbFusion,))
    assert [sorted(inner_types(n)) for n in fused(cann8.graph)] == [["Add", "Exp", "Neg"]]
    assert_same_values(g, cann8.graph)


def test_ub_overflow_refuses_with_the_figures():
    g = _chain(3)
    tiny = get_chip("ascend910").replace(ub_bytes=512)
    opt = ub_stage(g, chip=tiny)
    # refused at Add (Add-Mul-Relu), then at Mul (Mul-Relu): two matches, no fusion
    assert opt.log.counts()["TbeEltwiseFusionPass"] == (2, 0)
    why = opt.log.explain()
    assert "UB over capacity" in why and "> ub_bytes 512 B" in why
    assert not fused(opt.graph)
    assert fused(ub_stage(g).graph)  # the real UB takes it


def test_reduce_row_larger_than_ub_is_refused_on_a_real_chip():
    """A one-pass reduction holds a whole row: 100k float32 (400 KB) exceeds 910's 248 KB UB."""
    g = Graph("bigrow")
    g.output(g.relu(g.reduce_sum(g.input("x", (2, 100_000)), axes=[1], keepdims=1)))
    opt = ub_stage(g)
    assert opt.log.counts()["TbeReduceElemwiseFusionPass"] == (1, 0)
    assert "UB over capacity" in opt.log.explain()


def test_working_set_counts_live_buffers_double_buffered():
    g = _chain(2)                    # Add(x, y) -> Mul(., 0.5) on 64 float32
    chip = get_chip("ascend910")
    ws = ub_working_set(g, list(g.nodes), chip)
    # peak: x, y, add-out = 3 tiles of 64 float32 (256 B), doubled
    assert ws.tile_elems == 64 and ws.peak_buffers == 3 and ws.bytes == 2 * 3 * 256


def test_ai_cpu_ops_never_join_a_ub_group():
    g = Graph("pow")
    v = g.pow(g.mul(g.input("x", (16,)), 2.0), 3.0)
    g.output(g.relu(v))
    opt = ub_stage(g)
    assert not fused(opt.graph)


def test_ub_log_lines_and_rule_set_lookup():
    opt = ub_stage(_chain(3))
    assert "Run buffer fusion pass successfully, pass name:TbeEltwiseFusionPass." in str(opt.log)
    assert get_rules("cann8") is RULE_SETS["cann8"] and get_rules(None).name == "seed"
    with pytest.raises(ConfigError, match="unknown UB fusion rule set 'cann9'; valid: seed, cann8"):
        get_rules("cann9")
    with pytest.raises(ConfigError, match="eltwise_max"):
        get_rules("seed").with_(eltwise_max=-1)
    custom = get_rules("seed").with_(eltwise_max=2)
    assert [len(n.subgraph.nodes) for n in fused(ub_stage(_chain(4), rules=custom).graph)] \
        == [2, 2]


def test_a_refused_chain_is_retried_up_to_its_shared_value():
    """Add-Relu-Exp-Neg where Relu's value is also read outside: the 4-op match is refused,
    the chain up to Relu (whose value becomes the group's output) is fused, then Exp-Neg."""
    g = Graph("shrink")
    x, y = g.input("x", (32,)), g.input("y", (32,))
    r = g.relu(g.add(x, y))
    g.output(g.neg(g.exp(r)), g.mul(r, 3.0))
    opt = ub_stage(g)
    groups = [inner_types(n) for n in fused(opt.graph)]
    assert ["Add", "Relu"] in groups
    m, e = opt.log.counts()["TbeEltwiseFusionPass"]
    assert e == len(groups) and m > e
    assert "multi-consumer" in opt.log.explain()
    assert_same_values(g, opt.graph)


def test_residual_add_joins_a_layer_norm_as_its_prologue():
    g = Graph("addln")
    x, y = g.input("x", (4, 32)), g.input("y", (4, 32))
    rng = np.random.default_rng(5)
    scale = g.const(rng.standard_normal(32).astype(np.float32))
    bias = g.const(rng.standard_normal(32).astype(np.float32))
    g.output(g.relu(g.layer_normalization(g.add(x, y), scale, bias, axis=-1)))
    opt = ub_stage(g)
    (node,) = fused(opt.graph)
    assert inner_types(node) == ["Add", "LayerNormalization", "Relu"]
    assert node.attrs["pattern"] == "TbeReduceElemwiseFusion"
    assert_same_values(g, opt.graph)
