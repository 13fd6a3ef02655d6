"""Serving metrics of a decoder LLM on one chip: `generate()` simulates the prefill and the
decode steps of a batch of requests and reports TTFT, TPOT, throughput and peak HBM.

How the decode phase is timed: a decode step's time is affine in its context length (the
weights are read once per step whatever the context; the KV cache read grows by one token per
step), so `generate` simulates the decode step at `decode_samples` context lengths spread
evenly from the first step (context = prompt_len) to the last (prompt_len + new_tokens - 2),
and interpolates linearly between them for every other step, instead of simulating each of the
new_tokens - 1 steps. The prefill is simulated once (prompt_len tokens, empty cache).

Metrics (all sequences of the batch advance together, static batching; TTFT, TPOT and the
SLO check are defined once, here, by `ttft_ms`, `tpot_ms` and `meets_slo`, and shared with
`ascendsim.serving`; docs/api.md "Serving metrics"):
- ttft_ms: the prefill (it yields the first token; every request arrives at t = 0);
- tpot_ms: (e2e - TTFT) / (new_tokens - 1), i.e. the mean time of the decode steps;
- decode_tokens_per_s: decode throughput, batch / TPOT (the decode phase alone);
- output_tokens_per_s (also `tokens_per_s`): batch * new_tokens / (prefill + all decode
  steps), the output token throughput with the prefill included;
- prefill_tokens_per_s: batch * prompt_len / TTFT; e2e_latency_ms: TTFT + all decode steps;
- hbm_peak_bytes: weights + KV cache at the final context + the peak of live activations
  (liveness over one layer's prefill graph as the passes leave it, the largest step: layers
  are identical and each layer's intermediates die before the next starts; with fused
  attention no score matrix is live).

Capacity: before simulating, weights + KV cache + activations are compared with the chip's
HBM; a model that does not fit raises `CapacityError` naming the sizes, the excess and the
smallest parallel plan that fits (`smallest_plan`: fewest chips, tensor parallel before
pipeline parallel; each chip holds 1/n of the weights and KV cache plus the replicated
embedding, and the activations). `generate(..., parallel=asim.Parallel(...))` runs the
prefill and decode steps across chips (`ascendsim.plan`), the memory plan per chip.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .api import DEFAULT_DETAIL, Result, fusion_options, optimize, simulate
from .errors import CapacityError, ConfigError
from .hw import Chip, get_chip
from .ir.graph import Graph
from .models.blocks import check_positive
from .models.decoder import DecoderConfig, decoder, decoder_config
from .models.parallel import Parallel
from .plan import MemoryPlan, activation_peak, simulate_parallel

#: decode steps simulated by default (first, middle, last); the rest are interpolated
DEFAULT_DECODE_SAMPLES = 3

Builder = Callable[..., Graph]


def gib(nbytes: float) -> str:
    """A size in the unit that shows it (GiB for a 7B model, KiB for a 4 KiB what-if HBM)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale or unit == "KiB" and nbytes:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


