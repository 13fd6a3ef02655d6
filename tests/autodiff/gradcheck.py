"""Directional-derivative checks of gradient graphs against central finite differences.

For a graph with float64 inputs, loss = sum(y * r) over its first output for a seeded random
r; the gradient graph's <grad, u> along a seeded random direction u must equal
(L(x + h u) - L(x - h u)) / 2h. In float64 with h = 1e-5 the difference quotient is exact to
~1e-10 (truncation h^2 f''' and rounding 1e-16 / h), so a relative error of 1e-6 leaves room
for well-conditioned inputs while catching any wrong term.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

import ascendsim as asim
from ascendsim.ir.graph import Graph
from ascendsim.ir.tensor import materialize

H = 1e-5
REL = 1e-6


def with_loss(g: Graph, seed: int = 0) -> str:
    """Add loss = sum(y * r) over g's first output (r seeded); return the loss name."""
    y = g.values[g.outputs[0]]
    r = np.random.default_rng(seed + 1000).standard_normal(y.shape)
    prod = g.mul(y, g.const(r.astype(y.dtype)))
    loss = g.reduce_sum(prod, list(range(y.rank)), keepdims=0) if y.rank else prod
    g.output(loss)
    return loss.name


def directional_check(g: Graph, feeds: Mapping[str, np.ndarray], wrt: list[str] | None = None,
                      seed: int = 0, rel: float = REL) -> tuple[float, float]:
    """Check d loss along a random direction over `wrt` (inputs or constants; default: the
    graph's parameters and float inputs). Returns (analytic, numeric)."""
    if wrt is None:
        wrt = asim.autodiff.parameters(g) + [i for i in g.inputs
                                              if g.values[i].dtype == "float64"]
    loss = with_loss(g, seed)
    gg = asim.grad(g, loss, wrt)
    got = asim.execute(gg, feeds)
    rng = np.random.default_rng(seed)
    base = {w: (np.asarray(feeds[w]) if w in feeds else materialize(gg.constants[w]))
            for w in wrt}
    dirs = {w: rng.standard_normal(b.shape) for w, b in base.items()}
    analytic = sum(float(np.sum(got[f"{w}_grad"] * dirs[w])) for w in wrt)

    def loss_at(step: float) -> float:
        consts = dict(gg.constants)
        f = dict(feeds)
        for w in wrt:
            moved = base[w] + step * dirs[w]
            if w in feeds:
                f[w] = moved
            else:
                gg.constants[w] = moved
        try:
            return float(asim.execute(gg, f, [loss])[loss])
        finally:
            gg.constants = consts

    numeric = (loss_at(H) - loss_at(-H)) / (2 * H)
    scale = max(abs(numeric), 1e-3)
    assert abs(analytic - numeric) <= rel * scale, (analytic, numeric, wrt)
    return analytic, numeric
