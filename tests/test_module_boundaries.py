"""Rooms with public doors: no module of ascendsim imports another module's private
(underscore) names, and no file of the engine or the lowering grows past 800 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ascendsim"
MAX_LINES = 800


def _module_name(path: Path) -> list[str]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _private_imports(path: Path) -> list[str]:
    """`from X import _name` lines of `path` where X is another ascendsim module."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package[:len(package) - node.level + 1] if node.level > 1 else package
            target = base + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] in ("ascendsim", "kernels"):
            target = node.module.split(".")
        else:
            continue
        if target == here:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                             f"from {'.'.join(target)} import {alias.name}")
    return found


def test_no_module_imports_private_names_of_another() -> None:
    files = sorted(PACKAGE.rglob("*.py")) + sorted((ROOT / "kernels").rglob("*.py"))
    found = [line for path in files for line in _private_imports(path)]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_engine_and_lowering_files_stay_small() -> None:
    big = [f"{p.relative_to(ROOT)}: {n} lines"
           for folder in ("sim", "lower") for p in sorted((PACKAGE / folder).glob("*.py"))
           if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not big, f"files over {MAX_LINES} lines:\n" + "\n".join(big)
