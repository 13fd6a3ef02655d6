"""The `ascendsim` CLI: listings, and bad input -> one clear line on stderr, exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ascendsim as asim
from ascendsim.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_lists_every_builtin(capsys) -> None:
    code, out, err = run(capsys, "models")
    assert code == 0 and err == ""
    listed = [line.split()[0] for line in out.splitlines()]
    assert listed == asim.models.names()
    assert "resnet50" in listed and "net_basic_fuse" in listed


def test_chips(capsys) -> None:
    code, out, _ = run(capsys, "chips")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == asim.chips()
    assert "32 AI Cores" in out


def test_unknown_model_names_it_and_lists_valid_ones(capsys) -> None:
    code, out, err = run(capsys, "run", "resnet5O")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("ascendsim: error: unknown model 'resnet5O'")
    for name in asim.models.names():
        assert name in err


def test_missing_onnx_file(capsys, tmp_path) -> None:
    missing = str(tmp_path / "nope.onnx")
    code, _, err = run(capsys, "run", missing)
    assert code == 2 and err == f"ascendsim: error: file not found: '{missing}'\n"
    code, _, err = run(capsys, "compare", missing)
    assert code == 2 and "file not found" in err


def test_bad_onnx_file(capsys, tmp_path) -> None:
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"this is not a protobuf")
    code, _, err = run(capsys, "run", str(bad))
    assert code == 2 and err.startswith("ascendsim: error:") and err.count("\n") == 1
    assert "Traceback" not in err


def test_bad_chip(capsys) -> None:
    code, _, err = run(capsys, "run", "net_basic_fuse", "--chip", "ascend999")
    assert code == 2
    assert err.startswith("ascendsim: error: unknown chip 'ascend999'")
    assert "ascend910" in err
    code, _, err = run(capsys, "run", "net_basic_fuse", "--chip", "missing.toml")
    assert code == 2 and "chip file not found: 'missing.toml'" in err


def test_bad_options(capsys, tmp_path) -> None:
    code, _, err = run(capsys, "run", "net_basic_fuse", "--batch", "4")
    assert code == 2 and "model 'net_basic_fuse' has no batch size" in err and "resnet50" in err
    code, _, err = run(capsys, "run", "resnet50", "--batch", "0")
    assert code == 2 and "--batch must be a positive integer" in err
    code, _, err = run(capsys, "run", "net_basic_fuse", "--fusion-switch", "nope.cfg")
    assert code == 2 and "fusion switch file not found: 'nope.cfg'" in err
    sw = tmp_path / "sw.json"
    sw.write_text("{}")
    code, _, err = run(capsys, "run", "net_basic_fuse", "--no-fusion", "--fusion-switch", str(sw))
    assert code == 2 and "--no-fusion excludes --fusion-switch" in err
    code, _, err = run(capsys, "run", "net_basic_fuse", "--timeline",
                       str(tmp_path / "no" / "such" / "t.png"))
    assert code == 2 and "--timeline: folder" in err and "does not exist" in err


def test_usage_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["run"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "MODEL_OR_ONNX" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(["run", "net_basic_fuse", "--detail", "cycle"])
    assert e.value.code == 2 and "invalid choice: 'cycle'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2
    capsys.readouterr()
    assert main([]) == 2
    assert "run" in capsys.readouterr().err


def test_console_script_entry_point() -> None:
    """The installed `ascendsim` script (or `python -m ascendsim.cli`) runs main()."""
    exe = os.path.join(os.path.dirname(sys.executable), "ascendsim")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "ascendsim.cli"]
    p = subprocess.run([*cmd, "run", "no_such_model"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2
    assert p.stderr.startswith("ascendsim: error: unknown model 'no_such_model'")
    assert p.stdout == ""
