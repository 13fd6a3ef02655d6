"""The layer rules and the lint are executable: import-linter's contracts (pyproject.toml) and
ruff run as part of the suite, so the README's test command checks them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess:
    # from the repository root: the checker must see kernels/ as a top-level package
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_import_layers_hold() -> None:
    res = _run("import sys; sys.path.insert(0, '.'); "
               "from importlinter.cli import lint_imports_command; "
               "sys.exit(lint_imports_command())")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout and "KEPT" in res.stdout


def test_ruff_is_clean() -> None:
    res = _run("import sys; from ruff.__main__ import find_ruff_bin; import subprocess; "
               "sys.exit(subprocess.call([find_ruff_bin(), 'check', '.', '-q']))")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