@dataclass
class GenerationResult:
    """Serving metrics and the per-phase simulation Results."""

    model: str
    chip: Chip
    batch: int
    prompt_len: int
    new_tokens: int
    prefill: Result
    decode: list[tuple[int, Result]]          # (context length, Result) at the sampled steps
    decode_step_ms: list[float]               # every decode step, interpolated
    memory: MemoryPlan
    notes: list[str] = field(default_factory=list)

    @property
    def ttft_ms(self) -> float:
        return self.prefill.time_us / 1e3

    @property
    def tpot_ms(self) -> float:
        """`tpot_ms` of the module's metrics: the mean decode step."""
        return tpot_ms(self.e2e_latency_ms, self.ttft_ms, self.new_tokens) \
            if self.decode_step_ms else 0.0

    @property
    def total_ms(self) -> float:
        return self.ttft_ms + float(np.sum(self.decode_step_ms))

    @property
    def e2e_latency_ms(self) -> float:
        """End-to-end latency of a request: TTFT + every decode step (= total_ms)."""
        return self.total_ms

    @property
    def decode_tokens_per_s(self) -> float:
        """Decode throughput: tokens generated per second while decoding, batch / TPOT (the
        steady-state serving figure; prefill excluded)."""
        return self.batch / (self.tpot_ms / 1e3) if self.tpot_ms > 0 else 0.0

    @property
    def output_tokens_per_s(self) -> float:
        """Output token throughput: batch x new tokens over the whole run, prefill included
        (vLLM's "output token throughput")."""
        return self.batch * self.new_tokens / (self.total_ms / 1e3)

    @property
    def prefill_tokens_per_s(self) -> float:
        """Prefill throughput: prompt tokens processed per second (batch x prompt / TTFT)."""
        return self.batch * self.prompt_len / (self.ttft_ms / 1e3) if self.ttft_ms > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        """The output token throughput (`output_tokens_per_s`: prefill included); the decode
        phase alone is `decode_tokens_per_s`."""
        return self.output_tokens_per_s

    @property
    def hbm_peak_bytes(self) -> int:
        return self.memory.total

    def table(self) -> str:
        rows = [("model", self.model), ("chip", self.chip.name),
                ("batch x prompt + new", f"{self.batch} x {self.prompt_len} + {self.new_tokens}"),
                ("TTFT (ms)", f"{self.ttft_ms:.2f}"), ("TPOT (ms)", f"{self.tpot_ms:.3f}"),
                ("E2E latency (ms)", f"{self.e2e_latency_ms:.2f}"),
                ("decode throughput (tokens/s)", f"{self.decode_tokens_per_s:.1f}"),
                ("output throughput, prefill incl. (tokens/s)",
                 f"{self.output_tokens_per_s:.1f}"),
                ("prefill throughput (tokens/s)", f"{self.prefill_tokens_per_s:.1f}"),
                ("HBM peak", f"{gib(self.hbm_peak_bytes)} (weights {gib(self.memory.weights)}"
                             f", KV {gib(self.memory.kv_cache)}, activations "
                             f"{gib(self.memory.activations)})")]
        rows += [(f"decode step @ context {c} (ms)", f"{r.time_us / 1e3:.3f}")
                 for c, r in self.decode]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

    def __repr__(self) -> str:
        return (f"GenerationResult({self.model} on {self.chip.name}: TTFT {self.ttft_ms:.2f} ms, "
                f"TPOT {self.tpot_ms:.3f} ms, decode {self.decode_tokens_per_s:.1f} tokens/s, "
                f"output {self.output_tokens_per_s:.1f} tokens/s, HBM peak "
                f"{gib(self.hbm_peak_bytes)})")


# ----------------------------------------------------------------------------- metrics
#: the per-request metrics an SLO may bound (docs/api.md "Serving metrics")
SLO_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


def ttft_ms(arrival_s: float, first_token_s: float) -> float:
    """Time to first token: from the request's arrival to its first output token, ms."""
    return (first_token_s - arrival_s) * 1e3


def tpot_ms(e2e_ms: float, ttft_ms: float, output_tokens: int) -> float:
    """Time per output token after the first: (end-to-end - TTFT) / (output tokens - 1), ms;
    0 for a request of one output token."""
    return (e2e_ms - ttft_ms) / (output_tokens - 1) if output_tokens > 1 else 0.0


def check_slo(slo: dict[str, float] | None) -> dict[str, float]:
    """An SLO: upper bounds on per-request metrics of SLO_METRICS, ms; an unknown metric or a
    bound that is not a positive number raises ConfigError naming it."""
    if slo is None:
        return {}
    if not isinstance(slo, dict):
        raise ConfigError(f"slo must be a dict of metric -> bound (ms), got "
                          f"{type(slo).__name__}")
    for key, bound in slo.items():
        if key not in SLO_METRICS:
            raise ConfigError(f"slo: unknown metric {key!r}; metrics are "
                              f"{', '.join(SLO_METRICS)} (ms)")
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound > 0:
            raise ConfigError(f"slo: {key} must be a positive number of ms, got {bound!r}")
    return {k: float(v) for k, v in slo.items()}


def meets_slo(values: dict[str, float], slo: dict[str, float]) -> bool:
    """Whether a request's metrics meet every bound of `slo` (goodput counts such requests
    per second)."""
    return all(values[k] <= bound for k, bound in slo.items())


