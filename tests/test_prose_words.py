"""The prose files speak about the software, not about how its work was organised.

Prose: README.md, BENCHMARKS.md, docs/*.md and the markdown cells of notebooks/*.ipynb, with
code blocks, code spans (backticks) and HTML comments taken out. Identifiers stay allowed
(CANN's `session_and_graph_id`, or session_and_graph_id outside backticks: a whole-word match
does not see a word inside an identifier)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: words about how the work was organised, matched as whole words, any case
WORDS = ("session", "sessions", "helper", "helpers", "worktree", "worktrees", "subagent",
         "subagents", "sub-agent", "sub-agents")
#: branch names of the repository's history that are not ordinary words
BRANCHES = ("ffwd", "passfast", "optfast", "lowfast", "enginefast", "unitblock", "l2cache",
            "l2fix", "resnettrain", "attnrows", "gen1vec", "gen1gemm")
#: a `wt-...` branch name
BRANCH_PATTERN = r"wt-[a-z0-9-]+"


def prose_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "notebooks").glob("*.ipynb"))]
    return [f for f in files if f.exists()]


def prose_text(path: Path) -> str:
    """The file's prose: notebook markdown cells only; no code blocks, spans or comments."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text())["cells"]
        text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return strip_code(text)


def strip_code(text: str) -> str:
    """Markdown without fenced code blocks, HTML comments and code spans."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.S)


def branch_names() -> set[str]:
    """Local branch names of this clone that are not ordinary words (contain a digit, a hyphen
    or are listed in BRANCHES); empty outside a git checkout."""
    out = subprocess.run(["git", "-C", str(ROOT), "branch", "--format=%(refname:short)"],
                         capture_output=True, text=True)
    names = out.stdout.split() if out.returncode == 0 else []
    return {n for n in names if "-" in n or any(ch.isdigit() for ch in n)} | set(BRANCHES)


def offending(text: str, names: set[str]) -> list[str]:
    alternatives = [re.escape(w) for w in (*WORDS, *sorted(names))] + [BRANCH_PATTERN]
    pattern = re.compile(r"(?<![\w-])(" + "|".join(alternatives) + r")(?![\w-])", re.I)
    hits = []
    for m in pattern.finditer(text):
        line = text[:m.start()].count("\n") + 1
        hits.append(f"line {line}: {m.group(0)!r} in "
                    f"{text[max(0, m.start() - 40):m.end() + 40]!r}")
    return hits


@pytest.mark.parametrize("path", prose_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_prose_has_no_words_about_the_work(path):
    hits = offending(prose_text(path), branch_names())
    assert not hits, f"{path.name}:\n" + "\n".join(hits)


def test_identifiers_and_code_are_not_prose():
    sample = ("CANN's `session_and_graph_id` and session_and_graph_id are identifiers.\n"
              "```python\nsession = make_session()\n```\n<!-- a helper comment -->\n"
              "Code ``a `session` b`` in a span.\n")
    assert offending(strip_code(sample), set()) == []
    assert offending("the fifth session ran on wt-engine", set()) != []
    assert len(offending("a helper and the Sessions", set())) == 2
