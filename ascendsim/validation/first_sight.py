"""Error at first sight: a row's ratio under the model of the commit that added it.

The rule (docs/api.md, "The validation corpus"): when a row is added to the corpus, before
any change to the model or to a chip figure that the row motivates, its ratio under the
model as it stands is written into the row as ``first_ratio``, with ``first_commit`` (the
commit of that model, `git rev-parse HEAD`) and ``first_date`` (UTC, YYYY-MM-DD). The fields
are never updated afterwards. `ValidationReport.first_sight_median` is the median
|first_ratio - 1| over the rows that record one: how far the model was from figures it had
not seen, which no later fitting can improve. Rows older than the rule have none.

`stamp_first_sight(ids)` simulates the given rows with the current model and writes the
three fields into their corpus files (`bench/stamp_first_sight.py` is its command line). It
refuses rows that already have a first sight, rows that do not simulate, and pending rows.
Git is needed only here, to name the commit; `validate()` reads the fields from the rows.
"""

from __future__ import annotations

import datetime as _dt
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import ConfigError
from .corpus import CorpusRow, corpus_files, load_corpus


def model_commit(repo: str | Path | None = None) -> str:
    """The commit of the model that runs (`git rev-parse HEAD`), with "+dirty" when the
    package's source differs from it outside the corpus (the model is not that commit's)."""
    where = Path(repo) if repo is not None else Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ascendsim",
                                ":!ascendsim/validation/corpus"], cwd=where,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ConfigError(f"stamping a first sight needs the git checkout of the model: "
                          f"{exc}") from None
    return head + ("+dirty" if dirty else "")


def first_sight_ratios(rows: Sequence[CorpusRow]) -> dict[str, float]:
    """Row id -> ratio under the current model (rows that simulate)."""
    from .validate import validate_rows

    rep = validate_rows(rows)
    bad = [f"{r.id} ({r.status}: {r.reason})" for r in rep.rows if r.ratio is None]
    if bad:
        raise ConfigError(f"cannot stamp a first sight on rows that do not simulate: "
                          f"{', '.join(bad)}")
    return {r.id: r.ratio for r in rep.rows}


def stamp_first_sight(ids: Iterable[str], paths: Sequence[str | Path] | None = None,
                      commit: str | None = None, date: str | None = None,
                      ratios: dict[str, float] | None = None) -> dict[str, float]:
    """Write first_ratio, first_commit and first_date into the rows `ids` of the corpus
    files (the built-in ones, or `paths`), each after the row's `unit` line. Returns the
    ratios written. commit/date default to the model's commit and today (UTC); ratios
    (id -> ratio) default to simulating the rows now."""
    ids = list(dict.fromkeys(ids))
    files = [Path(p) for p in paths] if paths is not None else corpus_files()
    rows = {r.id: r for r in load_corpus(paths=files)}
    unknown = [i for i in ids if i not in rows]
    if unknown:
        raise ConfigError(f"no such corpus row: {', '.join(unknown)}")
    for i in ids:
        if rows[i].first_ratio is not None:
            raise ConfigError(f"{i} already records its first sight "
                              f"({rows[i].first_ratio} at {rows[i].first_commit}); it is "
                              f"never rewritten")
        if rows[i].role == "pending":
            raise ConfigError(f"{i} is pending: it has no ratio to record")
    if ratios is None:
        ratios = first_sight_ratios([rows[i] for i in ids])
    commit = commit or model_commit()
    date = date or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    todo = set(ids)
    for path in files:
        lines = path.read_text(encoding="utf-8").split("\n")
        out, cur, changed = [], None, False
        for line in lines:
            m = re.match(r'id = "([^"]+)"', line)
            if m:
                cur = m.group(1)
            out.append(line)
            if cur in todo and line.startswith("unit = "):
                out += [f"first_ratio = {round(ratios[cur], 4)!r}",
                        f'first_commit = "{commit}"', f'first_date = "{date}"']
                todo.discard(cur)
                changed = True
        if changed:
            path.write_text("\n".join(out), encoding="utf-8")
    if todo:
        raise ConfigError(f"rows without a 'unit = ' line to stamp after: {sorted(todo)}")
    return {i: ratios[i] for i in ids}


__all__ = ["stamp_first_sight", "first_sight_ratios", "model_commit"]
