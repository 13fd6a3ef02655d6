"""End to end: unfused vs fused simulation of the seeds' nets, MatMul+Bias+ReLU, Conv+BN+ReLU
and a BERT-large encoder layer. Full-size shapes (shape-only) show fewer launches, less DDR
traffic and less time; small sizes show equal outputs. `pytest -s` prints the tables."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import context

from ascendsim import models
from ascendsim.api import compare, simulate
from ascendsim.ir.graph import Graph
from ascendsim.passes.manager import PassManager, default_stages
from ascendsim.report.compare import Comparison, traffic_bytes

#: MindSpore runs graph-kernel fusion before buffer (UB) fusion
ORDER = ("ge", "graph_fusion", "graph_kernel_basic", "graph_kernel_composite", "ub_fusion",
         "l2_fusion")

CASES = [
    # name, full-size kwargs (shape only), small kwargs (values), graph kernel on
    ("net_basic_fuse", {"shape": (4096, 4096)}, {}, True),
    ("net_composite_fuse", {"shape": (4096, 4096)}, {}, True),
    ("matmul_bias_relu", {"m": 8192, "k": 1024, "n": 4096},
     {"m": 32, "k": 48, "n": 64, "dtype": "float32"}, False),
    ("conv_bn_relu", {"batch": 64}, {"cin": 16, "cout": 16, "h": 12, "w": 12,
                                     "dtype": "float32"}, False),
    ("bert_encoder_layer", {}, {"batch": 2, "seq_len": 16, "hidden": 64, "heads": 4,
                                "dtype": "float32"}, True),
]


def fuse(g, graph_kernel: bool, l2_fusion: bool = False):
    """The default pipeline in MindSpore's order. L2 fusion is off unless asked: its batch
    split trades launches for DDR traffic (see test_l2_batch_split_on_top)."""
    stages = sorted(default_stages(), key=lambda s: ORDER.index(s.name))
    return PassManager(stages, ctx=context(), enabled_options={"graph_kernel": graph_kernel,
                                                "l2_fusion": l2_fusion}).run(g)


def _inputs(g, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for name in g.inputs:
        v = g.values[name]
        if v.dtype.startswith("float"):
            out[name] = rng.standard_normal(v.shape).astype(v.dtype)
        else:
            out[name] = np.zeros(v.shape, v.dtype)
    return out


@pytest.mark.parametrize("name,big,small,gk", CASES, ids=[c[0] for c in CASES])
def test_fused_run_is_faster_with_less_ddr_traffic_and_fewer_launches(name, big, small, gk):
    g = models.get(name, **big)
    opt = fuse(g, gk)
    cmp = Comparison(simulate(g, fusion=False), simulate(opt.graph, fusion=False))
    print()
    print(cmp.table())
    a, b = cmp.unfused.trace, cmp.fused.trace
    assert len(b.tasks) < len(a.tasks)
    assert traffic_bytes(b, "DDR") < traffic_bytes(a, "DDR")
    assert cmp.fused.time_us < cmp.unfused.time_us and cmp.speedup > 1.1


@pytest.mark.parametrize("name,big,small,gk", CASES, ids=[c[0] for c in CASES])
def test_fused_outputs_equal_unfused(name, big, small, gk):
    g = models.get(name, **small)
    opt = fuse(g, gk)
    assert any(n.op_type == "FusedOp" for n in opt.graph.nodes)
    x = _inputs(g)
    cmp = Comparison(simulate(g, inputs=x, fusion=False),
                     simulate(opt.graph, inputs=x, fusion=False))
    print()
    print(cmp.table())
    assert cmp.outputs_equal, cmp.max_abs_diff
    assert len(cmp.fused.trace.tasks) < len(cmp.unfused.trace.tasks)


def _conv_chain(batch: int = 128, c: int = 64, hw: int = 56) -> Graph:
    g = Graph("ConvReluChain")
    v = g.input("x", (batch, c, hw, hw), "float16")
    for i in range(3):
        v = g.relu(g.conv(v, g.weight(f"w{i}", (c, c, 1, 1), "float16", seed=i)))
    g.output(v)
    return g


def test_l2_batch_split_on_top_of_ub_fusion():
    """Three 1x1 Conv+ReLU at batch 128 (49 MiB intermediates, over L2): run as batch chunks
    the chain has more launches but less DDR traffic and takes less time than with UB fusion
    alone."""
    g = _conv_chain()
    base = simulate(fuse(g, False).graph, fusion=False)
    opt = fuse(g, False, l2_fusion=True)
    assert [n.attrs.get("fusion") for n in opt.graph.nodes] == ["L2"]
    cmp = Comparison(base, simulate(opt.graph, fusion=False))
    print()
    print("UB fusion (unfused column) vs UB + L2 batch split (fused column)")
    print(cmp.table())
    assert traffic_bytes(cmp.fused.trace, "DDR") < traffic_bytes(base.trace, "DDR")
    assert cmp.fused.time_us < base.time_us
    assert len(cmp.fused.trace.tasks) > len(base.trace.tasks)


def test_l2_batch_split_refused_where_the_simulation_says_no():
    """BERT-large layer: its matmul chains overflow L2, but smaller GEMMs in chunks are less
    efficient than the HBM traffic saved; the pass refuses with the simulated times."""
    opt = fuse(models.bert_encoder_layer(), True, l2_fusion=True)
    m, e = opt.log.counts()["L2BatchSplitFusionPass"]
    assert m >= 1 and e == 0
    assert "not faster when simulated" in opt.log.explain()


def test_seed_composite_counts_through_the_pipeline():
    """With graph fusion (PowToMul) off, as in MindSpore: one composite in the end."""
    g = models.net_composite_fuse()
    stages = [s for s in sorted(default_stages(), key=lambda s: ORDER.index(s.name))
              if s.name in ("graph_kernel_basic", "graph_kernel_composite")]
    opt = PassManager(stages, ctx=context(), enabled_options={"graph_kernel": True}).run(g)
    assert opt.node_counts == {"initial": 3, "graph_kernel_basic": 2,
                               "graph_kernel_composite": 1}


def test_public_compare_uses_ub_fusion():
    cmp = compare(models.matmul_bias_relu(m=1024, k=1024, n=1024))
    fused_types = {t.op_type for t in cmp.fused.trace.tasks}
    assert "MatMulRelu" in fused_types
    assert cmp.speedup > 1.0
