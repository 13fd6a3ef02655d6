"""L2 fusion: batch split of chains whose intermediates do not fit in L2, when it pays."""

from __future__ import annotations

from fusion_helpers import assert_same_values, context, fused, inner_types

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.ir.graph import Graph
from ascendsim.passes.l2_fusion import L2BatchSplitFusionPass, batch_separable
from ascendsim.passes.manager import PassManager, Stage
from ascendsim.passes.ub_fusion import fuse_nodes


def _convs(batch: int = 8, c: int = 4, hw: int = 8, dtype: str = "float32",
           kernel: int = 3) -> Graph:
    g = Graph("convs")
    v = g.input("x", (batch, c, hw, hw), dtype)
    for i in range(2):
        w = g.weight(f"w{i}", (c, c, kernel, kernel), dtype, seed=i, scale=0.3)
        v = g.relu(g.conv(v, w, pads=[kernel // 2] * 4))
    g.output(v)
    return g


def _l2(g: Graph, chip):
    return PassManager([Stage("l2_fusion", "after L2 fusion", (L2BatchSplitFusionPass,))],
                       ctx=context(chip)).run(g)


def test_batch_split_when_intermediates_overflow_l2_and_it_pays():
    """Shape only: 1x1 convs (memory-bound) at batch 128 x 64 x 56 x 56 fp16 (49 MiB per
    intermediate) through a 32 MiB L2: the simulated chain is faster in batch chunks. (An
    18 MiB intermediate, which used to be split, now stays in the simulated L2 unsplit.)"""
    g = _convs(batch=128, c=64, hw=56, dtype="float16", kernel=1)
    opt = _l2(g, get_chip("ascend910"))
    (node,) = fused(opt.graph)
    assert node.attrs["fusion"] == "L2"
    assert inner_types(node) == ["Conv", "Relu", "Conv", "Relu"]
    k = node.attrs["batch_split"]
    assert k in (4, 8) and node.attrs["chunk_batch"] == 128 // k
    assert len(node.attrs["l2_values"]) == 3
    assert opt.log.counts()["L2BatchSplitFusionPass"] == (1, 1)
    why = opt.log.explain()
    assert f"batch 128 split {k} x {128 // k}" in why and "simulated" in why


def test_no_split_when_the_simulation_says_it_is_slower():
    """Tiny tensors: the screen passes with free launches, but per-task fixed costs make the
    chunks slower when simulated."""
    g = _convs()
    opt = _l2(g, get_chip("ascend910").replace(l2_bytes=8192, sink_launch_us=0.0))
    assert not fused(opt.graph)
    assert opt.log.counts()["L2BatchSplitFusionPass"] == (1, 0)
    assert "not faster when simulated: batch 8 as" in opt.log.explain()


def test_split_chain_values_are_unchanged():
    g = _convs()
    opt = g.copy()
    fuse_nodes(opt, list(opt.nodes), {"fusion": "L2", "pattern": "L2BatchSplitFusion",
                                      "display_type": "L2_chain", "batch_split": 2,
                                      "chunk_batch": 4, "l2_values": ("Conv_1",)})
    assert_same_values(g, opt)


def test_no_split_when_launches_cost_more_than_the_traffic_saved():
    g = _convs()
    chip = get_chip("ascend910").replace(l2_bytes=8192)   # 2 us per launch vs ns of traffic
    opt = _l2(g, chip)
    assert not fused(opt.graph)
    assert opt.log.counts()["L2BatchSplitFusionPass"] == (1, 0)
    assert "not faster: batch 8 as 2 x 4" in opt.log.explain()


def test_no_split_when_one_sample_does_not_fit():
    g = _convs(batch=2, hw=32)                # 16 KiB per sample > half of a 16 KiB L2
    opt = _l2(g, get_chip("ascend910").replace(l2_bytes=16384, sink_launch_us=0.0))
    assert not fused(opt.graph)
    assert "one sample's intermediate" in opt.log.explain()


def test_nothing_to_do_when_intermediates_fit():
    g = _convs()
    opt = _l2(g, get_chip("ascend910"))
    assert not fused(opt.graph) and opt.log.counts()["L2BatchSplitFusionPass"] == (0, 0)


def test_large_batch_on_the_real_chip_is_split():
    """Shape only: 1x1 convs at batch 32 x 256 x 56 x 56 fp16 (49 MiB) through a 32 MiB L2."""
    g = _convs(batch=32, c=256, hw=56, dtype="float16", kernel=1)
    opt = _l2(g, get_chip("ascend910"))
    (node,) = fused(opt.graph)
    assert node.attrs["batch_split"] == 4 and node.attrs["chunk_batch"] == 8


def test_batch_separability():
    g = Graph("sep")
    x = g.input("x", (4, 8))
    s = g.reduce_sum(x, axes=[0], keepdims=1)         # mixes samples
    r = g.relu(x)
    t = g.transpose(r, perm=[1, 0])
    g.output(s, t)
    sep = {n.op_type: batch_separable(g, n) for n in g.nodes}
    assert sep == {"ReduceSum": None, "Relu": 4, "Transpose": None}


def test_l2_group_of_ub_fused_nodes():
    from ascendsim.passes.ub_fusion import UB_PASSES

    g = _convs(batch=128, c=64, hw=56, dtype="float16", kernel=1)
    stages = [Stage("ub_fusion", "after UB fusion", UB_PASSES),
              Stage("l2_fusion", "after L2 fusion", (L2BatchSplitFusionPass,))]
    opt = PassManager(stages, ctx=context()).run(g)
    (node,) = opt.graph.nodes
    assert node.attrs["fusion"] == "L2" and node.attrs["batch_split"] > 1
    assert [n.attrs["display_type"] for n in node.subgraph.nodes] == ["ConvRelu", "ConvRelu"]


def test_a_constant_read_along_the_batch_is_not_split():
    """An optimizer-style update: the constant w has the chain's leading dimension, so chunks
    of the chain would need chunks of w; the pass leaves the chain whole (it used to split it,
    and the lowering met (N, C) against (N/k, C))."""
    g = Graph("upd")
    w = g.weight("w", (512, 256), "float32", seed=0)
    m = g.weight("m", (512, 256), "float32", seed=1)
    gr = g.input("grad", (512, 256), "float32")
    g.output(g.sub(w, g.mul(g.add(g.mul(m, 0.9), g.mul(gr, 0.1)), 1e-3)))
    chip = get_chip("ascend910b").replace(l2_bytes=256 * 1024)
    assert batch_separable(g, g.nodes[-1]) is None          # Sub reads w along the batch
    res = asim.simulate(g, chip)
    assert res.cycles > 0
    assert not any(n.attrs.get("fusion") == "L2" for n in res.graph.nodes)


def test_a_computed_weight_is_shared_by_every_chunk():
    """A training step's conv weight is a Cast of a float32 master input, not a constant; with
    its leading dim equal to the batch (8 output channels, batch 8) it must still be shared by
    the chunks, not split like an activation (ResNet-50's batch-256 step has such weights)."""
    from ascendsim.api import simulate
    from ascendsim.lower.composite import chunk_values

    g = Graph("cast_weight")
    x = g.input("x", (8, 4, 6, 6), "float16")
    master = g.input("w", (8, 4, 3, 3), "float32")
    y = g.relu(g.conv(x, g.cast(master, to="float16"), pads=[1, 1, 1, 1]))
    g.output(y)
    node, _, _ = g.nodes
    assert batch_separable(g, node) == 8
    opt = g.copy()
    fuse_nodes(opt, list(opt.nodes), {"fusion": "L2", "pattern": "L2BatchSplitFusion",
                                      "display_type": "L2_chain", "batch_split": 2,
                                      "chunk_batch": 4, "l2_values": ()})
    (fused_node,) = fused(opt)
    values = chunk_values(fused_node, 2, opt.constants)
    assert values[y.name].shape == (4, 8, 6, 6)      # 4 samples, all 8 output channels
    assert simulate(opt, fusion=False).cycles > 0


def test_a_computed_weight_inside_a_ub_fused_node_is_not_chunked():
    """Issue 23 item 3 / issue 26: ResNet-50's batch-512 training step holds an L2 chain with a
    UB-fused ConvTranspose (the input gradient) reading the Cast of a (512, 256, 1, 1) master
    weight. `weight_inputs` of the fused node names the weights of its inner nodes, so the
    chain stays batch-separable and the lowering's chunks share that weight whole (the pass
    refused the split before, the weights inside UB-fused nodes unseen)."""
    from ascendsim.api import simulate
    from ascendsim.ir.registry import weight_inputs
    from ascendsim.lower.composite import chunk_values

    g = Graph("convt_weight")
    dy = g.input("dy", (8, 8, 6, 6), "float16")
    master = g.input("w", (8, 4, 1, 1), "float32")       # leads with 8, the batch
    y = g.relu(g.conv_transpose(dy, g.cast(master, to="float16")))
    out = g.relu(g.add(y, y))
    g.output(out)
    cast, convt, relu, _, _ = g.nodes
    assert batch_separable(g, convt) == 8                  # the slot tells W apart
    fuse_nodes(g, [convt, relu], {"fusion": "UB", "pattern": "Conv2DBackpropEltwiseFusion",
                                  "display_type": "ConvTransposeRelu"})
    ub = next(n for n in g.nodes if n.subgraph is not None)
    assert weight_inputs(ub) == {cast.outputs[0]}
    assert batch_separable(g, ub) == 8
    assert [batch_separable(g, n) for n in g.nodes if n.op_type in ("Add", "Relu")] == [8, 8]
    chain = [n for n in g.nodes if n is not cast]
    fuse_nodes(g, chain, {"fusion": "L2", "pattern": "L2BatchSplitFusion",
                          "display_type": "L2_chain", "batch_split": 2, "chunk_batch": 4,
                          "l2_values": ()})
    l2 = next(n for n in g.nodes if n.attrs.get("fusion") == "L2")
    values = chunk_values(l2, 2, g.constants)
    assert values[cast.outputs[0]].shape == (8, 4, 1, 1)   # the weight, whole
    assert values["dy"].shape == (4, 8, 6, 6)              # the activation, chunked
    assert values[out.name].shape == (4, 4, 6, 6)
    assert simulate(g, fusion=False).cycles > 0


def test_resnet50_training_step_at_batch_512_optimizes_and_chunks():
    """Issue 23 item 3 on the real graph, shapes only: the passes (with their chain
    simulations) on ResNet-50's batch-512 step, then the lowering's chunk shapes of every
    batch split kept."""
    from ascendsim.lower.composite import chunk_values

    step = asim.models.resnet50_training_step(batch=512)
    for chip in ("ascend910", "ascend910b"):
        opt = asim.optimize(step, chip).graph
        for node in opt.nodes:
            if node.attrs.get("fusion") == "L2" and node.attrs.get("batch_split", 1) > 1:
                chunk_values(node, node.attrs["batch_split"], opt.constants)
