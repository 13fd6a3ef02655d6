"""Fusion benchmark: a fused node's composite numba kernel against the unfused chain.

    python bench/fusion.py            # 16M elements (about half a minute with compilation)
    python bench/fusion.py --quick    # 64K elements

The chain is the 6-op element-wise chain of bench/kernels.py,
``-(relu((x * 2 + 1) - 0.5) / 2)``. Graph-kernel basic fusion turns it into one FusedOp; its
values are computed by the composite kernel generated from the subgraph (one pass over the
data, intermediates in registers). References: the numpy expression a user would write
(one temporary per op) and the unfused graph run op by op with the registry kernels. Each
case is warmed up (JIT compilation) and checked against the numpy result, then timed 3
times; the table shows best times and the speed-up of the composite kernel (target >= 2x
over numpy at 16M float32). Timings on a shared machine are noisy: rerun before concluding.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from timing import best_of

from ascendsim.execute import execute, run_graph, run_subgraph
from ascendsim.hw import get_chip
from ascendsim.ir.graph import Graph
from ascendsim.passes.base import PassContext
from ascendsim.passes.graph_kernel import BasicOpsFusion


def chain_graph(n: int, dtype: str) -> Graph:
    """The 6-op chain as a graph (unfused)."""
    g = Graph("chain6")
    x = g.input("x", (n,), dtype)
    g.output(g.neg(g.div(g.relu(g.sub(g.add(g.mul(x, 2.0), 1.0), 0.5)), 2.0)))
    return g


def numpy_chain(x: np.ndarray) -> np.ndarray:
    two, one, half = (np.asarray(v, dtype=x.dtype) for v in (2.0, 1.0, 0.5))
    return -(np.maximum((x * two + one) - half, 0) / two)


def cases(quick: bool) -> list[tuple[str, Callable, Callable, Callable, float]]:
    """(name, composite kernel, numpy chain, unfused graph, rtol) per dtype."""
    n = 1 << 16 if quick else 1 << 24
    out = []
    for dtype, rtol in (("float32", 1e-6), ("float16", 2e-3)):
        g = chain_graph(n, dtype)
        fused = g.copy()
        BasicOpsFusion().run(fused, PassContext(chip=get_chip("ascend910")))
        (node,) = fused.nodes
        x = np.random.default_rng(0).standard_normal(n).astype(dtype)
        sub = node.subgraph
        out.append((f"6-op chain, {n / 2**20:g}M {dtype}",
                    lambda sub=sub, x=x: run_subgraph(sub, [x], run_graph)[0],
                    lambda x=x: numpy_chain(x),
                    lambda g=g, x=x: execute(g, {"x": x})[g.outputs[0]], rtol))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64K elements instead of 16M")
    args = ap.parse_args()
    rows = []
    for name, composite, ref, unfused, rtol in cases(args.quick):
        np.testing.assert_allclose(composite().astype(np.float64), ref().astype(np.float64),
                                   rtol=rtol, atol=rtol)
        tc, tn, tu = best_of(composite), best_of(ref), best_of(unfused)
        rows.append((name, tc * 1e3, tn * 1e3, tu * 1e3, tn / tc, tu / tc))
    head = ("case", "composite ms", "numpy chain ms", "unfused graph ms", "vs numpy",
            "vs unfused")
    widths = [max(len(head[0]), *(len(r[0]) for r in rows))] + [len(h) for h in head[1:]]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        cells = [r[0], f"{r[1]:.2f}", f"{r[2]:.2f}", f"{r[3]:.2f}", f"{r[4]:.2f}x",
                 f"{r[5]:.2f}x"]
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)))


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("fusion", main))
