"""`ascendsim validate` and `ascendsim calibrate` from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendsim.cli import main

pytest.importorskip("scipy")

DATA = Path(__file__).resolve().parents[1] / "data" / "msprof"


def test_validate_family_prints_table_and_writes_files(tmp_path, capsys):
    csv_path, png = tmp_path / "rows.csv", tmp_path / "scatter.png"
    assert main(["validate", "--family", "launch", "--csv", str(csv_path), "--plot", str(png),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "pub-pocketllm-910-aclnn-add-enqueue" in out
    assert "median |error| on validation rows" in out
    assert csv_path.read_text().count("\n") >= 2 and png.stat().st_size > 0


def test_validate_summary_reports_sources_and_leave_one_source_out(capsys):
    assert main(["validate", "--family", "launch", "--summary-only", "--loso",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "by source" in out and "leave one source out" in out
    assert "kernel_start_us" in out and "first sight" in out


def test_validate_selected_rows_by_id(capsys):
    """--id picks rows (repeatable); an unknown id is a one-line error naming it and the
    rows that share its prefix."""
    assert main(["validate", "--id", "hpm-resnet-0008", "--id", "hpm-bert-0020",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "validation rows (2)" in out
    assert "hpm-resnet-0008" in out and "hpm-bert-0020" in out and "hpm-bert-0019" not in out
    assert main(["validate", "--id", "hpm-bert-0999", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no corpus row 'hpm-bert-0999'" in err and "hpm-bert-0001" in err


def test_validate_bad_chip_is_one_line_error(capsys):
    assert main(["validate", "--chip", "ascend950", "--family", "launch"]) == 2
    assert "unknown chip" in capsys.readouterr().err


def test_calibrate_writes_a_loadable_chip_file(tmp_path, capsys):
    from ascendsim.hw import load_chip

    out = tmp_path / "my910b.toml"
    lines = (DATA / "op_summary_cann8_910b.csv").read_text().splitlines()
    small = tmp_path / "vector_ops.csv"      # the header and the Cast, Add, ReduceSumD rows
    small.write_text("\n".join([lines[0]] + [x for x in lines[1:]
                                             if ",Cast," in x or ",Add," in x
                                             or ",ReduceSumD," in x]) + "\n")
    assert main(["calibrate", str(small), "--chip", "ascend910b",
                 "--params", "vector_bytes_per_cycle", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "held-out median |error|" in text and "wrote chip file" in text
    chip = load_chip(out)
    assert chip.confidence("vector_bytes_per_cycle") == "C"


def test_calibrate_unknown_param_is_one_line_error(capsys):
    assert main(["calibrate", str(DATA / "op_summary_cann8_910b.csv"), "--params", "nope"]) == 2
    assert "non-fittable figure 'nope'" in capsys.readouterr().err
