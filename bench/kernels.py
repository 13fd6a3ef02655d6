"""Kernel benchmark: the registry's numba kernels against the numpy/BLAS code a user would
otherwise write.

    python bench/kernels.py            # the sizes of the tracker issue (about a minute)
    python bench/kernels.py --quick    # small sizes, a few seconds

Each case is warmed up once (JIT compilation, BLAS thread start-up), then timed 3 times;
the table shows the best time of each side and the ratio kernel/reference (< 1: the kernel
is faster). Results are checked against the reference before timing. Timings on a shared,
busy machine are noisy: compare ratios, not absolute times, and rerun before concluding.

Adding a row: write a function `(quick: bool) -> list[Case]` and list it in GROUPS. The
"fused composite kernel vs unfused numpy chain" row belongs in `fused_cases` below.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from timing import best_of

from ascendsim.ir.registry import get_op
from ascendsim.kernels.matmul import gemm_numba


@dataclass(frozen=True)
class Case:
    """One benchmark row: the kernel path, the reference path, and how close they must be."""

    name: str
    kernel: Callable[[], np.ndarray]
    reference: Callable[[], np.ndarray]
    ref_name: str
    rtol: float = 1e-4


def _kernel(op_type: str) -> Callable[..., np.ndarray]:
    """The registry kernel of an op as a plain function of arrays."""
    k = get_op(op_type).kernel
    return lambda *args, **attrs: k(list(args), attrs)[0]


# ----------------------------------------------------------------------------- cases
def elementwise_cases(quick: bool) -> list[Case]:
    """(a) a 6-op element-wise chain, one registry kernel per op vs the numpy expression."""
    n = 1 << 16 if quick else 1 << 24
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    two, one, half = np.float32(2.0), np.float32(1.0), np.float32(0.5)
    add, mul, sub, div, relu, neg = (_kernel(t) for t in ("Add", "Mul", "Sub", "Div", "Relu",
                                                           "Neg"))

    def chain() -> np.ndarray:
        return neg(div(relu(sub(add(mul(x, two), one), half)), two))

    def numpy_chain() -> np.ndarray:
        return -(np.maximum((x * two + one) - half, 0) / two)

    return [Case(f"6-op elementwise chain, {n / 2**20:g}M fp32",
                 chain, numpy_chain, "numpy chain")]


def fused_cases(quick: bool) -> list[Case]:
    """The composite kernel of a fused 6-op chain vs the unfused numpy chain (bench/fusion.py)."""
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from fusion import cases

    return [Case(f"fused composite: {name}", composite, chain, "numpy chain", rtol)
            for name, composite, chain, _unfused, rtol in cases(quick)]


def _matmul_case(m: int, k: int, n: int, dtype: str) -> Case:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    matmul = _kernel("MatMul")
    if dtype == "float16":  # the reference a user writes for fp16-in / fp32-accumulate
        def ref() -> np.ndarray:
            return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
        label, rtol = "fp16 in/fp32 acc", 2e-3
    else:
        def ref() -> np.ndarray:
            return a @ b
        label, rtol = dtype.replace("float", "fp"), 1e-4
    return Case(f"MatMul {m}x{k} @ {k}x{n} {label}", lambda: matmul(a, b), ref,
                "np.matmul (BLAS)", rtol)


def _pure_numba_case(m: int, k: int, n: int) -> Case:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return Case(f"blocked numba GEMM (no BLAS) {m}x{k}x{n} fp32", lambda: gemm_numba(a, b),
                lambda: a @ b, "np.matmul (BLAS)")


def matmul_cases(quick: bool) -> list[Case]:
    """(b) MatMul 1024^3 and 4096x4096x1024 (M x N x K), fp32 and fp16-in/fp32-acc."""
    sizes = [(128, 128, 128), (256, 128, 256)] if quick else [(1024, 1024, 1024),
                                                                (4096, 1024, 4096)]
    cases = [_matmul_case(m, k, n, dt) for m, k, n in sizes for dt in ("float32", "float16")]
    return cases + [_pure_numba_case(*sizes[0])]


def _im2col_conv(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """The usual numpy conv: im2col by a strided view, one BLAS GEMM, back to NCHW."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    oh, ow = win.shape[2:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    y = cols @ w.reshape(m, -1).T
    return np.ascontiguousarray(y.reshape(n, oh, ow, m).transpose(0, 3, 1, 2))


def _depthwise_ref(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """Depthwise conv in numpy: one vectorised multiply-add per kernel tap."""
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], x.shape[1], oh, ow), dtype=x.dtype)
    for a in range(kh):
        for e in range(kw):
            out += w[None, :, 0, a, e, None, None] * xp[:, :, a:a + oh, e:e + ow]
    return out


def conv_cases(quick: bool) -> list[Case]:
    """(c) ResNet-50 3x3 conv (56x56x64 -> 64, pad 1) at batch 8 vs im2col + BLAS."""
    batch, hw = (2, 14) if quick else (8, 56)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, 64, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    xd = rng.standard_normal((batch, 32, 2 * hw, 2 * hw)).astype(np.float32)
    wd = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    conv = _kernel("Conv")
    pads = [1, 1, 1, 1]
    return [
        Case(f"Conv 3x3 {hw}x{hw}x64->64 b{batch} fp32", lambda: conv(x, w, pads=pads),
             lambda: _im2col_conv(x, w, 1), "im2col + BLAS"),
        Case(f"Conv 3x3 {hw}x{hw}x64->64 b{batch} fp16 in/fp32 acc",
             lambda: conv(x16, w16, pads=pads),
             lambda: _im2col_conv(x16.astype(np.float32), w16.astype(np.float32), 1
                                  ).astype(np.float16), "im2col + BLAS", 2e-3),
        Case(f"Conv depthwise 3x3 {2 * hw}x{2 * hw}x32 b{batch} fp32",
             lambda: conv(xd, wd, pads=pads, group=32), lambda: _depthwise_ref(xd, wd, 1),
             "numpy tap loop"),
    ]


#: the table's row groups, in order (add a function here to add rows)
GROUPS = [elementwise_cases, fused_cases, matmul_cases, conv_cases]


def run(quick: bool = False) -> list[tuple[str, float, float, str]]:
    """Check and time every case; return rows (name, kernel s, reference s, reference name)."""
    rows = []
    for group in GROUPS:
        for case in group(quick):
            got, want = case.kernel(), case.reference()
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=case.rtol, atol=case.rtol, err_msg=case.name)
            rows.append((case.name, best_of(case.kernel), best_of(case.reference),
                         case.ref_name))
    return rows


def format_table(rows: list[tuple[str, float, float, str]]) -> str:
    """A plain-text table: case, kernel ms, reference ms, ratio, reference."""
    head = f"{'case':<52} {'numba ms':>10} {'ref ms':>10} {'ratio':>7}  reference"
    lines = [head, "-" * len(head)]
    for name, tk, tr, ref in rows:
        lines.append(f"{name:<52} {tk * 1e3:>10.2f} {tr * 1e3:>10.2f} {tk / tr:>7.2f}  {ref}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    args = parser.parse_args()
    print(format_table(run(args.quick)))


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("kernels", main))
