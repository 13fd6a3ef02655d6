"""The lowering as a table of lowerings (ascendsim/lower/lowering.py): every op finds its row
by its registry entry, and the modules of ascendsim.lower stay small rooms that import each
other without circles and without private names."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import numpy as np

import ascendsim as asim
from ascendsim.ir.registry import Unit, get_op, registered_ops
from ascendsim.lower import lowering
from ascendsim.lower.lowering import LOWERINGS, lowering_key

LOWER = Path(lowering.__file__).parent


def test_every_unit_and_every_named_lowering_has_a_row():
    assert {u.value for u in Unit} <= set(LOWERINGS)
    named = {get_op(t).lowering for t in registered_ops()} - {""}
    assert named <= set(LOWERINGS)
    assert {"fused", "flash_attention", "flash_attention_grad", "grouped_matmul",
            "cache_append"} <= named


def test_a_node_is_keyed_by_its_registry_entry():
    g = asim.Graph("keys")
    x = g.input("x", (4, 16), "float16")
    w = g.weight("w", (16, 8), "float16", seed=0)
    y = g.relu(g.matmul(x, w))
    g.output(g.reshape(y, g.const(np.array([32], np.int64))))
    keys = [lowering_key(n, dict(g.constants)) for n in g.nodes]
    assert keys == ["cube", "vector", "none"]


def _lower_modules() -> list[Path]:
    return sorted(LOWER.glob("*.py"))


def test_no_import_circles_between_lower_modules():
    """Lazy (function-level) imports count: grimp sees every import statement."""
    graph = grimp.build_graph("ascendsim")
    mods = {m for m in graph.modules if m.startswith("ascendsim.lower.")}
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in mods}
             for m in mods}
    for start in sorted(mods):
        stack, seen = [start], set()
        while stack:
            for nxt in edges[stack.pop()]:
                assert nxt != start, f"{start} imports itself back"
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)


def test_no_lower_module_imports_private_names():
    for path in _lower_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def test_small_files_and_functions():
    """No file over 800 lines; a function over 60 lines says why in its docstring."""
    for path in _lower_modules():
        text = path.read_text()
        assert len(text.splitlines()) <= 800, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    assert "Over 60" in (ast.get_docstring(node) or ""), \
                        f"{path.name}:{node.name} is {lines} lines and does not say why"
