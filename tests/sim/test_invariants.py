"""Invariants on every simulated model: buffers, pipes, roofline, determinism."""

import pytest

import ascendsim as asim
from ascendsim.api import simulate

MODELS = [
    ("net_basic_fuse", {}),
    ("net_composite_fuse", {}),
    ("matmul_bias_relu", {}),
    ("conv_bn_relu", {}),
    ("elementwise_chain", {}),
    ("resnet50", {"batch": 1}),
    ("bert", {"batch": 1, "seq_len": 128, "layers": 1, "hidden": 256, "heads": 4,
              "ffn": 1024}),
]


def _graph(name, kw):
    try:
        return asim.models.get(name, **kw)
    except TypeError:
        return asim.models.get(name)


@pytest.mark.parametrize("name,kw", MODELS, ids=[m[0] for m in MODELS])
@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_invariants_block(name, kw, fused, invariants):
    """Every built-in model, unfused and fused, keeps the invariants in block detail."""
    g = _graph(name, kw)
    res = simulate(g, "ascend910", fusion=True if fused else None)
    assert res.cycles > 0 and res.trace.tasks
    invariants(res)


@pytest.mark.parametrize("name,kw", MODELS[:5], ids=[m[0] for m in MODELS[:5]])
@pytest.mark.parametrize("chip", ["ascend910", "ascend910b", "ascend310"])
def test_invariants_tile_all_chips(name, kw, chip, invariants):
    """Tile detail (every instruction an event) keeps them too, on every built-in chip."""
    res = simulate(_graph(name, kw), chip, detail="tile", fusion=True)
    invariants(res)


@pytest.mark.parametrize("detail", ["block", "tile"])
def test_same_input_same_cycles_bit_for_bit(detail):
    """Two runs of the same graph give identical cycles, task records and intervals."""
    g = _graph("bert", MODELS[-1][1]) if detail == "block" else _graph("conv_bn_relu", {})
    a = simulate(g, detail=detail, fusion=False)
    b = simulate(g, detail=detail, fusion=False)
    assert a.cycles == b.cycles
    assert a.trace.tasks == b.trace.tasks
    assert a.trace.intervals == b.trace.intervals


def test_symmetric_groups_equal_per_core_processes(invariants):
    """One process set per group of identical cores gives the same cycles as one per core."""
    g = _graph("conv_bn_relu", {})
    a = simulate(g, detail="tile", symmetric=True, fusion=False)
    b = simulate(g, detail="tile", symmetric=False, fusion=False)
    assert a.cycles == b.cycles
    assert len(a.trace.intervals) == len(b.trace.intervals)
    invariants(b)


def test_l2_batch_split_chains_keep_the_invariants(invariants):
    """ResNet-50 at batch 32 with all fusions but the conv double-in one: the L2 fusion pass
    splits a layer1 bottleneck chain (conv, ReLU, conv, ReLU, conv, Add + ReLU) into batch
    chunks (tasks `<op>#<chunk>`); the invariants hold and the split run is faster than
    the same optimisation without L2 fusion, or close to it (the pass decides on the chain
    simulated alone; in the graph, with the simulated L2, the unsplit chain's intermediates
    partly stay in L2 too). At batch 16 no split pays off since a chunk's own input misses
    and output lines take the room below its intermediates as it reads them (sim/l2cache.py,
    LRU's cliff). With TbeConvDoubleInFusionPass on (the 910's default) the Add and ReLU ride
    in the conv's epilogue and no split pays off."""
    g = asim.models.get("resnet50", batch=32)
    no_double_in = {"Switch": {"UBFusion": {"TbeConvDoubleInFusionPass": "off"}}}
    res = simulate(g, fusion=no_double_in)
    chunks = [t for t in res.trace.tasks if "#" in t.op_name]
    batches = {int(t.input_shapes[0].split(",")[0]) for t in chunks if t.op_type != "TransData"}
    assert chunks and batches and all(b < 32 and 32 % b == 0 for b in batches)
    invariants(res)
    unsplit = simulate(g, fusion={"fusion_switch": no_double_in, "l2_fusion": False})
    assert res.cycles < 1.05 * unsplit.cycles
