"""The discipline that keeps the validation figure a measure of generalisation (issue 22):
calibration and validation rows never share a source table; every row names its table."""

from __future__ import annotations

from collections import defaultdict

import pytest

from ascendsim.validation.corpus import load_corpus


def test_every_row_names_its_source_table():
    missing = [r.id for r in load_corpus() if not r.source_table.strip()]
    assert not missing, f"rows without a source_table: {missing}"
    for r in load_corpus():
        repo, sep, rest = r.source_table.partition(":")
        assert sep and repo and rest, f"{r.id}: source_table is '<repo or site>:<path>#<table>'"
        # a path without revision: no commit hash or 'blob/<rev>' in it
        assert "/blob/" not in rest and "/tree/" not in rest, f"{r.id}: path has a revision"


#: tables allowed to hold both roles (none: the four shared when the rule was written had their
#: rows' roles turned around and the figures fitted on them re-fitted on other tables)
KNOWN_SHARED: set[str] = set()


def test_calibration_and_validation_rows_never_share_a_source_table():
    roles: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in load_corpus():
        roles[r.source_table][r.role].append(r.id)
    shared = {t: (v["calibration"][:3], v["validation"][:3]) for t, v in roles.items()
              if v.get("calibration") and v.get("validation") and t not in KNOWN_SHARED}
    assert not shared, f"tables holding both calibration and validation rows: {shared}"


# ----------------------------------------------------------------------------- the report
def _row(rid, source_table, ratio_value=2.0, first=None, role="validation", **extra):
    from ascendsim.validation.corpus import check_row

    raw = {"id": rid, "chip": "ascend910", "family": "elementwise", "role": role,
           "workload": {"kind": "op", "op": "Relu",
                        "inputs": [{"shape": [1024], "dtype": "float16"}]},
           "timing": "msprof_kernel", "data": "warm", "metric": "time", "value": ratio_value,
           "unit": "us", "source": "test", "source_table": source_table, **extra}
    if role == "calibration":
        raw["calibrates"] = ["host_launch_us"]
    if first is not None:
        raw.update(first_ratio=first, first_commit="0" * 40, first_date="2026-11-23")
    return check_row(raw, rid)


def test_first_sight_median_over_the_rows_that_record_one():
    import math

    from ascendsim.validation.validate import validate_rows

    rep = validate_rows([_row("a", "x.org:p#t", first=1.5), _row("b", "x.org:p#t", first=0.8),
                         _row("c", "y.org:q", first=1.1, role="calibration"),
                         _row("d", "y.org:q")])
    # |0.5|, |-0.2|, |0.1| over the three rows with a first sight (any role but pending)
    assert rep.first_sight.n == 3
    assert rep.first_sight_median == pytest.approx(0.2)
    assert "first sight" in rep.table(rows=False)
    assert math.isnan(validate_rows([_row("e", "x.org:p#t")]).first_sight_median)


def test_first_sight_by_family_pairs_first_sight_and_today_on_the_same_rows():
    from dataclasses import replace

    from ascendsim.validation.validate import validate_rows

    rows = [_row("a", "x.org:p#t", first=0.5), _row("b", "x.org:p#t", first=0.7),
            replace(_row("c", "x.org:p#t", first=2.0), family="softmax"),
            _row("d", "x.org:p#t")]                       # no first sight: not counted
    rep = validate_rows(rows)
    fams = rep.first_sight_by_family
    assert set(fams) == {"elementwise", "softmax"}
    first, today = fams["elementwise"]
    assert first.n == today.n == 2
    assert first.median_ratio == pytest.approx(0.6)
    want = [r.ratio for r in rep.rows if r.id in ("a", "b")]
    assert today.median_ratio == pytest.approx(sum(want) / 2)
    assert "first sight by family" in rep.table(rows=False)


def test_by_size_band_counts_msprof_kernel_rows_by_simulated_time():
    from ascendsim.validation.validate import validate_rows

    rows = [_row("a", "x.org:p#t"), _row("b", "x.org:p#t", ratio_value=3.0),
            _row("c", "x.org:p#t", timing="eager_call")]     # not a kernel time: not counted
    rep = validate_rows(rows)
    bands = rep.by_size_band
    sims = [r.simulated for r in rep.rows if r.id in ("a", "b")]
    assert all(s < 10 for s in sims)                           # a 1024-element Relu
    assert list(bands) == [("910", "< 10 us")]
    st = bands[("910", "< 10 us")]
    assert st.n == 2
    assert st.median_ratio == pytest.approx((sims[0] / 2.0 + sims[1] / 3.0) / 2)
    assert "by simulated kernel time" in rep.table(rows=False)


