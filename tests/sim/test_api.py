"""The public entry points (simulate, compare, Result) and the shared-bandwidth Fabric."""

import numpy as np
import pytest
import simpy

import ascendsim as asim
from ascendsim.api import Result, compare, simulate
from ascendsim.errors import ConfigError
from ascendsim.execute import execute
from ascendsim.ir.tensor import LazyTensor
from ascendsim.sim import Fabric


def test_simulate_with_inputs_computes_values_and_records_tasks(rng):
    g = asim.models.get("matmul_bias_relu")
    feeds = {n: rng.standard_normal([int(d) for d in g.values[n].shape]).astype(
        g.values[n].dtype) for n in g.inputs}
    res = simulate(g, "ascend910", inputs=feeds, fusion=False)
    assert isinstance(res, Result)
    want = execute(g, feeds)
    for k, v in want.items():
        np.testing.assert_array_equal(res.outputs[k], v)
    assert res.cycles == res.trace.total_cycles > 0
    assert res.time_us == pytest.approx(res.cycles / 1e3)      # 1 GHz
    assert res.events > 0 and res.pass_log is None
    mm = next(t for t in res.trace.tasks if t.task_type == "AI_CORE" and "M" in t.pipe_cycles)
    assert mm.flops > 0 and mm.block_dim >= 1 and mm.roofline_cycles > 0
    assert mm.input_formats[0] == "FRACTAL_NZ"
    assert ("L2", "write") in mm.traffic


def test_shape_only_simulation_never_materialises_lazy_weights():
    g = asim.models.get("resnet50", batch=1)
    lazy = [c for c in g.constants.values() if isinstance(c, LazyTensor)]
    assert lazy
    simulate(g, fusion=False)
    assert not any(c._cache for c in lazy)


def test_optimize_dict_and_compare():
    g = asim.models.get("conv_bn_relu")
    fused = simulate(g, fusion=True)
    assert fused.pass_log is not None
    assert any(t.fused_ops for t in fused.trace.tasks)
    cmp = compare(g)
    assert cmp.unfused.cycles == simulate(g, fusion=False).cycles
    assert cmp.fused.cycles == fused.cycles
    assert cmp.speedup > 1.0
    with pytest.raises(ConfigError, match="fusion switch file 'all' does not exist"):
        simulate(g, fusion="all")
    with pytest.raises(ConfigError, match=r"fusion=3: expected True, False"):
        simulate(g, fusion=3)


def _fabric_run(flows, l2=4096.0, hbm=1148.0):
    env = simpy.Environment()
    fab = Fabric(env, l2, hbm)
    ends = {}

    def go(name, nbytes, cap, miss, weight):
        yield fab.transfer(nbytes, cap, miss, weight)
        ends[name] = env.now
    for f in flows:
        env.process(go(*f))
    env.run()
    return ends, fab


def test_fabric_32_cores_share_hbm_instead_of_each_getting_it():
    """32 cores each asking 128 B/cycle from HBM get 1148/32 each: the transfer takes 32x as
    long as alone (not 1x); alone it runs at its path cap."""
    alone, _ = _fabric_run([("a", 128 * 1000, 128.0, 1.0, 1)])
    assert alone["a"] == 1000
    many, fab = _fabric_run([("a", 128 * 1000, 128.0, 1.0, 32)])
    assert many["a"] == pytest.approx(32 * 128 * 1000 / 1148, abs=2)
    assert fab.peak_hbm == pytest.approx(1148.0)


def test_fabric_rates_are_recomputed_when_a_flow_ends():
    """Two flows share L2 (1000 B/cycle): 500 each until the short one ends, then the long
    one gets all 1000 (max-min fair, work conserving)."""
    ends, _ = _fabric_run([("short", 500 * 10, 10_000.0, 0.0, 1),
                           ("long", 500 * 10 + 1000 * 10, 10_000.0, 0.0, 1)], l2=1000.0)
    assert ends["short"] == 10
    assert ends["long"] == 20


def test_ai_cpu_tasks_use_the_ai_cpu_lane():
    g = asim.Graph("p")
    x = g.input("x", (4096,), "float32")
    g.output(g.pow(x, 3.0, name="p"))
    res = simulate(g, fusion=False)
    ivs = [iv for iv in res.trace.intervals if iv.op == "p"]
    assert ivs and all(iv.engine == "aicpu" and iv.pipe == "AICPU" for iv in ivs)
    # launch, reads, compute, writes one after the other (ascendsim.sim.aicpu)
    assert [iv.kind for iv in ivs] == ["launch", "read", "compute", "write"]
    assert res.trace.task("p").pipe_cycles["AICPU"] == sum(iv.duration for iv in ivs)


def test_api_and_cli_give_the_same_figure(capsys):
    """One default: simulate(graph) fuses as `ascendsim run` does (same tasks, same time)."""
    from ascendsim.cli import main

    res = simulate(asim.models.resnet50(batch=8))
    assert main(["run", "resnet50", "--batch", "8", "--no-progress"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert f"{res.time_us:,.2f} us" in first and f"{len(res.trace.tasks)} tasks" in first
    assert res.fusion == "optimised and fused" and "optimised and fused" in first
    unfused = simulate(asim.models.resnet50(batch=8), fusion=False)
    assert len(unfused.trace.tasks) > len(res.trace.tasks) and unfused.fusion == "as given"


def test_comparison_counts_ai_core_tasks_of_split_chips():
    """On the 910B, tasks run as AI_VECTOR_CORE / MIX_AIC; all of them are AI Core tasks."""
    cmp = compare(asim.models.conv_bn_relu(), "ascend910b")
    tab = cmp.table()
    unfused, fused = tab.row("AI Core tasks")[1:3]
    assert unfused == len(cmp.unfused.trace.tasks) and fused == len(cmp.fused.trace.tasks)
    assert fused >= 1 and unfused > fused
    assert {t.task_type for t in cmp.unfused.trace.tasks} - {"AI_CORE"}   # not only AI_CORE


def test_fusion_options_that_contradict_the_chip_are_refused():
    g = asim.models.conv_bn_relu()
    with pytest.raises(ConfigError, match="ascend310.*ascend910b"):
        simulate(g, "ascend910b", fusion={"chip": "ascend310"})
    with pytest.raises(ConfigError, match="ascend310"):
        asim.compare(g, "ascend910b", fusion={"chip": "ascend310"})
    same = simulate(g, "ascend910b", fusion={"chip": "ascend910b"})   # no contradiction
    assert same.cycles == simulate(g, "ascend910b").cycles


def test_compare_checks_values_on_small_graphs_and_says_so_otherwise():
    small = compare(asim.models.conv_bn_relu())
    assert small.outputs_equal is True
    big = compare(asim.models.resnet50(batch=8))       # 8*3*224*224 inputs: over the limit
    assert big.outputs_equal is None
    assert big.table().row("outputs equal")[1] == "not checked"
