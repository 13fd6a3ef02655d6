"""The frozen validation set: the validation rows later work is judged on.

At the end of issue 10 the validation rows are frozen: `freeze()` writes their ids and a
hash of their measured values to `frozen.toml` (package data beside this module). From then
on `validate()` reports the median |error| over the frozen rows, and validation rows added
later form a separate "new" group, so that no change is judged on rows chosen after it.
`tests/validation/test_frozen.py` checks that every frozen row still exists, is still a
validation row, and still has the value it had when frozen.

Until the file exists every validation row counts (there is no "new" group).
"""

from __future__ import annotations

import hashlib
import importlib.resources
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .corpus import CorpusRow, load_corpus

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]


@dataclass(frozen=True)
class FrozenSet:
    """The frozen validation row ids and the hash of their measured values."""

    ids: tuple[str, ...]
    values_sha256: str
    note: str = ""


def frozen_path() -> Path:
    return Path(str(importlib.resources.files(__package__) / "frozen.toml"))


def values_hash(rows: Iterable[CorpusRow]) -> str:
    """sha256 over "id|value|unit" lines of the rows, sorted by id (the measured values)."""
    text = "\n".join(f"{r.id}|{r.value!r}|{r.unit}" for r in sorted(rows, key=lambda r: r.id))
    return hashlib.sha256(text.encode()).hexdigest()


def load_frozen(path: str | Path | None = None) -> FrozenSet | None:
    """The frozen set, or None when nothing is frozen yet."""
    path = frozen_path() if path is None else Path(path)
    if not path.is_file():
        return None
    try:
        doc = _toml.loads(path.read_text(encoding="utf-8"))
        ids, digest = doc["ids"], doc["values_sha256"]
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: not a frozen-set file (ids, values_sha256): {exc}") \
            from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ConfigError(f"{path}: ids must be a list of row ids")
    return FrozenSet(tuple(ids), str(digest), str(doc.get("note", "")))


def freeze(path: str | Path | None = None, note: str = "") -> FrozenSet:
    """Write the ids and value hash of today's validation rows (done once, by the lead)."""
    rows = [r for r in load_corpus() if r.role == "validation"]
    frozen = FrozenSet(tuple(sorted(r.id for r in rows)), values_hash(rows), note)
    path = frozen_path() if path is None else Path(path)
    lines = ["# The frozen validation set (ascendsim.validation.frozen); do not edit by hand.",
             f'note = "{note}"', f'values_sha256 = "{frozen.values_sha256}"', "ids = ["]
    lines += [f'    "{i}",' for i in frozen.ids] + ["]"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return frozen


__all__ = ["FrozenSet", "load_frozen", "freeze", "values_hash", "frozen_path"]
