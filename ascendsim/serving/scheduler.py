"""A serving instance in time: the scheduler, the paged KV cache and the step loop.

Note on the scheduler (`Scheduler`, policy "vllm": vLLM V1's, vllm/v1/core/sched/scheduler.py)
---------------------------------------------------------------------------------------------
Every step has a token budget (`max_num_batched_tokens`). The running requests are served
first, in order: each gets the tokens it still has to compute (the rest of its prompt, a chunk
of at most the budget left when `chunked_prefill` is on, or one decode token). When the KV
cache has no free block for a running request's new tokens, the request last admitted is
preempted: its blocks are freed and it goes back to the front of the waiting queue, to be
recomputed (its prompt and the tokens it generated) when admitted again. Waiting requests are
then admitted in arrival order while the budget, `max_num_seqs` and the free blocks allow and
no request was preempted in this step; with prefix caching a request whose `prefix_id` has
full blocks cached starts after them. A request whose computed tokens reach its length
yields a token at the end of the step (its first token ends its prefill); it finishes after
`output_tokens` tokens and frees its blocks (its prefix blocks stay cached, evicted least
recently used when the cache needs blocks).

Policy "mindie" (MindIE Server without SplitFuse): a step is either a prefill batch or a
decode batch, never mixed, and prefill goes first: waiting requests are admitted with whole
prompts (no chunking) up to `max_num_batched_tokens` (MindIE's max_prefill_tokens) and
`max_prefill_batch` requests (max_prefill_batch_size); a decode step runs every running
request (up to `max_num_seqs`, its maxBatchSize). The limits' names and the defaults 8192 and
50 are MindIE's (S: hiascend.com MindIE Service docs, mindie_service0081, the /v2 metadata
sample "max_prefill_batch_size": 50, "max_prefill_tokens": 8192); the prefill-first,
never-mixed order is G (MindIE's ScheduleConfig policy types were not found described).
Preemption frees the last admitted request as in vLLM.

Policy "vllm-v0" (vLLM V0's default scheduler, vllm/core/scheduler.py `_schedule_default`, as
vLLM 0.7.3 and vLLM-Ascend 0.7.x run it without chunked prefill): waiting requests are
admitted first, whole prompts only ("enable_chunking=False"), while `max_num_batched_tokens`,
`max_num_seqs` and the free blocks allow; running requests decode only in a step that admitted
none (S: the function's own comment says no decode is scheduled beside a prefill). So
every prefill is a step of its own and the running requests wait for it, as under "mindie"
but without MindIE's prefill batch cap. Preemption as in vLLM.
A step's tokens reach the user one step late: V0's engine processes a step's outputs
(detokenisation, stop checks, the request outputs the server streams) in a callback that the
model runner calls during the next step, after that step's forward and logits are launched and
before it samples (vllm_ascend/worker/model_runner.py `execute_model`, `async_callback` between
`compute_logits` and `sample`; vLLM-Ascend's NPUPlatform.is_async_output_supported returns True,
eager or not, vllm_ascend/platform.py of the 0.7 / 0.8 series). So a token is stamped at the
next step's start plus its host work (`overhead_us`) and its launches
(`StepModel.launch_us`), at most that step's end; a step after which nothing runs hands its
tokens over when it ends.

Paged KV cache (`KvCache`): `num_blocks` blocks of `block_size` tokens; a request holds
ceil(tokens / block_size) blocks for the tokens it has computed and is computing.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from .steps import LAUNCH_MODES, StepModel
from .workload import Request

POLICIES = ("vllm", "vllm-v0", "mindie")


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduler's limits (vLLM's engine arguments of the same names; MindIE's in the
    module note). num_blocks: the KV cache's block count instead of the memory plan's (vLLM's
    num_gpu_blocks_override). host_overhead_us: CPU time per step outside the device
    (scheduling, input preparation, sampling, detokenisation), None: the chip's figure for
    the policy and launch mode where it gives one, else the framework's default
    (`host_step_us`)."""

    policy: str = "vllm"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    prefix_caching: bool = True
    block_size: int = 128
    max_prefill_batch: int = 50
    launch: str = "graph"
    host_overhead_us: float | None = None
    gpu_memory_utilization: float = 0.9
    num_blocks: int | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"scheduler policy {self.policy!r} unknown; one of "
                              f"{', '.join(POLICIES)}")
        for key in ("max_num_seqs", "max_num_batched_tokens", "block_size",
                    "max_prefill_batch"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"scheduler {key} must be a positive integer, got {v!r}")
        if self.num_blocks is not None and (isinstance(self.num_blocks, bool) or not isinstance(
                self.num_blocks, int) or self.num_blocks < 1):
            raise ConfigError(f"scheduler num_blocks must be a positive integer, got "
                              f"{self.num_blocks!r}")
        if self.launch not in LAUNCH_MODES:
            raise ConfigError(f"scheduler launch {self.launch!r} unknown; one of "
                              f"{', '.join(LAUNCH_MODES)}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError(f"scheduler gpu_memory_utilization must be in (0, 1], got "
                              f"{self.gpu_memory_utilization!r}")
        if self.policy == "vllm-v0" and self.chunked_prefill:
            raise ConfigError("scheduler policy 'vllm-v0' is vLLM V0's scheduler without chunked "
                              "prefill; set chunked_prefill=False (V0's chunked-prefill scheduler "
                              "orders a step as policy 'vllm' does)")
        if self.host_overhead_us is not None and not self.host_overhead_us >= 0:
            raise ConfigError(f"scheduler host_overhead_us must be >= 0, got "
                              f"{self.host_overhead_us!r}")

    @property
    def overhead_us(self) -> float:
        if self.host_overhead_us is not None:
            return float(self.host_overhead_us)
        return HOST_OVERHEAD_US[(self.policy, self.launch)]


