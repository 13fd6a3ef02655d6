"""Training-graph UB fusions (passes/training_fusion.py): Conv + BNTrainingReduce and
BNTrainingUpdate + element-wise ops fuse into one task each, the fused values equal the
unfused ones exactly (the fused node runs the same kernels), the fused step is faster, and
each pass is switched off by name in a fusion-switch file."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import compare, optimize, simulate


def _conv_bn(residual: bool) -> asim.Graph:
    g = asim.Graph("conv_bn")
    x = g.input("x", (4, 16, 14, 14))
    w = g.weight("w", (32, 16, 3, 3))
    y = g.conv(x, w, pads=[1, 1, 1, 1], name="conv")
    s, q = g.bn_training_reduce(y, name="reduce")
    params = [g.const(np.full(32, v, np.float32)) for v in (1.5, 0.1, 0.0, 1.0)]
    out = g.bn_training_update(y, s, q, *params, name="update")
    if residual:
        act = g.relu(g.add(out[0], g.input("shortcut", (4, 32, 14, 14)), name="add"),
                     name="relu")
    else:
        act = g.relu(out[0], name="relu")
    g.output(act, *out[1:])
    return g


@pytest.mark.parametrize("chip", ["ascend910", "ascend910b"])
@pytest.mark.parametrize("residual,update_type", [(False, "BNTrainingUpdateRelu"),
                                                  (True, "BNTrainingUpdateAddRelu")])
def test_training_fusions_keep_values_and_save_time(chip, residual, update_type):
    cmp = compare(_conv_bn(residual), chip)
    types = [t.op_type for t in cmp.fused.trace.tasks]
    assert "ConvBNTrainingReduce" in types and update_type in types, types
    assert "BNTrainingReduce" not in types and "Relu" not in types
    assert cmp.outputs_equal and cmp.max_abs_diff == 0.0
    assert cmp.speedup > 1.0


def test_passes_log_their_cann_names_and_counts():
    res = optimize(_conv_bn(True), "ascend910")
    records = {r.name: r.result for r in res.log.records}
    conv = records["TbeConvBnreduceFusionPass"].patterns["TbeConvBnreduceFusion"]
    upd = records["TbeBnupdateEltwiseEltwiseFusionPass"].patterns[
        "TbeBnupdateEltwiseEltwiseFusion"]
    assert (conv.matched, conv.effected) == (1, 1)
    assert (upd.matched, upd.effected) == (1, 1)
    assert records["TbeBnupdateEltwiseFusionPass"].group == "UBFusion"


def test_fusion_switch_turns_each_pass_off():
    g = _conv_bn(False)
    switch = {"Switch": {"UBFusion": {"TbeConvBnreduceFusionPass": "off"}}}
    types = [t.op_type for t in simulate(g, "ascend910", fusion=switch).trace.tasks]
    assert "ConvBNTrainingReduce" not in types and "BNTrainingReduce" in types
    assert "BNTrainingUpdateRelu" in types
    switch = {"Switch": {"UBFusion": {"TbeBnupdateEltwiseFusionPass": "off"}}}
    types = [t.op_type for t in simulate(g, "ascend910", fusion=switch).trace.tasks]
    assert "BNTrainingUpdateRelu" not in types and "ConvBNTrainingReduce" in types


def test_update_output_read_elsewhere_is_written_too():
    """y read by the ReLU and by a ReLU-gradient mask (as an autodiff graph does) still fuses;
    y becomes an output of the fused node."""
    g = _conv_bn(False)
    update = next(n for n in g.nodes if n.name == "update")
    mask = g.greater(update.outputs[0], 0.0, name="mask")
    g.output(mask)
    fused = optimize(g, "ascend910").graph
    node = next(n for n in fused.nodes if n.attrs.get("display_type") == "BNTrainingUpdateRelu")
    assert update.outputs[0] in node.outputs
    assert compare(g, "ascend910").outputs_equal


def _dense_dropout_residual() -> asim.Graph:
    g = asim.Graph("dense_dropout")
    x = g.input("x", (128, 256), "float16")
    y = g.matmul(x, g.weight("w", (256, 256), "float16"), name="mm")
    mask = g.drop_out_gen_mask(shape=[128, 256], keep_prob=0.9, seed=1)
    d = g.drop_out_do_mask(y, mask, np.float16(0.9), name="domask")
    g.output(g.add(d, g.input("residual", (128, 256), "float16"), name="add"))
    return g


def test_matmul_dropout_add_fuses_on_coupled_chips_only():
    g = _dense_dropout_residual()
    cmp = compare(g, "ascend910")
    types = [t.op_type for t in cmp.fused.trace.tasks]
    assert "MatMulDropOutDoMaskAdd" in types and "DropOutDoMask" not in types, types
    assert cmp.outputs_equal and cmp.max_abs_diff == 0.0
    res = optimize(g, "ascend910b")
    assert not any(n.op_type == "FusedOp" for n in res.graph.nodes)
    why = [f.why for r in res.log.records for f in r.result.refusals
           if r.name == "MatmulDropoutDoMaskAddFusionPass"]
    assert why and "splits cube and vector" in why[0]