# ----------------------------------------------------------------------------- memory
def _const_bytes(graph: Graph) -> int:
    return sum(graph.values[c].nbytes for c in graph.constants)


def _cache_bytes(graph: Graph, tokens: int) -> int:
    """KV bytes of a builder's graph, its cache inputs rescaled to `tokens` positions."""
    total = 0
    for n in graph.inputs:
        if n.startswith(("past_key.", "past_value.")):
            v = graph.values[n]
            total += v.nbytes // max(int(v.shape[2]), 1) * tokens
    return total


def memory_plan(model: DecoderConfig | Builder, chip: Chip, batch: int, prompt_len: int,
                new_tokens: int, dtype: str, fusion: Any = True, quant: str | None = None,
                kv_cache_dtype: str | None = None) -> MemoryPlan:
    """Weights + KV cache at the final context + peak live activations (module note), the
    activations of the graph as `fusion` prepares it (fused attention keeps no scores).
    A quantised model (`quant`, `kv_cache_dtype` of `decoder`) counts its weights and cache
    at their stored size: the constants of its graph (int8 / INT4Pack weights, their scales)
    and the cache at the cache dtype's bytes."""
    tokens = prompt_len + new_tokens
    options = fusion_options(fusion)

    def prepared(g: Graph) -> Graph:
        return g if options is None else optimize(g, chip, **options).graph
    if isinstance(model, DecoderConfig):
        from .ir.tensor import itemsize

        kw = {"quant": quant, "kv_cache_dtype": kv_cache_dtype}
        one_layer = decoder(model, batch=batch, seq_len=prompt_len, dtype=dtype, layers=1, **kw)
        weights = (model.params() * itemsize(dtype) if quant is None else
                   _const_bytes(decoder(model, batch=1, seq_len=1, dtype=dtype, **kw)))
        return MemoryPlan(weights, model.kv_cache_bytes(batch, tokens, kv_cache_dtype or dtype),
                          activation_peak(prepared(one_layer)))
    g = model(batch=batch, seq_len=prompt_len, phase="prefill", context_len=0, dtype=dtype)
    return MemoryPlan(_const_bytes(g), _cache_bytes(g, tokens), activation_peak(prepared(g)))


#: the largest plan `smallest_plan` tries (chips)
MAX_PLAN_CHIPS = 64


def per_chip(plan: MemoryPlan, cfg: DecoderConfig | None, chips: int, dtype: str) -> int:
    """Bytes one of `chips` chips holds: 1/chips of the weights and KV cache, the embedding
    table replicated, the activations whole."""
    from .ir.tensor import itemsize

    emb = cfg.vocab * cfg.hidden * itemsize(dtype) if cfg is not None and chips > 1 else 0
    return (plan.weights + plan.kv_cache) // chips + emb + plan.activations


