"""The memory plan (ascendsim.lower.memory): peak live device memory by category, with GE's
reuse, the lowering's padded sizes, and the capacity check in `simulate`."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import lower, padded_bytes
from ascendsim.lower.formats import NC1HWC0, NZ
from ascendsim.lower.memory import CATEGORIES, memory_plan

F32 = 4


def _plan(g: asim.Graph, chip: str = "ascend910"):
    return memory_plan(g, lower(g, chip))


def test_chain_peak_is_two_adjacent_tensors_plus_weights_and_io():
    """x (8x8 f32, 256 B) -> relu -> tanh -> sigmoid -> abs -> add(c): at each task two
    activations of 256 B are live, so peak = 2 x 256 + weights (c, 256 B) + inputs/outputs
    (x and the output, 512 B) = 1280 B; without reuse every tensor has its own block: 1792 B."""
    g = asim.Graph("chain")
    x = g.input("x", (8, 8))
    r = g.abs(g.sigmoid(g.tanh(g.relu(x))))
    g.output(g.add(r, g.const(np.ones((8, 8), np.float32))))
    plan = _plan(g)
    t = 8 * 8 * F32
    assert plan.by_category == {"weights": t, "activations": 2 * t, "workspace": 0,
                                "inputs_outputs": 2 * t}
    assert plan.peak_bytes == 5 * t == 1280
    assert plan.no_reuse_bytes == 7 * t == 1792
    assert plan.peak_bytes < plan.no_reuse_bytes      # reuse lowers the peak
    assert set(CATEGORIES) == set(plan.by_category)


def test_peak_is_at_the_two_largest_adjacent_tensors():
    """x (4x8 f32) -> concat x4 (16x8, 512 B) -> relu (512 B) -> reduce (1x8, 32 B) -> exp:
    the peak is at relu, where the concat output and the relu output are both live."""
    g = asim.Graph("sizes")
    x = g.input("x", (4, 8))
    a = g.concat(x, x, x, x, axis=0)
    b = g.relu(a, name="relu")
    c = g.reduce_sum(b, g.const(np.array([0], np.int64)), keepdims=1)
    g.output(g.exp(c))
    plan = _plan(g)
    assert plan.peak_task == "relu"
    assert plan.by_category["activations"] == 2 * 16 * 8 * F32
    io = 4 * 8 * F32 + 8 * F32                         # x and the (1, 8) output
    assert plan.by_category["inputs_outputs"] == io
    assert plan.by_category["weights"] == 8            # the int64 axes constant
    assert plan.peak_bytes == 2 * 512 + io + 8
    assert [b for _, b in plan.largest[:2]] == [512, 512]


def test_reuse_keeps_a_long_chain_flat():
    """A chain of 20 ops: with reuse the peak stays at two activations; without reuse it grows
    with the chain."""
    g = asim.Graph("long")
    v = g.input("x", (32, 32))
    for k in range(20):
        v = g.tanh(v) if k % 2 else g.relu(v)
    g.output(v)
    plan = _plan(g)
    t = 32 * 32 * F32
    assert plan.peak_bytes == 4 * t                    # x, output, two live activations
    assert plan.no_reuse_bytes == 21 * t


def test_views_share_their_input_block():
    """A reshape launches no task and owns no memory: its output is its input's block."""
    g = asim.Graph("view")
    x = g.input("x", (8, 8))
    r = g.relu(x)
    v = g.reshape(r, g.const(np.array([64], np.int64)))
    g.output(g.exp(v))
    plan = _plan(g)
    names = [n for n, _ in plan.largest]
    assert not any(n.startswith("Reshape") for n in names)
    assert plan.peak_bytes == 3 * 64 * F32          # x, relu output, exp output; no copy


def test_padded_formats_use_the_lowering_sizes():
    """A 3-channel fp16 input converted to NC1HWC0 occupies C padded to 16 (the lowering's
    `padded_bytes`), not its 3 channels."""
    g = asim.Graph("pad")
    x = g.input("x", (1, 3, 8, 8), "float16")
    y = g.conv(x, g.weight("w", (16, 3, 3, 3), "float16"), pads=[1, 1, 1, 1], name="conv")
    g.output(g.relu(y))
    prog = lower(g, "ascend910")
    plan = memory_plan(g, prog)
    sizes = dict(plan.largest)
    conv = next(t for t in prog.tasks if t.op_name == "conv")
    x5d = conv.inputs[0]
    assert x5d.name != "x" and conv.input_formats[0] == NC1HWC0
    assert sizes[x5d.name] == padded_bytes(x5d, NC1HWC0) == 1 * 16 * 8 * 8 * 2
    assert sizes["x"] == 1 * 3 * 8 * 8 * 2                          # the graph input, ND
    assert sizes["w"] == 16 * 3 * 3 * 3 * 2                         # weights: ND bytes


def test_duplicate_constants_count_once():
    """Two constants with the same contents are one weight (ConstantFuseSamePass merges them
    in GE); different contents are two."""
    def graph(second: float) -> asim.Graph:
        g = asim.Graph("dups")
        x = g.input("x", (16, 16))
        a = g.add(x, g.const(np.full((16, 16), 1.0, np.float32)))
        g.output(g.mul(a, g.const(np.full((16, 16), second, np.float32))))
        return g

    w = 16 * 16 * F32
    assert _plan(graph(1.0)).by_category["weights"] == w
    assert _plan(graph(2.0)).by_category["weights"] == 2 * w


