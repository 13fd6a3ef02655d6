"""Parallel inference plans of a decoder: `Parallel` (how a model is split over chips), the
`Collective`s HCCL runs between the pieces, and `ParallelModel` (one graph per distinct rank).

`models.decoder(..., parallel=Parallel(tp=8))` builds a `ParallelModel`; `asim.simulate`
times it (`ascendsim.plan`). What each split does (Megatron-LM's tensor parallel layout, as
vLLM-Ascend and MindIE run it on HCCL):

- tensor parallel (tp): attention heads split by columns of q/k/v (GQA: the KV heads with
  their query groups; when tp exceeds the KV heads every KV head is replicated on tp /
  kv_heads ranks, as vLLM does), the output projection split by rows and its partial sums
  all-reduced; the MLP's merged gate/up split by columns (both halves), the down projection
  by rows, all-reduced; latent attention (DeepSeek MLA) splits the heads of q_b_proj,
  kv_b_proj and o_proj, the low-rank q_a / kv_a projections and the latent cache are
  replicated; MoE without ep splits every expert's ffn (and the shared expert's) and
  all-reduces the layer's output once; lm_head is split by vocabulary and its logits
  all-gathered. The embedding is replicated.
- sequence_parallel: the residual stream between the blocks is split over the tokens; each
  all-reduce becomes a ReduceScatter after the row-parallel projection and an AllGather
  before the next column-parallel one (Megatron-LM's sequence parallelism).
- pipeline parallel (pp): consecutive layers per stage (layers % pp == 0), the hidden state
  sent to the next stage (Send/Recv), the batch cut into `micro_batches` that flow through
  the stages one after another.
- expert parallel (ep): the routed experts of every MoE layer spread over the ep = tp * dp
  ranks of a stage; tokens go to their experts' ranks with an AllToAll (dispatch) and come
  back with another (combine). With tp = 1 (dp = ep) attention is data parallel, each rank
  with its own sequences (DeepSeek-V3's deployment); with tp > 1 attention is tensor
  parallel as above and the MoE layer's tokens, the same on the tp ranks after the
  attention's all-reduce, are cut in tp slices: each rank routes its slice (router, shared
  experts in full on its slice, dispatch to the experts of all ep ranks, combine) and an
  AllGather over the tp ranks puts the layer's output back together (the attention TP + MoE
  EP layout vLLM-Ascend and MindIE run DeepSeek in; the routed experts are whole, not split
  by tp).
- data parallel (dp): dp copies, each with batch / dp sequences.
- mc2: the row-parallel projections' all-reduce fused with their matmul (CANN's
  MatmulAllReduce, `torch_npu.npu_mm_all_reduce_base`), communication overlapping the
  matmul's tiles (timed in `ascendsim.plan`).

Ranks are numbered stage-major: rank = stage * (dp * tp) + d * tp + t. Ranks of a stage
differ only in which slice of the weights they hold (and, with dp, which sequences), so a
stage has one graph (`ParallelModel.graphs`) and one simulation; `rank_graph(rank)` builds a
rank's own graph with its own weight slices, for values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import itemsize, random_values

COLLECTIVE_KINDS = ("AllReduce", "ReduceScatter", "AllGather", "AllToAll", "SendRecv")


def _positive(key: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ConfigError(f"Parallel({key}={v!r}): must be a positive integer")


@dataclass(frozen=True)
class Parallel:
    """How a decoder is split over chips (module note): tensor, pipeline, expert and data
    parallel sizes; `sequence_parallel` (tp's all-reduces as ReduceScatter + AllGather);
    `mc2` (tp's all-reduces fused into their matmuls); `micro_batches` of the pipeline (None:
    pp of them)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    sequence_parallel: bool = False
    mc2: bool = False
    micro_batches: int | None = None

    def __post_init__(self) -> None:
        for key in ("tp", "pp", "ep", "dp"):
            _positive(key, getattr(self, key))
        if self.micro_batches is not None:
            _positive("micro_batches", self.micro_batches)
        for key in ("sequence_parallel", "mc2"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"Parallel({key}={getattr(self, key)!r}): must be a bool")
        if self.sequence_parallel and self.tp == 1:
            raise ConfigError("Parallel(sequence_parallel=True) splits the tokens over the "
                              "tensor-parallel ranks: it needs tp > 1")
        if self.mc2 and self.tp == 1:
            raise ConfigError("Parallel(mc2=True) fuses the tensor-parallel all-reduce into "
                              "its matmul: it needs tp > 1")
        if self.mc2 and self.sequence_parallel:
            raise ConfigError("Parallel(mc2=True, sequence_parallel=True): the fused matmul + "
                              "ReduceScatter / AllGather forms are not modelled (mc2 fuses "
                              "the all-reduce)")
        if self.ep > 1 and self.ep != self.tp * self.dp:
            raise ConfigError(f"Parallel(ep={self.ep}, tp={self.tp}, dp={self.dp}): expert "
                              f"parallel spreads the experts over every rank of a stage: "
                              f"ep must be tp * dp = {self.tp * self.dp} (tp=1, dp=ep: "
                              f"attention data parallel; tp > 1: attention tensor parallel)")
        if self.ep > 1 and self.tp > 1 and self.sequence_parallel:
            raise ConfigError(f"Parallel(ep={self.ep}, tp={self.tp}, sequence_parallel=True): "
                              f"expert parallel with tensor parallel attention is modelled "
                              f"without sequence parallel")

    @property
    def world(self) -> int:
        """Chips the plan takes: tp * pp * dp (the ep ranks are the dp ranks)."""
        return self.tp * self.pp * self.dp

    @property
    def stage_size(self) -> int:
        return self.tp * self.dp

    def micro(self) -> int:
        """Micro-batches of the pipeline (1 without pp)."""
        if self.pp == 1:
            return 1
        return self.micro_batches if self.micro_batches is not None else self.pp

    def check(self, cfg: Any, batch: int, seq_len: int) -> None:
        """ConfigError naming the first item of the model this plan does not divide."""
        tp = self.tp
        if cfg.heads % tp:
            raise ConfigError(f"{self}: tp={tp} does not divide the {cfg.heads} attention "
                              f"heads")
        if not cfg.mla and cfg.kv_heads % tp and tp % cfg.kv_heads:
            raise ConfigError(f"{self}: tp={tp} neither divides the {cfg.kv_heads} KV heads "
                              f"(GQA groups) nor is a multiple of them")
        dense = any(not cfg.moe_layer(i) for i in range(cfg.layers))
        if dense and cfg.ffn % tp:
            raise ConfigError(f"{self}: tp={tp} does not divide the MLP's ffn={cfg.ffn}")
        if cfg.moe and tp > 1 and self.ep == 1:
            if cfg.expert_ffn % tp:
                raise ConfigError(f"{self}: tp={tp} does not divide expert_ffn="
                                  f"{cfg.expert_ffn}")
            if cfg.shared_ffn % tp:
                raise ConfigError(f"{self}: tp={tp} does not divide shared_ffn="
                                  f"{cfg.shared_ffn}")
        if cfg.vocab % tp:
            raise ConfigError(f"{self}: tp={tp} does not divide the vocabulary ({cfg.vocab}) "
                              f"lm_head is split over")
        if cfg.layers % self.pp:
            raise ConfigError(f"{self}: pp={self.pp} does not divide the {cfg.layers} layers")
        if self.ep > 1:
            if not cfg.moe:
                raise ConfigError(f"{self}: ep={self.ep} needs a mixture-of-experts model "
                                  f"(this one has no experts)")
            if cfg.experts % self.ep:
                raise ConfigError(f"{self}: ep={self.ep} does not divide the {cfg.experts} "
                                  f"experts")
        if batch % self.dp:
            raise ConfigError(f"{self}: dp={self.dp} does not divide batch={batch}")
        m = self.micro()
        if (batch // self.dp) % m:
            raise ConfigError(f"{self}: {m} micro-batches do not divide the {batch // self.dp} "
                              f"sequences of a data-parallel rank")
        if self.ep > 1 and tp > 1 and (batch // self.dp // m) * seq_len % tp:
            raise ConfigError(f"{self}: expert parallel with tp={tp} routes 1/tp of a "
                              f"micro-batch's {(batch // self.dp // m) * seq_len} tokens "
                              f"per rank: not divisible")
        if self.sequence_parallel and (batch // self.dp // m) * seq_len % tp:
            raise ConfigError(f"{self}: sequence_parallel splits the {batch * seq_len} tokens "
                              f"over tp={tp}: not divisible")

    def __str__(self) -> str:
        parts = [f"{k}={getattr(self, k)}" for k in ("tp", "pp", "ep", "dp")
                 if getattr(self, k) != 1]
        parts += [k for k in ("sequence_parallel", "mc2") if getattr(self, k)]
        if self.micro_batches is not None:
            parts.append(f"micro_batches={self.micro_batches}")
        return f"Parallel({', '.join(parts)})"


@dataclass(frozen=True)
class Shard:
    """What one rank builds: its place in the plan (decoder.py reads it)."""

    parallel: Parallel
    tp_rank: int = 0
    dp_rank: int = 0
    stage: int = 0
    layers: tuple[int, ...] = ()
    #: AllToAll receive rows of an expert-parallel rank (None: the even spread, T * k)
    capacity: int | None = None

    @property
    def tp(self) -> int:
        return self.parallel.tp

    @property
    def ep(self) -> int:
        return self.parallel.ep

    @property
    def ep_rank(self) -> int:
        """Place among the stage's ep = tp * dp ranks (which experts it holds)."""
        return self.dp_rank * self.parallel.tp + self.tp_rank if self.parallel.ep > 1 else 0

    @property
    def first(self) -> bool:
        return self.stage == 0

    @property
    def last(self) -> bool:
        return self.stage == self.parallel.pp - 1


@dataclass(frozen=True)
class Collective:
    """One HCCL collective of a plan. `nbytes` is the buffer hw.collectives times (AllReduce:
    the tensor; ReduceScatter: its input; AllGather: its output; AllToAll: one rank's send
    buffer; SendRecv: the message). `in_values` leave the producing graph (its outputs),
    `out_values` enter the consuming graph (its inputs) of stage `stage` (SendRecv: stage ->
    stage + 1)."""

    name: str
    kind: str
    group: int
    nbytes: int
    in_values: tuple[str, ...]
    out_values: tuple[str, ...]
    stage: int = 0
    layer: int | None = None
    axis: int = 0
    mc2: bool = False


def split_ranges(n: int, parts: int, rank: int) -> tuple[int, int]:
    """[start, stop) of part `rank` of `n` split evenly in `parts`."""
    step = n // parts
    return rank * step, (rank + 1) * step


def sliced_values(full_shape: tuple[int, ...], dtype: str, seed: int, scale: float, axis: int,
                  ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The slices `ranges` along `axis` (concatenated) of the seeded random weight a
    single-chip model builds (`LazyTensor.random`): a rank's shard of a weight."""
    full = random_values(full_shape, dtype, seed, scale)
    parts = [np.take(full, np.arange(a, b), axis=axis) for a, b in ranges]
    return np.concatenate(parts, axis=axis) if len(parts) > 1 else parts[0]


def sliced_made(make: Callable[[], np.ndarray], axis: int,
                ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """The slices `ranges` along `axis` of the array `make()` builds (quantised weights)."""
    full = np.asarray(make())
    return np.concatenate([np.take(full, np.arange(a, b), axis=axis) for a, b in ranges],
                          axis=axis)


@dataclass
class StageModel:
    """The graph of one pipeline stage (every rank of the stage runs it), its ranks and the
    collectives its graph takes part in."""

    stage: int
    ranks: tuple[int, ...]
    layers: tuple[int, ...]
    graph: Graph
    collectives: list[Collective]


@dataclass
class ParallelModel:
    """A decoder split by a `Parallel` plan: one graph per distinct rank (per pipeline stage)
    and the collectives between them. `build(stage, layers, capacity)` builds a stage's graph
    for any subset of its layers (the simulation times representative layers), and
    `rank_graph(rank)` a rank's graph with its own weight slices (values)."""

    name: str
    config: Any
    parallel: Parallel
    phase: str
    batch: int
    seq_len: int
    context_len: int
    dtype: str
    quant: str | None
    builder: Callable[..., tuple[Graph, list[Collective]]] = field(repr=False)
    _stages: list[StageModel] | None = field(default=None, repr=False)
    #: the same model under another plan (`with_plan`)
    replanner: Callable[[Parallel], ParallelModel] | None = field(default=None, repr=False)

    def with_plan(self, parallel: Parallel) -> ParallelModel:
        """The same model, phase and batch split by `parallel` (ConfigError when the plan
        does not divide it)."""
        if self.replanner is None:
            raise ConfigError(f"{self!r} was built without a way to rebuild it under {parallel}")
        return self.replanner(parallel)

    @property
    def world(self) -> int:
        return self.parallel.world

    def stage_layers(self, stage: int) -> tuple[int, ...]:
        per = self.config.layers // self.parallel.pp
        return tuple(range(stage * per, (stage + 1) * per))

    def stage_ranks(self, stage: int) -> tuple[int, ...]:
        n = self.parallel.stage_size
        return tuple(range(stage * n, (stage + 1) * n))

    def shard(self, rank: int, layers: tuple[int, ...] | None = None,
              capacity: int | None = None) -> Shard:
        """The Shard of `rank` (its stage's layers unless `layers`)."""
        p = self.parallel
        if not 0 <= rank < p.world:
            raise ConfigError(f"rank {rank}: the plan {p} has ranks 0..{p.world - 1}")
        stage, inner = divmod(rank, p.stage_size)
        d, t = divmod(inner, p.tp)
        return Shard(p, t, d, stage, self.stage_layers(stage) if layers is None else layers,
                     capacity)

    def build(self, stage: int, layers: tuple[int, ...] | None = None,
              capacity: int | None = None, rank: int | None = None,
              batch: int | None = None) -> tuple[Graph, list[Collective]]:
        """(graph, collectives) of `stage` (its first rank, or `rank`) with `layers` (default
        all of the stage's), for `batch` sequences per data-parallel rank (default
        batch / dp / micro-batches)."""
        r = self.stage_ranks(stage)[0] if rank is None else rank
        return self.builder(self.shard(r, layers, capacity), batch)

    @property
    def stages(self) -> list[StageModel]:
        if self._stages is None:
            self._stages = []
            for s in range(self.parallel.pp):
                g, coll = self.build(s)
                self._stages.append(StageModel(s, self.stage_ranks(s), self.stage_layers(s),
                                               g, coll))
        return self._stages

    @property
    def graphs(self) -> list[Graph]:
        """One graph per distinct rank (the ranks of a pipeline stage share theirs)."""
        return [s.graph for s in self.stages]

    @property
    def collectives(self) -> list[Collective]:
        return [c for s in self.stages for c in s.collectives]

    def rank_graph(self, rank: int, capacity: int | None = None
                   ) -> tuple[Graph, list[Collective]]:
        """`rank`'s own graph (its weight slices) and collectives."""
        return self.builder(self.shard(rank, capacity=capacity), None)

    @property
    def local_batch(self) -> int:
        """Sequences one rank holds in one micro-batch."""
        return self.batch // self.parallel.dp // self.parallel.micro()

    def activation_bytes(self, tokens: int) -> int:
        """Bytes of a (tokens, hidden) activation in the model's dtype."""
        return tokens * self.config.hidden * itemsize(self.dtype)

    def __repr__(self) -> str:
        return (f"ParallelModel({self.name} {self.phase} batch {self.batch} x "
                f"{self.seq_len}, {self.parallel} on {self.world} chips)")


__all__ = ["Parallel", "ParallelModel", "StageModel", "Collective", "Shard",
           "COLLECTIVE_KINDS", "split_ranges", "sliced_values", "sliced_made"]