def smallest_plan(cfg: DecoderConfig, plan: MemoryPlan, chip: Chip, batch: int,
                  dtype: str = "float16") -> Parallel | None:
    """The plan with the fewest chips whose share fits the chip's HBM (tensor parallel before
    pipeline parallel at equal chips), among those that divide the model; None when none of
    up to MAX_PLAN_CHIPS does."""
    from .errors import ConfigError

    for n in range(2, MAX_PLAN_CHIPS + 1):
        if per_chip(plan, cfg, n, dtype) > chip.hbm_bytes:
            continue
        for tp in sorted((t for t in range(1, n + 1) if n % t == 0), reverse=True):
            cand = Parallel(tp=tp, pp=n // tp)
            try:
                cand.check(cfg, batch, 1)
            except ConfigError:
                continue
            return cand
    return None


def check_capacity(name: str, plan: MemoryPlan, chip: Chip, batch: int, tokens: int,
                   cfg: DecoderConfig | None = None, dtype: str = "float16") -> None:
    """CapacityError when the plan exceeds the chip's HBM, naming sizes and the smallest
    parallel plan that fits (for a DecoderConfig) or the minimum chips."""
    hbm = chip.hbm_bytes
    if plan.total <= hbm:
        return
    spare = hbm - plan.activations
    chips = math.ceil((plan.weights + plan.kv_cache) / spare) if spare > 0 else None
    best = smallest_plan(cfg, plan, chip, batch, dtype) if cfg is not None else None
    need = (f"at least {chips} chips (weights and KV cache split over them, activations on "
            f"each)" if chips else
            "more than any number of chips: the activations alone exceed one chip's HBM")
    if best is not None:
        need += (f"; the smallest plan that fits is {best} on {best.world} chips "
                 f"(generate(..., parallel={best}))")
    raise CapacityError(
        f"{name} does not fit one {chip.name}: weights {gib(plan.weights)} + KV cache "
        f"{gib(plan.kv_cache)} (batch {batch} x {tokens} tokens) + activations "
        f"{gib(plan.activations)} = {gib(plan.total)} > HBM {gib(hbm)} (over by "
        f"{gib(plan.total - hbm)}); it needs {need}")


# ----------------------------------------------------------------------------- generate
def decode_contexts(prompt_len: int, new_tokens: int, samples: int) -> list[int]:
    """Context lengths of the simulated decode steps: `samples` points spread evenly over the
    steps' contexts prompt_len .. prompt_len + new_tokens - 2 (all steps when fewer)."""
    steps = new_tokens - 1
    if steps <= 0:
        return []
    first, last = prompt_len, prompt_len + steps - 1
    k = min(samples, steps)
    if k == 1:
        return [first]
    return sorted({int(round(first + (last - first) * i / (k - 1))) for i in range(k)})


def generate(model: str | DecoderConfig | Builder, chip: str | Chip = "ascend910b",
             batch: int = 1, prompt_len: int = 128, new_tokens: int = 32,
             dtype: str = "float16", *, fusion: Any = True, detail: str = DEFAULT_DETAIL,
             decode_samples: int = DEFAULT_DECODE_SAMPLES, capacity_check: bool = True,
             quant: str | None = None, kv_cache_dtype: str | None = None,
             parallel: Parallel | None = None, box: Any = None,
             **overrides: Any) -> GenerationResult:
    """Simulate serving `batch` requests of `prompt_len` tokens, `new_tokens` generated each.

    model: a preset name of `asim.models.decoder_presets()`, a DecoderConfig, or a builder
    called as ``builder(batch=, seq_len=, phase=, context_len=, dtype=)`` returning a decoder
    graph with the same inputs (input_ids, past_key.l / past_value.l). `overrides` change
    preset fields (layers=4, ...). Raises CapacityError when the run does not fit the chip's
    HBM (see the module note); `capacity_check=False` simulates it anyway. parallel: an
    `asim.Parallel` plan (presets and DecoderConfigs): every step runs across chips on `box`
    (an `asim.Box`; None: the chip's Atlas 800 box), TTFT and TPOT are the plan's steps and
    the memory plan is one chip's share. `quant` and
    `kv_cache_dtype` are `decoder`'s (W8A8 / W8A16 / W4A16 weights, an int8 KV cache): the
    memory plan counts the weights and the cache at their stored size.
    """
    check_positive(batch=batch, prompt_len=prompt_len, new_tokens=new_tokens,
                   decode_samples=decode_samples)
    resolved = get_chip(chip)
    is_builder = callable(model) and not isinstance(model, (str, DecoderConfig))
    if is_builder:
        if overrides:
            raise ConfigError(f"overrides {sorted(overrides)} apply to presets, not to a "
                              f"builder function")
        if quant is not None or kv_cache_dtype is not None:
            raise ConfigError("quant and kv_cache_dtype apply to presets, not to a builder "
                              "function (build the quantised graph in the builder)")
        build: Builder = model
        name = getattr(model, "__name__", "decoder")
    else:
        cfg = decoder_config(model, **overrides)
        name = model if isinstance(model, str) else "decoder"

        def build(**kw: Any) -> Graph:
            return decoder(cfg, quant=quant, kv_cache_dtype=kv_cache_dtype, **kw)
    plan = memory_plan(build if is_builder else cfg, resolved, batch, prompt_len, new_tokens,
                       dtype, fusion, quant=quant, kv_cache_dtype=kv_cache_dtype)
    if parallel is not None:
        if is_builder:
            raise ConfigError("generate(parallel=...): takes a preset or a DecoderConfig, not a "
                              "builder function")
        return _generate_parallel(name, cfg, resolved, batch, prompt_len, new_tokens, dtype,
                                  plan, parallel, box, fusion, detail, decode_samples,
                                  capacity_check, quant, kv_cache_dtype)
    if capacity_check:
        check_capacity(name, plan, resolved, batch, prompt_len + new_tokens,
                       None if is_builder else cfg, dtype)
    prefill = simulate(build(batch=batch, seq_len=prompt_len, phase="prefill", context_len=0,
                             dtype=dtype), resolved, fusion=fusion, detail=detail,
                       check_capacity=capacity_check)
    contexts = decode_contexts(prompt_len, new_tokens, decode_samples)
    sampled = [(c, simulate(build(batch=batch, seq_len=None, phase="decode", context_len=c,
                                  dtype=dtype), resolved, fusion=fusion, detail=detail,
                            check_capacity=capacity_check))
               for c in contexts]
    all_ctx = np.arange(prompt_len, prompt_len + new_tokens - 1)
    steps = (np.interp(all_ctx, [c for c, _ in sampled], [r.time_us / 1e3 for _, r in sampled])
             if sampled else np.zeros(0))
    notes = [f"decode simulated at contexts {contexts}, the other "
             f"{max(0, len(all_ctx) - len(contexts))} steps interpolated linearly"]
    return GenerationResult(name, resolved, batch, prompt_len, new_tokens, prefill, sampled,
                            [float(s) for s in steps], plan, notes)


def _generate_parallel(name: str, cfg: DecoderConfig, chip: Chip, batch: int, prompt_len: int,
                       new_tokens: int, dtype: str, plan: MemoryPlan, parallel: Parallel,
                       box: Any, fusion: Any, detail: str, decode_samples: int,
                       capacity_check: bool, quant: str | None = None,
                       kv_cache_dtype: str | None = None) -> GenerationResult:
    """`generate` with a plan: the steps simulated across chips, memory per chip."""
    parallel.check(cfg, batch, prompt_len)
    share = MemoryPlan(per_chip(plan, cfg, parallel.world, dtype) - plan.activations, 0,
                       plan.activations)
    if capacity_check and share.total > chip.hbm_bytes:
        check_capacity(f"{name} with {parallel}", share, chip, batch,
                       prompt_len + new_tokens)
    where = box if box is not None else chip
    prefill = simulate_parallel(decoder(cfg, batch=batch, seq_len=prompt_len, dtype=dtype,
                                        parallel=parallel, quant=quant,
                                        kv_cache_dtype=kv_cache_dtype), where, fusion, detail,
                                check_capacity=capacity_check)
    contexts = decode_contexts(prompt_len, new_tokens, decode_samples)
    sampled = [(c, simulate_parallel(decoder(cfg, batch=batch, phase="decode", context_len=c,
                                             dtype=dtype, parallel=parallel, quant=quant,
                                             kv_cache_dtype=kv_cache_dtype),
                                     where, fusion, detail, check_capacity=capacity_check))
               for c in contexts]
    all_ctx = np.arange(prompt_len, prompt_len + new_tokens - 1)
    steps = (np.interp(all_ctx, [c for c, _ in sampled], [r.time_us / 1e3 for _, r in sampled])
             if sampled else np.zeros(0))
    notes = [f"{parallel} on {prefill.box}: memory per chip", *prefill.notes,
             f"decode simulated at contexts {contexts}, the other "
             f"{max(0, len(all_ctx) - len(contexts))} steps interpolated linearly"]
    return GenerationResult(name, chip, batch, prompt_len, new_tokens, prefill, sampled,
                            [float(s) for s in steps], share, notes)


__all__ = ["generate", "smallest_plan", "per_chip", "MAX_PLAN_CHIPS", "GenerationResult",
           "ttft_ms", "tpot_ms", "check_slo", "meets_slo", "SLO_METRICS", "MemoryPlan",
           "memory_plan", "check_capacity", "activation_peak", "decode_contexts",
           "DEFAULT_DECODE_SAMPLES"]
