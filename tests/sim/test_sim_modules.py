"""The engine's modules (ascendsim/sim/) stay small rooms: no import circle between files
(function-level imports included), no private name imported from another module, no file
over 800 lines, and no function over 60 lines without its docstring saying why."""

from __future__ import annotations

import ast
from pathlib import Path

import ascendsim.sim

SIM = Path(ascendsim.sim.__file__).parent
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 60


def _trees() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(SIM.glob("*.py"))}


def _imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    """(module of ascendsim.sim, names) of every import of a sibling, anywhere in the file."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level == 1:
                if node.module:
                    out.append((node.module.split(".")[0], names))
                else:                               # `from . import x`
                    out.extend((n, []) for n in names)
            elif node.level == 0 and (node.module or "").startswith("ascendsim.sim"):
                parts = node.module.split(".")
                if len(parts) > 2:
                    out.append((parts[2], names))
                else:
                    out.extend((n, []) for n in names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[:2] == ["ascendsim", "sim"] and len(parts) > 2:
                    out.append((parts[2], []))
    return out


def test_no_import_circle_between_sim_modules():
    trees = _trees()
    graph = {m: {dep for dep, _ in _imports(t) if dep in trees and dep != m}
             for m, t in trees.items() if m != "__init__"}
    state: dict[str, int] = {}              # 1: on the path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for dep in sorted(graph.get(m, ())):
            if state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                raise AssertionError(f"import circle: {' -> '.join(cycle)}")
            if dep not in state:
                visit(dep, path + [dep])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_no_private_name_imported_between_sim_modules():
    bad = [(m, dep, n) for m, t in _trees().items() for dep, names in _imports(t)
           for n in names if n.startswith("_") and not n.startswith("__")]
    assert not bad, f"private names imported: {bad}"


def test_no_sim_file_over_800_lines():
    long = {p.name: n for p in SIM.glob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not long, long


def test_a_long_function_says_why():
    unexplained = []
    for m, tree in _trees().items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                doc = ast.get_docstring(node) or ""
                if lines > MAX_FUNCTION_LINES and "lines" not in doc:
                    unexplained.append(f"{m}.{node.name} ({lines} lines)")
    assert not unexplained, unexplained
