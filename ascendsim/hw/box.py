"""`Box`: the chips a parallel inference plan runs on (a chip, how many, and how they are linked).

`Box("ascend910b", 8, "atlas800-a2")` is an Atlas 800 A2 server of eight 910B; the topology
is an interconnect file (`interconnects/<name>.toml`, or a path, or an `Interconnect`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .chip import Chip
from .collectives import server_layout
from .interconnect import Interconnect, get_interconnect
from .loader import get_chip


@dataclass(frozen=True, init=False)
class Box:
    """`count` chips of one kind linked by `topology` (one server, or whole servers)."""

    chip: Chip
    count: int
    topology: Interconnect

    def __init__(self, chip: str | Chip, count: int,
                 topology: str | Path | Interconnect | None = None) -> None:
        resolved = get_chip(chip)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"Box count={count!r}: must be a positive integer")
        ic = get_interconnect(topology, resolved)
        server_layout(count, ic)                # one mesh group, a whole server or servers
        object.__setattr__(self, "chip", resolved)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "topology", ic)

    def __repr__(self) -> str:
        return f"Box({self.chip.name!r}, {self.count}, {self.topology.name!r})"


__all__ = ["Box"]
