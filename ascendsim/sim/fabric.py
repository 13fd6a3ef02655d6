"""The memory fabric: L2, L2-write and HBM bandwidth shared by every GM flow in flight.

A move that touches GM is a fluid flow: all its bytes cross L2 and its miss/write-through
fraction also crosses HBM/DDR; moves into GM (writes) also share the chip's L2 write
bandwidth. Whenever a flow starts or ends, the rates of all flows in flight are recomputed by
max-min fair sharing (progressive filling), each flow also capped by its per-core path
bandwidth (see the note on the model in `ascendsim.sim.engine`, "Shared bandwidth").
"""

from __future__ import annotations

import math
from heapq import heappush

import simpy
from simpy.events import NORMAL, Event, Timeout

_EPS = 1e-9


class _Flow:
    __slots__ = ("remaining", "cap", "hbm", "weight", "rate", "event", "size", "write")

    def __init__(self, nbytes: float, cap: float, hbm: float, weight: int, event,
                 write: bool = False) -> None:
        self.remaining = float(nbytes)
        self.size = float(nbytes)
        self.cap = cap
        self.hbm = hbm
        self.weight = weight
        self.write = write
        self.rate = 0.0
        self.event = event


class Fabric:
    """L2, L2-write and HBM bandwidth shared by every GM flow in flight (max-min fair, fluid).

    Bandwidths are bytes/cycle; `l2_write_bw` (default: no separate limit) caps the flows
    that write GM, which also count against `l2_bw`.
    """

    def __init__(self, env: simpy.Environment, l2_bw: float, hbm_bw: float,
                 l2_write_bw: float | None = None) -> None:
        self.env = env
        self.l2_bw = l2_bw
        self.hbm_bw = hbm_bw
        self.l2_write_bw = l2_write_bw if l2_write_bw is not None else math.inf
        self.flows: list[_Flow] = []
        self.last = 0
        self.token = 0
        self.peak_l2 = 0.0
        self.peak_hbm = 0.0

    def transfer(self, nbytes: float, cap: float, hbm: float, weight: int = 1,
                 write: bool = False):
        """An event that fires when `nbytes` have moved (per core; `weight` identical cores);
        `write` marks a move into GM (shares the L2 write bandwidth)."""
        env = self.env
        ev = object.__new__(Event)          # (`env.event()`, inline)
        ev.env, ev.callbacks = env, []
        if nbytes <= 0:
            ev.succeed()
            return ev
        self._advance()
        self.flows.append(_Flow(nbytes, cap, hbm, weight, ev, write))
        self._reschedule()
        return ev

    def _advance(self) -> None:
        now = self.env._now
        dt = now - self.last
        if dt:
            for f in self.flows:
                f.remaining -= f.rate * dt
        self.last = now

    def _rates(self) -> None:
        """Progressive filling: raise every unfrozen rate together until a cap or a resource
        binds, freeze what is bound, repeat. (Each pass sums in flow order, as `sum` would:
        the same floats bit for bit.)"""
        flows = self.flows
        if len(flows) == 1:
            self._rate_one(flows[0])
            return
        for f in flows:
            f.rate = 0.0
        active = flows
        l2_bw, hbm_bw, wr_bw = self.l2_bw, self.hbm_bw, self.l2_write_bw
        res_l2, res_hbm, res_wr = l2_bw, hbm_bw, wr_bw
        while active:
            s_l2 = s_hbm = s_wr = 0
            d = None
            for f in active:
                w = f.weight
                s_l2 += w
                s_hbm += w * f.hbm
                if f.write:
                    s_wr += w
                g = f.cap - f.rate
                if d is None or g < d:          # (`min`: the first of the least)
                    d = g
            d = _fill_step(d, res_l2, s_l2, res_hbm, s_hbm, res_wr, s_wr)
            for f in active:
                f.rate += d
            res_l2 -= d * s_l2
            res_hbm -= d * s_hbm
            res_wr -= d * s_wr
            if res_l2 <= _EPS * l2_bw:          # L2 saturated: every flow is bound
                break
            sat_hbm = res_hbm <= _EPS * hbm_bw
            sat_wr = math.isfinite(res_wr) and res_wr <= _EPS * wr_bw
            active = [f for f in active if f.cap - f.rate > _EPS * f.cap
                      and not (sat_hbm and f.hbm > 0) and not (sat_wr and f.write)]
        use_l2 = use_hbm = 0
        for f in flows:
            wr = f.weight * f.rate
            use_l2 += wr
            use_hbm += wr * f.hbm
        if use_l2 > self.peak_l2:
            self.peak_l2 = use_l2
        if use_hbm > self.peak_hbm:
            self.peak_hbm = use_hbm

    def _rate_one(self, f: _Flow) -> None:
        """`_rates` of a single flow in flight (the common case): the same passes and the
        same float operations on scalars."""
        f.rate = 0.0
        w, hbm, write, cap = f.weight, f.hbm, f.write, f.cap
        l2_bw, hbm_bw, wr_bw = self.l2_bw, self.hbm_bw, self.l2_write_bw
        res_l2, res_hbm, res_wr = l2_bw, hbm_bw, wr_bw
        s_l2 = 0 + w                   # (the sums of one term, as `_rates` makes them)
        s_hbm = 0 + w * hbm
        s_wr = 0 + w if write else 0
        rate = 0.0
        while True:
            d = _fill_step(cap - rate, res_l2, s_l2, res_hbm, s_hbm, res_wr, s_wr)
            rate += d
            res_l2 -= d * s_l2
            res_hbm -= d * s_hbm
            res_wr -= d * s_wr
            if res_l2 <= _EPS * l2_bw:
                break
            sat_hbm = res_hbm <= _EPS * hbm_bw
            sat_wr = math.isfinite(res_wr) and res_wr <= _EPS * wr_bw
            if not (cap - rate > _EPS * cap and not (sat_hbm and hbm > 0)
                    and not (sat_wr and write)):
                break
        f.rate = rate
        wr = w * rate
        use_l2 = 0 + wr
        use_hbm = 0 + wr * hbm
        if use_l2 > self.peak_l2:
            self.peak_l2 = use_l2
        if use_hbm > self.peak_hbm:
            self.peak_hbm = use_hbm

    def _reschedule(self) -> None:
        self._rates()
        self.token += 1
        if not self.flows:
            return
        delay = None
        for f in self.flows:
            rate = f.rate
            if rate > 0:
                left = f.remaining
                if left < 0.0:
                    left = 0.0
                t = math.ceil(left / rate - _EPS)
            else:
                t = 1
            if delay is None or t < delay:
                delay = t
        # (SimPy's Timeout with the wake as its callback, built and scheduled inline)
        env = self.env
        delay = delay if delay > 0 else 0
        tmo = Timeout.__new__(Timeout)
        tmo.env, tmo.callbacks, tmo._value, tmo._delay, tmo._ok = \
            env, [_Wake(self, self.token)], None, delay, True
        heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), tmo))

    def _wake(self, tok: int) -> None:
        if tok != self.token:
            return
        self._advance()
        flows = self.flows
        done = [f for f in flows if f.remaining <= _EPS * max(f.size, 1.0)
                or f.remaining <= f.rate * 1e-6]
        if not done and flows:
            # the earliest flow ends within this cycle (integer rounding): finish it
            first = min(flows, key=lambda f: f.remaining / f.rate if f.rate else math.inf)
            done = [first]
        env = self.env
        for f in done:
            flows.remove(f)
            ev = f.event                    # (`succeed()`, inline)
            ev._ok, ev._value = True, None
            heappush(env._queue, (env._now, NORMAL, next(env._eid), ev))
        self._reschedule()


def _fill_step(d: float, res_l2: float, s_l2: float, res_hbm: float, s_hbm: float,
               res_wr: float, s_wr: float) -> float:
    """One pass of progressive filling: the rise `d` (the least headroom under a cap) bounded
    by each resource's remaining bandwidth over its weight, at least 0 (the comparisons of
    `max(min(d, x, ...), 0.0)`, the same floats)."""
    if s_l2 > 0:
        x = res_l2 / s_l2
        if x < d:
            d = x
    if s_hbm > 0:
        x = res_hbm / s_hbm
        if x < d:
            d = x
    if s_wr > 0:
        x = res_wr / s_wr
        if x < d:
            d = x
    if 0.0 > d:
        d = 0.0
    return d


class _Wake:
    """The callback of a fabric timeout: wakes the fabric if no flow started or ended since
    (`tok`); an object, not a closure, so the fast-forward can read it (sim/fastforward.py)."""

    __slots__ = ("fabric", "tok")

    def __init__(self, fabric: Fabric, tok: int) -> None:
        self.fabric, self.tok = fabric, tok

    def __call__(self, _ev) -> None:
        self.fabric._wake(self.tok)


__all__ = ["Fabric"]
