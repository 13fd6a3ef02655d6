"""Pausing Python's cyclic garbage collector while the simulator builds what lives on.

Building a training step, optimising it, lowering it and running the engine each allocate
10^5..10^6 small objects (nodes, values, instructions, events, trace rows) that stay alive to
the end of the call. Every 700 net allocations CPython runs a collection, and the full ones
walk every tracked object of the process, so a BERT-large step spent about a quarter of its
CPU time in collections that found nothing to free (bench/sim_speed.py; the figures are in
BENCHMARKS.md, "Simulator speed"). Nothing in these calls forms reference cycles that must
die early: the paused collector catches up on the caller's next allocations. Reference
counting still frees every acyclic object at once, so memory does not grow meanwhile.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (or the decorated function), restored after; a
    nested pause leaves it to the outermost."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


__all__ = ["gc_paused"]
