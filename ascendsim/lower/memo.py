"""Reuse of lowered work for identical nodes: the 24 encoder layers of BERT-large (and their
gradients, and the L2 pass's candidate chains, and a sweep's repeated points) tile once.

The expensive part of lowering a node is turning its `VecSpec` / `GemmSpec` into core groups
of instructions (`tiling.vector_work`, `cube_tiling.gemm_work`). Both are pure functions of the
chip, the spec and the core count (the op name only appears in error messages), and the spec
holds everything about the node that decides its work: the element count and bytes per
element (so op, attributes, shapes, dtypes and formats, as the lowering derived them), the
vector instruction classes, the cold L2 miss fractions of every input (the node's own reuse
pattern). The engine's L2 cache decides hits from the GM tensors each move names, which the
miss fractions carry (`GmFraction.tensors`, copied into `Instr.tensors`); float equality
ignores them, so `work_key` adds them with each name replaced by its slot (order of first
appearance) and its size and span kept: the 24 layers' equal nodes share a key. A reuse under
other names gets the work with the names substituted (`_renamed`: new groups marked with the
work's `template` number, which the engine's replay key compares; each builds its renamed
instructions only when they are read, `CoreGroup.renamed`). `work_key` is
that key; a result is reused only under an equal key, so a reused node gets exactly the
groups a fresh tiling would give (tests/lower/test_memo.py checks whole simulations against
a run with the memo off). The lowering's own state (formats, L2 LRU, streams, dependencies)
is still updated node by node: only the tiling is shared.
"""

from __future__ import annotations

import itertools
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
_templates = itertools.count(1)


def work_key(kind: str, spec: VecSpec | GemmSpec, cores: int | None = None) -> tuple:
    """Everything that decides a node's tiled work besides the chip and the GM tensor names
    (see the module note)."""
    return _key_names(kind, spec, cores)[0]


def _key_names(kind: str, spec, cores: int | None) -> tuple[tuple, tuple[str, ...]]:
    """`work_key` and the spec's GM tensor names by slot."""
    named = _named(spec)
    return ((kind, spec, cores, tuple((slot, size, span) for slot, (_, size, span)
                                      in enumerate(named))),
            tuple(t[0] for t in named))


def _named(spec) -> list[tuple[str, int, int]]:
    """The distinct GM tensors named by the miss/write fractions of a spec (`GmFraction`), in
    field order (the first occurrence of each name: its slot)."""
    if isinstance(spec, VecSpec):
        fracs = [m for _, m in spec.inputs] + [spec.out_through]
    else:
        fracs = [spec.miss_a, spec.miss_b, spec.out_through] + [m for _, m in spec.epi_inputs]
    seen: dict[str, tuple[str, int, int]] = {}
    for f in fracs:
        for t in getattr(f, "tensors", ()):
            if t[0] not in seen:
                seen[t[0]] = t
    return list(seen.values())


def _renamed(groups: tuple, old: tuple[str, ...], new: tuple[str, ...]) -> list:
    """`groups` with the GM tensor names `old` replaced by `new` (same slots): groups that
    build their instructions when first read (`CoreGroup.renamed`)."""
    if old == new:
        return list(groups)
    rename = dict(zip(old, new))
    return [CoreGroup.renamed(g, rename) for g in groups]


def _entry(groups: list, names: tuple[str, ...]) -> tuple:
    """A memo entry: the groups marked with a fresh template number, and their names."""
    tid = next(_templates)
    return tuple(g.with_template(tid) for g in groups), names


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
    key, names = _key_names("vector", spec, cores)
    hit = memo.get(key)
    if hit is None:
        groups, notes = tiling.vector_work(chip, spec, op, cores)
        hit = memo[key] = (_entry(groups, names), notes)
        _counts["misses"] += 1
    else:
        _counts["hits"] += 1
    (groups, old), notes = hit
    return _renamed(groups, old, names), list(notes)


def gemm_work(chip, spec: GemmSpec, op: str) -> tuple[list[CoreGroup], list[str], GemmTiling]:
    """`cube_tiling.gemm_work`, reused for an equal `work_key`."""
    if not _enabled:
        return cube_tiling.gemm_work(chip, spec, op)
    memo = _memo(chip)
    key, names = _key_names("gemm", spec, None)
    hit = memo.get(key)
    if hit is None:
        groups, notes, t = cube_tiling.gemm_work(chip, spec, op)
        hit = memo[key] = (_entry(groups, names), notes, t)
        _counts["misses"] += 1
    else:
        _counts["hits"] += 1
    (groups, old), notes, t = hit
    return _renamed(groups, old, names), list(notes), t


__all__ = ["vector_work", "gemm_work", "work_key", "set_enabled", "stats", "clear"]
