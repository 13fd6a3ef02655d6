"""Cores, pools and leases: the flags and buffer levels of one core (or of a symmetric group
of cores), and the pools of cores a task's phase leases from."""

from __future__ import annotations

from typing import Any

import simpy

from ..errors import SimulationError


class Core:
    """Flags and buffer levels of one core (or of a symmetric group of cores)."""

    __slots__ = ("flags", "waiters", "levels", "caps", "label", "op", "peaks")

    def __init__(self, caps: dict[str, int], label: str, op: str, peaks: dict) -> None:
        self.flags: dict[tuple, int] = {}
        self.waiters: dict[tuple, Any] = {}
        self.levels = dict.fromkeys(caps, 0)
        self.caps = caps
        self.label = label
        self.op = op
        self.peaks = peaks

    def alloc(self, buf: str, nbytes: int) -> None:
        level = self.levels[buf] + nbytes
        if level > self.caps[buf]:
            raise SimulationError(f"buffer {buf} of {self.label} over capacity in op "
                                  f"'{self.op}': {level} B > {self.caps[buf]} B")
        self.levels[buf] = level
        if level > self.peaks.get(buf, 0):
            self.peaks[buf] = level

    def free(self, buf: str, nbytes: int) -> None:
        self.levels[buf] -= nbytes


class Pool:
    """Cores of one engine: a SimPy Container counts free ones. A lease takes the lowest free
    ids, or, in a `rotating` pool, the free ids from the one after the previous lease's last
    core on, wrapping around: the A2 / A3 vector cores' block dispatch, which the 910C LongCat
    decode profile shows (ParanoidHW/kernel_evaluation example_profilings/910C/
    longcat_kernel_details.csv at 1af44fd, tasks 57-185: each vector kernel's blocks start on
    the AIV after the previous vector kernel's last block, so a 12-block Add between MatMuls
    starts cold four times, 48 / 12, before it meets its own cores again; docs/corpus.md,
    "Vector kernels take the AIV cores in turn")."""

    def __init__(self, env: simpy.Environment, name: str, n: int, offset: int = 0,
                 rotating: bool = False) -> None:
        self.name = name
        self.n = n
        self.container = simpy.Container(env, capacity=n, init=n)
        self.free = list(range(offset, offset + n))
        self.offset = offset
        self.rotating = rotating
        self.next = offset          # a rotating pool's first candidate core

    def peek(self, k: int) -> list[int]:
        """The `k` free core ids the next lease takes."""
        if not self.rotating:
            return self.free[:k]
        nxt = self.next
        return ([c for c in self.free if c >= nxt] + [c for c in self.free if c < nxt])[:k]

    def advance(self, ids: list[int]) -> None:
        """A lease took `ids` (in the order `peek` gave them): a rotating pool's next lease
        starts after the last."""
        if self.rotating and ids:
            self.next = (ids[-1] + 1 - self.offset) % self.n + self.offset

    def lease(self, k: int) -> Lease:
        """Ask for `k` cores: `with pool.lease(k) as lease: yield lease.granted; ...`."""
        return Lease(self, k)


class Lease:
    """`k` cores of a pool for one phase. As a context manager it gives them back if the phase
    ends early (an error); the normal path yields `release()`, which keeps SimPy's event order."""

    __slots__ = ("pool", "k", "granted", "ids")

    def __init__(self, pool: Pool, k: int) -> None:
        self.pool, self.k = pool, k
        self.granted = pool.container.get(k)    # the event to wait for
        self.ids: list[int] | None = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ids is not None:
            self.release()

    def take(self) -> list[int]:
        """The core ids, once `granted` has fired (`Pool.peek`)."""
        pool = self.pool
        self.ids = pool.peek(self.k)
        taken = set(self.ids)
        pool.free = [c for c in pool.free if c not in taken]
        pool.advance(self.ids)
        return self.ids

    def release(self):
        """Give the cores back; returns the Container put event (yield it)."""
        pool, ids, self.ids = self.pool, self.ids or [], None
        pool.free = sorted(pool.free + ids)
        return pool.container.put(self.k)


__all__ = ["Core", "Lease", "Pool"]
