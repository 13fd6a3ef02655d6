"""How the chips of a training cluster are linked: `Interconnect` records loaded from TOML files
(`interconnects/<name>.toml`, beside the chip files), every figure with its source.

Note on the model
-----------------
A server holds `chips_per_server` chips. Inside a server, chips form full-mesh groups of
`mesh_group_size` over HCCS: every chip of a group has its own HCCS link to every other one
(`hccs_bandwidth_bytes_per_s` per link and direction). A server with more chips than one group
(the 910's 4 + 4) joins its groups through `group_link_*` (a PCIe switch on the 910). Between
servers each chip has its own RoCE port (`nic_bandwidth_bytes_per_s`) into a non-blocking
network. Every step of a collective costs a fixed latency (`*_latency_us`, the alpha of HCCL's
alpha-beta model) plus bytes / bandwidth (beta). Where the file gives `stream_task_us`, a mesh
stage also pays its chain of HCCL stream tasks (notify record/wait, SDMA copy or inline reduce)
on the main stream, that many tasks times `stream_task_us` (`hw.collectives`, MESH_STAGE_TASKS).

File layout (see `interconnects/ascend910.toml`)::

    name = "ascend910"             # plain strings: name, description, base
    chips_per_server = {value = 8, source = "S: ..."}

A file may start from another with `base = "<built-in name or file path>"` and give only the
figures that differ (the Atlas 800 A2 box is the 910B training server's links under the box's
name: one place for each figure).

Unknown keys, missing figures and bad values raise `ConfigError` naming the key and the file.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from .chip import Chip, check_source
from .loader import parse_toml


@dataclass(frozen=True)
class Interconnect:
    """The links between the chips of a cluster (see the module's Note on the model)."""

    name: str
    description: str
    chips_per_server: int
    mesh_group_size: int
    hccs_bandwidth_bytes_per_s: float
    hccs_latency_us: float
    nic_bandwidth_bytes_per_s: float
    nic_latency_us: float
    group_link_bandwidth_bytes_per_s: float | None = None
    group_link_latency_us: float | None = None
    stream_task_us: float | None = None
    sources: Any = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("name", "description", "sources") or v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"interconnect {self.name}: {f.name} must be a positive "
                                  f"number, got {v!r}")
        for key in ("chips_per_server", "mesh_group_size"):
            if not isinstance(getattr(self, key), int):
                raise ConfigError(f"interconnect {self.name}: {key} must be an integer")
        if self.chips_per_server % self.mesh_group_size:
            raise ConfigError(f"interconnect {self.name}: chips_per_server "
                              f"({self.chips_per_server}) must be a multiple of mesh_group_size "
                              f"({self.mesh_group_size})")
        grouped = self.mesh_group_size < self.chips_per_server
        has_link = self.group_link_bandwidth_bytes_per_s is not None
        if grouped != has_link or has_link != (self.group_link_latency_us is not None):
            raise ConfigError(f"interconnect {self.name}: group_link_bandwidth_bytes_per_s and "
                              f"group_link_latency_us are needed exactly when a server holds "
                              f"several mesh groups (chips_per_server > mesh_group_size)")
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def __reduce__(self) -> tuple:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        return (_rebuild, (values, dict(self.sources)))

    def source(self, key: str) -> str:
        if key not in self.sources:
            raise ConfigError(f"interconnect {self.name}: no figure {key!r}")
        return self.sources[key]


def _rebuild(values: dict[str, Any], sources: dict[str, str]) -> Interconnect:
    return Interconnect(**values, sources=sources)


_FIGURES = {f.name: f for f in fields(Interconnect)
            if f.name not in ("name", "description", "sources")}


def interconnects() -> list[str]:
    """Names of the built-in interconnect files: training servers named like their chip
    (ascend910, ascend910b) and the boxes of parallel inference plans (atlas800-a2,
    atlas800-a3)."""
    folder = importlib.resources.files(__package__) / "interconnects"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_interconnect(path_or_name: str | Path) -> Interconnect:
    """An interconnect from a TOML file, or a built-in one by name."""
    raw, where = _raw(path_or_name, ())
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, entry in raw.items():
        if key in ("name", "description"):
            if not isinstance(entry, str):
                raise ConfigError(f"{where}: {key} must be a string")
            values[key] = entry
            continue
        if key not in _FIGURES:
            raise ConfigError(f"{where}: unknown key {key!r}; keys are "
                              f"{', '.join(['name', 'description', *_FIGURES])}")
        if not isinstance(entry, dict) or set(entry) != {"value", "source"}:
            raise ConfigError(f"{where}: {key} must be {{value = ..., source = \"TAG: ...\"}}")
        values[key] = entry["value"]
        sources[key] = check_source(key, entry["source"])
    missing = [k for k, f in _FIGURES.items() if f.default is not None and k not in values]
    missing += [k for k in ("name", "description") if k not in values]
    if missing:
        raise ConfigError(f"{where}: missing {', '.join(missing)}")
    try:
        return Interconnect(**values, sources=sources)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def _raw(path_or_name: str | Path, seen: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The parsed file, merged over its `base` (recursively), and where it came from."""
    text = str(path_or_name)
    if not isinstance(path_or_name, Path) and text.lower() in interconnects():
        data = (importlib.resources.files(__package__) / "interconnects"
                / f"{text.lower()}.toml").read_bytes()
        where = f"interconnects/{text.lower()}.toml"
    else:
        path = Path(path_or_name)
        if not path.is_file():
            raise ConfigError(f"interconnect file {text!r} not found (built-in: "
                              f"{', '.join(interconnects())})")
        data, where = path.read_bytes(), str(path)
    raw = parse_toml(data, where)
    base = raw.pop("base", None)
    if base is None:
        return raw, where
    if not isinstance(base, str):
        raise ConfigError(f"{where}: base must be an interconnect name or a file path")
    if where in seen:
        raise ConfigError(f"{where}: base files make a cycle")
    if base.lower() not in interconnects() and not where.startswith("interconnects/"):
        base = Path(where).parent / base          # a user file's base: beside it
    merged, _ = _raw(base, (*seen, where))
    return {**merged, **raw}, where


def get_interconnect(interconnect: str | Path | Interconnect | None,
                     chip: Chip) -> Interconnect:
    """`interconnect` resolved; None means the built-in file named like the chip."""
    if isinstance(interconnect, Interconnect):
        return interconnect
    if interconnect is None:
        if chip.name.lower() not in interconnects():
            raise ConfigError(f"no built-in interconnect for chip {chip.name!r} (built-in: "
                              f"{', '.join(interconnects())}); pass interconnect= a file")
        return load_interconnect(chip.name.lower())
    return load_interconnect(interconnect)


__all__ = ["Interconnect", "interconnects", "load_interconnect", "get_interconnect"]
