"""Every GE pass and graph fusion keeps values on random element-wise DAGs (seeded)."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim

UNARY = ("relu", "exp", "neg", "abs", "tanh")
BINARY = ("add", "mul", "sub")


def _random_graph(seed: int) -> asim.Graph:
    """Inputs, constants (some duplicated), constant-only subtrees and repeated expressions."""
    rng = np.random.default_rng(seed)
    g = asim.Graph(f"rand{seed}")
    vals = [g.input("x", (3, 4)), g.input("y", (3, 4))]
    for _ in range(int(rng.integers(8, 16))):
        kind = rng.integers(0, 4)
        if kind == 0:
            vals.append(getattr(g, str(rng.choice(UNARY)))(vals[int(rng.integers(len(vals)))]))
        elif kind == 1:
            a, b = rng.integers(len(vals), size=2)
            vals.append(getattr(g, str(rng.choice(BINARY)))(vals[int(a)], vals[int(b)]))
        elif kind == 2:            # a constant subtree: folds
            c = g.const(np.full((3, 4), float(rng.integers(1, 3)), np.float32))
            vals.append(g.mul(g.tanh(c), vals[int(rng.integers(len(vals)))]))
        else:                      # the same expression twice: CSE
            v = vals[int(rng.integers(len(vals)))]
            vals += [g.relu(v), g.relu(v)]
    read = {i for n in g.nodes for i in n.inputs}
    g.output(*[v for v in vals[2:] if v.name not in read])      # every sink: little to prune
    return g


@pytest.mark.parametrize("seed", range(8))
def test_random_dag_outputs_unchanged(seed, same_outputs):
    g = _random_graph(seed)
    res = same_outputs(g, rtol=1e-5, atol=1e-6)
    assert len(res.graph.nodes) <= len(g.nodes)


def test_random_dags_exercise_folding_and_cse(opt):
    """The generator is not vacuous: across the seeds, folds and CSE merges happen."""
    total: dict[str, int] = {}
    for seed in range(8):
        for name, (_, e) in opt(_random_graph(seed)).log.counts().items():
            total[name] = total.get(name, 0) + e
    assert total["ConstantFoldingPass"] > 0 and total["CommonSubexpressionEliminationPass"] > 0
