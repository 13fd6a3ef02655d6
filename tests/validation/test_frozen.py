"""The frozen validation set: once frozen, its rows keep their ids, role and values, and rows
added later are reported apart as "new"."""

from __future__ import annotations

import dataclasses

import pytest

from ascendsim.errors import ConfigError
from ascendsim.validation import frozen as fz
from ascendsim.validation.corpus import check_row, load_corpus
from ascendsim.validation.validate import validate_rows


def test_the_frozen_set_is_intact():
    """The validation set was frozen at the end of issue 10: every frozen row exists, is a
    validation row, and has the value it was frozen with (the hash of id|value|unit)."""
    frozen = fz.load_frozen()
    assert frozen is not None, "ascendsim/validation/frozen.toml is missing"
    assert len(frozen.ids) == 81
    rows = {r.id: r for r in load_corpus()}
    missing = [i for i in frozen.ids if i not in rows]
    assert not missing, f"frozen rows removed from the corpus: {missing}"
    demoted = [i for i in frozen.ids if rows[i].role != "validation"]
    assert not demoted, f"frozen rows no longer validation rows: {demoted}"
    assert fz.values_hash(rows[i] for i in frozen.ids) == frozen.values_sha256, \
        "a frozen row's measured value or unit changed"


def test_the_freeze_hash_covers_the_whole_row_definition():
    """definitions_sha256 hashes every defining field of the frozen rows (workload, timing,
    data temperature, chip...), not only id/value/unit: a redefinition must be recorded
    (`record_definitions()`), and the definitions as frozen are kept intact beside it."""
    frozen = fz.load_frozen()
    rows = {r.id: r for r in load_corpus()}
    today = [rows[i] for i in frozen.ids]
    assert fz.definitions_hash(today) == frozen.definitions_sha256, \
        "a frozen row's definition changed: give the source's words in its note, then " \
        "record it with ascendsim.validation.frozen.record_definitions()"
    as_frozen = frozen.as_frozen()
    assert [r.id for r in as_frozen] == list(frozen.ids)
    assert fz.definitions_hash(as_frozen) == frozen.frozen_definitions_sha256
    assert fz.values_hash(as_frozen) == frozen.values_sha256
    # the hash sees what the old one did not: data temperature, block_dim, workload
    row = today[0]
    for change in ({"data": "cold" if row.data != "cold" else "warm"},
                   {"timing": "msprof_kernel" if row.timing != "msprof_kernel" else "eager_call"},
                   {"workload": {**row.workload, "cores": 1}}):
        other = dataclasses.replace(row, **change)
        assert fz.values_hash([other]) == fz.values_hash([row])
        assert fz.definitions_hash([other]) != fz.definitions_hash([row])


def test_a_redefined_frozen_row_quotes_its_source():
    """A frozen row defined differently today than when frozen says so in its note, with the
    source's words in quotes ("Redefined after the freeze: ...; the source's words: '...'")."""
    frozen = fz.load_frozen()
    rows = {r.id: r for r in load_corpus()}
    changed = [r for r in frozen.as_frozen() if rows[r.id].definition() != r.definition()]
    assert len(changed) == 18     # 15 Addmv calls with self, 3 MatMuls at block_dim 32
    bad = [r.id for r in changed if fz.REDEFINED not in rows[r.id].note
           or "the source's words: '" not in rows[r.id].note]
    assert not bad, f"redefined frozen rows without the source's words in their note: {bad}"


def test_freeze_round_trip_and_new_rows_reported_apart(tmp_path, monkeypatch):
    path = tmp_path / "frozen.toml"
    frozen = fz.freeze(path, note="test")
    again = fz.load_frozen(path)
    assert again == frozen and again.ids == tuple(sorted(again.ids))
    vals = [r for r in load_corpus() if r.role == "validation"]
    assert set(frozen.ids) == {r.id for r in vals}
    assert fz.values_hash(vals) == frozen.values_sha256
    assert fz.values_hash(vals[1:]) != frozen.values_sha256

    import ascendsim.validation.validate as v

    monkeypatch.setattr(v, "load_frozen", lambda: fz.load_frozen(path))
    old = next(r for r in vals if r.workload.get("kind") == "transfer")
    new = check_row({"id": "t-new", "chip": "ascend910", "family": "elementwise",
                     "role": "validation", "timing": "msprof_kernel", "data": "warm",
                     "metric": "time", "value": 2.0, "unit": "us", "source": "test",
                     "workload": {"kind": "op", "op": "Relu",
                                  "inputs": [{"shape": [1024], "dtype": "float16"}]}}, "t")
    rep = validate_rows([old, new])
    assert rep.frozen is not None and not rep.is_new(rep.rows[0]) and rep.is_new(rep.rows[1])
    assert len(rep.ratios()) == 1 and len(rep.ratios(new=True)) == 1
    assert "validation rows added since the freeze" in rep.table(rows=False)
    # the per-family view of all validation rows counts the frozen row and the new one
    fams = rep.by_family_all
    assert sum(st.n for st in fams.values()) == rep.all_validation.n == 2
    assert fams["elementwise"].n == 1 + (old.family == "elementwise")
    assert "all validation rows by family" in rep.table(rows=False)


def test_a_malformed_frozen_file_is_a_config_error(tmp_path):
    path = tmp_path / "frozen.toml"
    path.write_text("ids = 3\nvalues_sha256 = 'x'\n")
    with pytest.raises(ConfigError, match="ids must be a list"):
        fz.load_frozen(path)
    path.write_text("nothing = 1\n")
    with pytest.raises(ConfigError, match="not a frozen-set file"):
        fz.load_frozen(path)
