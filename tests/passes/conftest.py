"""Helpers of the pass tests: optimise a graph and check its outputs did not change."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.api import optimize


def feeds_for(graph: asim.Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Seeded random inputs for every graph input (float: normal; int: small range)."""
    out = {}
    for name in graph.inputs:
        v = graph.values[name]
        if v.dtype.startswith("float"):
            out[name] = rng.standard_normal(v.shape).astype(v.dtype)
        elif v.dtype == "bool":
            out[name] = rng.integers(0, 2, v.shape).astype(bool)
        else:
            out[name] = rng.integers(0, 5, v.shape).astype(v.dtype)
    return out


#: the pass tests look at GE and graph fusion; UB fusion (issue 5) is tested in its own files
NO_UB = {"Switch": {"UBFusion": {"ALL": "off"}}}


@pytest.fixture
def opt() -> Callable:
    """optimize() with UB fusion off unless a fusion_switch is given."""

    def run(graph: asim.Graph, **kw):
        kw.setdefault("fusion_switch", NO_UB)
        return optimize(graph, **kw)

    return run


@pytest.fixture
def same_outputs(rng: np.random.Generator) -> Callable:
    """optimize(graph, **kw), assert outputs equal before/after (rtol 1e-5), return result."""

    def check(graph: asim.Graph, rtol: float = 1e-5, atol: float = 1e-6, **kw):
        feeds = feeds_for(graph, rng)
        before = asim.execute(graph, feeds)
        kw.setdefault("fusion_switch", NO_UB)
        res = optimize(graph, **kw)
        after = asim.execute(res.graph, feeds)
        assert list(after) == list(before)
        for k in before:
            np.testing.assert_allclose(after[k], before[k], rtol=rtol, atol=atol, err_msg=k)
        return res

    return check


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def counts(res, pass_name: str) -> tuple[int, int]:
    """(matched, effected) of a pass in a result's log."""
    return res.log.counts()[pass_name]
