"""Reuse of lowered work for identical nodes: the 24 encoder layers of BERT-large (and their
gradients, and the L2 pass's candidate chains, and a sweep's repeated points) tile once.

The expensive part of lowering a node is turning its `VecSpec` / `GemmSpec` into core groups
of instructions (`tiling.vector_work`, `cube_tiling.gemm_work`). Both are pure functions of the
chip, the spec and the core count (the op name only appears in error messages), and the spec
holds everything about the node that decides its work: the element count and bytes per
element (so op, attributes, shapes, dtypes and formats, as the lowering derived them), the
vector instruction classes, the L2 miss fractions of every input and the write-through of the
output (so the L2 residency the node's inputs meet, as long as the lowering models L2: once
the engine owns L2 those fields leave the spec and the key shrinks with it). `work_key` is
that key; a result is reused only under an equal key, so a reused node gets exactly the
groups a fresh tiling would give (tests/lower/test_memo.py checks whole simulations against
a run with the memo off). The lowering's own state (formats, L2 LRU, streams, dependencies)
is still updated node by node: only the tiling is shared.
"""

from __future__ import annotations

from typing import Any

from . import cube_tiling, tiling
from .cube_tiling import GemmSpec, GemmTiling
from .program import CoreGroup
from .tiling import VecSpec

#: chips whose memos are kept (a sweep varies the chip; older chips' memos are dropped)
MAX_CHIPS = 8
#: entries per chip before the memo is cleared (bounded memory on very long runs)
MAX_ENTRIES = 50_000

_enabled = True
_by_chip: dict[int, tuple[Any, dict]] = {}     # id(chip) -> (chip kept alive, memo)
_counts = {"hits": 0, "misses": 0}


def work_key(kind: str, spec: VecSpec | GemmSpec, cores: int | None = None) -> tuple:
    """Everything that decides a node's tiled work besides the chip (see the module note)."""
    return (kind, spec, cores)


def stats() -> dict[str, int]:
    """Reuses ("hits") and fresh tilings ("misses") since the last `clear()`, and entries."""
    return {**_counts, "entries": sum(len(m) for _, m in _by_chip.values())}


def clear() -> None:
    """Empty the memo and its counters."""
    _by_chip.clear()
    _counts.update(hits=0, misses=0)


def set_enabled(on: bool) -> bool:
    """Turn the memo on or off (tests compare against a run without it); returns the old
    setting. Turning it off also empties it."""
    global _enabled
    old, _enabled = _enabled, on
    if not on:
        clear()
    return old


def _memo(chip) -> dict:
    entry = _by_chip.get(id(chip))
    if entry is None or entry[0] is not chip:
        if len(_by_chip) >= MAX_CHIPS:
            _by_chip.clear()
        entry = _by_chip[id(chip)] = (chip, {})
    if len(entry[1]) >= MAX_ENTRIES:
        entry[1].clear()
    return entry[1]


def vector_work(chip, spec: VecSpec, op: str, cores: int) -> tuple[list[CoreGroup], list[str]]:
    """`tiling.vector_work`, reused for an equal `work_key`."""
    if not _enabled:
        return tiling.vector_work(chip, spec, op, cores)
    memo = _memo(chip)
    key = work_key("vector", spec, cores)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = tiling.vector_work(chip, spec, op, cores)
        _counts["misses"] += 1
    else:
        _counts["hits"] += 1
    return list(hit[0]), list(hit[1])


def gemm_work(chip, spec: GemmSpec, op: str) -> tuple[list[CoreGroup], list[str], GemmTiling]:
    """`cube_tiling.gemm_work`, reused for an equal `work_key`."""
    if not _enabled:
        return cube_tiling.gemm_work(chip, spec, op)
    memo = _memo(chip)
    key = work_key("gemm", spec)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = cube_tiling.gemm_work(chip, spec, op)
        _counts["misses"] += 1
    else:
        _counts["hits"] += 1
    return list(hit[0]), list(hit[1]), hit[2]


__all__ = ["vector_work", "gemm_work", "work_key", "set_enabled", "stats", "clear"]