#: CPU time per step outside the device, us, by (policy, launch). G: no per-step host figure
#: for vLLM-Ascend or MindIE was found; chosen so that small-batch decode carries a few ms of
#: host time in eager mode and about 1 ms in graph mode. The nearest measured figure is vLLM
#: V0's on GPU hosts (vLLM RFC #6854, multi-step scheduling: sampled-token transfer,
#: pythonisation of outputs, input preparation and the scheduler leave "about 4ms of GPU
#: bubble" per decode step, "5-13ms" in general); vLLM-Ascend 0.7.3 runs that V0 loop, but
#: the key here is the launch mode, not the engine version (V1, eager or graph, does less per
#: step), so the figure stays a guess. The device part of eager mode's launches is simulated
#: (serving.steps.launch_chip): launch "eager" runs the step op by op from the host, each task
#: at the chip's framework eager op call (`eager_op_launch_us`, torch_npu's Python, ATen
#: dispatch and aclnn launch; on the 910B torch.add's measured 12.142 us) when the chip file
#: gives one, else its AscendCL enqueue (`host_launch_us`). A qwen2.5-7b decode step of batch 4
#: at context 400 on the 910B3 launches 563 tasks: at 12.1 us they hide under its device time;
#: at 50 us per call the host lane paces it (29.3 ms). The v0.7.3 step is host-paced: vLLM-
#: Ascend's tuning notes (vllm-ascend PR #878) run qwen2.5-7b on v0.7.3 at about 1 req/s
#: (200 requests of 200 / 128 tokens) at a 17.2 ms median TPOT after host-side changes only
#: (PGO-built Python / torch / torch_npu, tcmalloc, MindIE Turbo), where the untuned v0.7.3
#: release benchmark (issue #776, ShareGPT prompts at 1 req/s) has 36.5 ms.
#: What the sources give for that step, and why the figure stays G:
#: - the eager Qwen2 layer of vLLM 0.7.3 on vLLM-Ascend 0.7.x makes about 15 torch_npu calls
#:   (add-RMSNorm twice; four linears; q, k and v made contiguous; the rotary, KV-cache write
#:   and paged-attention ATB ops; SwiGLU; two output allocations; vllm_ascend/attention.py and
#:   ops/rotary_embedding.py of that release): at `eager_op_launch_us` (12.142 us, M) that is
#:   about 5 ms per step over 28 layers, under the ~16 ms the device spends on a small decode
#:   batch, so the launches alone do not pace the step (the simulated eager lane agrees);
#: - vLLM RFC #6854 measures V0's serial host work per decode step on GPU hosts: about 4 ms
#:   in its traces, 5-13 ms in general (M, x86 hosts, an older V0);
#: - the tuned-host rows of PR #878 (serving.toml) run at a 17.3 ms median TPOT against ~16.3
#:   ms of simulated device time, so a tuned host adds about 1 ms; the untuned release adds
#:   ~16 ms more per step than the launches and the serial work above account for. No source
#:   splits those 16 ms (Python speed of the stock build, MindIE Turbo's patches, the
#:   allocator), so the chip figure below takes them whole, measured on that release's host.
HOST_OVERHEAD_US: dict[tuple[str, str], float] = {
    ("vllm", "graph"): 1000.0, ("vllm", "eager"): 3000.0,
    ("vllm-v0", "graph"): 1000.0, ("vllm-v0", "eager"): 3000.0,
    ("mindie", "graph"): 1000.0, ("mindie", "eager"): 3000.0,
}

