"""`ServingReport`: what a serving run measured, with the metrics of `ascendsim.generation`
(TTFT, TPOT, the SLO check; defined once, docs/api.md "Serving metrics")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..generation import MemoryPlan, gib, meets_slo, tpot_ms, ttft_ms
from .scheduler import SchedulerConfig, Seq, StepRecord
from .workload import Request

PERCENTILES = (50, 90, 99)


@dataclass
class ServingReport:
    """A serving run: per-request latencies, throughput, goodput under the SLO, the KV cache
    and batch over time, and where the device time went (op families, collectives)."""

    model: str
    chip: str
    parallel: Any
    scheduler: SchedulerConfig
    slo: dict[str, float]
    requests: list[Request]
    seqs: list[Seq]                                # one per request, in request order
    steps: list[tuple[int, StepRecord]]            # (instance, step)
    families_us: dict[str, float]
    collectives_us: dict[str, float]
    host_us: float
    memory: MemoryPlan
    num_blocks: int
    chips: int
    disaggregated: tuple[int, int] | None = None
    kv_transfer_ms: list[float] = field(default_factory=list)
    points_simulated: int = 0       # step shapes simulated afresh for this run
    memo_hits: int = 0              # steps timed from the memo alone
    memo_misses: int = 0            # steps that needed a fresh simulation
    prefix_hit_tokens: int = 0
    points_cpu_s: float = 0.0       # CPU seconds of this run's fresh step simulations
    notes: list[str] = field(default_factory=list)

    # ------------------------------------------------------------ per request
    @property
    def ttft_ms(self) -> np.ndarray:
        return np.array([ttft_ms(s.req.arrival_s, s.first_token_s) for s in self.seqs])

    @property
    def e2e_ms(self) -> np.ndarray:
        return np.array([(s.finish_s - s.req.arrival_s) * 1e3 for s in self.seqs])

    @property
    def tpot_ms(self) -> np.ndarray:
        return np.array([tpot_ms(e, t, s.req.output_tokens)
                         for e, t, s in zip(self.e2e_ms, self.ttft_ms, self.seqs)])

    def metric(self, name: str) -> np.ndarray:
        return {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}[name]

    def percentiles(self, name: str) -> dict[str, float]:
        """P50 / P90 / P99 of a per-request metric (numpy's linear percentile)."""
        v = self.metric(name)
        return {f"p{p}": float(np.percentile(v, p)) for p in PERCENTILES}

    @property
    def preemptions(self) -> int:
        return sum(s.preemptions for s in self.seqs)

    # ------------------------------------------------------------ rates
    @property
    def duration_s(self) -> float:
        """From the first arrival to the last request's end."""
        return max(s.finish_s for s in self.seqs) - min(r.arrival_s for r in self.requests)

    @property
    def requests_per_s(self) -> float:
        return len(self.seqs) / self.duration_s

    @property
    def output_tokens_per_s(self) -> float:
        return sum(r.output_tokens for r in self.requests) / self.duration_s

    @property
    def input_tokens_per_s(self) -> float:
        return sum(r.prompt_tokens for r in self.requests) / self.duration_s

    @property
    def slo_met(self) -> np.ndarray:
        """Per request: whether it meets every bound of the SLO (all True without one)."""
        t, p, e = self.ttft_ms, self.tpot_ms, self.e2e_ms
        return np.array([meets_slo({"ttft_ms": a, "tpot_ms": b, "e2e_ms": c}, self.slo)
                         for a, b, c in zip(t, p, e)])

    @property
    def goodput(self) -> float:
        """Requests per second that meet every SLO."""
        return int(self.slo_met.sum()) / self.duration_s

    @property
    def goodput_per_chip(self) -> float:
        return self.goodput / self.chips

    @property
    def memo_hit_rate(self) -> float:
        """Fraction of this run's steps timed without a fresh simulation."""
        asked = self.memo_hits + self.memo_misses
        return self.memo_hits / asked if asked else 0.0

    # ------------------------------------------------------------ over time
    def timeline(self, instance: int | None = None) -> dict[str, np.ndarray]:
        """Per step: end time (s), batch size, tokens, KV blocks in use (fraction of the
        cache)."""
        rows = [r for i, r in self.steps if instance is None or i == instance]
        return {"t_s": np.array([r.end_s for r in rows]),
                "batch": np.array([r.batch for r in rows]),
                "tokens": np.array([r.tokens for r in rows]),
                "kv_use": np.array([r.kv_blocks_used / self.num_blocks for r in rows])}

    # ------------------------------------------------------------ views
    def summary(self) -> dict[str, float]:
        out = {"requests": len(self.seqs), "duration_s": self.duration_s,
               "requests_per_s": self.requests_per_s,
               "output_tokens_per_s": self.output_tokens_per_s,
               "goodput": self.goodput, "goodput_per_chip": self.goodput_per_chip,
               "preemptions": self.preemptions, "chips": self.chips}
        for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
            for k, v in self.percentiles(m).items():
                out[f"{m}_{k}"] = v
        return out

    def table(self) -> str:
        rows = [("model / chip", f"{self.model} on {self.chip} x {self.chips}"),
                ("mode", "disaggregated P{}:D{}".format(*self.disaggregated)
                 if self.disaggregated else "mixed"),
                ("requests", f"{len(self.seqs)} in {self.duration_s:.2f} s"),
                ("throughput", f"{self.requests_per_s:.2f} req/s, "
                               f"{self.output_tokens_per_s:.0f} output tokens/s"),
                ("goodput", f"{self.goodput:.2f} req/s ({self.goodput_per_chip:.2f} per chip)"
                            f" under {self.slo or 'no SLO'}")]
        for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
            p = self.percentiles(m)
            rows.append((f"{m} P50/P90/P99", " / ".join(f"{v:.1f}" for v in p.values())))
        tl = self.timeline()
        rows += [("batch size mean / max", f"{tl['batch'].mean():.1f} / {tl['batch'].max()}"),
                 ("KV cache use mean / max", f"{tl['kv_use'].mean():.0%} / "
                                             f"{tl['kv_use'].max():.0%} of {self.num_blocks} "
                                             f"blocks"),
                 ("preemptions", str(self.preemptions)),
                 ("memory per chip", f"weights {gib(self.memory.weights)}, KV cache "
                                     f"{gib(self.memory.kv_cache)}, activations "
                                     f"{gib(self.memory.activations)}"),
                 ("step simulations", f"{self.points_simulated} fresh "
                                      f"({self.points_cpu_s:.1f} CPU s) for "
                                      f"{self.memo_hits + self.memo_misses} steps, memo "
                                      f"hit rate {self.memo_hit_rate:.2%} of steps")]
        device = sum(self.families_us.values())
        for fam, us in sorted(self.families_us.items(), key=lambda kv: -kv[1]):
            if us > 0:
                rows.append((f"  {fam}", f"{us / 1e6:.2f} s ({us / device:.0%} of device)"))
        for name, us in self.collectives_us.items():
            rows.append((f"  collective {name}", f"{us / 1e6:.2f} s"))
        rows.append(("  host (per-step overhead)", f"{self.host_us / 1e6:.2f} s"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def __repr__(self) -> str:
        p = self.percentiles("ttft_ms")["p50"], self.percentiles("tpot_ms")["p50"]
        return (f"ServingReport({self.model} on {self.chip} x {self.chips}: "
                f"{len(self.seqs)} requests, {self.requests_per_s:.2f} req/s, "
                f"{self.output_tokens_per_s:.0f} tokens/s, TTFT P50 {p[0]:.1f} ms, "
                f"TPOT P50 {p[1]:.2f} ms, goodput {self.goodput:.2f} req/s)")

    def to_csv(self, path: str) -> None:
        """One line per request: arrival, lengths, TTFT, TPOT, E2E (ms), SLO met,
        preemptions."""
        import csv

        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["request", "arrival_s", "prompt_tokens", "output_tokens", "ttft_ms",
                        "tpot_ms", "e2e_ms", "slo_met", "preemptions"])
            for s, t, p, e, ok in zip(self.seqs, self.ttft_ms, self.tpot_ms, self.e2e_ms,
                                      self.slo_met):
                w.writerow([s.req.rid, f"{s.req.arrival_s:.6f}", s.req.prompt_tokens,
                            s.req.output_tokens, f"{t:.3f}", f"{p:.3f}", f"{e:.3f}", int(ok),
                            s.preemptions])

    def plot(self, path: str | None = None):
        """Four panels: TTFT and TPOT distributions, batch size and KV-cache use over time."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(2, 2, figsize=(10, 7))
        for a, m in zip(ax[0], ("ttft_ms", "tpot_ms")):
            v = np.sort(self.metric(m))
            a.plot(v, np.arange(1, len(v) + 1) / len(v))
            if m in self.slo:
                a.axvline(self.slo[m], color="r", ls="--", label="SLO")
                a.legend()
            a.set_xlabel(f"{m}"), a.set_ylabel("fraction of requests")
        tl = self.timeline()
        ax[1][0].plot(tl["t_s"], tl["batch"], lw=0.7)
        ax[1][0].set_xlabel("time (s)"), ax[1][0].set_ylabel("batch size (sequences)")
        ax[1][1].plot(tl["t_s"], 100 * tl["kv_use"], lw=0.7)
        ax[1][1].set_xlabel("time (s)"), ax[1][1].set_ylabel("KV cache in use (%)")
        fig.suptitle(f"{self.model} on {self.chip} x {self.chips}")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path)
            plt.close(fig)
        return fig


__all__ = ["ServingReport", "PERCENTILES"]
