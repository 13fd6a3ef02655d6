"""Decoder-only LLMs (LLaMA / Qwen style) for prefill and decode with a KV cache, optionally MoE.

The graph is written the way an eager PyTorch model exports it, so that the fusion passes have
the real primitive patterns to find (RmsNormFusionPass, RotaryMulFusionPass, SwiGluFusionPass,
FlashAttentionFusionPass):

- RMSNorm: Mul(x, x) -> ReduceMean(-1) -> Add(eps) -> Sqrt -> Div(x, .) -> Mul(gamma) (HF's
  LlamaRMSNorm without its fp32 up-cast: the graph stays in the compute dtype);
- rotary embedding: x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin, cos/sin constants for
  the positions context_len .. context_len + seq_len - 1 (HF computes them from position ids);
- attention (grouped-query): q/k/v projections (+ bias for Qwen), Reshape + Transpose to BNSD,
  rotary on q and k, KvCacheAppend of the new keys/values into the cache at `context_len`,
  key/value heads repeated for their query-head group (HF repeat_kv: Reshape -> Expand ->
  Reshape), MatMul(q, Transpose(k)) -> Mul(1/sqrt(D)) -> Add(causal mask, prefill only) ->
  Softmax -> MatMul(., v), Transpose + Reshape, output projection, residual Add;
- MLP: one merged gate/up MatMul (as vLLM / MindIE load it), the two halves Sliced,
  Mul(a, Sigmoid(a)) * b, down projection, residual Add;
- MoE (Qwen2-MoE): router MatMul -> MoeGatingTopKSoftmax (top-k, no renormalisation) ->
  MoeInitRouting (token copies sorted by expert) -> GroupedMatmul (gate/up) -> SwiGLU ->
  GroupedMatmul (down) -> MoeFinalizeRouting (weighted sum), plus the shared expert (dense
  SwiGLU MLP scaled by Sigmoid(x @ w_gate)). Values route the tokens the router picks; the
  timing model assumes the tokens spread evenly over the experts (ceil(T * k / E) rows each,
  every touched expert's weights read once per layer, min(E, T * k) experts touched: see
  lower_grouped_matmul in ascendsim/lower/cube.py).
- the families of Hugging Face configs (models/hf_config.py): Qwen3's per-head q/k RMSNorm
  (on (B, S, H, D) before the transpose, head_dim may differ from hidden / heads); routers
  other than plain softmax top-k (Mixtral and Qwen3-MoE renormalised, DeepSeek-V2 groups,
  DeepSeek-V3 sigmoid + bias + groups, routed_scaling_factor) as MoeGatingTopK; DeepSeek's
  multi-head latent attention (`_Decoder.latent_attention`: a latent cache, the naive form in
  prefill, the absorbed form in decode), its leading dense layers and ungated shared
  experts; rope_scaling linear / llama3 / yarn in the cos/sin tables.
- quant="w8a8": the projections as DynamicQuant -> QuantBatchMatmul (ir/ops/quant.py), the
  routed experts as DynamicQuant -> GroupedMatmul with int8 weights (`_Decoder.experts`);
  quant="w8a16" / "w4a16": as WeightQuantBatchMatmulV2 with int8 / INT4Pack weights
  (weight-only: the activations stay in the compute dtype).
- parallel=asim.Parallel(...): the same layers built per rank of a plan (`_Decoder.shard`):
  the rank's heads, ffn or experts as slices of the single-chip weights (same seeds, so the
  values match), the HCCL collectives as graph outputs (what goes to HCCL) and inputs (what
  comes back), recorded as `Collective`s; `parallel_decoder` returns the `ParallelModel`
  (models/parallel.py has the rules).

Inputs: `input_ids` (batch, seq_len) int64 and, per layer l, `past_key.l` / `past_value.l`
(batch, kv_heads, context_len + seq_len, head_dim): the cache buffer sized for this step, its
first context_len positions filled. The residual stream is kept as (batch * seq_len, hidden),
so that every projection is one GEMM that reads its weight once. Outputs: `logits`
(batch, seq_len or 1, vocab) and the updated caches `present_key.l` / `present_value.l`. In
prefill only the last token's logits are computed unless `all_logits=True` (serving needs
the last one only).
"""

from __future__ import annotations

import dataclasses
import functools
from statistics import NormalDist

import numpy as np

from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import (
    LazyTensor,
    Value,
    as_storage,
    itemsize,
    random_values,
    storage_dtype,
)
from ..kernels import quant as kq
from .blocks import ModelBuilder, check_choice, check_positive
from .decoder_config import DecoderConfig
from .hf_config import from_hf, shipped
from .parallel import (
    Collective,
    Parallel,
    ParallelModel,
    Shard,
    sliced_made,
    sliced_values,
    split_ranges,
)

PHASES = ("prefill", "decode")
#: weight quantisation modes of `decoder(quant=...)` (None: the compute dtype throughout)
QUANT_MODES = ("w8a8", "w8a16", "w4a16")
#: weight-only modes: (weight bits, antiquant group size along K; 0 = per output channel).
#: W4A16 uses groups of 128 rows, the common AWQ / GPTQ group; a K that 128 does not divide,
#: or is not above, takes the largest of 64 and 32 that fits (CANN takes group sizes that are
#: multiples of 32 in [32, K - 1]), else per channel.
WEIGHT_ONLY = {"w8a16": (8, 0), "w4a16": (4, 128)}
#: KV cache dtypes of `decoder(kv_cache_dtype=...)` besides the compute dtype (None): MindIE's
#: and vLLM-Ascend's "kv int8" (C8): per-channel symmetric int8, dequantised inside the
#: decode attention (IncreFlashAttention's key/value antiquant scales)
KV_CACHE_DTYPES = ("int8",)
#: additive mask value of a hidden key (fp16's most negative finite number)
MASKED = -65504.0


def _shipped_presets() -> dict[str, DecoderConfig]:
    """The configs shipped in ascendsim/models/configs/ (written out from the models' published
    Hugging Face config.json files, the source in each file's "_source" key), by name."""
    return {name: from_hf(path) for name, path in shipped().items()}


#: Presets: the shipped Hugging Face configs by name (the names carry the size) and two tiny
#: test models built by hand.
PRESETS: dict[str, DecoderConfig] = {
    **_shipped_presets(),
    "tiny-gqa-1m": DecoderConfig(
        hidden=64, layers=2, heads=4, kv_heads=2, ffn=96, vocab=128, eps=1e-6,
        source="ascendsim test model (GQA, 2 query heads per KV head)"),
    "tiny-moe-1m": DecoderConfig(
        hidden=64, layers=2, heads=4, kv_heads=2, ffn=96, vocab=128, eps=1e-6, qkv_bias=True,
        experts=4, top_k=2, expert_ffn=32, shared_ffn=48,
        source="ascendsim test model (Qwen2-MoE layout: 4 experts, top-2, shared expert)"),
}
DEFAULT_PRESET = "tiny-gqa-1m"


