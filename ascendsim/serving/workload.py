"""The requests a serving run receives: a seeded synthetic workload or the user's CSV.

Synthetic workload (`synthetic`)
--------------------------------
Arrivals: a Poisson process at `rate` requests/s (exponential gaps; rate = inf: every request
at t = 0, vLLM's benchmark "QPS inf"), or a gamma process with
the same mean gap and coefficient of variation `cv` (shape 1 / cv^2; cv > 1 is burstier than
Poisson, cv = 1 is Poisson), as vLLM's `benchmark_serving.py --burstiness` draws them
(burstiness = 1 / cv^2). Lengths: prompt and output token counts are each drawn from a
log-normal with the given mean and coefficient of variation (`prompt_cv`, `output_cv`),
rounded and clipped to [1, max]; cv = 0 gives fixed lengths. The defaults (prompt mean 512,
output mean 128, cv 0.5) are a chat-like mix in the range of ShareGPT's (G: chosen, not fitted
to a trace). Everything is drawn from one `numpy.random.default_rng(seed)`.

Request CSV (`load_requests`)
-----------------------------
A header row and one row per request, columns `arrival_s, prompt_tokens, output_tokens`
and optionally `prefix_id, prefix_tokens` (requests with the same prefix_id share their first
prefix_tokens prompt tokens, which prefix caching may reuse). Arrival times need not be
sorted. A missing, non-numeric or negative field raises `ConfigError` naming the file, the
line and the column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError

#: default lengths of the synthetic workload (G: a chat-like mix, see the module note)
DEFAULT_PROMPT_MEAN = 512
DEFAULT_OUTPUT_MEAN = 128
DEFAULT_LENGTH_CV = 0.5
ARRIVALS = ("poisson", "gamma")
REQUIRED_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL_COLUMNS = ("prefix_id", "prefix_tokens")


@dataclass(frozen=True)
class Request:
    """One request: when it arrives (s), its prompt and output lengths (tokens) and the shared
    prefix it names (prefix_tokens of its prompt are the same for every request of that id)."""

    rid: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_id: str = ""
    prefix_tokens: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.arrival_s) and self.arrival_s >= 0):
            raise ConfigError(f"request {self.rid}: arrival_s must be >= 0, got "
                              f"{self.arrival_s!r}")
        for key in ("prompt_tokens", "output_tokens"):
            if getattr(self, key) < 1:
                raise ConfigError(f"request {self.rid}: {key} must be >= 1, got "
                                  f"{getattr(self, key)!r}")
        if not 0 <= self.prefix_tokens <= self.prompt_tokens:
            raise ConfigError(f"request {self.rid}: prefix_tokens must be in 0..prompt_tokens "
                              f"({self.prompt_tokens}), got {self.prefix_tokens!r}")


def _lengths(rng: np.random.Generator, n: int, mean: float, cv: float, cap: int) -> np.ndarray:
    if cv == 0:
        return np.full(n, int(round(mean)), dtype=np.int64)
    sigma2 = math.log1p(cv * cv)
    draws = rng.lognormal(math.log(mean) - sigma2 / 2, math.sqrt(sigma2), n)
    return np.clip(np.rint(draws), 1, cap).astype(np.int64)


def synthetic(n: int, rate: float, *, seed: int = 0, arrival: str = "poisson", cv: float = 1.0,
              prompt_mean: float = DEFAULT_PROMPT_MEAN, output_mean: float = DEFAULT_OUTPUT_MEAN,
              prompt_cv: float = DEFAULT_LENGTH_CV, output_cv: float = DEFAULT_LENGTH_CV,
              max_prompt: int = 8192, max_output: int = 4096) -> list[Request]:
    """`n` seeded requests arriving at `rate` per second (see the module note)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"requests: n must be a positive integer, got {n!r}")
    if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0):
        raise ConfigError(f"requests: rate must be a positive number (inf: all at t = 0), got "
                          f"{rate!r}")
    for key, v in (("prompt_mean", prompt_mean), ("output_mean", output_mean)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ConfigError(f"requests: {key} must be a positive number, got {v!r}")
    for key, v in (("cv", cv), ("prompt_cv", prompt_cv), ("output_cv", output_cv)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ConfigError(f"requests: {key} must be a non-negative number, got {v!r}")
    if arrival not in ARRIVALS:
        raise ConfigError(f"requests: arrival {arrival!r} unknown; one of {', '.join(ARRIVALS)}")
    rng = np.random.default_rng(seed)
    mean_gap = 1.0 / rate
    if arrival == "poisson" or cv == 1.0:
        gaps = rng.exponential(mean_gap, n)
    elif cv == 0:
        gaps = np.full(n, mean_gap)
    else:
        shape = 1.0 / (cv * cv)
        gaps = rng.gamma(shape, mean_gap / shape, n)
    arrivals = np.cumsum(gaps) - gaps[0]           # the first request arrives at t = 0
    prompts = _lengths(rng, n, prompt_mean, prompt_cv, max_prompt)
    outputs = _lengths(rng, n, output_mean, output_cv, max_output)
    return [Request(i, float(a), int(p), int(o))
            for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs))]


