"""Op rows whose cann_op is an aclnn chain (Addmv): the graph is the chain the aclnn source
launches, its values are beta*self + alpha*(mat @ vec), and the row's kernel time counts
every kernel of the call (TransData included)."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.validation.corpus import check_row, load_corpus
from ascendsim.validation.validate import validate_rows
from ascendsim.validation.workloads import (
    build_op_graph,
    icache_start,
    measured_nodes,
    measures_whole_call,
)


def addmv_row(m: int, k: int, dtype: str = "float16", attrs: dict | None = None,
              inputs: list | None = None, **changes):
    ins = inputs if inputs is not None else [
        {"shape": [m], "dtype": dtype}, {"shape": [m, k], "dtype": dtype},
        {"shape": [k], "dtype": dtype}]
    w = {"kind": "op", "op": "MatMul", "cann_op": "Addmv", "inputs": ins,
         "attrs": attrs or {}}
    base = {"id": f"t-addmv-{m}x{k}-{dtype}", "chip": "ascend910b", "family": "gemm",
            "role": "validation", "workload": w, "timing": "msprof_kernel", "data": "cold",
            "metric": "time", "value": 10.0, "unit": "us", "source": "test"}
    return check_row({**base, **changes}, "test row")


def test_addmv_builds_the_aclnn_chain():
    g = build_op_graph(addmv_row(256, 128))
    assert [n.op_type for n in g.nodes] == ["Unsqueeze", "MatMul", "Squeeze", "Add"]
    assert g.node("op").op_type == "MatMul"
    assert g.values[g.outputs[0]].shape == (256,)


def test_alpha_and_beta_add_the_scalar_muls_of_the_source():
    g = build_op_graph(addmv_row(64, 32, attrs={"alpha": 2.0, "beta": 0.5}))
    assert [n.op_type for n in g.nodes] == ["Unsqueeze", "MatMul", "Squeeze", "Mul", "Mul",
                                            "Add"]


def test_addmv_values_are_beta_self_plus_alpha_mat_vec():
    rng = np.random.default_rng(11)
    g = build_op_graph(addmv_row(48, 40, "float32", attrs={"alpha": 1.5, "beta": -2.0}))
    s, mat, vec = (rng.standard_normal(sh).astype(np.float32)
                   for sh in ((48,), (48, 40), (40,)))
    out = asim.execute(g, {"x0": s, "x1": mat, "x2": vec})[g.outputs[0]]
    want = -2.0 * s.astype(np.float64) + 1.5 * (mat.astype(np.float64) @ vec)
    # float32 products over K = 40 of unit normals: |error| well under 1e-4 relative
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_bad_chain_inputs_and_attributes_are_named():
    two = [{"shape": [64, 64], "dtype": "float16"}, {"shape": [64], "dtype": "float16"}]
    with pytest.raises(GraphError, match="Addmv: takes 3 inputs"):
        build_op_graph(addmv_row(64, 64, inputs=two))
    with pytest.raises(GraphError, match="unknown attribute.*gamma"):
        build_op_graph(addmv_row(64, 64, attrs={"gamma": 1.0}))
    flat = [{"shape": [64]}, {"shape": [64]}, {"shape": [64]}]
    with pytest.raises(GraphError, match=r"mat \[M, K\]"):
        build_op_graph(addmv_row(64, 64, inputs=flat))


def test_row_time_counts_every_kernel_of_the_call():
    """A 4096 x 4096 fp16 addmv launches TransData (mat, vec), MatMul, TransData (product)
    and Add: the row's time is their sum, above the MatMul's alone."""
    row = addmv_row(4096, 4096)
    assert measures_whole_call(row)
    g = build_op_graph(row)
    res = asim.simulate(g, "ascend910b", fusion=False, mode="sink", icache=icache_start(row))
    kinds = [t.op_type for t in res.trace.tasks]
    assert kinds == ["TransData", "TransData", "MatMul", "TransData", "Add"]
    total_us = res.chip.seconds(sum(t.duration for t in res.trace.tasks)) * 1e6
    mm_us = res.chip.seconds(next(t.duration for t in res.trace.tasks
                                  if t.op_type == "MatMul")) * 1e6
    sim = validate_rows([row]).rows[0].simulated
    assert sim == pytest.approx(total_us, rel=1e-6)
    assert sim > 2 * mm_us


def test_corpus_addmv_rows_name_self_mat_vec():
    rows = [r for r in load_corpus(["gemm"]) if r.workload.get("cann_op") == "Addmv"]
    assert len(rows) == 15
    for r in rows:
        s, mat, vec = (tuple(i["shape"]) for i in r.workload["inputs"])
        assert s == (mat[0],) and vec == (mat[1],), r.id
        assert measures_whole_call(r)


# ------------------------------------------------- CANN fused kernels (workloads.CANN_FUSIONS)
def conv_bnreduce_row(op: str = "Conv", data: str = "cold", **changes):
    ins = [{"shape": [2, 32, 14, 14], "dtype": "float16", "format": "NC1HWC0"},
           {"shape": [32, 32, 1, 1], "dtype": "float16", "format": "FracZ"}]
    w = {"kind": "op", "op": op, "cann_op": "FusionOp_Conv2D_BNTrainingReduce",
         "inputs": ins, "attrs": {"kernel_shape": [1, 1]}}
    base = {"id": "t-conv-bnreduce", "chip": "ascend910", "family": "conv",
            "role": "validation", "workload": w, "timing": "msprof_kernel", "data": data,
            "metric": "time", "value": 10.0, "unit": "us", "source": "test"}
    return check_row({**base, **changes}, "test row")


def test_fused_kernel_row_runs_the_members_as_one_task():
    """FusionOp_Conv2D_BNTrainingReduce: the Conv ("op") and the BNTrainingReduce of its
    output ("op_1") fused by the simulator's own TbeConvBnreduceFusionPass; the kernel time
    is that one task, not the TransData conversions around it."""
    row = conv_bnreduce_row()
    g = build_op_graph(row)
    assert g.node("op").op_type == "Conv" and g.node("op_1").op_type == "BNTrainingReduce"
    assert measured_nodes(row) == {"op", "op_1"}
    res = asim.simulate(g, chip="ascend910", fusion=True, mode="sink")
    (fused,) = [t for t in res.trace.tasks if "op" in t.fused_ops]
    assert fused.op_type == "ConvBNTrainingReduce" and set(fused.fused_ops) == {"op", "op_1"}
    (rec,) = validate_rows([row]).rows
    assert rec.status == "ok"
    # the row's unit is us; the record's simulated value is the fused task alone
    assert rec.simulated == pytest.approx(asim.get_chip("ascend910").us(fused.duration),
                                          rel=1e-9)


def test_fused_kernel_row_names_a_wrong_head_op():
    with pytest.raises(GraphError, match="head is Conv, the row says op = 'Relu'"):
        build_op_graph(conv_bnreduce_row(op="Relu"))
