"""The shipped confidence table (ascendsim/report/confidence_table.json) is the one `validate`
gives today: a digest check of the corpus (fast) and a fresh `validate()` (slow). When either
fails, regenerate it: `python bench/confidence_table.py`."""

from __future__ import annotations

import json
import statistics

import pytest

from ascendsim.report.confidence import load_table, size_bands
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
    assert table.bands, "the shipped table has no size bands"
    for (gen, band), b in table.bands.items():
        assert gen in ("910", "910B", "310P", "310") and band in size_bands()
        assert b.n > 0 and b.bias > 0
    assert table.meta["validation_rows"] == sum(e.n for e in table.entries.values())
    assert table.meta["eager_call_rows"] == sum(e.n for e in table.eager.values())
    n_val = sum(r.role == "validation" for r in load_corpus())
    assert table.meta["validation_rows"] + table.meta["eager_call_rows"] <= n_val


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


def test_table_groups_validation_rows_by_family_and_generation():
    from ascendsim.validation.validate import ValidationRecord, ValidationReport

    rows = [r for r in load_corpus() if r.role == "validation" and r.metric == "time"]
    gen1 = [r for r in rows if r.chip == "ascend910b_gen1" and r.family == "transpose"][:3]
    assert len(gen1) == 3
    cal = next(r for r in load_corpus() if r.role == "calibration")
    recs = [ValidationRecord(r, r.chip, r.value * f, "ok") for r, f in zip(gen1, (1.1, 0.8, 1.3))]
    recs += [ValidationRecord(cal, cal.chip, cal.value * 5, "ok"),          # not counted
             ValidationRecord(gen1[0], gen1[0].chip, None, "error", "boom")]  # not counted
    table = confidence_table(ValidationReport(recs))
    (row,) = table["rows"]
    assert (row["family"], row["generation"], row["n"]) == ("transpose", "910", 3)
    assert row["median_abs_error"] == pytest.approx(0.2)      # |0.1|, |-0.2|, |0.3|
    assert row["bias"] == pytest.approx(1.1)                  # the median ratio
    assert table["validation_rows"] == 3
    # first sight: the group's rows that record a first_ratio, whether they simulate today
    seen = [r.first_ratio for r in gen1 if r.first_ratio is not None]
    assert row["first_n"] == len(seen)
    want = statistics.median(abs(x - 1) for x in seen) if seen else None
    assert row["first_median_abs_error"] == pytest.approx(want, abs=1e-6)


def test_first_sight_counts_calibration_rows_but_not_pending_ones():
    from dataclasses import replace

    from ascendsim.validation.validate import ValidationRecord, ValidationReport

    val = next(r for r in load_corpus() if r.role == "validation" and r.family == "gemm")
    cal = replace(val, id="cal-twin", role="calibration", first_ratio=0.5)
    pend = replace(val, id="pending-twin", role="pending", first_ratio=3.0)
    val = replace(val, first_ratio=0.8)
    recs = [ValidationRecord(val, val.chip, val.value, "ok"),
            ValidationRecord(cal, cal.chip, cal.value, "ok"),
            ValidationRecord(pend, pend.chip, None, "pending")]
    (row,) = confidence_table(ValidationReport(recs))["rows"]
    assert row["n"] == 1 and row["first_n"] == 2
    assert row["first_median_abs_error"] == pytest.approx(0.35)   # |0.8 - 1|, |0.5 - 1|


def test_size_bands_group_msprof_kernel_rows_by_simulated_time():
    from ascendsim.validation.validate import ValidationRecord, ValidationReport

    rows = [r for r in load_corpus() if r.role == "validation" and r.unit == "us"
            and r.timing == "msprof_kernel" and r.chip == "ascend910b4"][:3]
    other = next(r for r in load_corpus() if r.role == "validation"
                 and r.timing != "msprof_kernel" and r.metric == "time")
    assert len(rows) == 3
    # simulated 5 us, 8 us and 500 us (ratios from the rows' measured values)
    recs = [ValidationRecord(r, r.chip, t, "ok") for r, t in zip(rows, (5.0, 8.0, 500.0))]
    recs.append(ValidationRecord(other, other.chip, other.value, "ok"))   # not a kernel row
    bands = {(b["generation"], b["band"]): b for b in confidence_table(ValidationReport(recs))
             ["size_bands"]}
    assert set(bands) == {("910B", "< 10 us"), ("910B", ">= 100 us")}
    small = bands[("910B", "< 10 us")]
    ratios = [5.0 / rows[0].value, 8.0 / rows[1].value]
    assert small["n"] == 2
    assert small["bias"] == pytest.approx(statistics.median(ratios), abs=1e-6)
    assert small["median_abs_error"] == pytest.approx(
        statistics.median(abs(x - 1) for x in ratios), abs=1e-6)
    assert bands[("910B", ">= 100 us")]["n"] == 1


def test_eager_call_rows_are_kept_out_of_the_family_rows():
    """A row timed as an eager call (the host's side of the call in its figure) counts in the
    generation's eager_calls, not in its family's row or first sight."""
    from dataclasses import replace

    from ascendsim.validation.validate import ValidationRecord, ValidationReport

    kernel = next(r for r in load_corpus() if r.role == "validation" and r.family == "gemm"
                  and r.chip == "ascend910b4" and r.timing == "msprof_kernel")
    eager = replace(kernel, id="eager-twin", timing="eager_call", first_ratio=0.2)
    kernel = replace(kernel, first_ratio=0.9)
    recs = [ValidationRecord(kernel, kernel.chip, kernel.value * 1.1, "ok"),
            ValidationRecord(eager, eager.chip, eager.value * 0.4, "ok")]
    table = confidence_table(ValidationReport(recs))
    (row,) = table["rows"]
    assert (row["family"], row["n"], row["first_n"]) == ("gemm", 1, 1)
    assert row["median_abs_error"] == pytest.approx(0.1)
    assert table["validation_rows"] == 1 and table["eager_call_rows"] == 1
    (e,) = table["eager_calls"]
    assert (e["generation"], e["n"]) == ("910B", 1)
    assert e["median_abs_error"] == pytest.approx(0.6) and e["bias"] == pytest.approx(0.4)


def test_digest_changes_with_a_first_sight():
    from dataclasses import replace

    rows = load_corpus()
    i = next(i for i, r in enumerate(rows) if r.role != "pending" and r.first_ratio)
    changed = [*rows[:i], replace(rows[i], first_ratio=rows[i].first_ratio * 1.01),
               *rows[i + 1:]]
    assert corpus_digest(changed) != corpus_digest(rows)
