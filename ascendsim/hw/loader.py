"""Read chip files (TOML) into `Chip` records, keeping the source of every figure.

File layout (see `chips/ascend910.toml`)::

    name = "ascend910"                       # plain strings: name, description, base
    description = "..."
    ai_cores = {value = 32, source = "S: HC31-press"}        # every figure: value + source
    [cube_mkn]                                                # groups are tables
    float16 = {value = [16, 16, 16], source = "S: HIA-TBE-AICORE"}

A source starts with a confidence tag (S, D, F, M, G; U for user figures) and a colon.
A user file is either complete or starts from another chip with `base = "ascend910"` (a
built-in name, or a path relative to the file) and sets only the figures it changes. In user
files a plain figure (`ub_bytes = 524288`) is accepted and recorded with source
"U: <file name>"; built-in files must give every source. Unknown keys, missing figures, wrong
types and bad values raise `ConfigError` naming the key and the file.
"""

from __future__ import annotations

import difflib
import importlib.resources
import re
from dataclasses import MISSING, fields
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .chip import Chip, check_source

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10
    try:
        import tomli as _toml  # type: ignore[no-redef]
    except ImportError:
        _toml = None  # type: ignore[assignment]

#: built-in aliases -> file names
#: (ascend910b is the 910B2; ascend910b_gen1 is the first-generation SoC CANN calls "Ascend910B")
ALIASES = {"ascend910a": "ascend910", "ascend910b2": "ascend910b", "ascend310p3": "ascend310p"}
_META = ("name", "description", "base")
_FIELDS = {f.name: f for f in fields(Chip) if f.name != "sources"}

# raw form after parsing one file: key -> (value, source); group -> {entry: (value, source)}
Raw = dict[str, Any]


def chips() -> list[str]:
    """Names of the built-in chips, sorted."""
    folder = importlib.resources.files(__package__) / "chips"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def get_chip(name: str | Chip) -> Chip:
    """A built-in chip by name (case-insensitive; a `Chip` is returned unchanged)."""
    if isinstance(name, Chip):
        return name
    if not isinstance(name, str):
        raise ConfigError(f"chip must be a name or a Chip, got {type(name).__name__}")
    key = ALIASES.get(name.lower(), name.lower())
    if key not in chips():
        raise ConfigError(f"unknown chip {name!r}; built-in chips are {', '.join(chips())}")
    return _builtin(key)


def load_chip(path_or_name: str | Path) -> Chip:
    """A chip from a TOML file, or a built-in chip when given one of `chips()`."""
    text = str(path_or_name)
    if not isinstance(path_or_name, Path) and ALIASES.get(text.lower(), text.lower()) in chips():
        return get_chip(text)
    path = Path(path_or_name)
    if not path.is_file():
        raise ConfigError(f"chip file {text!r} not found (built-in chips: {', '.join(chips())})")
    raw = _resolve(path.read_bytes(), str(path), path.parent, path.stem, (str(path.resolve()),))
    return _build(raw, str(path))


@cache
def _builtin(name: str) -> Chip:
    res = importlib.resources.files(__package__) / "chips" / f"{name}.toml"
    where = f"built-in chip file {name}.toml"
    return _build(_resolve(res.read_bytes(), where, None, name, (name,)), where)


def parse_toml(data: bytes, where: str) -> dict[str, Any]:
    """A TOML document (chip or interconnect file) as a dict; ConfigError naming `where` when it
    is not UTF-8 text or not valid TOML."""
    if _toml is None:  # pragma: no cover
        raise ConfigError("reading chip files needs Python >= 3.11 (tomllib) or the tomli package")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte {data[exc.start]:#04x} at offset "
                          f"{exc.start})") from None
    try:
        return _toml.loads(text)
    except RecursionError:
        raise ConfigError(f"{where}: not valid TOML: arrays or tables nested too deeply to "
                          f"parse (a chip file nests at most 2 levels)") from None
    except ValueError as exc:
        m = re.search(r"\d{1000,}", text)
        line = f" (line {text.count(chr(10), 0, m.start()) + 1}: a number of "\
               f"{len(m.group()):,} digits)" if m else ""
        raise ConfigError(f"{where}: not valid TOML{line}: {str(exc).split(';')[0]}") from None


