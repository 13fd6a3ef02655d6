"""CANN's training kernels: simulated time against the primitive-op form and the HBM bound,
and the numba kernels' wall time.

    python bench/training_ops.py           # every table (~1 minute)
    python bench/training_ops.py --quick   # smaller shapes

Tables (simulated figures repeat bit for bit; wall times depend on the machine):
1. BatchNorm training forward on a ResNet-50 stage-1 activation (fp16): the primitive form
   (ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Add, as a graph built from ONNX
   primitives computes it) vs BNTrainingReduce + BNTrainingUpdate, and with the conv in front,
   unfused vs UB-fused (TbeConvBnreduceFusionPass + TbeBnupdateEltwiseFusionPass).
2. BatchNorm backward: primitive form vs BNTrainingUpdateGrad + BNTrainingReduceGrad.
3. One optimizer update of ResNet-50's 25.6M fp32 parameters (one tensor) per kernel, with the
   HBM bound: bytes moved / HBM bandwidth.
4. Wall time of the numba kernels (best of 3 after a warm-up).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.execute import execute
from ascendsim.hw import get_chip

CHIPS = ("ascend910", "ascend910b")


def _us(g, chip, fusion=False) -> float:
    return simulate(g, chip, fusion=fusion).cycles / get_chip(chip).clock_hz * 1e6


def _channel_params(g, c):
    return [g.input(n, (c,)) for n in ("scale", "offset", "mean", "var")]


def bn_primitive(shape, dtype="float16") -> asim.Graph:
    g = asim.Graph("bn_primitive")
    n, c = shape[:2]
    x = g.input("x", shape, dtype)
    axes = g.const(np.array([0, 2, 3], np.int64))
    scale = g.input("scale", (1, c, 1, 1), dtype)
    bias = g.input("bias", (1, c, 1, 1), dtype)
    mean = g.reduce_mean(x, axes)
    d = g.sub(x, mean)
    var = g.reduce_mean(g.mul(d, d), axes)
    y = g.add(g.mul(g.div(d, g.sqrt(g.add(var, 1e-5))), scale), bias)
    g.output(y, mean, var)
    return g


def bn_cann(shape, dtype="float16") -> asim.Graph:
    g = asim.Graph("bn_cann")
    x = g.input("x", shape, dtype)
    s, q = g.bn_training_reduce(x)
    g.output(*g.bn_training_update(x, s, q, *_channel_params(g, shape[1])))
    return g


def conv_bn_relu(shape, dtype="float16") -> asim.Graph:
    g = asim.Graph("conv_bn_relu")
    n, c, h, w = shape
    x = g.input("x", shape, dtype)
    y = g.conv(x, g.weight("w", (c, c, 3, 3), dtype), pads=[1, 1, 1, 1])
    s, q = g.bn_training_reduce(y)
    out = g.bn_training_update(y, s, q, *_channel_params(g, c))
    g.output(g.relu(out[0]), *out[1:])
    return g


def bn_grad_primitive(shape, dtype="float16") -> asim.Graph:
    g = asim.Graph("bn_grad_primitive")
    n, c = shape[:2]
    x, dy = g.input("x", shape, dtype), g.input("dy", shape, dtype)
    axes = g.const(np.array([0, 2, 3], np.int64))
    mean, rstd, gamma = (g.input(k, (1, c, 1, 1), dtype) for k in ("mean", "rstd", "gamma"))
    xhat = g.mul(g.sub(x, mean), rstd)
    dbeta = g.reduce_sum(dy, axes)
    dgamma = g.reduce_sum(g.mul(dy, xhat), axes)
    inv = 1.0 / (shape[0] * shape[2] * shape[3])     # 1/n: n itself overflows fp16
    dx = g.mul(g.mul(gamma, rstd),
               g.sub(g.sub(dy, g.mul(dbeta, inv)), g.mul(xhat, g.mul(dgamma, inv))))
    g.output(dx, dgamma, dbeta)
    return g


def bn_grad_cann(shape, dtype="float16") -> asim.Graph:
    g = asim.Graph("bn_grad_cann")
    c = shape[1]
    x, dy = g.input("x", shape, dtype), g.input("dy", shape, dtype)
    bm, bv, sc = (g.input(k, (c,)) for k in ("bm", "bv", "scale"))
    ds, do = g.bn_training_update_grad(dy, x, bm, bv)
    g.output(g.bn_training_reduce_grad(dy, x, ds, do, sc, bm, bv), ds, do)
    return g


def optimizer(kind: str, n: int) -> tuple[asim.Graph, int]:
    """(graph, bytes an ideal kernel moves: each tensor read or written once)."""
    g = asim.Graph(kind)
    var, m, v, grad = (g.input(k, (n,)) for k in ("var", "m", "v", "grad"))
    s = [g.input(f"s{i}", (1,)) for i in range(8)]
    if kind == "ApplyMomentum":
        g.output(*g.apply_momentum(var, m, s[0], grad, s[1]))
        tensors = 3 + 2
    elif kind == "ApplyAdam":
        g.output(*g.apply_adam(var, m, v, *s[:6], grad))
        tensors = 4 + 3
    elif kind == "ApplyAdamW":
        g.output(*g.apply_adam_w(var, m, v, *s[:7], grad))
        tensors = 4 + 3
    else:   # LAMB: both phases (the norms are scalars here)
        upd, v2, m2 = g.lamb_apply_optimizer_assign(grad, v, m, var, *s[:7])
        g.output(g.lamb_apply_weight_assign(s[0], s[1], s[2], upd, var), v2, m2)
        tensors = (4 + 3) + (2 + 1)
    return g, tensors * 4 * n


def table_bn(quick: bool) -> None:
    shape = (8, 64, 56, 56) if quick else (32, 256, 56, 56)
    print(f"\n## BatchNorm training, x {shape} fp16 (simulated us)\n")
    print("| chip | primitive fwd | CANN fwd | conv+BN+ReLU unfused | fused | primitive bwd |"
          " CANN bwd |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for chip in CHIPS:
        cbr = conv_bn_relu(shape)
        row = [_us(bn_primitive(shape), chip), _us(bn_cann(shape), chip), _us(cbr, chip),
               _us(cbr, chip, fusion=True), _us(bn_grad_primitive(shape), chip),
               _us(bn_grad_cann(shape), chip)]
        print(f"| {chip} | " + " | ".join(f"{v:.1f}" for v in row) + " |")


def table_optimizers(quick: bool) -> None:
    n = 2_560_000 if quick else 25_600_000
    print(f"\n## Optimizer update, {n:,} fp32 parameters (simulated us)\n")
    print("| kernel | " + " | ".join(f"{c} | {c} HBM bound" for c in CHIPS) + " |")
    print("|---|" + "---:|" * (2 * len(CHIPS)))
    for kind in ("ApplyMomentum", "ApplyAdam", "ApplyAdamW", "LAMB (both phases)"):
        g, nbytes = optimizer(kind, n)
        cells = []
        for chip in CHIPS:
            bound = nbytes / get_chip(chip).hbm_bandwidth_bytes_per_s * 1e6
            cells += [f"{_us(g, chip):.1f}", f"{bound:.1f}"]
        print(f"| {kind} | " + " | ".join(cells) + " |")


def _best(f, reps: int = 3) -> float:
    f()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def table_wall(quick: bool) -> None:
    shape = (4, 64, 56, 56) if quick else (8, 256, 56, 56)
    rng = np.random.default_rng(0)
    c = shape[1]
    feeds = {"x": rng.standard_normal(shape).astype(np.float32),
             **{k: np.ones(c, np.float32) for k in ("scale", "offset", "mean", "var")}}
    g = bn_cann(shape, "float32")
    n = 1_000_000 if quick else 10_000_000
    og, _ = optimizer("ApplyAdam", n)
    ofeeds = {k: rng.standard_normal(og.values[k].shape).astype(np.float32) ** 2
              for k in og.inputs}
    print("\n## numba kernels, wall time (ms, best of 3)\n")
    print("| case | ms |")
    print("|---|---:|")
    print(f"| BNTrainingReduce + BNTrainingUpdate, {shape} fp32 | "
          f"{_best(lambda: execute(g, feeds)):.0f} |")
    print(f"| ApplyAdam, {n:,} fp32 | {_best(lambda: execute(og, ofeeds)):.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller shapes")
    args = ap.parse_args()
    table_bn(args.quick)
    table_optimizers(args.quick)
    table_wall(args.quick)


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("training_ops", main))
