"""The shape of a decoder LLM (`DecoderConfig`): what `models.decoder` builds and
`models.hf_config` reads from a Hugging Face config.json."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..ir.tensor import itemsize
from .blocks import check_choice, check_positive


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
    shared_ffn: int = 0         # shared_expert_intermediate_size (DeepSeek: n_shared_experts
                                # * moe_intermediate_size)
    source: str = ""
    # --- fields of the Hugging Face families beyond LLaMA / Qwen2 (hf_config.py reads them)
    head_size: int = 0          # head_dim when it is not hidden / heads (Qwen3); 0: hidden/heads
    qk_norm: bool = False       # Qwen3: RMSNorm over head_dim of each q and k head
    rope_scaling: tuple = ()    # HF rope_scaling as sorted (key, value) pairs; () none
    max_positions: int = 0      # max_position_embeddings (yarn's default original length)
    q_lora_rank: int = 0        # DeepSeek MLA: query low-rank (0: a full q_proj)
    kv_lora_rank: int = 0       # > 0: multi-head latent attention (DeepSeek V2/V3)
    qk_nope_dim: int = 0        # qk_nope_head_dim
    qk_rope_dim: int = 0        # qk_rope_head_dim
    v_head_dim: int = 0
    router: str = "softmax"     # scoring_func: softmax | sigmoid
    norm_topk: bool = False     # norm_topk_prob: the k picked weights renormalised
    n_group: int = 1            # expert groups of group-limited routing
    topk_group: int = 1         # groups kept per token
    group_score: str = "max"    # a group's score: "max" (DeepSeek-V2) or "top2" (sum, V3)
    score_bias: bool = False    # e_score_correction_bias added to the selection scores (V3)
    routed_scale: float = 1.0   # factor on the routed experts' weights (routed_scaling_factor)
    shared_gate: bool = True    # the shared expert scaled by sigmoid(x @ w) (Qwen2-MoE)
    first_dense: int = 0        # first_k_dense_replace: leading layers with the dense MLP
    moe_every: int = 1          # an MoE layer every moe_every layers (decoder_sparse_step,
    moe_offset: int = 0         # moe_layer_freq) at layer % moe_every == moe_offset
    dense_layers: tuple = ()    # mlp_only_layers (Qwen-MoE)
    model_type: str = ""        # the HF model_type this came from ("" built by hand)

    def __post_init__(self) -> None:
        check_positive(hidden=self.hidden, layers=self.layers, heads=self.heads,
                       kv_heads=self.kv_heads, ffn=self.ffn, vocab=self.vocab)
        if self.mla:
            check_positive(qk_nope_dim=self.qk_nope_dim, qk_rope_dim=self.qk_rope_dim,
                           v_head_dim=self.v_head_dim)
        elif self.hidden % self.heads and not self.head_size:
            raise ConfigError(f"hidden={self.hidden} is not a multiple of heads={self.heads}")
        if self.heads % self.kv_heads:
            raise ConfigError(f"heads={self.heads} is not a multiple of kv_heads="
                              f"{self.kv_heads}")
        if (self.rope_dim % 2) != 0:
            raise ConfigError(f"head_dim={self.rope_dim} must be even (rotary embedding)")
        if self.experts and not (1 <= self.top_k <= self.experts and self.expert_ffn > 0):
            raise ConfigError(f"MoE needs 1 <= top_k <= experts and expert_ffn > 0; got "
                              f"experts={self.experts}, top_k={self.top_k}, "
                              f"expert_ffn={self.expert_ffn}")
        if self.experts and (self.n_group < 1 or self.experts % self.n_group or not
                             1 <= self.topk_group <= self.n_group):
            raise ConfigError(f"n_group={self.n_group} must divide experts={self.experts} "
                              f"and 1 <= topk_group={self.topk_group} <= n_group")
        check_choice("router", self.router, ("softmax", "sigmoid"))
        check_choice("group_score", self.group_score, ("max", "top2"))

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def head_dim(self) -> int:
        """Query/key head size (MLA: qk_nope_head_dim + qk_rope_head_dim)."""
        if self.mla:
            return self.qk_nope_dim + self.qk_rope_dim
        return self.head_size or self.hidden // self.heads

    @property
    def rope_dim(self) -> int:
        """Channels the rotary embedding turns (MLA: qk_rope_head_dim only)."""
        return self.qk_rope_dim if self.mla else self.head_dim

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def moe_layer(self, layer: int) -> bool:
        """Whether `layer` has the routed experts (else the dense MLP of `ffn`)."""
        return (self.moe and layer >= self.first_dense and layer not in self.dense_layers
                and layer % self.moe_every == self.moe_offset % self.moe_every)

    def params(self) -> int:
        """Parameter count (embeddings counted once when tied, as the checkpoint stores)."""
        h, d = self.hidden, self.head_dim
        if self.mla:
            qd, lat = self.heads * d, self.kv_lora_rank
            q = (h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * qd
                 if self.q_lora_rank else h * qd)
            attn = (q + h * (lat + self.qk_rope_dim) + lat
                    + lat * self.heads * (self.qk_nope_dim + self.v_head_dim)
                    + self.heads * self.v_head_dim * h)
        else:
            attn = h * (self.heads * d) * 2 + h * (self.kv_heads * d) * 2
            if self.qkv_bias:
                attn += (self.heads + 2 * self.kv_heads) * d
            if self.qk_norm:
                attn += 2 * d
        moe = self.experts * 3 * h * self.expert_ffn + h * self.experts
        if self.shared_ffn:
            moe += 3 * h * self.shared_ffn + (h if self.shared_gate else 0)
        if self.score_bias:
            moe += self.experts
        n_moe = sum(self.moe_layer(i) for i in range(self.layers))
        mlp = n_moe * moe + (self.layers - n_moe) * 3 * h * self.ffn
        emb = self.vocab * h * (1 if self.tie_embeddings else 2)
        return self.layers * (attn + 2 * h) + mlp + emb + h

    def kv_cache_bytes(self, batch: int, tokens: int, dtype: str = "float16") -> int:
        """Bytes of the keys and values of `tokens` positions for `batch` sequences (MLA: the
        compressed latent and the rotary key, kv_lora_rank + qk_rope_head_dim per token)."""
        if self.mla:
            per = self.kv_lora_rank + self.qk_rope_dim
            return self.layers * batch * tokens * per * itemsize(dtype)
        return 2 * self.layers * batch * self.kv_heads * tokens * self.head_dim * itemsize(dtype)
