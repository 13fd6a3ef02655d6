"""bench/confidence.py: the headline confidence lines and the BENCHMARKS.md section."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import confidence as cb  # noqa: E402


@pytest.mark.slow
def test_markdown_section_has_every_case(capsys):
    assert cb.main(["--tables", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("`Result.confidence()`")
    for label, cmd, _, _ in cb.CASES:
        assert label in out and cmd in out
    assert out.count("% of time in validated families") == len(cb.CASES)
    assert "| op type | share of time | family |" in out
