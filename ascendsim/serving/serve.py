"""`serve`: a decoder LLM served on a chip (or a plan's chips) under a stream of requests.

Note on the memory plan
-----------------------
As vLLM sizes its cache: of each chip's HBM, `gpu_memory_utilization` (vLLM's default 0.9,
S: vLLM engine arguments) may be used; the rest is left to the runtime's workspace. Out of
that come the weights (their bytes per chip: split evenly over a plan's ranks), the peak
activations of a step of `max_num_batched_tokens` tokens (one layer's prefill graph as the
passes leave it, `generation.activation_peak`; above `ACTIVATION_PROBE_TOKENS` the peak at
that many tokens scaled linearly: with fused attention every live intermediate is
tokens x a width, measured 944 MiB at 8192 tokens and 1888 MiB at 16384 for qwen2.5-7b, while
building and optimising a prompt's graph grows with its square), and the KV cache gets the
remainder, in blocks of `block_size` tokens (`SchedulerConfig.num_blocks` overrides the
count, as vLLM's num_gpu_blocks_override). A model whose weights and activations leave no
room, or whose cache cannot hold the longest request, raises CapacityError naming the sizes.

Note on disaggregation
----------------------
`disaggregated=(p, d)`: p prefill instances and d decode instances, each a chip (or a plan).
Requests go round-robin to the prefill instances, which run the scheduler with every request
leaving after its first token; its prompt's KV cache then moves to a decode instance
(round-robin) over the interconnect (`hw.interconnect`: HCCS inside a server when all the
instances fit one server, RoCE between servers otherwise; latency + bytes / bandwidth of one
link) and joins that instance's queue with its prompt cached. The decode instances do not
push back on the prefill ones (their queues absorb the transfers).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..api import DEFAULT_DETAIL, optimize
from ..errors import CapacityError, ConfigError
from ..generation import MemoryPlan, activation_peak, check_slo, gib
from ..hw import Chip, get_chip
from ..hw.interconnect import get_interconnect
from ..ir.tensor import itemsize
from ..models.decoder import DecoderConfig, decoder, decoder_config
from ..models.hf_config import from_hf
from .report import ServingReport
from .scheduler import SchedulerConfig, Seq, check_scheduler, run_instance
from .steps import COLLECTIVE, StepModel, plan_size
from .workload import Request, load_requests, synthetic

#: the chip `serve` runs on unless told (the LLM serving chip of the built-in ones)
DEFAULT_SERVING_CHIP = "ascend910b"
#: the largest step whose activations are measured directly (module note)
ACTIVATION_PROBE_TOKENS = 4096
#: step models kept between calls (a search serves one model many times)
STEP_MODEL_CACHE = 8
_STEP_MODELS: OrderedDict[tuple, StepModel] = OrderedDict()
#: bytes per weight of a quantisation mode's projections (the embeddings, lm_head and norms
#: stay in the compute dtype; decoder(quant=...) documents which weights are quantised; the
#: antiquant scales of weight-only modes are left out, a few bytes per output channel)
QUANT_WEIGHT_BYTES = {"w8a8": 1, "w8a16": 1, "w4a16": 0.5}


def step_model(cfg: DecoderConfig, chip: Chip, parallel: Any, *, dtype: str, quant: str | None,
               launch: str, detail: str) -> StepModel:
    """The memoised step model of this model, chip, plan and options (kept between calls)."""
    key = (cfg, chip, repr(parallel), dtype, quant, launch, detail)
    got = _STEP_MODELS.get(key)
    if got is None:
        got = StepModel(cfg, chip, parallel, dtype=dtype, quant=quant, launch=launch,
                        detail=detail)
        _STEP_MODELS[key] = got
        while len(_STEP_MODELS) > STEP_MODEL_CACHE:
            _STEP_MODELS.popitem(last=False)
    _STEP_MODELS.move_to_end(key)
    return got


def weight_bytes(cfg: DecoderConfig, dtype: str, quant: str | None) -> int:
    """Bytes of the weights: int8 projections under w8a8, the rest in `dtype`."""
    total = cfg.params() * itemsize(dtype)
    if quant is None:
        return total
    if quant not in QUANT_WEIGHT_BYTES:
        raise ConfigError(f"quant {quant!r} unknown; one of {', '.join(QUANT_WEIGHT_BYTES)}")
    emb = cfg.vocab * cfg.hidden * (1 if cfg.tie_embeddings else 2)
    projections = cfg.params() - emb
    return int(emb * itemsize(dtype) + projections * QUANT_WEIGHT_BYTES[quant])


def kv_plan(cfg: DecoderConfig, chip: Chip, parallel: Any, sched: SchedulerConfig, *,
            dtype: str, quant: str | None, longest: int, name: str) -> tuple[MemoryPlan, int]:
    """The memory plan per chip and the number of KV blocks (module note)."""
    ranks = plan_size(parallel)
    usable = int(chip.hbm_bytes * sched.gpu_memory_utilization)
    weights = weight_bytes(cfg, dtype, quant) // ranks
    probe = min(sched.max_num_batched_tokens, ACTIVATION_PROBE_TOKENS)
    g = decoder(cfg, batch=1, seq_len=probe, phase="prefill", context_len=0, dtype=dtype,
                quant=quant, layers=1)
    acts = activation_peak(optimize(g, chip).graph) * sched.max_num_batched_tokens // probe \
        // ranks
    per_block = cfg.kv_cache_bytes(1, sched.block_size, dtype) // ranks
    room = usable - weights - acts
    if room < per_block:
        raise CapacityError(
            f"{name} does not fit {chip.name} x {ranks}: weights {gib(weights)} + activations "
            f"{gib(acts)} (a step of {sched.max_num_batched_tokens} tokens) per chip leave "
            f"{gib(max(room, 0))} of the usable {gib(usable)} "
            f"({sched.gpu_memory_utilization:.0%} of HBM) for the KV cache; use more chips, "
            f"quantisation or a smaller max_num_batched_tokens")
    blocks = room // per_block if sched.num_blocks is None else sched.num_blocks
    need = math.ceil(longest / sched.block_size)
    if blocks < need:
        raise CapacityError(
            f"{name} on {chip.name} x {ranks}: the KV cache holds {blocks} blocks of "
            f"{sched.block_size} tokens ({blocks * sched.block_size} tokens), the longest "
            f"request needs {need} ({longest} tokens)")
    return MemoryPlan(weights, blocks * per_block, acts), int(blocks)


def _requests(requests: Any) -> list[Request]:
    if requests is None:
        return synthetic(100, 1.0)
    if isinstance(requests, (str, Path)):
        return load_requests(requests)
    if isinstance(requests, dict):
        return synthetic(**requests)
    out = list(requests)
    if not out or not all(isinstance(r, Request) for r in out):
        raise ConfigError("requests must be Requests (asim.llm.synthetic), a CSV path or a dict "
                          "of synthetic() arguments")
    return out


def kv_transfer_us(cfg: DecoderConfig, chip: Chip, tokens: int, dtype: str, same_server: bool,
                   interconnect: Any = None) -> float:
    """Time to move `tokens` positions of KV cache from a prefill to a decode instance."""
    ic = get_interconnect(interconnect, chip)
    nbytes = cfg.kv_cache_bytes(1, tokens, dtype)
    if same_server:
        return ic.hccs_latency_us + nbytes / ic.hccs_bandwidth_bytes_per_s * 1e6
    return ic.nic_latency_us + nbytes / ic.nic_bandwidth_bytes_per_s * 1e6


def serve(model: str | Path | DecoderConfig, chip: str | Chip = DEFAULT_SERVING_CHIP,
          parallel: Any = None, requests: Any = None, scheduler: Any = None,
          slo: dict[str, float] | None = None, *,
          dtype: str = "float16", quant: str | None = None,
          disaggregated: tuple[int, int] | None = None, instances: int = 1,
          interconnect: Any = None, max_concurrency: int | None = None,
          detail: str = DEFAULT_DETAIL, **overrides: Any) -> ServingReport:
    """Serve `requests` with `model` (a preset, a DecoderConfig or a Hugging Face config.json
    path) on `chip` (`instances` copies, or `disaggregated`
    (prefill, decode) instances), each instance one chip or one `parallel` plan.

    requests: a list of `Request`, a CSV path (`load_requests`), a dict of `synthetic()`
    arguments, or None (100 Poisson requests at 1 per second). scheduler: a
    `SchedulerConfig` or a dict of its fields. slo: bounds on metrics of `SLO_METRICS` (ms)
    for goodput. max_concurrency: a closed loop of at most that many requests in flight
    (vLLM's benchmark --max-concurrency; one mixed instance). overrides change preset fields
    (layers=..., as `generate`).
    """
    slo_ = check_slo(slo)
    sched = check_scheduler(scheduler)
    resolved = get_chip(chip)
    if isinstance(model, (str, Path)) and str(model).endswith(".json"):
        if not Path(model).is_file():
            raise ConfigError(f"model config {str(model)!r} not found")
        cfg, name = decoder_config(from_hf(str(model)), **overrides), Path(model).stem
    else:
        cfg = decoder_config(model, **overrides)
        name = model if isinstance(model, str) else "decoder"
    reqs = _requests(requests)
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise ConfigError(f"instances must be a positive integer, got {instances!r}")
    if max_concurrency is not None:
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) \
                or max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be a positive integer, got "
                              f"{max_concurrency!r}")
        if disaggregated is not None or instances != 1:
            raise ConfigError("max_concurrency applies to one mixed instance")
    if disaggregated is not None:
        if (not isinstance(disaggregated, tuple) or len(disaggregated) != 2
                or not all(isinstance(x, int) and x >= 1 for x in disaggregated)):
            raise ConfigError(f"disaggregated must be (prefill instances, decode instances), "
                              f"two positive integers, got {disaggregated!r}")
    sm = step_model(cfg, resolved, parallel, dtype=dtype, quant=quant, launch=sched.launch,
                    detail=detail)
    hits0, misses0 = sm.steps_memo, sm.misses
    fresh0, cpu0 = sm.steps_fresh, sm.points_cpu_s
    longest = max(r.prompt_tokens + r.output_tokens for r in reqs)
    memory, blocks = kv_plan(cfg, resolved, parallel, sched, dtype=dtype, quant=quant,
                             longest=longest, name=name)
    ranks = plan_size(parallel)
    steps: list = []
    families: dict[str, float] = {}
    host = 0.0
    hit_tokens = 0
    seqs: dict[int, Seq] = {}
    transfers: list[float] = []

    def run(group: list[list[tuple[float, Request, int]]], offset: int,
            prefill_only: bool = False) -> list[Seq]:
        nonlocal host, hit_tokens
        out = []
        for k, arr in enumerate(group):
            if not arr:
                continue
            res = run_instance(arr, sm, sched, blocks, prefill_only=prefill_only,
                               max_concurrency=max_concurrency)
            steps.extend((offset + k, st) for st in res.steps)
            for f, us in res.families_us.items():
                families[f] = families.get(f, 0.0) + us
            host += res.host_us
            hit_tokens += res.prefix_hit_tokens
            out.extend(res.seqs)
        return out

    if disaggregated is None:
        group: list[list] = [[] for _ in range(instances)]
        for i, r in enumerate(reqs):
            group[i % instances].append((r.arrival_s, r, 0))
        for s in run(group, 0):
            seqs[s.req.rid] = s
        chips = instances * ranks
    else:
        p, d = disaggregated
        chips = (p + d) * ranks
        ic = get_interconnect(interconnect, resolved)
        same = chips <= ic.chips_per_server
        pgroup: list[list] = [[] for _ in range(p)]
        for i, r in enumerate(reqs):
            pgroup[i % p].append((r.arrival_s, r, 0))
        prefilled = sorted(run(pgroup, 0, prefill_only=True),
                           key=lambda s: (s.first_token_s, s.req.rid))
        dgroup: list[list] = [[] for _ in range(d)]
        first: dict[int, Seq] = {}
        for i, s in enumerate(prefilled):
            first[s.req.rid] = s
            if s.req.output_tokens == 1:
                seqs[s.req.rid] = s
                continue
            t_us = kv_transfer_us(cfg, resolved, s.req.prompt_tokens, dtype, same, ic)
            transfers.append(t_us / 1e3)
            dgroup[i % d].append((s.first_token_s + t_us / 1e6, s.req, s.req.prompt_tokens))
        for s in run(dgroup, p):
            pre = first[s.req.rid]
            s.first_token_s = pre.first_token_s
            s.preemptions += pre.preemptions
            seqs[s.req.rid] = s
    ordered = [seqs[r.rid] for r in reqs]
    notes = [f"iteration times from {len(sm.memo)} simulated step shapes "
             f"({sm.misses - misses0} new in this run), interpolated (serving/steps.py)"]
    collectives = {k[len(COLLECTIVE):]: families.pop(k) for k in list(families)
                   if k.startswith(COLLECTIVE)}
    return ServingReport(name, resolved.name, parallel, sched, slo_, reqs, ordered, steps,
                         families, collectives, host, memory, blocks, chips, disaggregated,
                         transfers, sm.misses - misses0, sm.steps_memo - hits0,
                         sm.steps_fresh - fresh0, hit_tokens, sm.points_cpu_s - cpu0, notes)


__all__ = ["serve", "DEFAULT_SERVING_CHIP", "kv_plan", "kv_transfer_us", "weight_bytes",
           "step_model"]
