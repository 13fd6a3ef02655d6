"""The shipped confidence table (ascendsim/report/confidence_table.json) is the one `validate`
gives today: a digest check of the corpus (fast) and a fresh `validate()` (slow). When either
fails, regenerate it: `python bench/confidence_table.py`."""

from __future__ import annotations

import json

import pytest

from ascendsim.report.confidence import load_table
from ascendsim.validation.confidence import (
    confidence_table,
    corpus_digest,
    shipped_table_path,
    table_text,
)
from ascendsim.validation.corpus import FAMILIES, load_corpus
from ascendsim.validation.validate import validate

STALE = "the shipped confidence table is stale: run python bench/confidence_table.py"


def test_shipped_table_matches_the_corpus_digest():
    shipped = json.loads(shipped_table_path().read_text(encoding="utf-8"))
    assert shipped["corpus_digest"] == corpus_digest(), STALE


def test_shipped_table_is_well_formed():
    table = load_table()
    assert table.entries
    for (fam, gen), e in table.entries.items():
        assert fam in FAMILIES and gen in ("910", "910B", "310P", "310")
        assert e.n > 0 and e.median_abs_error >= 0 and e.bias > 0
    assert table.meta["validation_rows"] == sum(e.n for e in table.entries.values())
    n_val = sum(r.role == "validation" for r in load_corpus())
    assert table.meta["validation_rows"] <= n_val


def test_digest_changes_with_a_validation_row():
    rows = load_corpus()
    i = next(i for i, r in enumerate(rows) if r.role == "validation")
    from dataclasses import replace

    changed = [*rows[:i], replace(rows[i], value=rows[i].value * 1.01), *rows[i + 1:]]
    assert corpus_digest(changed) != corpus_digest(rows)
    assert corpus_digest(rows[:i] + rows[i + 1:]) != corpus_digest(rows)


@pytest.mark.slow
def test_shipped_table_equals_a_fresh_validate():
    fresh = table_text(confidence_table(validate()))
    assert fresh == shipped_table_path().read_text(encoding="utf-8"), STALE
