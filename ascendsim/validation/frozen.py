"""The frozen validation set: the validation rows later work is judged on.

At the end of issue 10 the validation rows were frozen: `freeze()` writes to `frozen.toml`
(package data beside this module) their ids, a hash of their measured values
(`values_sha256`), a hash of their whole definitions (`definitions_sha256`: what ran, how it
was timed, on what data, what was measured: `corpus.DEFINITION_KEYS`) and the definitions
themselves as they were when frozen (``[[frozen_row]]`` tables). From then on:

- `validate()` reports the frozen rows as defined today and, beside them, as frozen (the
  ``[[frozen_row]]`` definitions simulated under today's model), and validation rows added
  later as a separate "new" group;
- a change to a frozen row's definition needs the source's words in the row's note: a
  sentence "Redefined after the freeze: ... the source's words: '...'" (tests/validation/
  test_frozen.py checks it for every frozen row whose definition differs from the frozen one),
  and `record_definitions()` rewrites `definitions_sha256` so the change is deliberate.

Until the file exists every validation row counts (there is no "new" group).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .corpus import CorpusRow, check_row, load_corpus

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

#: the words a frozen row's note must hold when its definition changed after the freeze
REDEFINED = "Redefined after the freeze"


@dataclass(frozen=True)
class FrozenSet:
    """The frozen validation row ids, the hashes of their values and definitions, and the
    definitions as frozen (raw row tables)."""

    ids: tuple[str, ...]
    values_sha256: str
    note: str = ""
    definitions_sha256: str = ""
    frozen_definitions_sha256: str = ""
    rows: tuple[Mapping[str, Any], ...] = ()

    def as_frozen(self) -> list[CorpusRow]:
        """The frozen rows as they were defined when frozen (to simulate under today's
        model)."""
        return [check_row(raw, f"frozen.toml: frozen_row {raw.get('id')!r}") for raw in self.rows]


def frozen_path() -> Path:
    return Path(str(importlib.resources.files(__package__) / "frozen.toml"))


def values_hash(rows: Iterable[CorpusRow]) -> str:
    """sha256 over "id|value|unit" lines of the rows, sorted by id (the measured values)."""
    text = "\n".join(f"{r.id}|{r.value!r}|{r.unit}" for r in sorted(rows, key=lambda r: r.id))
    return hashlib.sha256(text.encode()).hexdigest()


def definitions_hash(rows: Iterable[CorpusRow]) -> str:
    """sha256 over the rows' whole definitions (`CorpusRow.definition`: id, chip, variant,
    family, role, workload, timing, data, metric, value, unit), as canonical JSON sorted by id."""
    text = "\n".join(json.dumps(r.definition(), sort_keys=True, ensure_ascii=False)
                     for r in sorted(rows, key=lambda r: r.id))
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
    rows = doc.get("frozen_row", [])
    if not isinstance(rows, list):
        raise ConfigError(f"{path}: frozen_row must be an array of tables ([[frozen_row]])")
    return FrozenSet(tuple(ids), str(digest), str(doc.get("note", "")),
                     str(doc.get("definitions_sha256", "")),
                     str(doc.get("frozen_definitions_sha256", "")), tuple(rows))


def freeze(path: str | Path | None = None, note: str = "") -> FrozenSet:
    """Write the ids, hashes and definitions of today's validation rows (done once, by the
    lead)."""
    rows = sorted((r for r in load_corpus() if r.role == "validation"), key=lambda r: r.id)
    raws = tuple(_raw(r) for r in rows)
    digest = definitions_hash(rows)
    frozen = FrozenSet(tuple(r.id for r in rows), values_hash(rows), note, digest, digest, raws)
    write_frozen(frozen, path)
    return frozen


def record_definitions(path: str | Path | None = None) -> FrozenSet:
    """Rewrite `definitions_sha256` over today's definitions of the frozen rows (after a
    redefinition whose note carries the source's words); ids, values and the definitions as
    frozen are kept."""
    frozen = load_frozen(path)
    if frozen is None:
        raise ConfigError("nothing is frozen yet")
    rows = {r.id: r for r in load_corpus()}
    today = definitions_hash(rows[i] for i in frozen.ids)
    new = FrozenSet(frozen.ids, frozen.values_sha256, frozen.note, today,
                    frozen.frozen_definitions_sha256, frozen.rows)
    write_frozen(new, path)
    return new


def write_frozen(frozen: FrozenSet, path: str | Path | None = None) -> None:
    path = frozen_path() if path is None else Path(path)
    lines = ["# The frozen validation set (ascendsim.validation.frozen); do not edit by hand.",
             f"note = {_toml_value(frozen.note)}",
             f'values_sha256 = "{frozen.values_sha256}"',
             "# whole-row hash (corpus.DEFINITION_KEYS) of the frozen rows as defined today",
             f'definitions_sha256 = "{frozen.definitions_sha256}"',
             "# the same hash over the definitions as frozen (the [[frozen_row]] tables below)",
             f'frozen_definitions_sha256 = "{frozen.frozen_definitions_sha256}"', "ids = ["]
    lines += [f'    "{i}",' for i in frozen.ids] + ["]"]
    for raw in frozen.rows:
        lines += ["", "[[frozen_row]]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in raw.items()]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _raw(row: CorpusRow) -> dict[str, Any]:
    """A row's definition and source as a raw table (what `check_row` reads back)."""
    out = row.definition()
    out["source"] = row.source
    if row.source_table:
        out["source_table"] = row.source_table
    return out


def _toml_value(v: Any) -> str:
    """One value in TOML inline syntax (strings as JSON-escaped basic strings)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"not a finite number: {v!r}")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() and k.isascii() \
        else json.dumps(k, ensure_ascii=False)


__all__ = ["FrozenSet", "load_frozen", "freeze", "record_definitions", "write_frozen",
           "values_hash", "definitions_hash", "frozen_path", "REDEFINED"]