def _resolve(data: bytes, where: str, folder: Path | None, stem: str,
             seen: tuple[str, ...]) -> Raw:
    """Parse one file and merge it over its base (recursively); returns the raw form.

    `folder` is the file's folder, None for a built-in file (built-in figures must all carry a
    source). `seen` holds the files on the base chain (resolved paths or built-in names).
    """
    doc = parse_toml(data, where)
    base = doc.pop("base", None)
    own = _parse(doc, where, user=folder is not None)
    if base is None:
        own.setdefault("name", (stem, ""))
        own.setdefault("description", ("", ""))
        return own
    if not isinstance(base, str):
        raise ConfigError(f"{where}: base must be a chip name or a file path, got {base!r}")
    key = ALIASES.get(base.lower(), base.lower())
    if key in chips():
        res = importlib.resources.files(__package__) / "chips" / f"{key}.toml"
        merged = _resolve(res.read_bytes(), f"built-in chip file {key}.toml", None, key,
                          seen + (key,))
    else:
        path = (folder / base) if folder is not None else Path(base)
        if not path.is_file():
            raise ConfigError(f"{where}: base {base!r} is neither a built-in chip "
                              f"({', '.join(chips())}) nor a chip file")
        ident = str(path.resolve())
        if ident in seen:
            raise ConfigError(f"{where}: base {base!r} makes a cycle of base files")
        merged = _resolve(path.read_bytes(), str(path), path.parent, path.stem, seen + (ident,))
    merged["name"] = (stem, "")
    for key, value in own.items():
        if key in merged and isinstance(value, dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _parse(doc: dict[str, Any], where: str, user: bool) -> Raw:
    """Check keys and entry shapes of one file; return key -> (value, source)."""
    raw: Raw = {}
    for key, entry in doc.items():
        if key in ("name", "description"):
            if not isinstance(entry, str):
                raise ConfigError(f"{where}: {key} must be a string, got {entry!r}")
            raw[key] = (entry, "")
            continue
        spec = _FIELDS.get(key)
        if spec is None:
            raise ConfigError(f"{where}: unknown key {key!r}{_hint(key, list(_FIELDS))}")
        group = spec.metadata["group"]
        if group is None:
            raw[key] = _entry(key, entry, where, user)
            continue
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: {key} must be a table of entries, got {entry!r}")
        names = [f.name for f in fields(group)]
        for sub in entry:
            if sub not in names:
                raise ConfigError(f"{where}: unknown key {key}.{sub}{_hint(sub, names)}")
        raw[key] = {sub: _entry(f"{key}.{sub}", e, where, user) for sub, e in entry.items()}
    return raw


def _entry(key: str, entry: Any, where: str, user: bool) -> tuple[Any, str]:
    if isinstance(entry, dict):
        extra = set(entry) - {"value", "source"}
        if extra or "value" not in entry or "source" not in entry:
            raise ConfigError(f"{where}: {key} must be {{value = ..., source = \"TAG: ...\"}}, "
                              f"got keys {sorted(entry)}")
        try:
            return entry["value"], check_source(key, entry["source"])
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if user:
        return entry, f"U: {Path(where).name}"
    raise ConfigError(f"{where}: {key} must be {{value = ..., source = \"TAG: ...\"}} "
                      f"(every figure of a built-in chip file names its source), got {entry!r}")


def _build(raw: Raw, where: str) -> Chip:
    """Make a Chip from the merged raw form; every error names the file."""
    kwargs: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, spec in _FIELDS.items():
        if name not in raw:
            if spec.default is None:   # an optional figure (Chip.vector_bfloat16)
                continue
            raise ConfigError(f"{where}: missing key {name!r}")
        group = spec.metadata["group"]
        if group is None:
            kwargs[name], src = raw[name]
            if src:
                sources[name] = src
            continue
        entries = raw[name]
        for f in fields(group):
            if f.default is MISSING and f.name not in entries:
                raise ConfigError(f"{where}: missing key {name}.{f.name}")
        kwargs[name] = group(**{sub: value for sub, (value, _) in entries.items()})
        sources.update({f"{name}.{sub}": src for sub, (_, src) in entries.items()})
    try:
        return Chip(**kwargs, sources=sources)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _hint(key: str, names: list[str]) -> str:
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""
