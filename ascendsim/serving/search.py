"""`search`: the serving configurations of a model on a box, and the Pareto front of goodput
per chip against latency under an SLO.

A box is a chip and a count (`asim.Box(chip, count, topology)`, or any object with `chip`
and `count`, or a `(chip, count)` pair, or a chip alone: one chip). The space is a dict of
lists (`DEFAULT_SPACE` for the keys): every combination of tensor-parallel size `tp`, `mode`
("mixed": count / tp instances, requests round-robin; "disaggregated": every split of the
count / tp instances into prefill and decode ones, or the `ratios` given), scheduler limits
(`max_num_seqs`, `max_num_batched_tokens`, `chunked_prefill`) and `quant` is one point, served
with the same requests (`serve`); a point that cannot run (a plan that does not fit, a plan
the model cannot split, such as W4A16 across ranks) is kept with its error and left off the
front. Every point records the keyword arguments of the one `serve` call that reproduces it
(`Point.serve_kwargs`).

Points run on `executor` (any `concurrent.futures.Executor`, e.g. a process pool or a Dask
client's `get_executor()`); None runs them in this process, one after another, where they
share the memoised step times.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from ..errors import AscendSimError, ConfigError
from ..generation import check_slo
from .serve import serve

#: the search space unless told: keys and their default values
DEFAULT_SPACE: dict[str, list[Any]] = {
    "tp": [1],
    "mode": ["mixed", "disaggregated"],
    "ratios": [],                       # (prefill, decode) splits; [] every split
    "max_num_seqs": [256],
    "max_num_batched_tokens": [2048, 8192],
    "chunked_prefill": [True],
    "quant": [None],
}
#: the summary key used as the latency axis unless told
DEFAULT_LATENCY = "e2e_ms_p90"


@dataclass
class Point:
    """One configuration: what it is, its serve() arguments, its figures or its error."""

    config: dict[str, Any]
    serve_kwargs: dict[str, Any]
    summary: dict[str, float] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def _box(box: Any) -> tuple[Any, int]:
    if isinstance(box, tuple) and len(box) == 2:
        return box
    if hasattr(box, "chip") and hasattr(box, "count"):
        return box.chip, int(box.count)
    if isinstance(box, str):
        return box, 1
    raise ConfigError(f"box must be asim.Box(chip, count, topology), (chip, count) or a chip "
                      f"name, got {box!r}")


def _space(space: Mapping[str, Sequence[Any]] | None) -> dict[str, list[Any]]:
    out = {k: list(v) for k, v in DEFAULT_SPACE.items()}
    for key, values in (space or {}).items():
        if key not in DEFAULT_SPACE:
            raise ConfigError(f"search space: unknown key {key!r}; keys are "
                              f"{', '.join(DEFAULT_SPACE)}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise ConfigError(f"search space: {key} must be a list of values, got {values!r}")
        out[key] = list(values)
    for mode in out["mode"]:
        if mode not in ("mixed", "disaggregated"):
            raise ConfigError(f"search space: mode {mode!r} unknown; modes are mixed, "
                              f"disaggregated")
    return out


def _plan(tp: int) -> Any:
    """The parallel plan of `tp` chips (None for one chip); a plan without the plan layer
    raises ConfigError when served, and the point records it."""
    if tp == 1:
        return None
    import ascendsim

    make = getattr(ascendsim, "Parallel", None)
    if make is None:
        return _PendingPlan(tp)
    return make(tp=tp)


@dataclass(frozen=True)
class _PendingPlan:
    """A TP plan named while the plan layer is absent (serve refuses it with a clear error)."""

    tp: int


def points(model: Any, box: Any, slo: dict[str, float], space: Mapping[str, Sequence[Any]]
           | None, requests: Any) -> list[Point]:
    """Every configuration of the space on the box, not yet run."""
    chip, count = _box(box)
    sp = _space(space)
    out = []
    for tp, mode, seqs, tokens, chunked, quant in itertools.product(
            sp["tp"], sp["mode"], sp["max_num_seqs"], sp["max_num_batched_tokens"],
            sp["chunked_prefill"], sp["quant"]):
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1 or count % tp:
            raise ConfigError(f"search space: tp {tp!r} must divide the box's {count} chips")
        n = count // tp
        sched = dict(max_num_seqs=seqs, max_num_batched_tokens=tokens,
                     chunked_prefill=chunked)
        base = dict(model=model, chip=chip, parallel=_plan(tp), requests=requests,
                    scheduler=sched, slo=slo, quant=quant)
        cfg = dict(tp=tp, max_num_seqs=seqs, max_num_batched_tokens=tokens,
                   chunked_prefill=chunked, quant=quant)
        if mode == "mixed":
            out.append(Point({**cfg, "mode": "mixed", "instances": n},
                             {**base, "instances": n}))
            continue
        splits = [tuple(r) for r in sp["ratios"]] or [(p, n - p) for p in range(1, n)]
        for p, d in splits:
            if p + d > n:
                continue
            out.append(Point({**cfg, "mode": f"disaggregated {p}:{d}", "instances": p + d},
                             {**base, "disaggregated": (p, d)}))
    return out


def run_point(point: Point) -> Point:
    """Serve one point (module-level so that any executor can pickle it)."""
    try:
        point.summary = serve(**point.serve_kwargs).summary()
    except AscendSimError as e:
        point.error = str(e)
    return point


@dataclass
class SearchResult:
    """Every point of a search and its Pareto front."""

    points: list[Point]
    slo: dict[str, float]
    latency: str

    def front(self) -> list[Point]:
        """Points no other beats on both goodput per chip (higher) and latency (lower),
        best goodput first."""
        ok = [p for p in self.points if p.ok]
        front = [p for p in ok if not any(
            q.summary["goodput_per_chip"] >= p.summary["goodput_per_chip"]
            and q.summary[self.latency] <= p.summary[self.latency]
            and (q.summary["goodput_per_chip"] > p.summary["goodput_per_chip"]
                 or q.summary[self.latency] < p.summary[self.latency]) for q in ok)]
        return sorted(front, key=lambda p: (-p.summary["goodput_per_chip"],
                                            p.summary[self.latency]))

    @property
    def best(self) -> Point:
        """The front's point of highest goodput per chip (ties: lower latency)."""
        front = self.front()
        if not front:
            raise ConfigError("search: no configuration could be served; errors: "
                              + "; ".join(sorted({p.error for p in self.points})))
        return front[0]

    def table(self) -> str:
        front = {id(p) for p in self.front()}
        head = (f"{'mode':<18} {'tp':>2} {'quant':>5} {'seqs':>5} {'tokens':>6} "
                f"{'goodput/chip':>12} {self.latency:>11}  front")
        rows = [head]
        for p in self.points:
            c = p.config
            left = (f"{c['mode']:<18} {c['tp']:>2} {str(c['quant'] or '-'):>5} "
                    f"{c['max_num_seqs']:>5} {c['max_num_batched_tokens']:>6}")
            if not p.ok:
                rows.append(f"{left}  error: {p.error[:70]}")
                continue
            rows.append(f"{left} {p.summary['goodput_per_chip']:>12.2f} "
                        f"{p.summary[self.latency]:>11.1f}  {'*' if id(p) in front else ''}")
        return "\n".join(rows)


def search(model: Any, box: Any, slo: dict[str, float] | None = None,
           space: Mapping[str, Sequence[Any]] | None = None, executor: Executor | None = None,
           *, requests: Any = None, latency: str = DEFAULT_LATENCY) -> SearchResult:
    """Serve every configuration of `space` on `box` with `requests` and return the points
    and their Pareto front of goodput per chip against `latency` (a `ServingReport.summary()`
    key, default the P90 end-to-end latency)."""
    slo_ = check_slo(slo)
    todo = points(model, box, slo_, space, requests)
    if latency not in {f"{m}_p{q}" for m in ("ttft_ms", "tpot_ms", "e2e_ms")
                       for q in (50, 90, 99)}:
        raise ConfigError(f"search: latency {latency!r} unknown; use METRIC_pNN, e.g. "
                          f"e2e_ms_p90")
    if executor is None:
        done = [run_point(p) for p in todo]
    else:
        done = [f.result() for f in [executor.submit(run_point, p) for p in todo]]
    return SearchResult(done, slo_, latency)


__all__ = ["search", "SearchResult", "Point", "DEFAULT_SPACE", "DEFAULT_LATENCY", "run_point"]
