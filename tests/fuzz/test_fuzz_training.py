"""Fuzzing of training: random graphs (strategies.py `training_graphs`) made into training
steps, each checked for what users rely on.

- Data parallel: `simulate_data_parallel(step, world_size=1)` is `simulate(step)` within 1%,
  and the optimizer half of the step holds no backward op (issue 23 items 2 and 20).

Each surface has a default run (derandomized: the same examples on every machine) and a
heavy run under `pytest -m fuzz`; BENCHMARKS.md ("Fuzzing") has the counts.
"""

from __future__ import annotations

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
DP_EXAMPLES, DP_FUZZ_EXAMPLES = 15, 300


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
