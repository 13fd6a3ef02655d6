"""calibrate(): recovers a known figure from a synthetic profile, improves held-out error,
writes a loadable chip file, refuses unknown figures; C-tagged chip figures cite only
calibration rows of the corpus."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from ascendsim.api import simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip, load_chip
from ascendsim.models import matmul_bias_relu
from ascendsim.validation.calibrate import (
    C_PREFIX,
    calibrate,
    cited_rows,
    fittable_params,
    split,
)
from ascendsim.validation.corpus import load_corpus
from ascendsim.validation.msprof import OpCall, simulate_call

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest.importorskip("scipy")

CHIPS = Path(__file__).resolve().parents[2] / "ascendsim" / "hw" / "chips"
#: copy-like ops large enough (> half of the 910's 32 MiB L2) to stream from HBM
OPS = [((4096, 4096), "Add"), ((8192, 2048), "Relu"), ((1024, 8192), "Cast"),
       ((4096, 4096), "Relu"), ((16384, 1024), "Mul"), ((6144, 4096), "Exp"),
       ((4096, 8192), "Sigmoid"), ((12288, 1024), "Add"), ((2048, 8192), "Abs"),
       ((8192, 4096), "Neg")]
TRUE_FACTOR = 0.5


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    """An op_summary CSV whose "measured" times come from a 910 with half the HBM bandwidth."""
    chip = get_chip("ascend910")
    truth = chip.replace(hbm_bandwidth_bytes_per_s=chip.hbm_bandwidth_bytes_per_s * TRUE_FACTOR)
    path = tmp_path_factory.mktemp("cal") / "synthetic_op_summary.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Op Name", "OP Type", "Task Type", "Task Duration(us)", "Input Shapes",
                    "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types"])
        for i, (shape, op) in enumerate(OPS):
            n = 2 if op in ("Add", "Mul") else 1
            out = "float32" if op == "Cast" else "float16"
            us = simulate_call(OpCall(op, ((shape, "float16", "ND"),) * n,
                                      ((shape, out, "ND"),)), truth)[0]
            s = ",".join(map(str, shape))
            w.writerow([f"op{i}", op, "AI_CORE", f"{us:.4f}", ";".join([s] * n),
                        ";".join(["DT_FLOAT16"] * n), ";".join(["ND"] * n), s,
                        "DT_FLOAT" if op == "Cast" else "DT_FLOAT16"])
    return path


@pytest.fixture(scope="module")
def result(profile):
    return calibrate(profile, "ascend910", ["hbm_bandwidth_bytes_per_s"], holdout=0.3, seed=0)


def test_recovers_the_hbm_bandwidth_within_10_percent(result):
    assert result.factors["hbm_bandwidth_bytes_per_s"] == pytest.approx(TRUE_FACTOR, rel=0.10)
    assert result.params["hbm_bandwidth_bytes_per_s"] == pytest.approx(
        get_chip("ascend910").hbm_bandwidth_bytes_per_s * TRUE_FACTOR, rel=0.10)


def test_held_out_error_improves(result):
    assert len(result.test_rows) == 3 and len(result.train_rows) == 7
    assert not set(result.test_rows) & set(result.train_rows)
    assert result.error_before > 0.3          # the start is far off: 2x the bandwidth
    assert result.error_after < result.error_before
    assert result.loss_after < result.loss_before


def test_fitted_figure_says_where_it_came_from(result):
    src = result.chip.source("hbm_bandwidth_bytes_per_s")
    assert src.startswith(C_PREFIX) and result.chip.confidence("hbm_bandwidth_bytes_per_s") == "C"
    assert cited_rows(src) == result.train_rows
    assert result.chip.source("l2_bytes") == get_chip("ascend910").source("l2_bytes")


def test_written_chip_file_loads_and_simulates(result, tmp_path):
    path = result.write_toml(tmp_path / "my910.toml")
    doc = tomllib.loads(path.read_text())
    assert doc["base"] == "ascend910"
    chip = load_chip(path)
    assert chip.hbm_bandwidth_bytes_per_s == pytest.approx(
        result.params["hbm_bandwidth_bytes_per_s"])
    assert chip.source("hbm_bandwidth_bytes_per_s").startswith(C_PREFIX)
    assert simulate(matmul_bias_relu(64, 64, 64), chip).cycles > 0


def test_split_is_seeded_and_disjoint():
    ids = [str(i) for i in range(10)]
    assert split(ids, 0.3, 0) == split(ids, 0.3, 0)
    assert split(ids, 0.3, 0) != split(ids, 0.3, 1)
    train, test = split(ids, 0.3, 0)
    assert sorted(train + test) == list(range(10)) and len(test) == 3
    with pytest.raises(ConfigError, match="holdout"):
        split(ids, 1.0, 0)


def test_unknown_figure_lists_the_valid_ones(profile):
    with pytest.raises(ConfigError, match="unknown or non-fittable figure 'hbm_bw'.*valid: "
                                          ".*hbm_bandwidth_bytes_per_s"):
        calibrate(profile, "ascend910", ["hbm_bw"])
    with pytest.raises(ConfigError, match="ai_cores"):
        calibrate(profile, "ascend910", ["ai_cores"])       # an integer count: not fittable
    assert "path_bytes_per_cycle.gm_ub" in fittable_params(get_chip("ascend910b"))


def test_calibrates_on_corpus_rows_too():
    """Corpus rows work as input: the 910B1 GM->L1 DMA curve, bandwidth refitted."""
    rows = [r for r in load_corpus(["copy"]) if "910b1-dma-gm-l1" in r.id]
    res = calibrate(rows, "ascend910b", ["path_bytes_per_cycle.gm_l1"], holdout=0.25)
    assert res.train_rows and res.test_rows
    assert res.train_error_after <= res.train_error_before + 1e-12


def c_tag_problems(path: Path, rows: dict) -> list[str]:
    """Problems of the C-tagged figures of one chip file (cites nothing, an unknown row, or a
    row that is not a calibration row)."""
    doc = tomllib.loads(path.read_text())
    problems = []
    for key, value in doc.items():
        if not isinstance(value, dict):
            continue
        subs = [(key, value)] if "source" in value else \
            [(f"{key}.{s}", e) for s, e in value.items() if isinstance(e, dict)]
        for name, entry in subs:
            src = entry.get("source", "")
            if not src.startswith("C"):
                continue
            ids = cited_rows(src)
            if not ids:
                problems.append(f"{path.name}: {name}: cites no rows: {src!r}")
            for i in ids:
                if i not in rows:
                    problems.append(f"{path.name}: {name}: unknown row {i!r}")
                elif rows[i].role != "calibration":
                    problems.append(f"{path.name}: {name}: {i} is a {rows[i].role} row")
    return problems


def test_built_in_c_tagged_figures_cite_only_calibration_rows():
    """Every chip figure tagged C in ascendsim/hw/chips/*.toml cites row ids that exist in
    the corpus with role calibration (there may be none today; the files are still read)."""
    rows = {r.id: r for r in load_corpus()}
    files = sorted(CHIPS.glob("*.toml"))
    assert len(files) >= 3
    problems = [p for path in files for p in c_tag_problems(path, rows)]
    assert not problems, "\n".join(problems)


def test_the_c_tag_check_catches_a_validation_row(tmp_path):
    rows = {r.id: r for r in load_corpus()}
    val = next(r.id for r in rows.values() if r.role == "validation")
    cal = next(r.id for r in rows.values() if r.role == "calibration")
    path = tmp_path / "x.toml"
    path.write_text(f'base = "ascend910"\n'
                    f'host_launch_us = {{value = 9.0, source = "{C_PREFIX}{cal}"}}\n'
                    f'[path_bytes_per_cycle]\n'
                    f'gm_ub = {{value = 9.0, source = "{C_PREFIX}{cal}, {val}, nope"}}\n')
    assert load_chip(path).confidence("host_launch_us") == "C"
    problems = c_tag_problems(path, rows)
    assert len(problems) == 2
    assert f"{val} is a validation row" in problems[0] and "unknown row 'nope'" in problems[1]


def test_missing_scipy_names_the_extra(monkeypatch, profile):
    """Without scipy, calibrate() says which extra to install (scipy.optimize unimportable)."""
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(ConfigError, match=r"pip install 'ascendsim\[calibrate\]'"):
        calibrate(profile, "ascend910", ["hbm_bandwidth_bytes_per_s"])


# ---------------------------------------------------- issue 23 item 9: what calibration shows
def test_per_row_before_after_table(result):
    rows = {r.id: r for r in result.rows}
    assert set(rows) == set(result.train_rows) | set(result.test_rows)
    assert {rows[i].part for i in result.test_rows} == {"held out"}
    for r in result.rows:                        # half the bandwidth: the start is fast
        assert r.ratio_before < 0.9 and abs(r.ratio_after - 1) < abs(r.ratio_before - 1)
    text = result.row_table()
    assert text.splitlines()[0].split()[:2] == ["row", "part"]
    assert all(i in text for i in result.test_rows)


def test_write_refused_when_held_out_error_got_worse(result, tmp_path):
    import dataclasses

    worse = dataclasses.replace(result, error_before=0.693, error_after=0.710)
    assert worse.worse and not result.worse
    with pytest.raises(ConfigError, match=r"worse \(69\.3% -> 71\.0%\).*force=True"):
        worse.write_toml(tmp_path / "w.toml")
    assert not (tmp_path / "w.toml").exists()
    assert load_chip(worse.write_toml(tmp_path / "w.toml", force=True)).name
    assert "refuses it" in worse.summary()


def test_implausible_fit_of_a_sourced_figure_is_warned(result):
    from ascendsim.validation.calibrate import PLAUSIBLE_FACTOR, implausible

    chip = get_chip("ascend910")
    hbm = chip.hbm_bandwidth_bytes_per_s
    tag = chip.confidence("hbm_bandwidth_bytes_per_s")
    assert PLAUSIBLE_FACTOR[tag.split("/")[0]] == 2.0
    warn = implausible(chip, {"hbm_bandwidth_bytes_per_s": 455e9})
    assert len(warn) == 1 and "hbm_bandwidth_bytes_per_s = 4.55e+11" in warn[0] \
        and f"x{455e9 / hbm:.2f}" in warn[0]
    assert implausible(chip, {"hbm_bandwidth_bytes_per_s": hbm * 0.8}) == []
    assert result.warnings == implausible(chip, result.params)


def test_cli_reports_unmapped_rows_the_table_and_refuses_a_worse_file(profile, tmp_path,
                                                                      capsys, monkeypatch):
    import dataclasses

    from ascendsim.cli import main
    from ascendsim.validation import calibrate as cal_mod

    rows = profile.read_text().splitlines()
    extra = tmp_path / "with_unknown.csv"
    extra.write_text("\n".join([*rows, "z0,Zork,AI_CORE,3.0,16,DT_FLOAT16,ND,16,DT_FLOAT16",
                                "f0,FusionOp_Conv2D_Relu,AI_CORE,3.0,16,DT_FLOAT16,ND,16,"
                                "DT_FLOAT16"]) + "\n")
    out = tmp_path / "c.toml"
    assert main(["calibrate", str(extra), "--chip", "ascend910", "--params",
                 "hbm_bandwidth_bytes_per_s", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 of 12 row(s) not used" in text and "FusionOp_Conv2D_Relu (1)" in text \
        and "Zork (1)" in text
    assert "ratio before" in text and "single ops' inputs: warm L2" in text and out.exists()
    real = cal_mod.calibrate
    monkeypatch.setattr(cal_mod, "calibrate", lambda *a, **k: dataclasses.replace(
        real(*a, **k), error_before=0.1, error_after=0.2))
    out.unlink()
    assert main(["calibrate", str(profile), "--chip", "ascend910", "--params",
                 "hbm_bandwidth_bytes_per_s", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "worse (10.0% -> 20.0%)" in err
    assert not out.exists()
    assert main(["calibrate", str(profile), "--chip", "ascend910", "--params",
                 "hbm_bandwidth_bytes_per_s", "--out", str(out), "--force"]) == 0
    assert out.exists()
