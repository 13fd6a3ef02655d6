"""The time of one serving iteration, from the chip model: `simulate_point` simulates one
uniform step shape; `StepModel` memoises such points and interpolates between them.

Note on the model
-----------------
A vLLM V1 iteration runs the model once over a flat batch of tokens: the decode tokens of
the running sequences (one each, against their own context) and the prompt chunks being
prefilled (several tokens each, after the part already computed). The projections, norms,
rotary embedding and MLP see only the total token count T; attention sees each sequence's
query length and context. So a step's time is split as

    step = head(rows) + layers x [dense(T) + attn_decode(b, c) + sum_i attn_prefill(s_i, c_i)]

- dense(T): one layer's time outside the attention kernels, from a decode point of batch T
  (T one-token rows, the shape of a flattened token batch);
- attn_decode(b, c): one layer's attention-kernel time (IncreFlashAttention) for b decode
  sequences at mean context c (the kernel's cost is affine in the context of each sequence,
  so the mean stands for the mix);
- attn_prefill(s, c): one layer's attention (PromptFlashAttention) for a chunk of s tokens
  after c cached ones, from a prefill point of batch 1;
- head(rows): what is outside the layers (embedding gather, final norm, lm_head over the
  rows that yield a token), from a decode point of batch `rows`.

A point is simulated twice, cut to one and to two layers (layers are identical; a model
whose layers differ, e.g. leading dense layers of an MoE, is simulated whole): per op family
(`ascendsim.report.confidence.OP_FAMILY`), the difference is one layer and the rest is the
head, so the whole model is head + layers x layer (tests/serving/test_steps.py: within 0.5%
of simulating every layer). Task spans are scaled to add up to the simulated time.
Points sit on fixed grids (`TOKEN_GRID`, `ATTENTION_TOKEN_GRID`, `CONTEXT_GRID`); a step's
parts are interpolated linearly between the grid points that bracket it (bilinearly for the
attention parts: attention's cost is close to bilinear in batch x context), each grid point
simulated once and kept (`StepModel.hits`, `.misses`). The error of the memo against direct
simulation of the same step is measured by tests/serving/test_steps.py.

Launch. "graph" sinks the step on the device (ascendsim's mode "sink": vLLM-Ascend's ACL
graph replay, MindIE's graph); "eager" runs it op by op from the host, launches running ahead
of the device (mode "host"), as vLLM-Ascend's eager PyTorch path does: every op is a torch_npu
call from Python, so the host lane charges each task the chip's framework eager op call
(`eager_op_launch_us`: Python, ATen dispatch, the aclnn workspace query and launch) where the
chip file gives one, else its bare AscendCL enqueue (`host_launch_us`) (`launch_chip`). When
that call costs more than the device spends on the op, the host lane paces the step.
`StepModel.launch_us` is the host time to launch one step (its kernels at that call cost in
eager mode, one graph launch in graph mode): the scheduler's vLLM V0 policy hands a step's
tokens over after the next step's launches (serving.scheduler, module note).

`simulate_point` is the only place that builds and simulates a step: with a parallel plan
(`parallel` with more than one rank) it builds `models.decoder(..., parallel=plan)` and times
it with `plan.simulate_parallel` (collectives on the box's interconnect; their exposed time
is reported per kind, as families named `COLLECTIVE` + kind).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..api import DEFAULT_DETAIL, simulate
from ..errors import ConfigError
from ..hw import Chip
from ..models.decoder import DecoderConfig, decoder
from ..plan import simulate_parallel
from ..report.confidence import OP_FAMILY

#: prefix of the families that are a plan's collectives (exposed time), e.g. "collective AllReduce"
COLLECTIVE = "collective "

#: token counts at which dense(T), head(rows) and attn_prefill are simulated (powers of 2 and
#: 1.5 x 2^k; every point above 16 a multiple of its quantum below)
TOKEN_GRID = (1, 2, 4, 8) + tuple(sorted({2**k for k in range(4, 18)} | {48, 96}
                                         | {3 * 2**k for k in range(7, 17)}))
#: token counts at which attn_prefill is simulated: TOKEN_GRID and every multiple of 128 up to
#: 4096. A prompt chunk's attention is a staircase in query blocks of 128 rows (CANN's S1_BASE,
#: lower/attention.py) handed to the vector cores in runs: qwen2-0.5b's layer attention on the
#: 910B goes from 137 to 179 us between 2048 and 2193 tokens, which an interpolation between
#: TOKEN_GRID's 2048 and 3072 misses. One point per query block brings the memo's mean error
#: on the draw of tests/serving/test_steps.py from 2.0 % to 1.3 %, and on prompt-only draws of
#: 16-3000 tokens after 0-4000 cached ones (other seeds) from 2.5-2.9 % (8-9 % at most) to
#: 1.4-1.8 % (5-6 %)
ATTENTION_TOKEN_GRID = tuple(sorted(set(TOKEN_GRID) | set(range(128, 4097, 128))))
#: (up to this many tokens, round up to a multiple of): the cube runs a GEMM's M in base
#: blocks, so a step's time is flat between multiples of the block and jumps at each (M:
#: measured on the model's lowered GEMMs, 16-row steps up to 128 tokens, 128-row above)
TOKEN_QUANTA = ((16, 1), (128, 16), (2**62, 128))
#: decode batch sizes of attn_decode (powers of 2)
BATCH_GRID = tuple(2**k for k in range(0, 13))
#: context lengths of the attention points (x4 apart: attention is affine in the context)
CONTEXT_GRID = (0, 64, 256, 1024, 4096, 16384, 65536, 262144)
#: launch modes as vLLM-Ascend / MindIE run the model: graph (captured and replayed on the
#: device: ascendsim's "sink") or eager (PyTorch op by op from the host, running ahead)
LAUNCH_MODES = {"graph": "sink", "eager": "host"}
ATTENTION = "attention"


def launch_chip(chip: Chip, launch: str) -> Chip:
    """The chip a step of `launch` mode runs on (module note, *Launch*): for "eager", one whose
    host launch is the framework's eager op call (`eager_op_launch_us`) when the chip gives
    that figure; otherwise the chip unchanged."""
    if launch not in LAUNCH_MODES:
        raise ConfigError(f"launch {launch!r} unknown; one of {', '.join(LAUNCH_MODES)}")
    if launch == "eager" and chip.eager_op_launch_us is not None:
        return chip.replace(host_launch_us=chip.eager_op_launch_us)
    return chip


def plan_size(parallel: Any) -> int:
    """Ranks of a parallel plan (None: one chip)."""
    if parallel is None:
        return 1
    size = 1
    for key in ("tp", "pp", "ep", "dp"):
        v = getattr(parallel, key, 1) or 1
        size *= int(v)
    return size


@dataclass(frozen=True)
class PointTime:
    """One simulated step shape: its time and where it went (one layer and the head, us by
    op family; collectives by name when a plan has them)."""

    time_us: float
    layers: int
    layer_us: dict[str, float]
    head_us: dict[str, float]
    collective_us: dict[str, float] = field(default_factory=dict)
    tasks: float = 0.0               # kernel launches of the whole step (layers and head)

    @property
    def layer_attention_us(self) -> float:
        return self.layer_us.get(ATTENTION, 0.0)

    @property
    def layer_dense_us(self) -> float:
        return sum(v for k, v in self.layer_us.items() if k != ATTENTION)

    @property
    def head_total_us(self) -> float:
        return sum(self.head_us.values())


def _uniform_layers(cfg: DecoderConfig) -> bool:
    return len({cfg.moe_layer(i) for i in range(cfg.layers)}) == 1


def simulate_point(cfg: DecoderConfig, chip: Chip, parallel: Any, phase: str, batch: int,
                   seq_len: int, context_len: int, *, dtype: str = "float16",
                   quant: str | None = None, launch: str = "graph",
                   detail: str = DEFAULT_DETAIL, layers: int | None = 1) -> PointTime:
    """Simulate one uniform step (`batch` sequences, `seq_len` new tokens each after
    `context_len` cached ones) and split its time (module note). layers=1 simulates one layer
    and scales (when the model's layers are identical); None simulates them all."""
    chip = launch_chip(chip, launch)
    if plan_size(parallel) > 1:
        return _simulate_plan_point(cfg, chip, parallel, phase, batch, seq_len, context_len,
                                    dtype=dtype, quant=quant, launch=launch, detail=detail)
    uniform = _uniform_layers(cfg)
    if layers is None or not uniform or cfg.layers < 2:
        fams, tasks = _families(cfg, chip, phase, batch, seq_len, context_len, cfg.layers,
                                launch, detail, dtype, quant)
        per = {k: v / cfg.layers for k, v in fams.items()}
        return PointTime(sum(fams.values()), cfg.layers, per, {}, tasks=tasks)
    (one, t1), (two, t2) = (_families(cfg, chip, phase, batch, seq_len, context_len, n, launch,
                                      detail, dtype, quant) for n in (1, 2))
    per_layer = {k: two.get(k, 0.0) - one.get(k, 0.0) for k in {*one, *two}}
    head_us = {k: one.get(k, 0.0) - per_layer[k] for k in per_layer}
    total = sum(head_us.values()) + cfg.layers * sum(per_layer.values())
    return PointTime(total, cfg.layers, per_layer, head_us, tasks=t1 + (cfg.layers - 1) * (t2 - t1))


def _families(cfg: DecoderConfig, chip: Chip, phase: str, batch: int, seq_len: int,
              context_len: int, layers: int, launch: str, detail: str, dtype: str,
              quant: str | None) -> tuple[dict[str, float], int]:
    """Simulated time of the model cut to `layers` layers, us by op family (task spans
    scaled to add up to the simulated time), and its number of tasks."""
    g = decoder(cfg, batch=batch, seq_len=None if phase == "decode" else seq_len, phase=phase,
                context_len=context_len, dtype=dtype, quant=quant, layers=layers)
    res = simulate(g, chip, detail=detail, mode=LAUNCH_MODES[launch], check_capacity=False)
    fams = family_advance(res.trace.tasks)
    spans = sum(fams.values())
    scale = res.time_us / spans if spans else 0.0
    return {k: v * scale for k, v in fams.items()}, len(res.trace.tasks)


def family_advance(tasks: Sequence[Any]) -> dict[str, float]:
    """How far each op family moved the step's end, in cycles: tasks in order of their end,
    each charged the time from the previous task's end (or its own launch, for the first) to
    its own, so the charges add up to the step and a task that waits (for its host launch in
    eager mode, its dispatch on the device) carries the wait that paces it. Overlapping
    spans (`end - launch_start` per task) would count a host-paced step's queueing once per
    task and split it by where the queue stood, not by what each family costs."""
    fams: dict[str, float] = {}
    prev = None
    for t in sorted(tasks, key=lambda t: (t.end, t.start)):
        begin = t.launch_start if prev is None else prev
        fam = OP_FAMILY.get(t.op_type, "other")
        fams[fam] = fams.get(fam, 0.0) + max(t.end - begin, 0)
        prev = t.end if prev is None else max(prev, t.end)
    return fams


def _simulate_plan_point(cfg: DecoderConfig, chip: Chip, parallel: Any, phase: str, batch: int,
                         seq_len: int, context_len: int, **kw: Any) -> PointTime:
    """A step of a multi-chip plan: the plan layer's decoder (`models.decoder(...,
    parallel=plan)`) timed by `plan.simulate_parallel` on the chip's Atlas 800 box (its
    layers extrapolated there). Where the time went: the compute of the plan's largest
    simulated graph by op family, scaled to the step's compute, and the exposed collectives
    by kind (`COLLECTIVE` + kind); all of it is counted per layer (the head is not split out
    of a plan's step, so its share follows the layers when steps are interpolated)."""
    model = decoder(cfg, batch=batch, seq_len=None if phase == "decode" else seq_len,
                    phase=phase, context_len=context_len, dtype=kw["dtype"], quant=kw["quant"],
                    parallel=parallel)
    # the serving run checks its memory itself (weights + KV blocks), as a single-chip step
    res = simulate_parallel(model, chip, detail=kw["detail"], mode=LAUNCH_MODES[kw["launch"]],
                            check_capacity=False)
    comm: dict[str, float] = {}
    for c in res.collectives:
        comm[COLLECTIVE + c.kind] = comm.get(COLLECTIVE + c.kind, 0.0) + c.exposed_us * c.count
    compute = max(res.time_us - sum(comm.values()), 0.0)
    largest = max(res.stages, key=lambda st: st.time_us).result.trace.tasks
    fams = family_advance(largest)
    spans = sum(fams.values())
    fams = {k: v * compute / spans for k, v in fams.items()} if spans else {"other": compute}
    fams.update(comm)
    per_layer = {k: v / cfg.layers for k, v in fams.items()}
    return PointTime(res.time_us, cfg.layers, per_layer, {}, comm, tasks=len(largest))


def quantised(tokens: int) -> int:
    """`tokens` rounded up to its block quantum (TOKEN_QUANTA)."""
    for limit, q in TOKEN_QUANTA:
        if tokens <= limit:
            return -(-tokens // q) * q
    raise AssertionError("unreachable: the last quantum has no limit")


def _bracket(grid: Sequence[int], x: float) -> tuple[int, int, float]:
    """Grid points around x and x's weight on the upper one (clamped to the grid's ends:
    beyond the last point the line through the last two is extended)."""
    if x <= grid[0]:
        return grid[0], grid[1], (x - grid[0]) / (grid[1] - grid[0])
    i = bisect.bisect_left(grid, x)
    if i >= len(grid):
        i = len(grid) - 1
    lo, hi = grid[i - 1], grid[i]
    return lo, hi, (x - lo) / (hi - lo)


@dataclass
class StepTime:
    """One iteration's time, us, and its parts (for the report's per-family totals)."""

    time_us: float
    families: dict[str, float]


class StepModel:
    """Memoised step times of one model on one chip and plan (module note)."""

    def __init__(self, cfg: DecoderConfig, chip: Chip, parallel: Any = None, *,
                 dtype: str = "float16", quant: str | None = None, launch: str = "graph",
                 detail: str = DEFAULT_DETAIL) -> None:
        if launch not in LAUNCH_MODES:
            raise ConfigError(f"launch {launch!r} unknown; one of {', '.join(LAUNCH_MODES)}")
        self.cfg, self.chip, self.parallel = cfg, chip, parallel
        self.options = dict(dtype=dtype, quant=quant, launch=launch, detail=detail)
        self.memo: dict[tuple, PointTime] = {}
        self.hits = 0
        self.misses = 0
        self.steps_memo = 0          # steps timed from the memo alone
        self.steps_fresh = 0         # steps that needed a fresh simulation
        self.points_cpu_s = 0.0      # CPU seconds of the fresh simulations

    # ---------------------------------------------------------------- points
    def point(self, phase: str, batch: int, seq_len: int, context_len: int) -> PointTime:
        key = (phase, int(batch), int(seq_len), int(context_len))
        got = self.memo.get(key)
        if got is None:
            self.misses += 1
            c0 = time.process_time()
            got = simulate_point(self.cfg, self.chip, self.parallel, phase, batch, seq_len,
                                 context_len, **self.options)
            self.points_cpu_s += time.process_time() - c0
            self.memo[key] = got
        else:
            self.hits += 1
        return got

    @property
    def hit_rate(self) -> float:
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def _decode(self, batch: int, ctx: int) -> PointTime:
        return self.point("decode", batch, 1, max(ctx, 1))

    def launch_us(self) -> float:
        """Host time to launch one step's forward (module note, *Launch*): in eager mode every
        kernel of a decode step at the chip's eager call cost, in graph mode the one graph
        launch (the chip's AscendCL enqueue). The kernel count barely moves with the batch,
        so one decode point of batch 1 stands for every step."""
        chip = launch_chip(self.chip, self.options["launch"])
        if self.options["launch"] == "graph":
            return chip.host_launch_us
        return self._decode(1, CONTEXT_GRID[1]).tasks * chip.host_launch_us

    # ---------------------------------------------------------------- parts
    def dense(self, tokens: int) -> dict[str, float]:
        """One layer's non-attention time by family at `tokens` tokens (interpolated)."""
        lo, hi, w = _bracket(TOKEN_GRID, quantised(tokens))
        a, b = self._decode(lo, CONTEXT_GRID[1]), self._decode(hi, CONTEXT_GRID[1])
        fams = {k for k in (*a.layer_us, *b.layer_us) if k != ATTENTION}
        return {k: max(0.0, (1 - w) * a.layer_us.get(k, 0) + w * b.layer_us.get(k, 0))
                for k in fams}

    def head(self, rows: int) -> dict[str, float]:
        lo, hi, w = _bracket(TOKEN_GRID, rows)
        a, b = self._decode(lo, CONTEXT_GRID[1]), self._decode(hi, CONTEXT_GRID[1])
        return {k: max(0.0, (1 - w) * a.head_us.get(k, 0) + w * b.head_us.get(k, 0))
                for k in {*a.head_us, *b.head_us}}

    def _bilinear(self, phase: str, grid: Sequence[int], x: int, ctx: float) -> float:
        x0, x1, wx = _bracket(grid, x)
        cgrid = CONTEXT_GRID if phase == "prefill" else CONTEXT_GRID[1:]
        c0, c1, wc = _bracket(cgrid, ctx)

        def at(xx: int, cc: int) -> float:
            if phase == "decode":
                return self._decode(xx, cc).layer_attention_us
            return self.point("prefill", 1, xx, cc).layer_attention_us
        v = ((1 - wx) * ((1 - wc) * at(x0, c0) + wc * at(x0, c1))
             + wx * ((1 - wc) * at(x1, c0) + wc * at(x1, c1)))
        return max(v, 0.0)

    def attn_decode(self, batch: int, mean_ctx: float) -> float:
        return self._bilinear("decode", BATCH_GRID, batch, mean_ctx) if batch else 0.0

    def attn_prefill(self, chunk: int, ctx: int) -> float:
        return self._bilinear("prefill", ATTENTION_TOKEN_GRID, quantised(chunk), ctx)

    # ---------------------------------------------------------------- a step
    def step(self, decode_contexts: Sequence[int], prefills: Sequence[tuple[int, int]],
             rows: int | None = None) -> StepTime:
        """An iteration of decode sequences at `decode_contexts` and prompt chunks
        (tokens, cached context) in `prefills`; `rows`: sequences that yield a token (default
        the decodes plus the chunks)."""
        tokens = len(decode_contexts) + sum(s for s, _ in prefills)
        if tokens == 0:
            return StepTime(0.0, {})
        before = self.misses
        got = self._step(tokens, decode_contexts, prefills, rows)
        if self.misses == before:
            self.steps_memo += 1
        else:
            self.steps_fresh += 1
        return got

    @property
    def step_hit_rate(self) -> float:
        """Fraction of the steps timed without a fresh simulation."""
        n = self.steps_memo + self.steps_fresh
        return self.steps_memo / n if n else 0.0

    def _step(self, tokens: int, decode_contexts: Sequence[int],
              prefills: Sequence[tuple[int, int]], rows: int | None) -> StepTime:
        n_rows = rows if rows is not None else len(decode_contexts) + len(prefills)
        fams = {k: v * self.cfg.layers for k, v in self.dense(tokens).items()}
        attn = 0.0
        if decode_contexts:
            attn += self.attn_decode(len(decode_contexts),
                                     sum(decode_contexts) / len(decode_contexts))
        for s, c in prefills:
            attn += self.attn_prefill(s, c)
        fams[ATTENTION] = fams.get(ATTENTION, 0.0) + attn * self.cfg.layers
        for k, v in self.head(max(n_rows, 1)).items():
            fams[k] = fams.get(k, 0.0) + v
        return StepTime(sum(fams.values()), fams)

    def direct(self, phase: str, batch: int, seq_len: int, context_len: int) -> float:
        """The same uniform step simulated whole (all layers), no memo: the reference the
        memo's error is measured against."""
        return simulate_point(self.cfg, self.chip, self.parallel, phase, batch, seq_len,
                              context_len, layers=None, **self.options).time_us

    def uniform(self, phase: str, batch: int, seq_len: int, context_len: int) -> float:
        """The memo's time of a uniform step (what `direct` simulates)."""
        if phase == "decode":
            return self.step([context_len] * batch, [], rows=batch).time_us
        parts = self.step([], [(seq_len, context_len)], rows=batch)
        if batch == 1:
            return parts.time_us
        # batch prompts of seq_len: dense over all tokens, attention per prompt
        fams = {k: v * self.cfg.layers for k, v in self.dense(batch * seq_len).items()}
        total = sum(fams.values()) + batch * self.attn_prefill(seq_len, context_len) \
            * self.cfg.layers + sum(self.head(batch).values())
        return total


__all__ = ["simulate_point", "launch_chip", "family_advance", "COLLECTIVE", "PointTime",
           "StepModel", "StepTime", "plan_size", "TOKEN_GRID", "ATTENTION_TOKEN_GRID", "BATCH_GRID",
           "CONTEXT_GRID", "LAUNCH_MODES"]