def _number(text: str | None, where: str, col: str, integer: bool) -> float:
    if text is None or not text.strip():
        raise ConfigError(f"{where}: missing {col}")
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(f"{where}: {col} {text.strip()!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ConfigError(f"{where}: {col} must be a non-negative number, got {text.strip()}")
    if integer and v != int(v):
        raise ConfigError(f"{where}: {col} must be a whole number of tokens, got {text.strip()}")
    return v


def load_requests(path: str | Path) -> list[Request]:
    """Requests from a CSV (see the module note); sorted by arrival time."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"request file {str(path)!r} not found")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise ConfigError(f"{path}: line 1: missing column(s) {', '.join(missing)} (columns: "
                              f"{', '.join(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)})")
        unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
        if unknown:
            raise ConfigError(f"{path}: line 1: unknown column(s) {', '.join(unknown)}")
        reader.fieldnames = header
        out = []
        for row in reader:
            where = f"{path}: line {reader.line_num}"
            arrival = _number(row.get("arrival_s"), where, "arrival_s", False)
            prompt = int(_number(row.get("prompt_tokens"), where, "prompt_tokens", True))
            output = int(_number(row.get("output_tokens"), where, "output_tokens", True))
            for col, v in (("prompt_tokens", prompt), ("output_tokens", output)):
                if v < 1:
                    raise ConfigError(f"{where}: {col} must be >= 1, got {v}")
            prefix_id = (row.get("prefix_id") or "").strip()
            prefix = 0
            if prefix_id:
                prefix = int(_number(row.get("prefix_tokens"), where, "prefix_tokens", True))
                if prefix > prompt:
                    raise ConfigError(f"{where}: prefix_tokens {prefix} exceeds prompt_tokens "
                                      f"{prompt}")
            out.append((arrival, prompt, output, prefix_id, prefix))
    if not out:
        raise ConfigError(f"{path}: no requests")
    out.sort(key=lambda r: r[0])
    return [Request(i, *r) for i, r in enumerate(out)]


def write_requests(requests: list[Request], path: str | Path) -> None:
    """Write requests as the CSV `load_requests` reads (e.g. to replay a synthetic run)."""
    with Path(path).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
        for r in requests:
            w.writerow([f"{r.arrival_s:.6f}", r.prompt_tokens, r.output_tokens, r.prefix_id,
                        r.prefix_tokens if r.prefix_id else ""])


__all__ = ["Request", "synthetic", "load_requests", "write_requests", "ARRIVALS",
           "DEFAULT_PROMPT_MEAN", "DEFAULT_OUTPUT_MEAN", "DEFAULT_LENGTH_CV"]