#: The chip figure that replaces the `HOST_OVERHEAD_US` guess of a (policy, launch) where the
#: chip file gives it. `vllm_v0_eager_step_us`: vLLM 0.7.3's V0 engine on vLLM-Ascend 0.7.3,
#: eager, the release benchmark's stock host (no MindIE Turbo), calibrated on that release's
#: offline latency test (vllm-ascend#776, batch 8, 32 / 128 tokens: 4284.9 ms, about 33.4 ms
#: a decode step against the simulated 15.7 ms of device-paced step; corpus row
#: serve-vllmascend-qwen25-7b-offline-latency-bs8). The host work is taken as added to the
#: step, not hidden under the device: the same benchmark with MindIE Turbo (#776's 'vllm-ascend
#: v0.7.3 + MindIE Turbo' table) runs 12.1-15.2 ms faster per token at every request rate (ITL
#: 22.5 / 26.8 / 36.7 / 41.0 against 35.3 / 41.9 / 51.2 / 53.1 ms at 1 / 4 / 16 / inf req/s),
#: a constant gap, where launches hidden under a device step that grows with the batch would
#: narrow it. Rows of a tuned host (MindIE Turbo, PGO Python: vllm-ascend PR #878) run with it
#: too and come out slow by that host's difference (the rows cannot say which host ran them).
HOST_STEP_FIGURES: dict[tuple[str, str], str] = {("vllm-v0", "eager"): "vllm_v0_eager_step_us"}


def host_step_us(sched: SchedulerConfig, chip: Any) -> float:
    """CPU time per step outside the device: the scheduler's own `host_overhead_us` when set,
    else the chip's figure for its (policy, launch) (`HOST_STEP_FIGURES`) when the chip file
    gives it, else the `HOST_OVERHEAD_US` guess."""
    if sched.host_overhead_us is not None:
        return float(sched.host_overhead_us)
    figure = HOST_STEP_FIGURES.get((sched.policy, sched.launch))
    value = getattr(chip, figure, None) if figure else None
    return float(value) if value is not None else sched.overhead_us


