"""Helpers of the fusion tests: run one fusion stage, compare fused and unfused values."""

from __future__ import annotations

import numpy as np

from ascendsim.api import DEFAULT_CHIP, cost_model
from ascendsim.execute import execute
from ascendsim.hw import get_chip
from ascendsim.ir.graph import Graph
from ascendsim.passes.base import PassContext
from ascendsim.passes.graph_kernel import BasicOpsFusion, CompositeOpsFusion
from ascendsim.passes.manager import OptimizeResult, PassManager, Stage
from ascendsim.passes.ub_fusion import UB_PASSES

RTOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3}
ATOL = {"float32": 1e-6, "float64": 1e-12, "float16": 2e-3}


def context(chip=None, **options) -> PassContext:
    """A pass context as the API layer builds it: the chip (default ascend910), its cost model
    (lowering + engine, block detail, sink), and pass options."""
    resolved = get_chip(chip or DEFAULT_CHIP)
    return PassContext(chip=resolved, cost_model=cost_model(resolved), options=options)


def ub_stage(g: Graph, rules: str = "seed", chip=None, passes=UB_PASSES) -> OptimizeResult:
    """UB fusion only (verifier on after every pass)."""
    ctx = context(chip, ub_rules=rules)
    return PassManager([Stage("ub_fusion", "after UB fusion", tuple(passes))], ctx=ctx).run(g)


def gk_stages(g: Graph, dump_dir=None, **options) -> OptimizeResult:
    """Graph-kernel basic then composite fusion, dumps on request."""
    stages = [Stage("graph_kernel_basic", "after graph-kernel basic fusion", (BasicOpsFusion,)),
              Stage("graph_kernel_composite", "after graph-kernel composite fusion",
                    (CompositeOpsFusion,))]
    return PassManager(stages, ctx=context(**options), dump_dir=dump_dir).run(g)


def fused(g: Graph) -> list:
    return [n for n in g.nodes if n.op_type == "FusedOp"]


def inner_types(node) -> list[str]:
    return [n.op_type for n in node.subgraph.nodes]


def feeds(g: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name in g.inputs:
        v = g.values[name]
        out[name] = rng.standard_normal(v.shape).astype(v.dtype)
    return out


def assert_same_values(before: Graph, after: Graph, seed: int = 0) -> None:
    """Fused outputs equal unfused outputs within the dtype's tolerance."""
    x = feeds(before, seed)
    ref = execute(before, x)
    got = execute(after, x)
    assert set(ref) == set(got)
    for k in ref:
        dt = ref[k].dtype.name
        np.testing.assert_allclose(got[k].astype(np.float64), ref[k].astype(np.float64),
                                   rtol=RTOL.get(dt, 0), atol=ATOL.get(dt, 0), err_msg=k)
