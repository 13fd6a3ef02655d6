"""TbeConvDoubleInFusionPass (passes/conv_double_in_fusion.py): Conv2D + the residual Add + ReLU
become one conv kernel on the product lines CANN ships the pass for (910, 310P, 310), not on
the Atlas A2; the fused values equal the unfused ones exactly, the fused run is faster than the
same graph with the pass switched off, and shapes outside the pattern stay unfused."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import compare, optimize, simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip

OFF = {"Switch": {"UBFusion": {"TbeConvDoubleInFusionPass": "off"}}}


def _bottleneck(shortcut_shape=(2, 32, 14, 14), relu_readers: int = 1) -> asim.Graph:
    """conv -> Add(conv, shortcut) -> Relu, the end of a ResNet bottleneck after the BN fold."""
    g = asim.Graph("bottleneck_tail")
    x = g.input("x", (2, 16, 14, 14))
    w = g.weight("w", (32, 16, 1, 1))
    y = g.conv(x, w, name="conv")
    s = g.add(y, g.input("shortcut", shortcut_shape), name="add")
    r = g.relu(s, name="relu")
    outs = [r] + [g.neg(r, name=f"after_{i}") for i in range(relu_readers - 1)]
    g.output(*outs)
    return g


def _types(res) -> list[str]:
    return [t.op_type for t in res.trace.tasks]


@pytest.mark.parametrize("chip", ["ascend910", "ascend310p", "ascend310"])
def test_conv_add_relu_is_one_kernel_with_the_same_values(chip):
    cmp = compare(_bottleneck(), chip)
    types = _types(cmp.fused)
    assert types.count("ConvAddRelu") == 1, types
    assert "Add" not in types and "AddRelu" not in types and "Relu" not in types
    assert cmp.outputs_equal and cmp.max_abs_diff == 0.0


@pytest.mark.parametrize("chip", ["ascend910", "ascend310p"])
def test_the_fused_kernel_beats_the_conv_and_a_separate_add_relu(chip):
    # switched off, the Add and ReLU fuse on their own (TbeEltwiseFusionPass): one more task
    # that reads the conv output and the shortcut from GM and writes the sum
    on, off = simulate(_bottleneck(), chip), simulate(_bottleneck(), chip, fusion=OFF)
    assert "AddRelu" in _types(off) and "ConvAddRelu" not in _types(off)
    assert on.cycles < off.cycles


@pytest.mark.parametrize("chip", ["ascend910b", "ascend910b4", "ascend910c"])
def test_not_run_on_atlas_a2_and_a3_and_the_log_says_why(chip):
    res = optimize(_bottleneck(), chip)
    rec = {r.name: r.result for r in res.log.records}["TbeConvDoubleInFusionPass"]
    assert rec.patterns == {} or rec.patterns["TbeConvDoubleInFusion"].effected == 0
    assert any("not run on" in n and get_chip(chip).product_line in n for n in rec.notes)
    assert "ConvAddRelu" not in _types(simulate(_bottleneck(), chip))


def test_a_broadcast_operand_or_a_shared_sum_is_not_the_pattern():
    # a per-channel operand is a bias, not a second tensor of the conv output's shape
    bias = _types(simulate(_bottleneck(shortcut_shape=(1, 32, 1, 1)), "ascend910"))
    assert "ConvAddRelu" not in bias
    # the ReLU output is the group's last value, so other readers of it are fine
    shared = _types(simulate(_bottleneck(relu_readers=2), "ascend910"))
    assert "ConvAddRelu" in shared


def test_a_sum_read_outside_the_group_keeps_the_add_apart():
    g = asim.Graph("sum_escapes")
    x = g.input("x", (2, 16, 14, 14))
    y = g.conv(x, g.weight("w", (32, 16, 1, 1)), name="conv")
    s = g.add(y, g.input("shortcut", (2, 32, 14, 14)), name="add")
    g.output(g.relu(s, name="relu"), g.neg(s, name="other"))
    assert "ConvAddRelu" not in _types(simulate(g, "ascend910"))


def test_product_line_is_a_checked_chip_figure():
    chip = get_chip("ascend910")
    assert chip.product_line == "atlas_training"
    assert chip.source("product_line").startswith("S:")
    with pytest.raises(ConfigError, match="product_line must be one of"):
        chip.replace(product_line="atlas_9000")
    assert np.isclose(simulate(_bottleneck(), chip.replace(product_line="atlas_a2")).cycles,
                      simulate(_bottleneck(), "ascend910", fusion=OFF).cycles)


def test_a_tensor_held_in_a_device_format_is_refused_with_the_reason():
    g = asim.Graph("nz_shortcut")
    x = g.input("x", (2, 16, 14, 14))
    y = g.conv(x, g.weight("w", (32, 16, 1, 1)), name="conv")
    s = g.add(y, g.input("shortcut", (2, 32, 14, 14), layout="NC1HWC0"), name="add")
    g.output(g.relu(s, name="relu"))
    rec = {r.name: r.result for r in optimize(g, "ascend910").log.records}[
        "TbeConvDoubleInFusionPass"]
    assert any("'shortcut' is held as NC1HWC0" in r.why for r in rec.refusals)