def test_per_source_table_counts_each_source_apart():
    from ascendsim.validation.validate import validate_rows

    rep = validate_rows([_row("a", "x.org:p#t1"), _row("b", "x.org:p#t2"),
                         _row("c", "y.org:q", role="calibration"), _row("d", "y.org:r")])
    src = rep.by_source
    assert list(src) == ["x.org", "y.org"]
    assert src["x.org"].validation.n == 2 and src["x.org"].tables == 2
    assert src["y.org"].validation.n == 1 and src["y.org"].calibration.n == 1
    text = rep.table(rows=False)
    assert "by source" in text and "x.org" in text and "y.org" in text


def test_report_lines_say_which_rows_they_count():
    from ascendsim.validation.validate import validate_rows

    text = validate_rows([_row("a", "x.org:p#t")]).table(rows=False)
    for label in ("frozen validation rows, as defined today",
                  "frozen validation rows, as frozen", "validation rows added since the freeze",
                  "all validation rows (frozen + added)", "calibration rows (fitted; not an error)",
                  "first sight (rows with a first_ratio, not pending)"):
        assert label in text


def test_leave_one_source_out_of_every_calibrated_figure():
    """Each C figure of the first-generation 910, each source of its calibration rows left
    out: the figure without it and the error on its rows, with and without."""
    from ascendsim.hw import get_chip
    from ascendsim.validation.calibrate import leave_one_source_out, loso_table

    recs = leave_one_source_out(chip_names=["ascend910b_gen1"])
    chip = get_chip("ascend910b_gen1")
    c_figures = {k for k in chip.figure_keys() if chip.confidence(k) == "C"}
    assert {r.figure for r in recs} == c_figures
    for r in recs:
        assert r.rows and r.error_with == r.error_with      # a number, not NaN
        rows = {x.id: x for x in load_corpus()}
        assert all(rows[i].source_repo == r.source and r.figure in rows[i].calibrates
                   for i in r.rows)
    assert "leave one source out" in loso_table(recs)[0]


def test_stamp_first_sight_writes_the_fields_once(tmp_path):
    from ascendsim.errors import ConfigError
    from ascendsim.validation.corpus import load_corpus_file
    from ascendsim.validation.first_sight import stamp_first_sight

    path = tmp_path / "rows.toml"
    path.write_text('[[row]]\nid = "t-relu"\nchip = "ascend910"\nfamily = "elementwise"\n'
                    'role = "validation"\ntiming = "msprof_kernel"\ndata = "warm"\n'
                    'metric = "time"\nvalue = 3.0\nunit = "us"\nsource = "test"\n'
                    'source_table = "x.org:p#t"\nworkload = {kind = "op", op = "Relu", '
                    'inputs = [{shape = [1024], dtype = "float16"}]}\n', encoding="utf-8")
    got = stamp_first_sight(["t-relu"], paths=[path], commit="c" * 40, date="2026-11-23")
    row = load_corpus_file(path)[0]
    assert row.first_ratio == pytest.approx(round(got["t-relu"], 4))
    assert row.first_commit == "c" * 40 and row.first_date == "2026-11-23"
    with pytest.raises(ConfigError, match="never rewritten"):
        stamp_first_sight(["t-relu"], paths=[path], commit="d" * 40)


def test_the_built_in_corpus_reports_a_first_sight_median():
    """Rows added since the rule record their first sight, and validate() reports its median
    from the rows alone (package data: no git at run time)."""
    import math

    from ascendsim.validation.validate import validate_rows

    stamped = [r for r in load_corpus() if r.first_ratio is not None]
    assert len(stamped) >= 6
    assert all(len(r.first_commit.split("+")[0]) == 40 and r.first_date for r in stamped)
    cheap = [r for r in stamped if r.id.startswith("hpm-bert64-ks-")]
    rep = validate_rows(cheap)
    assert rep.first_sight.n == len(cheap) and not math.isnan(rep.first_sight_median)
