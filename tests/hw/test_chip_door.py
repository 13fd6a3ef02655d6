"""Chip figures at the door (issue 14): types and the impossible are rejected (zero or negative
sizes and rates, non-finite values, non-integral counts, sizes beyond a physical ceiling);
what-ifs of 10x and 0.1x of every figure stay legal, since sweeps rely on them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import ConfigError
from ascendsim.hw.chip import MAX_BYTES
from ascendsim.hw.loader import chips, get_chip

NUMERIC = (int, float)


def _scaled(chip, key: str, factor: float):
    """`key` scaled by `factor` as a sweep would set it: an integer figure rounds to an integer
    (a buffer size to a multiple of its alignment, an alignment to a power of two), a divisor
    defined >= 1 (a slowdown) stays >= 1."""
    value = chip.figure(key)
    new = value * factor
    if isinstance(value, int):
        if key.endswith("_align_bytes"):
            new = 2 ** round(math.log2(new)) if new >= 1 else 1
        elif key in {f"{b}_bytes" for b in ("l0a", "l0b", "l0c", "l1", "ub")}:
            align = chip.figure(key.replace("_bytes", "_align_bytes"))
            new = max(align, round(new / align) * align)
        else:
            new = max(1 if value > 0 else 0, round(new))
    elif key.endswith("slowdown"):
        new = max(1.0, new)
    if "." in key:
        group, sub = key.split(".")
        return {group: {sub: new}}
    return {key: new}


def _numeric_keys(chip) -> list[str]:
    return [k for k in chip.figure_keys()
            if isinstance(chip.figure(k), NUMERIC) and not isinstance(chip.figure(k), bool)]


def _tiny() -> asim.Graph:
    g = asim.Graph("tiny")
    x = g.input("x", (64, 64), "float16")
    w = g.const(np.full((64, 64), 0.01, np.float16))
    g.output(g.relu(g.add(g.matmul(x, w), 1.0)))
    return g


@pytest.mark.parametrize("name", chips())
@pytest.mark.parametrize("factor", [10.0, 0.1])
def test_every_figure_at_10x_and_tenth_is_a_legal_what_if(name, factor):
    chip, g = get_chip(name), _tiny()
    keys = _numeric_keys(chip)
    assert len(keys) > 40, "the figures are found"
    for key in keys:
        what_if = chip.replace(**_scaled(chip, key, factor))
        r = asim.simulate(g, chip=what_if, fusion=False)
        assert r.cycles > 0 and math.isfinite(r.time_us), key


@pytest.mark.parametrize("changes, named", [
    ({"ub_bytes": 1e40}, "ub_bytes"),                     # issue 14: accepted before
    ({"ub_bytes": 256.5}, "ub_bytes"),
    ({"ub_bytes": MAX_BYTES * 2}, "ub_bytes"),
    ({"hbm_bytes": 0}, "hbm_bytes"),
    ({"l1_bytes": -1024}, "l1_bytes"),
    ({"ai_cores": 2.5}, "ai_cores"),
    ({"ai_cores": 10**9}, "ai_cores"),
    ({"ai_cores": "32"}, "ai_cores"),
    ({"ai_cores": True}, "ai_cores"),
    ({"clock_hz": math.inf}, "clock_hz"),
    ({"clock_hz": math.nan}, "clock_hz"),
    ({"clock_hz": 0.0}, "clock_hz"),
    ({"hbm_bandwidth_bytes_per_s": -1.0}, "hbm_bandwidth_bytes_per_s"),
    ({"hbm_bandwidth_bytes_per_s": 1e30}, "hbm_bandwidth_bytes_per_s"),
    ({"l2_bytes": float("inf")}, "l2_bytes"),
    ({"path_bytes_per_cycle": {"gm_ub": 0.0}}, "path_bytes_per_cycle.gm_ub"),
    ({"vector_op_bytes_per_cycle": {"exp_fp16": math.nan}}, "vector_op_bytes_per_cycle.exp_fp16"),
])
def test_impossible_figures_are_rejected_naming_the_figure(changes, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        get_chip("ascend910").replace(**changes)


def test_a_vanishing_clock_raises_instead_of_printing_inf():
    # 1e-300 Hz is a positive finite figure, but the run's time is not finite: SimulationError
    chip = get_chip("ascend910").replace(clock_hz=1e-300)
    with pytest.raises(asim.SimulationError, match="clock_hz"):
        asim.simulate(_tiny(), chip=chip, fusion=False)


@pytest.mark.parametrize("changes, named", [
    ({"hbm_bandwidth_bytes_per_s": 1e-300}, "hbm_bandwidth_bytes_per_s"),   # OverflowError before
    ({"l2_bandwidth_bytes_per_s": 1e-300}, "l2_bandwidth_bytes_per_s"),
    ({"vector_bytes_per_cycle": 1e-300}, "vector_bytes_per_cycle"),          # 8e303 cycles before
    ({"path_latency_cycles": {"gm_ub": 1e300}}, "path_latency_cycles.gm_ub"),
    ({"cube_mmad_overhead_cycles": 1e300}, "cube_mmad_overhead_cycles"),
])
def test_a_vanishing_rate_or_endless_latency_raises_naming_the_figure(changes, named):
    chip = get_chip("ascend910").replace(**changes)
    for detail in ("block", "tile"):
        with pytest.raises(asim.SimulationError, match=named.replace(".", r"\.")):
            asim.simulate(_tiny(), chip=chip, detail=detail)
