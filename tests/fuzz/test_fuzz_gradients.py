"""Fuzzing of autodiff: gradients of random float64 graphs (strategies.py `grad_graphs`:
every family of ops with a gradient rule, broadcasting, reductions, MatMul/Gemm, Conv,
pooling, Softmax, the norms, moves) against central finite differences
(tests/autodiff/gradcheck.py: a directional derivative along a seeded random direction over
every input and parameter, relative error 1e-6).

The default run draws `DEFAULT_EXAMPLES` derandomized examples; `pytest -m fuzz` draws
`FUZZ_EXAMPLES` (BENCHMARKS.md, "Fuzzing").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from strategies import Drawn, grad_graphs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autodiff"))
from gradcheck import directional_check  # noqa: E402

DEFAULT_EXAMPLES = 40
FUZZ_EXAMPLES = 2000
_COMMON = dict(derandomize=True, deadline=None, database=None,
               phases=(Phase.explicit, Phase.generate),
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])


def check_gradients(drawn: Drawn, seed: int = 0) -> None:
    g = drawn.graph
    rng = np.random.default_rng(seed)
    feeds = {n: rng.uniform(-1.0, 1.0, g.values[n].shape) for n in g.inputs}
    directional_check(g, feeds, seed=seed)


def _run(examples: int, max_ops: int) -> tuple[int, list[tuple[str, str]]]:
    seen: list[int] = []
    failures: list[tuple[str, str]] = []

    @settings(max_examples=examples, **_COMMON)
    @given(grad_graphs(max_ops=max_ops))
    def run(drawn):
        seen.append(1)
        try:
            check_gradients(drawn)
        except Exception as exc:     # every failure is collected, with its example
            failures.append((f"{type(exc).__name__}: {exc}", repr(drawn)))

    run()
    return len(seen), failures


def _report(failures) -> str:
    return "\n".join(f"{err[:300]}\n    e.g. {ex}" for err, ex in failures[:100])


def test_gradients_fuzz_default():
    n, failures = _run(DEFAULT_EXAMPLES, max_ops=5)
    assert n == DEFAULT_EXAMPLES
    assert not failures, f"{len(failures)} of {n} failed:\n{_report(failures)}"


@pytest.mark.fuzz
def test_gradients_fuzz_heavy():
    n, failures = _run(FUZZ_EXAMPLES, max_ops=8)
    print(f"fuzz gradients: {n} examples, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {n} failed:\n{_report(failures)}"
