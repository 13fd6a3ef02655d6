"""CANN's training ops lower and simulate through the generic lowering on both chip
generations: every task at or above its roofline, multi-output vector ops as one task,
per-channel statistics read NC1HWC0 data in place, float-status reads no tensor bytes."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip

N, C, H, W = 8, 32, 14, 14


def _bn_graph(g):
    x = g.input("x", (N, C, H, W))
    s, q = g.bn_training_reduce(x, name="op")
    c = [g.input(n, (C,)) for n in ("scale", "offset", "mean", "var")]
    g.output(*g.bn_training_update(x, s, q, *c, name="update"))


def _bn_grad_graph(g):
    x, dy = g.input("x", (N, C, H, W)), g.input("dy", (N, C, H, W))
    bm, bv, sc = (g.input(n, (C,)) for n in ("bm", "bv", "scale"))
    ds, do = g.bn_training_update_grad(dy, x, bm, bv, name="op")
    g.output(g.bn_training_reduce_grad(dy, x, ds, do, sc, bm, bv, name="reduce_grad"))


def _pool_graph(g):
    x = g.input("x", (N, C, H, W))
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    y, arg = g.max_pool_with_argmax(x, name="op", **attrs)
    g.output(g.max_pool_grad_with_argmax(x, y, arg, name="grad", **attrs))


def _xent_graph(g):
    loss, back = g.softmax_cross_entropy_with_logits(g.input("f", (64, 1000)),
                                                     g.input("l", (64, 1000)), name="op")
    g.output(loss, back)


def _ln_graph(g):
    x, dy = g.input("x", (16, 128, 256)), g.input("dy", (16, 128, 256))
    mean, rstd = g.input("mean", (16, 128, 1)), g.input("rstd", (16, 128, 1))
    gamma = g.input("gamma", (256,))
    g.output(g.layer_norm_x_backprop(dy, x, mean, rstd, gamma, name="op"),
             *g.layer_norm_beta_gamma_backprop(dy, x, mean, rstd, name="bg"))


def _dropout_graph(g):
    x = g.input("x", (16, 128, 256))
    mask = g.drop_out_gen_mask(shape=[16, 128, 256], keep_prob=0.9, seed=1, name="gen")
    g.output(g.drop_out_do_mask(x, mask, np.float32(0.9), name="op"))


def _scalar(g, name):
    return g.input(name, (1,))


def _optim_graph(g):
    n = (1024, 1024)
    var, m, v, grad = (g.input(k, n) for k in ("var", "m", "v", "grad"))
    g.output(*g.apply_momentum(var, m, _scalar(g, "lr"), grad, _scalar(g, "mom"), name="op"))
    s = [_scalar(g, k) for k in ("b1p", "b2p", "lr2", "b1", "b2", "eps")]
    g.output(*g.apply_adam(var, m, v, *s, grad, name="adam"))
    g.output(*g.apply_adam_w(var, m, v, *s[:3], _scalar(g, "wd"), *s[3:], grad, name="adamw"))
    s1 = [_scalar(g, f"l{i}") for i in range(7)]
    upd, nv, nm = g.lamb_apply_optimizer_assign(grad, v, m, var, *s1, name="lamb1")
    g.output(g.lamb_apply_weight_assign(s1[0], s1[1], s1[2], upd, var, name="lamb2"), nv, nm)


def _status_graph(g):
    grad = g.input("grad", (4096, 1024))
    clear = g.npu_clear_float_status(name="clear")
    g.output(g.npu_get_float_status(clear, g.relu(grad), name="op"))


GRAPHS = {"bn": _bn_graph, "bn_grad": _bn_grad_graph, "pool": _pool_graph, "xent": _xent_graph,
          "layer_norm": _ln_graph, "dropout": _dropout_graph, "optimizers": _optim_graph,
          "status": _status_graph}


@pytest.mark.parametrize("chip", ["ascend910", "ascend910b"])
@pytest.mark.parametrize("which", sorted(GRAPHS))
def test_training_ops_simulate_at_or_above_roofline(which, chip, invariants):
    g = asim.Graph(which)
    GRAPHS[which](g)
    res = simulate(g, chip, fusion=False)
    invariants(res)
    ops = {t.op_type for t in res.trace.tasks}
    node_types = {n.op_type for n in g.nodes}
    assert node_types <= ops | {"Relu"}, node_types - ops
    for t in res.trace.tasks:
        assert t.duration >= t.roofline_cycles, t.op_name
        moved = sum(t.traffic.values())
        # the bound is real: every task moving more than a few KB has a positive roofline
        assert t.roofline_cycles > 0 or moved < 4096 or t.task_type == "AI_CPU", t.op_name


def test_bn_statistics_read_conv_output_in_place():
    """Conv -> BNTrainingReduce -> BNTrainingUpdate: no TransData between them (the
    per-channel sums are ND vectors, y stays NC1HWC0)."""
    g = asim.Graph("conv_bn")
    x = g.input("x", (8, 64, 28, 28), "float16")
    w = g.weight("w", (64, 64, 3, 3), "float16")
    y = g.conv(x, w, pads=[1, 1, 1, 1], name="conv")
    s, q = g.bn_training_reduce(y, name="reduce")
    c = [g.input(n, (64,)) for n in ("scale", "offset", "mean", "var")]
    out = g.bn_training_update(y, s, q, *c, name="update")
    g.output(g.relu(out[0], name="relu"), *out[1:])
    res = simulate(g, "ascend910", fusion=False)
    types = [t.op_type for t in res.trace.tasks]
    inner = types[types.index("Conv"):types.index("Relu") + 1]
    assert "TransData" not in inner, types
    update = res.trace.task("update")
    assert update.output_formats[0] == "NC1HWC0" and update.output_formats[1] == "ND"
    assert res.trace.task("reduce").input_formats[0] == "NC1HWC0"


def test_float_status_reads_no_tensor_bytes():
    g = asim.Graph("st")
    _status_graph(g)
    res = simulate(g, "ascend910", fusion=False)
    status = res.trace.task("op")
    assert status.traffic.get(("DDR", "read"), 0) + status.traffic.get(("L2", "read"), 0) == 0
    assert len(status.input_shapes) == 2, "the status op keeps its ordering inputs"
    relu = next(t for t in res.trace.tasks if t.op_type == "Relu")
    assert status.start >= relu.end


def test_float_status_ops_survive_the_optimiser():
    """Clear and Get act on the status register: constant folding and CSE keep them."""
    from ascendsim.api import optimize

    g = asim.Graph("st")
    _status_graph(g)
    types = [n.op_type for n in optimize(g, "ascend910").graph.nodes]
    assert "NPUClearFloatStatus" in types and "NPUGetFloatStatus" in types


def test_optimizer_vector_time_counts_its_sqrt_and_div():
    """16 KB of ApplyAdam on one core: 10 binary instructions + one vsqrt + one vdiv per
    element (`vec_extra`), each at its class's rate, within one minimum-instruction overhead
    per instruction; ApplyMomentum is 4 binary instructions; ApplyAdamW is TBE's
    apply_adam_w.py: 9 binary, 12 unary (vmuls / vadds and the vector_dups of the scalars
    unary ops read), 2 vdiv and one vsqrt."""
    base = get_chip("ascend910b")
    # (the rates alone: no completion latency between the dependent steps)
    chip = base.replace(ai_cores=1, aiv_cores=1, vector_dep_latency_cycles=None)
    n = 16 * 1024 // 4
    g = asim.Graph("adam")
    var, m, v, grad = (g.input(k, (n,)) for k in ("var", "m", "v", "grad"))
    s = [_scalar(g, f"s{i}") for i in range(6)]
    g.output(*g.apply_adam(var, m, v, *s, grad, name="adam"))
    g.output(*g.apply_momentum(var, m, s[0], grad, s[1], name="mom"))
    g.output(*g.apply_adam_w(var, m, v, *s, _scalar(g, "s6"), grad, name="adamw"))
    res = simulate(g, chip, detail="tile", fusion=False)
    nbytes = 4 * n
    want = {"adam": 10 * nbytes / chip.vector_rate("binary", "float32")
            + nbytes / chip.vector_rate("sqrt", "float32")
            + nbytes / chip.vector_rate("div", "float32"),
            "mom": 4 * nbytes / chip.vector_rate("binary", "float32"),
            "adamw": 9 * nbytes / chip.vector_rate("binary", "float32")
            + 12 * nbytes / chip.vector_rate("unary", "float32")
            + nbytes / chip.vector_rate("sqrt", "float32")
            + 2 * nbytes / chip.vector_rate("div", "float32")}
    for op, expected in want.items():
        task = res.trace.task(op)
        ivs = [iv for iv in res.trace.intervals if iv.task_id == task.task_id and iv.pipe == "V"]
        busy = sum(iv.duration for iv in ivs)
        assert abs(busy - expected) <= chip.vector_min_cycles * len(ivs), (op, busy, expected)


def test_layer_norm_gamma_beta_grads_read_fractal_nz_in_place():
    """dy and x in FRACTAL_NZ (matmul outputs) are read in place; the per-row statistics are
    read as ND vectors and dgamma/dbeta written ND: no TransData at all after the matmuls."""
    g = asim.Graph("ln_bg")
    w = g.weight("w", (256, 256), "float16")
    x = g.matmul(g.input("x", (8, 128, 256), "float16"), w)
    dy = g.matmul(g.input("dy", (8, 128, 256), "float16"), w)
    stats = [g.input(k, (8, 128, 1)) for k in ("mean", "rstd")]
    g.output(*g.layer_norm_beta_gamma_backprop(dy, x, *stats, name="bg"))
    res = simulate(g, "ascend910", fusion=False)
    types = [t.op_type for t in res.trace.tasks]
    assert types.count("TransData") == 2, types      # the two ND inputs of the matmuls
    bg = res.trace.task("bg")
    assert bg.input_formats == ("FRACTAL_NZ", "FRACTAL_NZ", "ND", "ND")
    assert bg.output_formats == ("ND", "ND")
