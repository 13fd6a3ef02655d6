"""Shared fixtures: seeded random generators (every test is deterministic) and the
simulator's invariant checker."""

from collections import defaultdict

import numpy as np
import pytest


def pytest_collection_modifyitems(config, items) -> None:
    """Run the tests marked `slow` (tens of seconds to two minutes each) first, in their
    collected order: the worker processes (pytest-xdist) then fill the rest of the run with
    short tests and finish together, instead of one worker starting a two-minute test after
    the other has run out of work."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def check_invariants(res) -> None:
    """Assert the model's invariants on a Result; messages name the op, core, pipe, buffer."""
    # no buffer over capacity at any instant (the engine raises; the peaks must agree)
    caps = res.meta["buffer_capacity"]
    for buf, peak in res.meta["buffer_peak"].items():
        assert peak <= caps[buf], f"buffer {buf}: peak {peak} B > capacity {caps[buf]} B"
    # no pipe busy with two instructions at once
    lanes = defaultdict(list)
    for iv in res.trace.intervals:
        assert iv.end > iv.start, f"empty interval {iv}"
        lanes[(iv.engine, iv.core, iv.pipe)].append((iv.start, iv.end, iv.op))
    for lane, ivs in lanes.items():
        ivs.sort()
        for (s0, e0, op0), (s1, e1, op1) in zip(ivs, ivs[1:]):
            assert s1 >= e0, f"{lane} busy twice: {op0} [{s0},{e0}) and {op1} [{s1},{e1})"
    # every task takes at least its roofline bound
    for t in res.trace.tasks:
        assert t.duration >= t.roofline_cycles, (
            f"{t.op_name}: {t.duration} cycles < roofline {t.roofline_cycles}")
        assert t.end <= res.cycles


@pytest.fixture
def invariants():
    """The invariant checker: `invariants(result)`."""
    return check_invariants
