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
    """Cores of one engine: a SimPy Container counts free ones; the lowest ids are used."""

    def __init__(self, env: simpy.Environment, name: str, n: int, offset: int = 0) -> None:
        self.name = name
        self.n = n
        self.container = simpy.Container(env, capacity=n, init=n)
        self.free = list(range(offset, offset + n))

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
        """The core ids, once `granted` has fired (the lowest free ids)."""
        pool = self.pool
        self.ids, pool.free = pool.free[:self.k], pool.free[self.k:]
        return self.ids

    def release(self):
        """Give the cores back; returns the Container put event (yield it)."""
        pool, ids, self.ids = self.pool, self.ids or [], None
        pool.free = sorted(pool.free + ids)
        return pool.container.put(self.k)


__all__ = ["Core", "Lease", "Pool"]