def test_mix_kernel_workspace_on_split_chips():
    """On the 910B a MatMul with a fused element-wise tail is a mix kernel: the cube result
    waits in a GM workspace (the MatMul output's bytes, ND on the 910B) for the AIV phase."""
    g = asim.Graph("mix")
    a = g.input("a", (64, 64), "float16")
    g.output(g.relu(g.matmul(a, g.weight("w", (64, 48), "float16"))))
    opt = asim.optimize(g, "ascend910b").graph
    prog = lower(opt, "ascend910b")
    mix = [t for t in prog.tasks if t.task_type == "MIX_AIC"]
    assert len(mix) == 1
    assert mix[0].workspace_bytes == padded_bytes(mix[0].outputs[0], NZ) == 64 * 48 * 2
    plan = memory_plan(opt, prog)
    assert plan.by_category["workspace"] == 64 * 48 * 2
    assert (f"{mix[0].op_name} (workspace)", 64 * 48 * 2) in plan.largest
    # ND in and out on the 910B (cube_tiling.takes_nd): no TransData task around the kernel
    assert [t.task_type for t in prog.tasks] == ["MIX_AIC"]


def test_capacity_error_names_peak_capacity_and_largest_tensors():
    """A MatMul of two 2^16 x 2^16 fp16 operands (8 GiB each) and its output does not fit the
    910's 32 GiB with the 16-padded copies; the error names the sizes and the tensors."""
    g = asim.Graph("huge")
    a = g.input("a", (1 << 16, 1 << 16), "float16")
    b = g.input("b", (1 << 16, 1 << 16), "float16")
    g.output(g.matmul(a, b, name="mm"))
    with pytest.raises(asim.CapacityError) as err:
        asim.simulate(g, "ascend910")
    msg = str(err.value)
    plan_peak = _plan(g).peak_bytes
    assert plan_peak > get_chip("ascend910").hbm_bytes
    assert f"{plan_peak:,} B" in msg and "34,359,738,368 B" in msg and "ascend910" in msg
    assert "check_capacity=False" in msg
    top3 = [n for n, _ in _plan(g).largest[:3]]
    assert all(f"{n} " in msg for n in top3)
    assert isinstance(err.value, asim.AscendSimError)


def test_shape_only_tensor_beyond_hbm_is_rejected_before_simulating():
    """Issue 14 Found 4: a tensor larger than the HBM simulated anyway. A (2^18, 2^18) fp16
    input (128 GiB, under the builder's physical ceiling) is rejected by the capacity check,
    shapes only, before the engine runs."""
    g = asim.Graph("big")
    g.output(g.relu(g.input("x", (1 << 18, 1 << 18), "float16")))
    with pytest.raises(asim.CapacityError, match=r"exceeds the 32.00 GiB .* largest tensors: "
                                                 r"(Relu_0|x) 128.00 GiB"):
        asim.simulate(g, fusion=False)


def test_check_capacity_false_simulates_anyway():
    """Past a (what-if) 4 KiB HBM the run raises; check_capacity=False simulates and still
    reports the plan."""
    chip = get_chip("ascend910").replace(hbm_bytes=4096)
    g = asim.Graph("small")
    g.output(g.relu(g.input("x", (32, 32))))          # 4 KiB in, 4 KiB out
    with pytest.raises(asim.CapacityError, match="exceeds the 4.00 KiB"):
        asim.simulate(g, chip, fusion=False)
    res = asim.simulate(g, chip, fusion=False, check_capacity=False)
    assert res.cycles > 0 and res.memory.peak_bytes == 8192 > chip.hbm_bytes


@pytest.mark.parametrize("detail", ["block", "tile"])
@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("values", [True, False], ids=["values", "shape-only"])
def test_result_memory_on_every_run(detail, fusion, values):
    """Every run reports its plan: fused or not, block or tile, with values or shapes only."""
    g = asim.models.get("conv_bn_relu")
    inputs = asim.api.seeded_inputs(g) if values else None
    res = asim.simulate(g, detail=detail, fusion=fusion, inputs=inputs)
    mem = res.memory
    assert isinstance(mem, asim.MemoryPlan)
    assert mem.peak_bytes == sum(mem.by_category.values()) > 0
    assert mem.by_category["weights"] > 0 and mem.by_category["inputs_outputs"] > 0
    assert mem.largest and mem.largest[0][1] == max(b for _, b in mem.largest)
    assert mem.peak_bytes <= mem.no_reuse_bytes


def test_compare_reports_memory_of_both_runs():
    cmp = asim.compare(asim.models.get("net_basic_fuse"))
    assert cmp.unfused.memory is not None and cmp.fused.memory is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "bert_base", "bert_large"])
def test_default_models_fit_the_default_chip(name):
    """The inference models at their default sizes fit the 910's HBM, fused as simulate runs
    them (training steps: bench/memory_plan.py, BENCHMARKS.md, too slow for the suite)."""
    chip = get_chip("ascend910")
    g = asim.optimize(asim.models.get(name), chip).graph
    plan = memory_plan(g, lower(g, chip))
    assert 0 < plan.peak_bytes <= chip.hbm_bytes
    assert plan.by_category["weights"] > 0 and plan.by_category["activations"] > 0


def test_seed_models_fit_every_chip():
    """The small built-in models fit every built-in chip at their default sizes."""
    for name in ("net_basic_fuse", "net_composite_fuse", "matmul_bias_relu", "conv_bn_relu",
                 "elementwise_chain"):
        g = asim.models.get(name)
        for chip in asim.chips():
            plan = memory_plan(g, lower(g, chip))
            assert plan.peak_bytes <= get_chip(chip).hbm_bytes, (name, chip)
