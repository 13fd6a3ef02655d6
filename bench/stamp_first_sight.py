"""Stamp the error at first sight onto newly added corpus rows (issue 22's rule).

Run it right after adding rows, before any change to the model or to a chip figure that the
rows motivate: it simulates the rows with the model as it stands and writes first_ratio,
first_commit (the model's commit) and first_date into their TOML tables. A row's first sight
is never rewritten. See ascendsim/validation/first_sight.py and docs/api.md.

    python bench/stamp_first_sight.py ROW_ID [ROW_ID ...]
    python bench/stamp_first_sight.py --unstamped-since REV   # rows not in the corpus at REV
"""

from __future__ import annotations

import argparse
import subprocess
import sys

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

from ascendsim.validation.corpus import corpus_dir, load_corpus
from ascendsim.validation.first_sight import stamp_first_sight


def ids_since(rev: str) -> list[str]:
    """Ids of today's non-pending rows without a first sight that the corpus at `rev` lacks."""
    root = corpus_dir()
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, text=True,
                         capture_output=True, check=True).stdout.strip()
    rel = root.relative_to(top).as_posix()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:{rel}"], cwd=top,
                           text=True, capture_output=True, check=True).stdout.split()
    old = set()
    for name in names:
        text = subprocess.run(["git", "show", f"{rev}:{rel}/{name}"], cwd=top, text=True,
                              capture_output=True, check=True).stdout
        old |= {r["id"] for r in _toml.loads(text).get("row", [])}
    return [r.id for r in load_corpus() if r.id not in old and r.role != "pending"
            and r.first_ratio is None]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="*", help="row ids to stamp")
    ap.add_argument("--unstamped-since", metavar="REV",
                    help="stamp every row added since git revision REV that has none")
    args = ap.parse_args(argv)
    ids = list(args.ids) + (ids_since(args.unstamped_since) if args.unstamped_since else [])
    if not ids:
        ap.error("no rows to stamp")
    for rid, ratio in stamp_first_sight(ids).items():
        print(f"{rid}: first_ratio {ratio:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
