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
  every expert's weights read once per layer: see ascendsim/lower/attention.py).

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
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import Value, itemsize, storage_dtype
from .blocks import ModelBuilder, check_choice, check_positive

PHASES = ("prefill", "decode")
#: additive mask value of a hidden key (fp16's most negative finite number)
MASKED = -65504.0


@dataclass(frozen=True)
class DecoderConfig:
    """Shape of a decoder model (HF config.json names in comments)."""

    hidden: int                 # hidden_size
    layers: int                 # num_hidden_layers
    heads: int                  # num_attention_heads
    kv_heads: int               # num_key_value_heads
    ffn: int                    # intermediate_size (dense MLP)
    vocab: int                  # vocab_size
    eps: float = 1e-6           # rms_norm_eps
    rope_theta: float = 10000.0
    qkv_bias: bool = False      # Qwen2 has q/k/v biases
    tie_embeddings: bool = False
    experts: int = 0            # num_experts (0: dense)
    top_k: int = 0              # num_experts_per_tok
    expert_ffn: int = 0         # moe_intermediate_size
    shared_ffn: int = 0         # shared_expert_intermediate_size
    source: str = ""

    def __post_init__(self) -> None:
        check_positive(hidden=self.hidden, layers=self.layers, heads=self.heads,
                       kv_heads=self.kv_heads, ffn=self.ffn, vocab=self.vocab)
        if self.hidden % self.heads:
            raise ConfigError(f"hidden={self.hidden} is not a multiple of heads={self.heads}")
        if self.heads % self.kv_heads:
            raise ConfigError(f"heads={self.heads} is not a multiple of kv_heads="
                              f"{self.kv_heads}")
        if (self.head_dim % 2) != 0:
            raise ConfigError(f"head_dim={self.head_dim} must be even (rotary embedding)")
        if self.experts and not (1 <= self.top_k <= self.experts and self.expert_ffn > 0):
            raise ConfigError(f"MoE needs 1 <= top_k <= experts and expert_ffn > 0; got "
                              f"experts={self.experts}, top_k={self.top_k}, "
                              f"expert_ffn={self.expert_ffn}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def params(self) -> int:
        """Parameter count (embeddings counted once when tied, as the checkpoint stores)."""
        h, d = self.hidden, self.head_dim
        attn = h * (self.heads * d) * 2 + h * (self.kv_heads * d) * 2
        if self.qkv_bias:
            attn += (self.heads + 2 * self.kv_heads) * d
        if self.moe:
            mlp = self.experts * 3 * h * self.expert_ffn + h * self.experts
            if self.shared_ffn:
                mlp += 3 * h * self.shared_ffn + h
        else:
            mlp = 3 * h * self.ffn
        per_layer = attn + mlp + 2 * h
        emb = self.vocab * h * (1 if self.tie_embeddings else 2)
        return self.layers * per_layer + emb + h

    def kv_cache_bytes(self, batch: int, tokens: int, dtype: str = "float16") -> int:
        """Bytes of the keys and values of `tokens` positions for `batch` sequences."""
        return 2 * self.layers * batch * self.kv_heads * tokens * self.head_dim * itemsize(dtype)


#: Presets from the models' published Hugging Face config.json files.
PRESETS: dict[str, DecoderConfig] = {
    "qwen2-0.5b": DecoderConfig(
        hidden=896, layers=24, heads=14, kv_heads=2, ffn=4864, vocab=151936, eps=1e-6,
        rope_theta=1e6, qkv_bias=True, tie_embeddings=True,
        source="Qwen/Qwen2-0.5B config.json (hidden_size 896, 24 layers, 14 heads, 2 KV heads, "
               "intermediate 4864, vocab 151936, tied embeddings)"),
    "llama2-7b": DecoderConfig(
        hidden=4096, layers=32, heads=32, kv_heads=32, ffn=11008, vocab=32000, eps=1e-5,
        source="meta-llama/Llama-2-7b-hf config.json (hidden_size 4096, 32 layers, 32 heads, "
               "intermediate 11008, vocab 32000, rms_norm_eps 1e-5)"),
    "llama2-70b": DecoderConfig(
        hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, vocab=32000, eps=1e-5,
        source="meta-llama/Llama-2-70b-hf config.json (hidden_size 8192, 80 layers, 64 heads, "
               "8 KV heads, intermediate 28672, vocab 32000)"),
    "qwen1.5-moe-14b-a2.7b": DecoderConfig(
        hidden=2048, layers=24, heads=16, kv_heads=16, ffn=5632, vocab=151936, eps=1e-6,
        rope_theta=1e6, qkv_bias=True, experts=60, top_k=4, expert_ffn=1408, shared_ffn=5632,
        source="Qwen/Qwen1.5-MoE-A2.7B config.json (hidden_size 2048, 24 layers, 16 heads, "
               "60 experts, top-4, moe_intermediate 1408, shared expert 5632; 14.3B total, "
               "2.7B active per the model card)"),
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


# ----------------------------------------------------------------------------- layers
class _Decoder:
    def __init__(self, cfg: DecoderConfig, mb: ModelBuilder, batch: int, seq: int, ctx: int):
        self.cfg, self.mb, self.g = cfg, mb, mb.g
        self.b, self.s, self.ctx = batch, seq, ctx
        self.total = ctx + seq
        d = cfg.head_dim
        inv = cfg.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.arange(ctx, ctx + seq, dtype=np.float64)[:, None] * inv[None, :]
        ang = np.concatenate([ang, ang], axis=-1).reshape(1, 1, seq, d)
        self.cos = self.g.const(np.cos(ang), "rope.cos", dtype=mb.dtype, buffer=True)
        self.sin = self.g.const(np.sin(ang), "rope.sin", dtype=mb.dtype, buffer=True)
        self.mask = None
        if seq > 1:
            t = np.arange(self.total)[None, :]
            i = np.arange(seq)[:, None]
            m = np.where(t <= i + ctx, 0.0, MASKED).reshape(1, 1, seq, self.total)
            self.mask = self.g.const(m, "attention.causal_mask", dtype=mb.dtype, buffer=True)

    def linear(self, x: Value, name: str, n: int, bias: bool = False) -> Value:
        k = int(x.shape[-1])
        w = self.mb.weight(f"{name}.weight", (k, n), scale=float(1 / np.sqrt(k)))
        y = self.g.matmul(x, w, name=name)
        if bias:
            y = self.g.add(y, self.mb.weight(f"{name}.bias", (n,), scale=0.02))
        return y

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

    def heads(self, x: Value, n: int) -> Value:
        g, mb = self.g, self.mb
        d = self.cfg.head_dim
        return g.transpose(g.reshape(x, mb.ints([self.b, self.s, n, d])), perm=[0, 2, 1, 3])

    def repeat_kv(self, x: Value) -> Value:
        """HF repeat_kv: (B, Hkv, T, D) -> (B, Hkv * G, T, D), each kv head G times."""
        cfg, g, mb = self.cfg, self.g, self.mb
        group = cfg.heads // cfg.kv_heads
        if group == 1:
            return x
        b, hk, t, d = (int(v) for v in x.shape)
        x5 = g.reshape(x, mb.ints([b, hk, 1, t, d]))
        x5 = g.expand(x5, mb.ints([b, hk, group, t, d]))
        return g.reshape(x5, mb.ints([b, hk * group, t, d]))

    def attention(self, x: Value, layer: int) -> Value:
        cfg, g, mb = self.cfg, self.g, self.mb
        d, name = cfg.head_dim, f"layers.{layer}.self_attn"
        q = self.heads(self.linear(x, f"{name}.q_proj", cfg.heads * d, cfg.qkv_bias), cfg.heads)
        k = self.heads(self.linear(x, f"{name}.k_proj", cfg.kv_heads * d, cfg.qkv_bias),
                       cfg.kv_heads)
        v = self.heads(self.linear(x, f"{name}.v_proj", cfg.kv_heads * d, cfg.qkv_bias),
                       cfg.kv_heads)
        q, k = self.rotary(q), self.rotary(k)
        cache_shape = (self.b, cfg.kv_heads, self.total, d)
        past_k = g.input(f"past_key.{layer}", cache_shape, mb.dtype)
        past_v = g.input(f"past_value.{layer}", cache_shape, mb.dtype)
        kc = g.kv_cache_append(past_k, k, position=self.ctx, name=f"present_key.{layer}")
        vc = g.kv_cache_append(past_v, v, position=self.ctx, name=f"present_value.{layer}")
        g.output(kc, vc)
        kt = g.transpose(self.repeat_kv(kc), perm=[0, 1, 3, 2])
        scores = g.mul(g.matmul(q, kt), mb.scalar(1.0 / float(np.sqrt(d))))
        if self.mask is not None:
            scores = g.add(scores, self.mask)
        ctx = g.matmul(g.softmax(scores, axis=-1), self.repeat_kv(vc))
        ctx = g.reshape(g.transpose(ctx, perm=[0, 2, 1, 3]),
                        mb.ints([self.b * self.s, cfg.heads * d]))
        return self.linear(ctx, f"{name}.o_proj", cfg.hidden)

    def swiglu(self, gate_up: Value) -> Value:
        """silu(a) * b of the two halves of the last axis, as exported (Slice, Sigmoid, Mul)."""
        g, mb = self.g, self.mb
        n = int(gate_up.shape[-1])
        a = g.slice(gate_up, mb.ints([0]), mb.ints([n // 2]), mb.ints([-1]))
        b = g.slice(gate_up, mb.ints([n // 2]), mb.ints([n]), mb.ints([-1]))
        return g.mul(g.mul(a, g.sigmoid(a)), b)

    def mlp(self, x: Value, name: str, ffn: int) -> Value:
        act = self.swiglu(self.linear(x, f"{name}.gate_up_proj", 2 * ffn))
        return self.linear(act, f"{name}.down_proj", self.cfg.hidden)

    def moe(self, x: Value, layer: int) -> Value:
        cfg, g, mb = self.cfg, self.g, self.mb
        name = f"layers.{layer}.mlp"
        h, e, ffn = cfg.hidden, cfg.experts, cfg.expert_ffn
        x2 = x
        logits = self.linear(x2, f"{name}.gate", e)
        scales, idx, _ = g.moe_gating_top_k_softmax(logits, k=cfg.top_k, name=f"{name}.router")
        ex, pos, groups = g.moe_init_routing(x2, idx, num_experts=e, name=f"{name}.dispatch")
        w_gu = mb.weight(f"{name}.experts.gate_up_proj", (e, h, 2 * ffn),
                         scale=float(1 / np.sqrt(h)))
        w_dn = mb.weight(f"{name}.experts.down_proj", (e, ffn, h), scale=float(1 / np.sqrt(ffn)))
        gu = g.grouped_matmul(ex, w_gu, groups, name=f"{name}.experts.gate_up")
        down = g.grouped_matmul(self.swiglu(gu), w_dn, groups, name=f"{name}.experts.down")
        y = g.moe_finalize_routing(down, scales, pos, name=f"{name}.combine")
        if cfg.shared_ffn:
            shared = self.mlp(x2, f"{name}.shared_expert", cfg.shared_ffn)
            gate = g.sigmoid(self.linear(x2, f"{name}.shared_expert_gate", 1))
            y = g.add(y, g.mul(shared, gate))
        return y

    def layer(self, x: Value, layer: int) -> Value:
        name = f"layers.{layer}"
        x = self.g.add(x, self.attention(self.rms_norm(x, f"{name}.input_layernorm"), layer))
        h = self.rms_norm(x, f"{name}.post_attention_layernorm")
        out = self.moe(h, layer) if self.cfg.moe else self.mlp(h, f"{name}.mlp", self.cfg.ffn)
        return self.g.add(x, out)


def decoder(preset: str | DecoderConfig | None = None, *, batch: int = 1,
            seq_len: int | None = None, phase: str = "prefill", context_len: int = 0,
            dtype: str = "float16", all_logits: bool = False, seed: int = 0,
            **overrides) -> Graph:
    """A decoder LLM step: prefill of `seq_len` prompt tokens after `context_len` cached ones,
    or one decode token per sequence against a cache of `context_len` tokens.

    preset: a name from `decoder_presets()` (default the tiny GQA test model) or a
    DecoderConfig; `overrides` change config fields (layers=2, experts=8, ...). Weights are
    lazy seeded constants: a 70B graph costs no weight memory until values are asked for.
    """
    cfg = decoder_config(preset, **overrides)
    check_choice("phase", phase, PHASES)
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
    mb = ModelBuilder(f"{label}_{phase}_b{batch}_s{seq_len}_c{context_len}", dtype, seed)
    dec = _Decoder(cfg, mb, int(batch), int(seq_len), int(context_len))
    g = mb.g
    ids = g.input("input_ids", (batch, seq_len), "int64")
    table = mb.weight("embed_tokens.weight", (cfg.vocab, cfg.hidden), scale=0.02)
    x = g.gather(table, ids, axis=0, name="embed_tokens")
    # the residual stream is (tokens, hidden), as the fused kernels see it: the projections
    # are then single GEMMs of M = batch * seq_len rows that read each weight once
    x = g.reshape(x, mb.ints([batch * seq_len, cfg.hidden]))
    for layer in range(cfg.layers):
        x = dec.layer(x, layer)
    x = dec.rms_norm(x, "norm")
    rows = seq_len if all_logits else 1
    x = g.reshape(x, mb.ints([batch, seq_len, cfg.hidden]))
    if rows != seq_len:
        x = g.slice(x, mb.ints([seq_len - 1]), mb.ints([seq_len]), mb.ints([1]))
    x = g.reshape(x, mb.ints([batch * rows, cfg.hidden]))
    w = mb.weight("lm_head.weight", (cfg.hidden, cfg.vocab), scale=float(1 / np.sqrt(cfg.hidden)))
    logits = g.reshape(g.matmul(x, w, name="lm_head"), mb.ints([batch, rows, cfg.vocab]),
                       name="logits")
    g.outputs.insert(0, logits.name)
    g.validate()
    return g


def empty_cache(graph: Graph) -> dict[str, np.ndarray]:
    """Zero-filled past_key / past_value inputs of a decoder graph (a cache with nothing in
    it yet; prefill with context_len=0 overwrites all of it)."""
    return {n: np.zeros(graph.values[n].shape, storage_dtype(graph.values[n].dtype))
            for n in graph.inputs if n.startswith(("past_key.", "past_value."))}


__all__ = ["decoder", "decoder_presets", "decoder_config", "DecoderConfig", "PRESETS",
           "empty_cache", "PHASES"]
