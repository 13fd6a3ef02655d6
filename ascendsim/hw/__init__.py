"""Chip descriptions: frozen `Chip` records loaded from TOML chip files, every figure with a source.

Built-in chips (`chips()`): "ascend910" (910A, coupled cores), "ascend910b" (910B2, split
AIC/AIV; alias "ascend910b2"), its siblings "ascend910b1", "ascend910b3", "ascend910b4",
"ascend910b_gen1" (the first-generation 30-core SoC CANN calls "Ascend910B", coupled),
"ascend910c" (one die of the Atlas A3's 910C, the 910B's microarchitecture), "ascend310" and
"ascend310p" (310P3, alias "ascend310p3"). Users load their own with `load_chip("my.toml")`,
either complete or as `base = "ascend910"` plus the figures they change, and make what-ifs
with `get_chip("ascend910").replace(ub_bytes=512 * 1024)`.

The timing model these figures feed, and which of them are estimates, is described in
`ascendsim.hw.chip`; `chip.source(key)` / `chip.confidence(key)` tell, figure by figure.
`Ascend910`, `Ascend910B` and `Ascend310` are the built-in chips, loaded on first use.
"""

from __future__ import annotations

from typing import Any

from .chip import (
    ARCHS,
    LOCATIONS,
    PATH_PIPE,
    VECTOR_CLASSES,
    AiCpuRates,
    Chip,
    CubeShapes,
    PathTable,
    VectorRates,
)
from .loader import chips, get_chip, load_chip

__all__ = [
    "ARCHS", "LOCATIONS", "PATH_PIPE", "VECTOR_CLASSES",
    "AiCpuRates", "Chip", "CubeShapes", "PathTable", "VectorRates",
    "chips", "get_chip", "load_chip",
    "Ascend910", "Ascend910B", "Ascend310",
]

_LAZY = {"Ascend910": "ascend910", "Ascend910B": "ascend910b", "Ascend310": "ascend310"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return get_chip(_LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
