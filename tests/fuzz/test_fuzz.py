"""The graph fuzzer: random graphs, fusion options and chips (strategies.py), each checked for
what users rely on.

For every drawn (graph, chip, fusion options):
- the optimised graph computes the unfused graph's values (`asim.execute` on both, seeded
  uniform(-1, 1) inputs, a norm-wise tolerance by dtype);
- block and tile simulation of the optimised graph complete and keep the simulator's
  invariants (`check_invariants` of tests/conftest.py: no buffer over capacity, no pipe busy
  twice at once, no task faster than its roofline); tile is within 5% of block (the stated
  agreement of the two details, tests/sim/test_detail.py); the same graph simulated twice
  gives the same cycles and task records; the unfused graph simulates and keeps the
  invariants too.

The default run draws `DEFAULT_EXAMPLES` examples derandomized (the same examples on every
machine: a fixed seed); `pytest -m fuzz` draws `FUZZ_EXAMPLES` (tests/fuzz/conftest.py skips
that test unless the `fuzz` marker is selected).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from strategies import Drawn, DrawnChip, chips, fusion_options, graphs

import ascendsim as asim

DEFAULT_EXAMPLES = 60
FUZZ_EXAMPLES = 2000
#: block and tile detail agree within this on total time (tests/sim/test_detail.py)
TILE_VS_BLOCK = 0.05
#: norm-wise tolerance |got - ref|max <= TOL * (1 + |ref|max): float32 kernels sum in another
#: order when fused (a few ulp per op over <= 10 ops); float16 rounds each unfused intermediate
#: to 11 bits where a fused kernel may keep more (about 1e-3 per op)
TOL = {"float32": 1e-4, "float16": 2e-2, "float64": 1e-10}


def _load_check_invariants():
    """`check_invariants` of tests/conftest.py (the one invariant checker of the suite)."""
    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("sim_invariants", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.check_invariants


check_invariants = _load_check_invariants()


def _feeds(graph: asim.Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-1.0, 1.0, graph.values[n].shape).astype(graph.values[n].dtype)
            for n in graph.inputs}


def _assert_same_values(before: asim.Graph, after: asim.Graph) -> None:
    feeds = _feeds(before)
    ref = asim.execute(before, feeds)
    got = asim.execute(after, feeds)
    assert set(got) == set(ref), f"outputs {sorted(got)} != {sorted(ref)}"
    for name, r in ref.items():
        g = got[name]
        assert g.shape == r.shape, f"output {name}: shape {g.shape} != {r.shape}"
        r64, g64 = r.astype(np.float64), g.astype(np.float64)
        err = float(np.max(np.abs(g64 - r64), initial=0.0))
        scale = 1.0 + float(np.max(np.abs(r64), initial=0.0))
        tol = TOL.get(r.dtype.name, 0.0)
        assert err <= tol * scale, (f"output {name} ({r.dtype}): max |fused - unfused| = "
                                    f"{err:.3g} > {tol} x {scale:.3g}")


def _simulate(graph: asim.Graph, chip: asim.Chip, detail: str) -> asim.Result:
    res = asim.simulate(graph, chip, fusion=False, detail=detail)
    assert res.cycles > 0 or not res.trace.tasks
    check_invariants(res)
    return res


def check_example(drawn: Drawn, drawn_chip: DrawnChip, options: dict) -> None:
    """Every property of one example (see the module docstring)."""
    g, chip = drawn.graph, drawn_chip.chip
    opt = asim.optimize(g, chip, **options).graph
    _assert_same_values(g, opt)
    block = _simulate(opt, chip, "block")
    again = _simulate(opt, chip, "block")
    assert again.cycles == block.cycles and again.trace.tasks == block.trace.tasks, \
        f"same graph, different cycles: {block.cycles} vs {again.cycles}"
    mem = block.memory
    assert mem is not None and 0 < mem.peak_bytes <= mem.no_reuse_bytes, mem
    tile = _simulate(opt, chip, "tile")
    if tile.cycles:
        err = abs(block.cycles - tile.cycles) / tile.cycles
        assert err <= TILE_VS_BLOCK, (f"block {block.cycles} vs tile {tile.cycles} cycles: "
                                      f"{100 * err:.2f}% > {100 * TILE_VS_BLOCK:.0f}%")
    _simulate(g, chip, "block")


_COMMON = dict(derandomize=True, deadline=None, database=None,
               phases=(Phase.explicit, Phase.generate),   # the drawn steps are short already
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])


def _run(examples: int, max_ops: int) -> tuple[int, list[tuple[str, str]]]:
    """Run `examples` derandomized examples; (examples run, [(failure, example)])."""
    seen: list[int] = []
    failures: list[tuple[str, str]] = []

    @settings(max_examples=examples, **_COMMON)
    @given(graphs(max_ops=max_ops), chips(), fusion_options())
    def run(drawn, chip, options):
        seen.append(1)
        try:
            check_example(drawn, chip, options)
        except Exception as exc:  # every failure is collected, with its example
            failures.append((f"{type(exc).__name__}: {exc}",
                             f"{drawn!r}, chip={chip!r}, options={options!r}"))

    run()
    return len(seen), failures


def _report(failures: list[tuple[str, str]]) -> str:
    kinds: dict[str, list[str]] = {}
    for err, example in failures:
        kinds.setdefault(err.split("\n")[0][:160], []).append(example)
    return "\n".join(f"{len(ex)} x {err}\n    e.g. {ex[0]}" for err, ex in kinds.items())


def test_fuzz_default():
    """A few derandomized examples on every run of the suite."""
    n, failures = _run(DEFAULT_EXAMPLES, max_ops=8)
    assert n == DEFAULT_EXAMPLES
    assert not failures, f"{len(failures)} of {n} examples failed:\n{_report(failures)}"


@pytest.mark.fuzz
def test_fuzz_heavy():
    """`pytest -m fuzz`: FUZZ_EXAMPLES examples; prints how many ran and how many failed."""
    n, failures = _run(FUZZ_EXAMPLES, max_ops=10)
    print(f"fuzz: {n} examples, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {n} examples failed:\n{_report(failures)}"


def test_found_2_view_beside_a_broadcastable_sibling():
    """What the fuzzer found (issue 14 Found 2, second symptom): graph-kernel fusion of a
    reshape (8, 1, 4) -> (8, 4) beside a sibling output of the first shape; the composite
    kernel recursed without end. Values and simulation must hold."""
    g = asim.Graph("found2")
    m = g.relu(g.input("x", (8, 1, 4)))
    g.output(g.add(m, 1.0), g.add(g.reshape(m, g.const(np.array([8, 4], np.int64))), 1.0))
    check_example(Drawn(g, []), DrawnChip("ascend910b", ()), {"graph_kernel": True})


def test_found_3_bias_folded_from_batchnorm_into_a_one_channel_conv():
    """What the fuzzer found (issue 14 Found 3, second form): a one-channel Conv whose bias
    comes from a folded BatchNormalization, then Relu; lowering lost the folded bias."""
    g = asim.Graph("found3")
    y = g.conv(g.input("x", (2, 2, 5, 5)), g.const(np.ones((1, 2, 3, 3), np.float32)))
    one = [g.const(np.full((1,), v, np.float32)) for v in (1.0, 0.5, 0.0, 1.0)]
    g.output(g.relu(g.batch_normalization(y, *one)))
    check_example(Drawn(g, []), DrawnChip("ascend910", ()), {})