def decoder_presets() -> dict[str, DecoderConfig]:
    """The built-in decoder configurations by name (names carry the size: '7b', '70b')."""
    return dict(PRESETS)


def decoder_config(preset: str | DecoderConfig | None = None, **overrides) -> DecoderConfig:
    """A preset (by name or as given) with `overrides` (DecoderConfig field names) applied."""
    if isinstance(preset, DecoderConfig):
        cfg = preset
    else:
        name = DEFAULT_PRESET if preset is None else preset
        if name not in PRESETS:
            raise ConfigError(f"unknown decoder preset {name!r}; valid: {', '.join(PRESETS)}")
        cfg = PRESETS[name]
    fields = {f.name for f in dataclasses.fields(DecoderConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ConfigError(f"decoder(): unknown argument(s) {', '.join(unknown)}; config "
                          f"fields: {', '.join(sorted(fields))}")
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


#: W8A8 weight clip in standard deviations of the seeded weights (module note of quant_linear)
QUANT_CLIP_SIGMAS = 4.0


def _quantised(shape: tuple, dtype: str, seed: int, sigma: float) -> np.ndarray:
    """The int8 weight of a seeded normal(0, sigma) float weight (quant_linear)."""
    return kq.quant_weight(random_values(shape, dtype, seed, sigma),
                           QUANT_CLIP_SIGMAS * sigma / 127.0)


#: expected saturated weights per quantisation group (per channel or per group of K rows) of
#: the weight-only scale: the clip sits where a normal group passes it this rarely
WEIGHT_CLIP_TAIL = 0.05


def weight_only_scale(rows: int, sigma: float, bits: int) -> float:
    """The antiquant scale of a seeded normal(0, sigma) weight quantised to `bits` per channel
    or per group of `rows` rows of K: the clip c * sigma that `rows` normal values pass
    WEIGHT_CLIP_TAIL times on average (P(|x| > c) = WEIGHT_CLIP_TAIL / rows: about the
    group's absmax, rarer outliers saturate), over 2^(bits-1) - 1 levels. Known without
    building the weight, as W8A8's scale is (a shape-only run never materialises weights)."""
    c = NormalDist().inv_cdf(1.0 - WEIGHT_CLIP_TAIL / (2.0 * rows))
    return sigma * c / (2 ** (bits - 1) - 1)


def _weight_only(shape: tuple, dtype: str, seed: int, sigma: float, bits: int,
                 scale: float) -> np.ndarray:
    """The stored weight of a seeded normal(0, sigma) float weight quantised to `bits` with
    `scale`: int8 (K, N), or int4 in CANN's INT4Pack int32 (K, N / 8)."""
    qmax = 2 ** (bits - 1) - 1
    w = np.asarray(random_values(shape, dtype, seed, sigma), np.float64)
    q = np.clip(np.round(w / scale), -qmax, qmax).astype(np.int8)
    return kq.pack_int4(q) if bits == 4 else q


# ----------------------------------------------------------------------------- rotary
def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * float(np.log(scale)) + 1.0


def rope_frequencies(cfg: DecoderConfig) -> tuple[np.ndarray, float]:
    """(inverse frequencies of the rotary pairs, factor on cos/sin) as HF's
    ROPE_INIT_FUNCTIONS compute them for rope_scaling types default, linear, llama3, yarn."""
    d = cfg.rope_dim
    inv = cfg.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    rs = dict(cfg.rope_scaling)
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return inv, 1.0
    factor = float(rs["factor"])
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "llama3":
        old = float(rs["original_max_position_embeddings"])
        lo, hi = float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        wavelen = 2 * np.pi / inv
        scaled = np.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return np.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        base = cfg.rope_theta
        orig = float(rs.get("original_max_position_embeddings") or cfg.max_positions)
        fast, slow = float(rs.get("beta_fast") or 32), float(rs.get("beta_slow") or 1)

        def corr(rot: float) -> float:
            return d * np.log(orig / (rot * 2 * np.pi)) / (2 * np.log(base))
        low = max(int(np.floor(corr(fast))), 0)
        high = min(int(np.ceil(corr(slow))), d - 1)
        ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low)
                       / ((high - low) if high != low else 0.001), 0, 1)
        extra = 1 - ramp
        inv = inv / factor * (1 - extra) + inv * extra
        att = rs.get("attention_factor")
        if att is None:
            m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
            att = (_yarn_mscale(factor, m) / _yarn_mscale(factor, m_all) if m and m_all
                   else _yarn_mscale(factor))
        return inv, float(att)
    raise ConfigError(f"rope_scaling type {kind!r} is not supported (default, linear, llama3, "
                      f"yarn)")


def softmax_scale(cfg: DecoderConfig) -> float:
    """1/sqrt(q head size), times DeepSeek's yarn mscale(factor, mscale_all_dim)^2 for MLA."""
    scale = 1.0 / float(np.sqrt(cfg.head_dim))
    rs = dict(cfg.rope_scaling)
    if cfg.mla and rs.get("mscale_all_dim"):
        m = _yarn_mscale(float(rs["factor"]), float(rs["mscale_all_dim"]))
        scale *= m * m
    return scale


@functools.lru_cache(maxsize=2)
def causal_mask(seq: int, ctx: int, dtype: str) -> np.ndarray:
    """The additive causal mask (1, 1, seq, ctx + seq) of a step in `dtype`'s storage: 0 where
    key t <= query i + ctx, MASKED elsewhere. Cached (the last two): a parallel plan builds the
    same step several times (its representative layers), and an 8k prompt's mask holds 64M
    entries. Callers must not write into it."""
    total = ctx + seq
    t = np.arange(total)[None, :]
    i = np.arange(seq)[:, None]
    m = np.where(t <= i + ctx, np.float32(0.0), np.float32(MASKED))
    return as_storage(m.reshape(1, 1, seq, total), dtype)


