"""Fuzzing of training: random graphs (strategies.py `training_graphs`) made into training
steps, each checked for what users rely on.

- The step executes (seeded inputs from `initial_state` and uniform(-1, 1) data), its
  outputs finite; the optimised step (`asim.optimize`: fused optimizer chains, UB and L2
  fusion) computes the same loss and parameter updates within a norm-wise tolerance by
  dtype, and simulates.
- Data parallel: `simulate_data_parallel(step, world_size=1)` is `simulate(step)` within 1%,
  and the optimizer half of the step holds no backward op (issue 23 items 2 and 20).

Each surface has a default run (derandomized: the same examples on every machine) and a
heavy run under `pytest -m fuzz`; BENCHMARKS.md ("Fuzzing") has the counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from strategies import DrawnStep, training_graphs

import ascendsim as asim
from ascendsim.multichip import simulate_data_parallel

_COMMON = dict(derandomize=True, deadline=None, database=None,
               phases=(Phase.explicit, Phase.generate),
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
DP_EXAMPLES, DP_FUZZ_EXAMPLES = 15, 1000
STEP_EXAMPLES, STEP_FUZZ_EXAMPLES = 25, 2000
#: |optimised - as given| <= TOL (1 + |as given|) per output: float32 kernels sum in another
#: order when fused; a float16 forward rounds each unfused intermediate
TOL = {"float64": 1e-9, "float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}


def step_feeds(step: asim.Graph, seed: int = 0) -> dict[str, np.ndarray]:
    from ascendsim.ir.tensor import as_storage

    feeds = dict(asim.autodiff.initial_state(step))
    rng = np.random.default_rng(seed)
    for name in step.inputs:
        if name not in feeds:
            v = step.values[name]
            feeds[name] = as_storage(rng.uniform(-1.0, 1.0, v.shape), v.dtype)
    return feeds


def check_training_step(drawn: DrawnStep, chip: str = "ascend910b") -> None:
    step = drawn.step()
    feeds = step_feeds(step)
    ref = asim.execute(step, feeds)
    for name, v in ref.items():
        assert np.all(np.isfinite(np.asarray(v, np.float64))), f"{name} is not finite"
    opt = asim.optimize(step, chip).graph
    got = asim.execute(opt, feeds)
    # a float16 forward (mixed precision, or a float16 model) rounds the float32 loss and
    # updates it feeds as much as float16 values
    half = drawn.mixed_precision or any(v.dtype == "float16"
                                        for v in drawn.graph.values.values())
    for name, r in ref.items():
        r64, g64 = (np.asarray(a, np.float64) for a in (r, got[name]))
        err = float(np.max(np.abs(g64 - r64), initial=0.0))
        dtype = "float16" if half else step.values[name].dtype
        tol = TOL.get(dtype, 0.0) * (1 + float(np.max(np.abs(r64), initial=0.0)))
        assert err <= tol, f"{name}: max |optimised - as given| = {err:.3g} > {tol:.3g}"
    assert asim.simulate(opt, chip, fusion=False).cycles > 0


def _run_steps(examples: int, max_ops: int) -> tuple[int, list[tuple[str, str]]]:
    seen: list[int] = []
    failures: list[tuple[str, str]] = []

    @settings(max_examples=examples, **_COMMON)
    @given(training_graphs(max_ops=max_ops))
    def run(drawn):
        seen.append(1)
        try:
            check_training_step(drawn)
        except Exception as exc:     # every failure is collected, with its example
            failures.append((f"{type(exc).__name__}: {exc}", repr(drawn)))

    run()
    return len(seen), failures


def _report(failures) -> str:
    kinds: dict[str, list[str]] = {}
    for err, example in failures:
        kinds.setdefault(err.split("\n")[0][:200], []).append(example)
    return "\n".join(f"{len(ex)} x {err}\n    e.g. {ex[0]}" for err, ex in kinds.items())


def test_training_steps_fuzz_default():
    n, failures = _run_steps(STEP_EXAMPLES, max_ops=6)
    assert n == STEP_EXAMPLES
    assert not failures, f"{len(failures)} of {n} failed:\n{_report(failures)}"


@pytest.mark.fuzz
def test_training_steps_fuzz_heavy():
    n, failures = _run_steps(STEP_FUZZ_EXAMPLES, max_ops=8)
    print(f"fuzz training steps: {n} examples, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {n} failed:\n{_report(failures)}"


def _backward_op(node) -> bool:
    return (node.opdef.unit_for(node, {}) == asim.ir.registry.Unit.CUBE
            or "Grad" in node.op_type or "Backprop" in node.op_type)


def check_data_parallel(drawn: DrawnStep, chip: str) -> None:
    step = drawn.step()
    whole = asim.simulate(step, chip).time_us
    one = simulate_data_parallel(step, 1, chip)
    assert abs(one.compute_us - whole) <= 0.01 * whole, (one.compute_us, whole)
    assert one.step_us == one.compute_us and one.exposed_comm_us == 0
    opt = one.optimizer.graph.nodes if one.optimizer is not None else []
    assert not [n.name for n in opt if _backward_op(n)]


def _run_data_parallel(examples: int) -> int:
    seen = []

    @settings(max_examples=examples, **_COMMON)
    @given(training_graphs(), st.sampled_from(["ascend910", "ascend910b"]))
    def run(drawn, chip):
        seen.append(1)
        check_data_parallel(drawn, chip)

    run()
    return len(seen)


def test_data_parallel_one_chip_is_simulate():
    assert _run_data_parallel(DP_EXAMPLES) == DP_EXAMPLES


@pytest.mark.fuzz
def test_data_parallel_one_chip_is_simulate_heavy():
    n = _run_data_parallel(DP_FUZZ_EXAMPLES)
    print(f"fuzz data parallel: {n} examples")