@dataclass
class Seq:
    """A request in flight: what it has computed and generated, and its blocks."""

    req: Request
    ready_s: float                 # when it may be scheduled (arrival, or KV received)
    computed: int = 0              # tokens whose KV is in the cache
    generated: int = 0             # output tokens produced
    blocks: int = 0                # blocks held (prefix blocks excluded)
    prefix_blocks: int = 0         # cached prefix blocks it shares
    first_token_s: float | None = None
    finish_s: float | None = None
    preemptions: int = 0
    token_times: list[float] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Tokens to have in the cache before the next token can be sampled (the prompt and
        every token generated so far: the last one is fed back as the next input)."""
        return self.req.prompt_tokens + self.generated

    @property
    def context(self) -> int:
        return self.computed


class KvCache:
    """Paged KV blocks with a cache of shared prefixes (module note)."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        self.used = 0                       # blocks held by requests
        self.prefix_caching = prefix_caching
        self.prefixes: OrderedDict[str, list[int]] = OrderedDict()   # id -> [blocks, refs]
        self.hit_tokens = 0
        self.asked_tokens = 0

    @property
    def cached(self) -> int:
        return sum(b for b, _ in self.prefixes.values())

    def free(self) -> int:
        """Blocks free, counting cached prefixes no request uses (evictable)."""
        idle = sum(b for b, refs in self.prefixes.values() if refs == 0)
        return self.num_blocks - self.used - self.cached + idle

    def _evict(self, need: int) -> None:
        for pid in list(self.prefixes):
            if self.num_blocks - self.used - self.cached >= need:
                return
            if self.prefixes[pid][1] == 0:
                del self.prefixes[pid]

    def take(self, n: int) -> bool:
        if n <= 0:
            return True
        if self.free() < n:
            return False
        self._evict(n)
        self.used += n
        return True

    def give_back(self, n: int) -> None:
        self.used -= n

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def lookup(self, seq: Seq) -> int:
        """Cached prefix tokens the request can start after (full blocks, at least one prompt
        token left to compute); takes a reference on them."""
        r = seq.req
        if not (self.prefix_caching and r.prefix_id):
            return 0
        got = self.prefixes.get(r.prefix_id)
        if got is None:
            return 0
        usable = min(got[0], r.prefix_tokens // self.block_size,
                     (r.prompt_tokens - 1) // self.block_size)
        if usable <= 0:
            return 0
        got[1] += 1
        self.prefixes.move_to_end(r.prefix_id)
        seq.prefix_blocks = usable
        return usable * self.block_size

    def publish(self, seq: Seq) -> None:
        """After a request computed its prefix, its full prefix blocks become cached (moved
        from the request's blocks to the cache; the request references them)."""
        r = seq.req
        if not (self.prefix_caching and r.prefix_id) or seq.prefix_blocks:
            return
        full = r.prefix_tokens // self.block_size
        if full <= 0 or r.prefix_id in self.prefixes:
            return
        self.prefixes[r.prefix_id] = [full, 1]
        seq.blocks -= full
        self.used -= full
        seq.prefix_blocks = full

    def release(self, seq: Seq) -> None:
        self.give_back(seq.blocks)
        seq.blocks = 0
        if seq.prefix_blocks and seq.req.prefix_id in self.prefixes:
            self.prefixes[seq.req.prefix_id][1] -= 1
        seq.prefix_blocks = 0


@dataclass
class StepRecord:
    """One step of an instance: when it ended, how long it took, what it ran."""

    end_s: float
    time_us: float
    batch: int
    tokens: int
    prefill_tokens: int
    kv_blocks_used: int


@dataclass
class InstanceRun:
    """What one instance did: its sequences, steps and time by op family."""

    seqs: list[Seq]
    steps: list[StepRecord]
    families_us: dict[str, float]
    host_us: float
    preemptions: int
    num_blocks: int
    prefix_hit_tokens: int
    prefix_asked_tokens: int


def run_instance(arrivals: list[tuple[float, Request, int]], model: StepModel,
                 sched: SchedulerConfig, num_blocks: int, *, prefill_only: bool = False,
                 max_concurrency: int | None = None,
                 max_steps: int = 10_000_000) -> InstanceRun:
    """Serve `arrivals` (ready time, request, tokens already in the cache when it arrives:
    a disaggregated decode instance receives the prompt's KV) on one instance.
    prefill_only: each request leaves after its first token (a prefill instance).
    max_concurrency: at most this many requests in flight; a request is sent at its arrival
    or when one in flight ends, whichever is later (vLLM's benchmark --max-concurrency)."""
    cache = KvCache(num_blocks, sched.block_size, sched.prefix_caching)
    pending = deque(sorted(arrivals, key=lambda a: (a[0], a[1].rid)))
    waiting: deque[Seq] = deque()
    running: list[Seq] = []
    done: list[Seq] = []
    steps: list[StepRecord] = []
    families: dict[str, float] = {}
    host = 0.0
    preemptions = 0
    now = 0.0
    overhead = host_step_us(sched, model.chip)
    budget_max = sched.max_num_batched_tokens
    # V0's output callback (module note): the tokens of the last step, stamped when it ended,
    # move to the next step's callback when one runs
    deferred = sched.policy == "vllm-v0"
    launch = model.launch_us() if deferred else 0.0
    last_tokens: list[tuple[Seq, bool]] = []

    def admit_arrivals() -> None:
        while pending and pending[0][0] <= now + 1e-12:
            if max_concurrency is not None and len(waiting) + len(running) >= max_concurrency:
                return
            t, r, have = pending.popleft()
            if max_concurrency is not None:
                t = max(t, now)            # sent when a slot frees: its latency starts here
                r = replace(r, arrival_s=t)
            s = Seq(r, t)
            if have:
                s.computed, s.generated = have, 1
                s.first_token_s = t
            waiting.append(s)

    scheduled: list[tuple[Seq, int]] = []
    budget = budget_max


    def preempt() -> Seq:
        nonlocal preemptions
        victim = running.pop()
        cache.release(victim)
        victim.computed = 0
        victim.preemptions += 1
        preemptions += 1
        waiting.appendleft(victim)
        return victim

    def schedule_running() -> bool:
        """Running requests first; True when one was preempted."""
        nonlocal budget
        preempted, i = False, 0
        while i < len(running) and budget > 0:
            s = running[i]
            need = s.length - s.computed
            if need > budget and not sched.chunked_prefill:
                i += 1
                continue
            n = min(need, budget)
            extra = cache.blocks_for(s.computed + n) - s.blocks - s.prefix_blocks
            while not cache.take(extra):
                preempted = True
                if preempt() is s:
                    return True
            s.blocks += max(extra, 0)
            scheduled.append((s, n))
            budget -= n
            i += 1
        return preempted

    def schedule_waiting() -> None:
        nonlocal budget
        admitted = 0
        while (waiting and budget > 0 and len(running) < sched.max_num_seqs
               and (sched.policy != "mindie" or admitted < sched.max_prefill_batch)):
            s = waiting[0]
            fresh = s.computed == 0
            start = cache.lookup(s) if fresh else s.computed
            need = s.length - start
            n = min(need, budget)
            extra = cache.blocks_for(start + n) - s.prefix_blocks - s.blocks
            chunk_ok = need <= budget or (sched.chunked_prefill and sched.policy == "vllm")
            if not chunk_ok or not cache.take(extra):
                if fresh:
                    cache.release(s)
                break
            waiting.popleft()
            if fresh:
                cache.hit_tokens += start
                cache.asked_tokens += s.req.prompt_tokens
            s.computed = start
            s.blocks += max(extra, 0)
            running.append(s)
            scheduled.append((s, n))
            budget -= n
            admitted += 1

    for _ in range(max_steps):
        admit_arrivals()
        if not running and not waiting:
            last_tokens = []               # nothing runs next: handed over when they ended
            if not pending:
                break
            now = pending[0][0]
            continue
        scheduled.clear()
        budget = budget_max
        if sched.policy == "vllm":
            if not schedule_running():
                schedule_waiting()
        else:
            if len(running) < sched.max_num_seqs:
                schedule_waiting()
            if not scheduled:
                schedule_running()
        if not scheduled:
            if pending:
                last_tokens = []
                now = max(now, pending[0][0])
                continue
            raise ConfigError(
                f"a request cannot be scheduled: request {waiting[0].req.rid} needs "
                f"{cache.blocks_for(waiting[0].length)} KV blocks of {sched.block_size} "
                f"tokens, the cache holds {num_blocks}; raise the KV capacity (more HBM, "
                f"a smaller model, quantisation) or shorten the requests")
        decodes = [s.computed for s, n in scheduled if s.generated > 0 and n == 1
                   and s.computed + 1 >= s.length]
        prefills = [(n, s.computed) for s, n in scheduled
                    if not (s.generated > 0 and n == 1 and s.computed + 1 >= s.length)]
        rows = sum(1 for s, n in scheduled if s.computed + n >= s.length)
        st = model.step(decodes, prefills, rows=max(rows, 1))
        for k, v in st.families.items():
            families[k] = families.get(k, 0.0) + v
        host += overhead
        dt = st.time_us + overhead
        if last_tokens:
            handed = now + min(overhead + launch, dt) / 1e6
            for s, first in last_tokens:
                s.token_times[-1] = handed
                if first:
                    s.first_token_s = handed
                if s.finish_s is not None:
                    s.finish_s = handed
            last_tokens = []
        now += dt / 1e6
        for s, n in scheduled:
            s.computed += n
            if s.req.prefix_id and s.computed >= s.req.prefix_tokens:
                cache.publish(s)
            if s.computed >= s.length:
                s.generated += 1
                s.token_times.append(now)
                if deferred:
                    last_tokens.append((s, s.first_token_s is None))
                if s.first_token_s is None:
                    s.first_token_s = now
                if s.generated >= s.req.output_tokens or prefill_only:
                    s.finish_s = now
                    running.remove(s)
                    cache.release(s)
                    done.append(s)
        steps.append(StepRecord(now, dt, len(scheduled), sum(n for _, n in scheduled),
                                sum(n for n, _ in prefills), cache.used + cache.cached))
    else:
        raise ConfigError(f"serving did not finish in {max_steps} steps")
    return InstanceRun(done, steps, families, host, preemptions, num_blocks,
                       cache.hit_tokens, cache.asked_tokens)


def check_scheduler(sched: Any) -> SchedulerConfig:
    """A SchedulerConfig from one, a dict of its fields, or None (the defaults)."""
    if sched is None:
        return SchedulerConfig()
    if isinstance(sched, SchedulerConfig):
        return sched
    if isinstance(sched, dict):
        names = set(SchedulerConfig.__dataclass_fields__)
        unknown = sorted(set(sched) - names)
        if unknown:
            raise ConfigError(f"scheduler: unknown option(s) {', '.join(unknown)}; options are "
                              f"{', '.join(sorted(names))}")
        return SchedulerConfig(**sched)
    raise ConfigError(f"scheduler must be a SchedulerConfig or a dict, got "
                      f"{type(sched).__name__}")


__all__ = ["SchedulerConfig", "KvCache", "Seq", "StepRecord", "InstanceRun", "run_instance",
           "check_scheduler", "POLICIES", "HOST_OVERHEAD_US", "HOST_STEP_FIGURES",
           "host_step_us"]