# ----------------------------------------------------------------------------- layers
class _Decoder:
    def __init__(self, cfg: DecoderConfig, mb: ModelBuilder, batch: int, seq: int, ctx: int,
                 absorbed: bool = False, quant: str | None = None, shard: Shard | None = None,
                 kv_cache_dtype: str | None = None):
        self.cfg, self.mb, self.g = cfg, mb, mb.g
        self.quant = quant
        self.kv_int8 = kv_cache_dtype == "int8"
        # a rank of a parallel plan (models/parallel.py): its heads, KV heads, the collectives
        self.shard = shard
        self.comm: list[Collective] = []
        self.tp = shard.tp if shard is not None else 1
        self.sp = shard is not None and shard.parallel.sequence_parallel
        self.nh = cfg.heads // self.tp
        self.nkv = cfg.kv_heads // self.tp if cfg.kv_heads >= self.tp else 1
        self.b, self.s, self.ctx = batch, seq, ctx
        self.total = ctx + seq
        self.absorbed = absorbed
        d = cfg.rope_dim
        inv, att = rope_frequencies(cfg)
        ang = np.arange(ctx, ctx + seq, dtype=np.float64)[:, None] * inv[None, :]
        ang = np.concatenate([ang, ang], axis=-1).reshape(1, 1, seq, d)
        cos, sin = np.cos(ang), np.sin(ang)
        if att != 1.0:
            cos, sin = cos * att, sin * att
        self.cos = self.g.const(cos, "rope.cos", dtype=mb.dtype, buffer=True)
        self.sin = self.g.const(sin, "rope.sin", dtype=mb.dtype, buffer=True)
        self.mask = None
        if seq > 1:
            self.mask = self.g.const(causal_mask(seq, ctx, mb.dtype), "attention.causal_mask",
                                     dtype=mb.dtype, buffer=True)

    def linear(self, x: Value, name: str, n: int, bias: bool = False,
               split: tuple | None = None) -> Value:
        """x @ W (+ b) of a (k, n) weight; on a rank of a plan `split` = ("col", ranges) keeps
        those output columns, ("row", ranges, k) those input rows of the full (k, n) weight."""
        k = int(x.shape[-1])
        if split is not None and split[0] == "row":
            k = split[2]
            if bias:
                raise ConfigError(f"{name}: a row-parallel projection with a bias is not "
                                  f"modelled")
        if self.quant == "w8a8" and not name.endswith("gate"):
            y = self.quant_linear(x, name, k, n, split)
        elif self.quant in WEIGHT_ONLY and not name.endswith("gate") and \
                (self.quant == "w8a16" or n % kq.INT4_PER_INT32 == 0):
            y = self.weight_only_linear(x, name, k, n, split)
        else:
            w = self.param(f"{name}.weight", (k, n), float(1 / np.sqrt(k)), split)
            y = self.g.matmul(x, w, name=name)
        if bias:
            y = self.g.add(y, self.param(f"{name}.bias", (n,), 0.02,
                                         None if split is None else ("col", split[1])))
        return y

    def param(self, name: str, shape: tuple, scale: float, split: tuple | None = None,
              axis: int | None = None) -> Value:
        """A seeded weight of the single-chip model, or on a rank its slice (`split`: "col"
        slices the last axis, "row" the first, or `axis`), with the same values."""
        if split is None:
            return self.mb.weight(name, shape, scale=scale)
        ax = axis if axis is not None else (len(shape) - 1 if split[0] == "col" else 0)
        ranges = tuple(split[1])
        local = list(shape)
        local[ax] = sum(b - a for a, b in ranges)
        make = functools.partial(sliced_values, tuple(shape), self.mb.dtype,
                                 self.mb._seed(name), scale, ax, ranges)
        return self.g.const(LazyTensor(tuple(local), self.mb.dtype, make,
                                       f"{name} slice {ranges} of axis {ax}"), name)

    def quant_linear(self, x: Value, name: str, k: int, n: int,
                     split: tuple | None = None) -> Value:
        """W8A8 (vLLM-Ascend / MindIE): DynamicQuant of the activations per token, the weight
        int8 with a per-output-channel scale, QuantBatchMatmul dequantising in its epilogue.
        The int8 weight is the same seeded float weight the unquantised model has, quantised
        offline; its scale is the one a per-channel absmax calibration gives the seeded
        normal(0, sigma) weights up to their rare outliers (QUANT_CLIP_SIGMAS * sigma / 127,
        beyond it clipped), so the scale is known without building the weight (a shape-only
        run never materialises weights)."""
        g, mb = self.g, self.mb
        shape, seed, sigma = (k, n), mb._seed(f"{name}.weight"), float(1 / np.sqrt(k))
        make = functools.partial(_quantised, shape, mb.dtype, seed, sigma)
        if split is not None:           # a rank's slice of the int8 weight
            ax = 1 if split[0] == "col" else 0
            ranges = tuple(split[1])
            shape = (k, sum(b - a for a, b in ranges)) if ax else (sum(b - a for a, b in ranges),
                                                                   n)
            make = functools.partial(sliced_made, make, ax, ranges)
        wq = g.const(LazyTensor(shape, "int8", make, f"int8 of random(seed={seed})"),
                     f"{name}.weight_int8")
        ws = mb.fill(f"{name}.weight_scale", (shape[1],), QUANT_CLIP_SIGMAS * sigma / 127.0,
                     dtype="float32")
        xq, xs = g.dynamic_quant(x, name=f"{name}.quant")
        return g.quant_batch_matmul(xq, wq, ws, xs, output_dtype=mb.dtype, name=name)

    def experts(self, x: Value, groups: Value, wname: str, shape: tuple, split: tuple | None,
                axis: int | None, name: str) -> Value:
        """GroupedMatmul of the routed experts' (E, K, N) weight (a rank's slice with
        `split` along `axis`, as `param`). W8A8 quantises them too, as vLLM-Ascend's W8A8
        MoE runs DeepSeek: DynamicQuant of the routed tokens, the int8 weight (the seeded
        float weight quantised with the per expert and output channel scale of
        `quant_linear`), GroupedMatmul dequantising in its epilogue."""
        g, mb = self.g, self.mb
        sigma = float(1 / np.sqrt(shape[1]))
        if self.quant != "w8a8":
            return g.grouped_matmul(x, self.param(wname, shape, sigma, split, axis), groups,
                                    name=name)
        seed = mb._seed(wname)
        make = functools.partial(_quantised, shape, mb.dtype, seed, sigma)
        local = list(shape)
        if split is not None:
            ax = axis if axis is not None else (len(shape) - 1 if split[0] == "col" else 0)
            ranges = tuple(split[1])
            local[ax] = sum(b - a for a, b in ranges)
            make = functools.partial(sliced_made, make, ax, ranges)
        wq = g.const(LazyTensor(tuple(local), "int8", make, f"int8 of random(seed={seed})"),
                     f"{wname}_int8")
        ws = mb.fill(f"{wname}_scale", (local[0], local[2]),
                     QUANT_CLIP_SIGMAS * sigma / 127.0, dtype="float32")
        xq, xs = g.dynamic_quant(x, name=f"{name}.quant")
        return g.grouped_matmul(xq, wq, groups, ws, xs, output_dtype=mb.dtype, name=name)

    def kv_scale(self, name: str) -> float:
        """The per-channel antiquant scale of an int8 cache: the seeded model's keys and
        values are about unit normal (RMS-normed inputs through 1/sqrt(K)-scaled weights), so
        a calibration by absmax gives QUANT_CLIP_SIGMAS / 127 up to rare outliers (beyond it
        saturated); the same for every channel, known without running the model."""
        return QUANT_CLIP_SIGMAS / 127.0

    def kv_quant(self, x: Value, name: str) -> Value:
        """New keys or values (B, Hkv, S, D) to int8 (AscendQuantV2, per channel (Hkv, 1, D))."""
        g, mb = self.g, self.mb
        shape = (self.nkv, 1, int(x.shape[-1]))
        inv = mb.fill(f"{name}.quant_scale", shape, 1.0 / self.kv_scale(name))
        return g.ascend_quant_v2(x, inv, name=f"{name}.quant")

    def kv_dequant(self, cache: Value, name: str) -> Value:
        """The int8 cache back to the compute dtype (AscendAntiQuantV2; in decode the
        attention fusion moves it into IncreFlashAttention)."""
        g, mb = self.g, self.mb
        shape = (self.nkv, 1, int(cache.shape[-1]))
        scale = mb.fill(f"{name}.antiquant_scale", shape, self.kv_scale(name))
        return g.ascend_anti_quant_v2(cache, scale, dst_type=mb.dtype, name=f"{name}.dequant")

    def weight_only_linear(self, x: Value, name: str, k: int, n: int,
                           split: tuple | None = None) -> Value:
        """W8A16 / W4A16 (WEIGHT_ONLY): the same seeded float weight the unquantised model
        has, quantised offline per channel or per group of K rows with the scale
        `weight_only_scale` gives (the same for every channel and group), the activations
        left in the compute dtype; WeightQuantBatchMatmulV2 antiquants it in the kernel. On a
        rank of a plan (`split`) the int8 weight is sliced like the float one; int4's packed
        columns and per-group scales are not sliced here (a ConfigError names the plan)."""
        g, mb = self.g, self.mb
        bits, group = WEIGHT_ONLY[self.quant]
        if split is not None and bits == 4:
            raise ConfigError(f"{name}: quant={self.quant!r} with a parallel plan is not "
                              f"modelled (int4 packed columns and per-group scales are not "
                              f"split across ranks); use 'w8a16' or 'w8a8'")
        group = next((gs for gs in (group, group // 2, group // 4)
                      if 32 <= gs < k and k % gs == 0), 0) if group else 0
        shape, seed, sigma = (k, n), mb._seed(f"{name}.weight"), float(1 / np.sqrt(k))
        scale = weight_only_scale(group or k, sigma, bits)
        wshape, wdt = ((k, n // kq.INT4_PER_INT32), "int32") if bits == 4 else ((k, n), "int8")
        make = functools.partial(_weight_only, shape, mb.dtype, seed, sigma, bits, scale)
        cols = n
        if split is not None:           # a rank's slice of the int8 weight
            ax, ranges = (1 if split[0] == "col" else 0), tuple(split[1])
            width = sum(b - a for a, b in ranges)
            wshape = (k, width) if ax else (width, n)
            cols = wshape[1]
            make = functools.partial(sliced_made, make, ax, ranges)
        w = g.const(LazyTensor(wshape, wdt, make, f"int{bits} of random(seed={seed})"),
                    f"{name}.weight_int{bits}")
        sc = mb.fill(f"{name}.antiquant_scale", (k // group, n) if group else (cols,), scale)
        return g.weight_quant_batch_matmul_v2(x, w, sc, antiquant_group_size=group, name=name)

    def rms_norm(self, x: Value, name: str) -> Value:
        g, mb = self.g, self.mb
        gamma = mb.uniform(f"{name}.weight", (int(x.shape[-1]),), 0.9, 1.1)
        ms = g.reduce_mean(g.mul(x, x), [-1], keepdims=1)
        return g.mul(g.div(x, g.sqrt(g.add(ms, mb.scalar(self.cfg.eps)))), gamma)

    def rotary(self, x: Value) -> Value:
        g, mb = self.g, self.mb
        d = int(x.shape[-1])
        half = d // 2
        x1 = g.slice(x, mb.ints([0]), mb.ints([half]), mb.ints([-1]))
        x2 = g.slice(x, mb.ints([half]), mb.ints([d]), mb.ints([-1]))
        rot = g.concat(g.neg(x2), x1, axis=-1)
        return g.add(g.mul(x, self.cos), g.mul(rot, self.sin))

    def heads(self, x: Value, n: int, norm: str | None = None) -> Value:
        """(B*S, n*D) -> (B, n, S, D); Qwen3 normalises each head (`norm`) before the
        transpose, as HF's q_norm / k_norm do."""
        g, mb = self.g, self.mb
        d = int(x.shape[-1]) // n
        x = g.reshape(x, mb.ints([self.b, self.s, n, d]))
        if norm is not None:
            x = self.rms_norm(x, norm)
        return g.transpose(x, perm=[0, 2, 1, 3])

    def repeat_kv(self, x: Value) -> Value:
        """HF repeat_kv: (B, Hkv, T, D) -> (B, Hkv * G, T, D), each kv head G times."""
        g, mb = self.g, self.mb
        group = self.nh // self.nkv
        if group == 1:
            return x
        b, hk, t, d = (int(v) for v in x.shape)
        x5 = g.reshape(x, mb.ints([b, hk, 1, t, d]))
        x5 = g.expand(x5, mb.ints([b, hk, group, t, d]))
        return g.reshape(x5, mb.ints([b, hk * group, t, d]))

    def attention(self, x: Value, layer: int) -> Value:
        cfg, g, mb = self.cfg, self.g, self.mb
        if cfg.mla:
            return self.latent_attention(x, layer)
        d, name = cfg.head_dim, f"layers.{layer}.self_attn"
        qn, kn = (f"{name}.q_norm", f"{name}.k_norm") if cfg.qk_norm else (None, None)
        qs, kvs, os_ = self.head_splits(d, d, d)
        x = self.tp_gather(x, f"{name}.input", layer)
        q = self.heads(self.linear(x, f"{name}.q_proj", cfg.heads * d, cfg.qkv_bias, qs),
                       self.nh, qn)
        k = self.heads(self.linear(x, f"{name}.k_proj", cfg.kv_heads * d, cfg.qkv_bias, kvs),
                       self.nkv, kn)
        v = self.heads(self.linear(x, f"{name}.v_proj", cfg.kv_heads * d, cfg.qkv_bias, kvs),
                       self.nkv)
        q, k = self.rotary(q), self.rotary(k)
        cache_shape = (self.b, self.nkv, self.total, d)
        cache_dt = "int8" if self.kv_int8 else mb.dtype
        past_k = g.input(f"past_key.{layer}", cache_shape, cache_dt)
        past_v = g.input(f"past_value.{layer}", cache_shape, cache_dt)
        if self.kv_int8:
            k, v = self.kv_quant(k, f"{name}.k_cache"), self.kv_quant(v, f"{name}.v_cache")
        kc = g.kv_cache_append(past_k, k, position=self.ctx, name=f"present_key.{layer}")
        vc = g.kv_cache_append(past_v, v, position=self.ctx, name=f"present_value.{layer}")
        g.output(kc, vc)
        if self.kv_int8:
            kc, vc = self.kv_dequant(kc, f"{name}.k_cache"), self.kv_dequant(vc, f"{name}.v_cache")
        kt = g.transpose(self.repeat_kv(kc), perm=[0, 1, 3, 2])
        scores = g.mul(g.matmul(q, kt), mb.scalar(softmax_scale(cfg)))
        if self.mask is not None:
            scores = g.add(scores, self.mask)
        ctx = g.matmul(g.softmax(scores, axis=-1), self.repeat_kv(vc))
        ctx = g.reshape(g.transpose(ctx, perm=[0, 2, 1, 3]),
                        mb.ints([self.b * self.s, self.nh * d]))
        out = self.linear(ctx, f"{name}.o_proj", cfg.hidden, split=os_)
        return self.tp_reduce(out, f"{name}.o_proj", layer)

    def head_splits(self, qd: int, kvd: int, od: int) -> tuple:
        """(q split, k/v split, o_proj split) of this rank's heads (None on one chip): query
        heads [a, b) of head size qd; KV heads of size kvd, split or (tp > kv_heads) the one
        KV head of this rank's query group replicated; o_proj rows of od per head."""
        if self.tp == 1:
            return None, None, None
        cfg, r = self.cfg, self.shard.tp_rank
        a, b = split_ranges(cfg.heads, self.tp, r)
        if cfg.kv_heads >= self.tp:
            ka, kb = split_ranges(cfg.kv_heads, self.tp, r)
        else:
            ka = a * cfg.kv_heads // cfg.heads
            kb = ka + 1
        return (("col", ((a * qd, b * qd),)), ("col", ((ka * kvd, kb * kvd),)),
                ("row", ((a * od, b * od),), cfg.heads * od))

    def collective(self, kind: str, name: str, values: list[Value], outs: list[tuple],
                   nbytes: int, layer: int | None, axis: int = 0, mc2: bool = False
                   ) -> list[Value]:
        """Hand `values` to HCCL (they become outputs of this graph) and take its results
        (`outs`: (shape, dtype) each) as new inputs, recording the Collective."""
        g = self.g
        g.output(*values)
        got = [g.input(f"{name}.{kind.lower()}.{i}", shape, dtype)
               for i, (shape, dtype) in enumerate(outs)]
        p = self.shard.parallel
        group = p.ep if kind == "AllToAll" else p.tp
        self.comm.append(Collective(f"{name}.{kind}", kind, group, int(nbytes),
                                    tuple(v.name for v in values), tuple(v.name for v in got),
                                    self.shard.stage, layer, axis, mc2))
        return got

    def tp_reduce(self, y: Value, name: str, layer: int | None) -> Value:
        """The partial sums of a row-parallel projection summed over the tp ranks: AllReduce
        (MC2: fused with its matmul) or, with sequence parallel, ReduceScatter over tokens."""
        if self.tp == 1:
            return y
        t, h = (int(v) for v in y.shape)
        nbytes = y.nbytes
        if self.sp:
            return self.collective("ReduceScatter", name, [y], [((t // self.tp, h), y.dtype)],
                                   nbytes, layer)[0]
        return self.collective("AllReduce", name, [y], [((t, h), y.dtype)], nbytes, layer,
                               mc2=self.shard.parallel.mc2)[0]

    def tp_gather(self, x: Value, name: str, layer: int | None) -> Value:
        """Sequence parallel: the tokens of the tp ranks gathered before a column-parallel
        block (identity otherwise)."""
        if not self.sp:
            return x
        t, h = (int(v) for v in x.shape)
        return self.collective("AllGather", name, [x], [((t * self.tp, h), x.dtype)],
                               x.nbytes * self.tp, layer)[0]

    def latent_attention(self, x: Value, layer: int) -> Value:
        """DeepSeek V2/V3 multi-head latent attention (HF DeepseekV2Attention). The cache of a
        layer is `past_key.l` (B, 1, T, kv_lora_rank + qk_rope_head_dim): the normalised
        latent c_kv and the rotated shared key k_pe, one row per token (vLLM's MLA cache).
        Prefill (naive form): keys and values of every cached token are decompressed with
        kv_b_proj and attention runs per head on q = [q_nope | q_pe], k = [k_nope | k_pe].
        Decode (absorbed form): W_UK is folded into the query (q_nope @ W_UK -> the latent
        space) and W_UV applied after attention, so the heads attend to the latent cache
        itself as one shared key/value head of width kv_lora_rank + qk_rope_head_dim (the
        heads become the rows of one GEMM per sequence, as FlashMLA runs it)."""
        cfg, g, mb = self.cfg, self.g, self.mb
        name = f"layers.{layer}.self_attn"
        b, s, t, h = self.b, self.s, self.total, self.nh
        nope, rope, lat, vd = cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.kv_lora_rank, cfg.v_head_dim
        qd = nope + rope
        qs, _, os_ = self.head_splits(qd, nope + vd, vd)
        x = self.tp_gather(x, f"{name}.input", layer)
        if cfg.q_lora_rank:
            qa = self.rms_norm(self.linear(x, f"{name}.q_a_proj", cfg.q_lora_rank),
                               f"{name}.q_a_layernorm")
            q = self.linear(qa, f"{name}.q_b_proj", cfg.heads * qd, split=qs)
        else:
            q = self.linear(x, f"{name}.q_proj", cfg.heads * qd, split=qs)
        q = self.heads(q, h)                                     # (B, H, S, qd)
        last = [-1]
        q_nope = g.slice(q, mb.ints([0]), mb.ints([nope]), mb.ints(last))
        q_pe = self.rotary(g.slice(q, mb.ints([nope]), mb.ints([qd]), mb.ints(last)))
        ckv = self.linear(x, f"{name}.kv_a_proj_with_mqa", lat + rope)      # (B*S, lat+rope)
        c = self.rms_norm(g.slice(ckv, mb.ints([0]), mb.ints([lat]), mb.ints(last)),
                          f"{name}.kv_a_layernorm")
        k_pe = g.slice(ckv, mb.ints([lat]), mb.ints([lat + rope]), mb.ints(last))
        k_pe = self.rotary(g.reshape(k_pe, mb.ints([b, 1, s, rope])))
        latent = g.concat(g.reshape(c, mb.ints([b, 1, s, lat])), k_pe, axis=-1)
        past = g.input(f"past_key.{layer}", (b, 1, t, lat + rope), mb.dtype)
        kc = g.kv_cache_append(past, latent, position=self.ctx, name=f"present_key.{layer}")
        g.output(kc)
        c_all = g.slice(kc, mb.ints([0]), mb.ints([lat]), mb.ints(last))         # (B,1,T,lat)
        kv_split = None
        if self.tp > 1:                  # this rank's heads of kv_b_proj, (nope + vd) each
            a, z = split_ranges(cfg.heads, self.tp, self.shard.tp_rank)
            kv_split = ("col", ((a * (nope + vd), z * (nope + vd)),))
        w_kv = self.param(f"{name}.kv_b_proj.weight", (lat, cfg.heads * (nope + vd)),
                          float(1 / np.sqrt(lat)), kv_split)
        scale = mb.scalar(softmax_scale(cfg))
        if self.absorbed:
            w3 = g.reshape(w_kv, mb.ints([lat, h, nope + vd]))
            w_uk = g.transpose(g.slice(w3, mb.ints([0]), mb.ints([nope]), mb.ints(last)),
                               perm=[1, 2, 0])                               # (H, nope, lat)
            w_uv = g.transpose(g.slice(w3, mb.ints([nope]), mb.ints([nope + vd]),
                                       mb.ints(last)), perm=[1, 0, 2])       # (H, lat, vd)
            qn = g.reshape(g.transpose(q_nope, perm=[1, 0, 2, 3]), mb.ints([h, b * s, nope]))
            q_lat = g.matmul(qn, w_uk, name=f"{name}.q_absorb")              # (H, B*S, lat)
            q_lat = g.transpose(g.reshape(q_lat, mb.ints([h, b, s, lat])), perm=[1, 0, 2, 3])
            qf = g.reshape(g.concat(q_lat, q_pe, axis=-1), mb.ints([b, 1, h * s, lat + rope]))
            scores = g.mul(g.matmul(qf, g.transpose(kc, perm=[0, 1, 3, 2])), scale)
            if self.mask is not None:         # (1, 1, S, T) -> per head rows (1, 1, H*S, T)
                m = g.reshape(g.expand(g.reshape(self.mask, mb.ints([1, 1, 1, s, t])),
                                       mb.ints([1, 1, h, s, t])), mb.ints([1, 1, h * s, t]))
                scores = g.add(scores, m)
            o_lat = g.matmul(g.softmax(scores, axis=-1), c_all)             # (B, 1, H*S, lat)
            o_lat = g.reshape(g.transpose(g.reshape(o_lat, mb.ints([b, h, s, lat])),
                                          perm=[1, 0, 2, 3]), mb.ints([h, b * s, lat]))
            o = g.matmul(o_lat, w_uv, name=f"{name}.v_absorb")              # (H, B*S, vd)
            o = g.transpose(g.reshape(o, mb.ints([h, b, s, vd])), perm=[1, 2, 0, 3])
        else:
            kv = g.matmul(g.reshape(c_all, mb.ints([b * t, lat])), w_kv,
                          name=f"{name}.kv_b_proj")
            kv = g.transpose(g.reshape(kv, mb.ints([b, t, h, nope + vd])), perm=[0, 2, 1, 3])
            k_nope = g.slice(kv, mb.ints([0]), mb.ints([nope]), mb.ints(last))
            v = g.slice(kv, mb.ints([nope]), mb.ints([nope + vd]), mb.ints(last))
            kpe_all = g.slice(kc, mb.ints([lat]), mb.ints([lat + rope]), mb.ints(last))
            k = g.concat(k_nope, g.expand(kpe_all, mb.ints([b, h, t, rope])), axis=-1)
            qf = g.concat(q_nope, q_pe, axis=-1)
            scores = g.mul(g.matmul(qf, g.transpose(k, perm=[0, 1, 3, 2])), scale)
            if self.mask is not None:
                scores = g.add(scores, self.mask)
            o = g.transpose(g.matmul(g.softmax(scores, axis=-1), v), perm=[0, 2, 1, 3])
        o = g.reshape(o, mb.ints([b * s, h * vd]))
        out = self.linear(o, f"{name}.o_proj", cfg.hidden, split=os_)
        return self.tp_reduce(out, f"{name}.o_proj", layer)

    def router(self, logits: Value, name: str) -> Value:
        """(weights (T, k), expert_idx (T, k)) of the family's router."""
        cfg, g, mb = self.cfg, self.g, self.mb
        plain = (cfg.router == "softmax" and not cfg.norm_topk and cfg.n_group == 1
                 and not cfg.score_bias and cfg.routed_scale == 1.0)
        if plain:       # Qwen2-MoE as CANN's MoeGatingTopKSoftmax
            scales, idx, _ = g.moe_gating_top_k_softmax(logits, k=cfg.top_k,
                                                        name=f"{name}.router")
            return scales, idx
        bias = (mb.weight(f"{name}.gate.e_score_correction_bias", (cfg.experts,), scale=0.02)
                if cfg.score_bias else None)
        scales, idx, _ = g.moe_gating_top_k(
            logits, bias, k=cfg.top_k, k_group=cfg.topk_group, group_count=cfg.n_group,
            group_select_mode=int(cfg.group_score == "top2"),
            norm_type=int(cfg.router == "sigmoid"), renorm=int(cfg.norm_topk),
            routed_scaling_factor=float(cfg.routed_scale), name=f"{name}.router")
        return scales, idx

    def swiglu(self, gate_up: Value) -> Value:
        """silu(a) * b of the two halves of the last axis, as exported (Slice, Sigmoid, Mul)."""
        g, mb = self.g, self.mb
        n = int(gate_up.shape[-1])
        a = g.slice(gate_up, mb.ints([0]), mb.ints([n // 2]), mb.ints([-1]))
        b = g.slice(gate_up, mb.ints([n // 2]), mb.ints([n]), mb.ints([-1]))
        return g.mul(g.mul(a, g.sigmoid(a)), b)

    def mlp(self, x: Value, name: str, ffn: int, layer: int | None = None,
            comm: bool = True, split: bool = True) -> Value:
        """SwiGLU MLP; on a tp rank its ffn slice (gate and up halves), reduced over the
        ranks unless `comm` is False (a MoE layer reduces once, at its end); `split` False:
        the whole MLP (a shared expert on a rank's token slice, attention TP + MoE EP)."""
        up, down = None, None
        if self.tp > 1 and split:
            a, b = split_ranges(ffn, self.tp, self.shard.tp_rank)
            up, down = ("col", ((a, b), (ffn + a, ffn + b))), ("row", ((a, b),), ffn)
        if comm:
            x = self.tp_gather(x, f"{name}.input", layer)
        act = self.swiglu(self.linear(x, f"{name}.gate_up_proj", 2 * ffn, split=up))
        y = self.linear(act, f"{name}.down_proj", self.cfg.hidden, split=down)
        return self.tp_reduce(y, f"{name}.down_proj", layer) if comm else y

    def moe(self, x: Value, layer: int) -> Value:
        cfg, g = self.cfg, self.g
        name = f"layers.{layer}.mlp"
        h, e, ffn = cfg.hidden, cfg.experts, cfg.expert_ffn
        ep = self.shard.ep if self.shard is not None else 1
        x2 = self.tp_gather(x, f"{name}.input", layer)
        ep_tp = ep > 1 and self.tp > 1          # attention TP + MoE EP: route a tp slice
        if ep_tp:
            full = int(x2.shape[0])
            t0, t1 = split_ranges(full, self.tp, self.shard.tp_rank)
            x2 = g.slice(x2, starts=[t0], ends=[t1], axes=[0], name=f"{name}.tp_slice")
        logits = self.linear(x2, f"{name}.gate", e)
        scales, idx = self.router(logits, name)
        ex, pos, groups = g.moe_init_routing(x2, idx, num_experts=e, name=f"{name}.dispatch")
        gu_split = dn_split = None
        if self.tp > 1 and ep == 1:     # every expert's ffn split over the tp ranks
            a, b = split_ranges(ffn, self.tp, self.shard.tp_rank)
            gu_split, dn_split = ("col", ((a, b), (ffn + a, ffn + b))), ("row", ((a, b),))
        n_local = e
        if ep > 1:                      # this rank's experts; tokens sent to their experts
            e0, e1 = split_ranges(e, ep, self.shard.ep_rank)
            n_local = e1 - e0
            gu_split = dn_split = ("row", ((e0, e1),))
            rows = int(ex.shape[0])
            cap = self.shard.capacity or rows
            ex, groups = self.collective(
                "AllToAll", f"{name}.dispatch", [ex, groups],
                [((cap, h), ex.dtype), ((n_local,), groups.dtype)],
                ex.nbytes + groups.nbytes, layer)
        gu = self.experts(ex, groups, f"{name}.experts.gate_up_proj", (e, h, 2 * ffn),
                          gu_split, 0 if ep > 1 else None, f"{name}.experts.gate_up")
        down = self.experts(self.swiglu(gu), groups, f"{name}.experts.down_proj",
                            (e, ffn, h), dn_split, 0 if ep > 1 else 1,
                            f"{name}.experts.down")
        if ep > 1:                      # the expert outputs back to their tokens' ranks
            down = self.collective("AllToAll", f"{name}.combine", [down],
                                   [((rows, h), down.dtype)], rows * h * itemsize(down.dtype),
                                   layer)[0]
        y = g.moe_finalize_routing(down, scales, pos, name=f"{name}.combine")
        if cfg.shared_ffn and cfg.shared_gate:
            shared = self.mlp(x2, f"{name}.shared_expert", cfg.shared_ffn, layer, comm=False,
                              split=not ep_tp)
            gate = g.sigmoid(self.linear(x2, f"{name}.shared_expert_gate", 1))
            y = g.add(y, g.mul(shared, gate))
        elif cfg.shared_ffn:        # DeepSeek: n_shared_experts always-on experts, no gate
            y = g.add(y, self.mlp(x2, f"{name}.shared_experts", cfg.shared_ffn, layer,
                                  comm=False, split=not ep_tp))
        if ep_tp:                       # the tp slices of the layer's output put together
            return self.collective("AllGather", f"{name}.output", [y],
                                   [((full, h), y.dtype)], full * h * itemsize(y.dtype),
                                   layer)[0]
        return self.tp_reduce(y, name, layer)

    def layer(self, x: Value, layer: int) -> Value:
        name = f"layers.{layer}"
        x = self.g.add(x, self.attention(self.rms_norm(x, f"{name}.input_layernorm"), layer))
        h = self.rms_norm(x, f"{name}.post_attention_layernorm")
        out = (self.moe(h, layer) if self.cfg.moe_layer(layer)
               else self.mlp(h, f"{name}.mlp", self.cfg.ffn, layer))
        return self.g.add(x, out)


def decoder(preset: str | DecoderConfig | None = None, *, config=None, batch: int = 1,
            seq_len: int | None = None, phase: str = "prefill", context_len: int = 0,
            dtype: str = "float16", all_logits: bool = False, seed: int = 0,
            quant: str | None = None, kv_cache_dtype: str | None = None,
            parallel: Parallel | None = None, **overrides) -> Graph | ParallelModel:
    """A decoder LLM step: prefill of `seq_len` prompt tokens after `context_len` cached ones,
    or one decode token per sequence against a cache of `context_len` tokens.

    preset: a name from `decoder_presets()` (default the tiny GQA test model) or a
    DecoderConfig; config: a Hugging Face config.json (path or dict; models/hf_config.py lists
    the model_types and the fields each reads) instead of a preset; `overrides` change config
    fields (layers=2, experts=8, ...). Weights are lazy seeded constants: a 70B graph costs no
    weight memory until values are asked for. Latent attention (DeepSeek) builds its absorbed
    form in decode, its naive form in prefill. quant="w8a8": the attention and MLP
    projections as DynamicQuant + QuantBatchMatmul with int8 weights, the routed experts as
    DynamicQuant + int8 GroupedMatmul (the router, the shared expert gate, attention itself
    and lm_head stay in `dtype`);
    quant="w8a16" / "w4a16": the same projections as WeightQuantBatchMatmulV2 (int8 or int4
    weights, antiquant in the kernel; a chip whose CANN lacks it fails when simulated).
    kv_cache_dtype="int8": the K/V caches in int8 (AscendQuantV2 of the new tokens,
    AscendAntiQuantV2 before attention, fused into IncreFlashAttention in decode).
    parallel: an `asim.Parallel` plan: returns a `ParallelModel` (models/parallel.py) with one
    graph per distinct rank and the collectives between them instead of a Graph.
    """
    if config is not None:
        if preset is not None:
            raise ConfigError("decoder(): pass a preset or a config, not both")
        preset = from_hf(config)
    cfg = decoder_config(preset, **overrides)
    check_choice("phase", phase, PHASES)
    if quant is not None:
        check_choice("quant", quant, QUANT_MODES)
    if kv_cache_dtype is not None:
        check_choice("kv_cache_dtype", kv_cache_dtype, KV_CACHE_DTYPES)
        if cfg.mla:
            raise ConfigError("kv_cache_dtype='int8': the latent cache of multi-head latent "
                              "attention is not quantised here (only per-head K/V caches)")
    if phase == "decode":
        if seq_len not in (None, 1):
            raise ConfigError(f"seq_len={seq_len!r}: decode adds one token per sequence "
                              f"(pass None or 1)")
        seq_len = 1
        check_positive(context_len=context_len)
    elif seq_len is None:
        raise ConfigError("seq_len: prefill needs the number of prompt tokens")
    check_positive(batch=batch, seq_len=seq_len)
    if isinstance(context_len, bool) or not isinstance(context_len, (int, np.integer)) or \
            context_len < 0:
        raise ConfigError(f"context_len={context_len!r}: must be a non-negative integer")
    label = preset if isinstance(preset, str) else "decoder"
    if parallel is not None:
        if quant is not None and WEIGHT_ONLY.get(quant, (8,))[0] == 4:
            raise ConfigError(f"quant={quant!r} with a parallel plan is not modelled (int4 "
                              f"packed columns and per-group scales are not split across "
                              f"ranks); use 'w8a16' or 'w8a8'")
        return parallel_decoder(cfg, parallel, label=label, batch=int(batch),
                                seq_len=int(seq_len), phase=phase,
                                context_len=int(context_len), dtype=dtype,
                                all_logits=all_logits, seed=seed, quant=quant,
                                kv_cache_dtype=kv_cache_dtype)
    mb = ModelBuilder(f"{label}_{phase}_b{batch}_s{seq_len}_c{context_len}", dtype, seed)
    dec = _Decoder(cfg, mb, int(batch), int(seq_len), int(context_len),
                   absorbed=phase == "decode", quant=quant,
                   kv_cache_dtype=kv_cache_dtype)
    return _body(dec, int(batch), int(seq_len), all_logits)


def _body(dec: _Decoder, batch: int, seq_len: int, all_logits: bool) -> Graph:
    """Embedding, the layers, the final norm and lm_head of a single-chip model, or of one
    rank of a plan (`dec.shard`: its stage's layers, the hidden state from / to the next
    stage, lm_head split over the vocabulary with its logits all-gathered)."""
    cfg, mb, g, sh = dec.cfg, dec.mb, dec.g, dec.shard
    tokens = batch * seq_len
    if sh is None or sh.first:
        ids = g.input("input_ids", (batch, seq_len), "int64")
        table = mb.weight("embed_tokens.weight", (cfg.vocab, cfg.hidden), scale=0.02)
        x = g.gather(table, ids, axis=0, name="embed_tokens")
        # the residual stream is (tokens, hidden), as the fused kernels see it: the
        # projections are then single GEMMs of M = batch * seq_len rows that read each
        # weight once
        x = g.reshape(x, mb.ints([tokens, cfg.hidden]))
        if dec.sp:                  # sequence parallel: this rank's share of the tokens
            a, b = split_ranges(tokens, dec.tp, sh.tp_rank)
            x = g.slice(x, mb.ints([a]), mb.ints([b]), mb.ints([0]))
    else:
        x = g.input(f"pp.hidden.{sh.stage - 1}", (tokens // dec.tp if dec.sp else tokens,
                                                  cfg.hidden), mb.dtype)
    for layer in (range(cfg.layers) if sh is None else sh.layers):
        x = dec.layer(x, layer)
    if sh is not None and not sh.last:          # to the next pipeline stage
        g.outputs.insert(0, x.name)
        dec.comm.append(Collective(f"pp.stage{sh.stage}.SendRecv", "SendRecv", 2, x.nbytes,
                                   (x.name,), (f"pp.hidden.{sh.stage}",), sh.stage))
        g.validate()
        return g
    x = dec.rms_norm(x, "norm")
    if sh is not None:
        x = dec.tp_gather(x, "norm", None)
    rows = seq_len if all_logits else 1
    x = g.reshape(x, mb.ints([batch, seq_len, cfg.hidden]))
    if rows != seq_len:
        x = g.slice(x, mb.ints([seq_len - 1]), mb.ints([seq_len]), mb.ints([1]))
    x = g.reshape(x, mb.ints([batch * rows, cfg.hidden]))
    scale = float(1 / np.sqrt(cfg.hidden))
    if dec.tp == 1:
        w = mb.weight("lm_head.weight", (cfg.hidden, cfg.vocab), scale=scale)
        logits = g.reshape(g.matmul(x, w, name="lm_head"), mb.ints([batch, rows, cfg.vocab]),
                           name="logits")
        g.outputs.insert(0, logits.name)
    else:                           # lm_head split over the vocabulary, logits all-gathered
        w = dec.param("lm_head.weight", (cfg.hidden, cfg.vocab), scale,
                      ("col", (split_ranges(cfg.vocab, dec.tp, sh.tp_rank),)))
        n = cfg.vocab // dec.tp
        part = g.reshape(g.matmul(x, w, name="lm_head"), mb.ints([batch, rows, n]),
                         name="logits.shard")
        g.outputs.insert(0, part.name)
        dec.comm.append(Collective("lm_head.AllGather", "AllGather", dec.tp, part.nbytes * dec.tp,
                                   (part.name,), ("logits",), sh.stage, None, axis=-1))
    g.validate()
    return g


def parallel_decoder(cfg: DecoderConfig, parallel: Parallel, *, label: str = "decoder",
                     batch: int = 1, seq_len: int = 1, phase: str = "prefill",
                     context_len: int = 0, dtype: str = "float16", all_logits: bool = False,
                     seed: int = 0, quant: str | None = None,
                     kv_cache_dtype: str | None = None) -> ParallelModel:
    """`decoder(..., parallel=plan)`: the model split by `plan` (models/parallel.py), its
    stage graphs built on first use."""
    if not isinstance(parallel, Parallel):
        raise ConfigError(f"parallel={parallel!r}: pass an asim.Parallel(tp=, pp=, ep=, dp=)")
    parallel.check(cfg, batch, seq_len)

    def build(shard: Shard, local_batch: int | None) -> tuple[Graph, list[Collective]]:
        b = local_batch or batch // parallel.dp // parallel.micro()
        mb = ModelBuilder(f"{label}_{phase}_b{b}_s{seq_len}_c{context_len}_stage{shard.stage}",
                          dtype, seed)
        dec = _Decoder(cfg, mb, b, seq_len, context_len, absorbed=phase == "decode",
                       quant=quant, shard=shard, kv_cache_dtype=kv_cache_dtype)
        g = _body(dec, b, seq_len, all_logits)
        return g, list(dec.comm)
    def replan(other: Parallel) -> ParallelModel:
        return parallel_decoder(cfg, other, label=label, batch=batch, seq_len=seq_len,
                                phase=phase, context_len=context_len, dtype=dtype,
                                all_logits=all_logits, seed=seed, quant=quant,
                                kv_cache_dtype=kv_cache_dtype)
    return ParallelModel(label, cfg, parallel, phase, batch, seq_len, context_len, dtype, quant,
                         build, replanner=replan)


def empty_cache(graph: Graph) -> dict[str, np.ndarray]:
    """Zero-filled past_key / past_value inputs of a decoder graph (a cache with nothing in
    it yet; prefill with context_len=0 overwrites all of it)."""
    return {n: np.zeros(graph.values[n].shape, storage_dtype(graph.values[n].dtype))
            for n in graph.inputs if n.startswith(("past_key.", "past_value."))}


__all__ = ["decoder", "parallel_decoder", "decoder_presets", "decoder_config", "DecoderConfig",
           "PRESETS",
           "empty_cache", "PHASES", "rope_frequencies", "softmax_scale"]
