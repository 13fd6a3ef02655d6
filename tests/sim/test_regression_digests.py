"""Every simulated figure of the 108 regression cases (cycles, task records, intervals) equals
the golden file `tests/data/regression_digests.json`: a refactor or a speed-up must keep them
bit for bit. A change that moves figures on purpose rewrites the file with
`python bench/regression.py --write` and says in its commit which cases moved and why."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import regression  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("model", [name for name, *_ in regression.MODELS])
def test_regression_cases_identical(model: str) -> None:
    want = json.loads(regression.GOLDEN.read_text())
    got = regression.measure(only=f"{model}/")
    assert len(got) == 36
    diff = regression.compare(got, want)
    assert not diff, "figures moved:\n" + "\n".join(diff)


def test_golden_file_covers_every_case() -> None:
    want = json.loads(regression.GOLDEN.read_text())
    assert sorted(want) == sorted(regression.case_names())
    assert len(want) == 108
