"""Decoder configurations from Hugging Face `config.json` files (no weights, no network).

`from_hf(config)` takes a path to a config.json or its dict and returns a `DecoderConfig`.
Every `model_type` has the fields it reads (`FAMILIES[t].reads`) and the fields it may ignore
(`IGNORED`: ids, dtype, training-only coefficients, ...). A field in neither list, a missing
required field, an unknown model_type or a value that changes the maths in a way the decoder
does not build (a rope_scaling type, a quantization_config, a sliding window, biases the family
does not have, an activation other than SiLU) is a ConfigError naming it: a config is never
silently simulated as a different model.

Families (HF modeling file each follows):
- llama (LlamaForCausalLM): Llama 2 / 3 / 3.1; GQA; rope_scaling llama3 / linear / yarn.
- qwen2 (Qwen2ForCausalLM): Qwen2, Qwen2.5; q/k/v biases.
- qwen3 (Qwen3ForCausalLM): per-head q/k RMSNorm, head_dim may differ from hidden / heads.
- qwen2_moe (Qwen2MoeForCausalLM, Qwen1.5-MoE, Qwen2-57B-A14B): softmax top-k (renormalised
  when norm_topk_prob), a shared expert gated by sigmoid(x @ w).
- qwen3_moe (Qwen3MoeForCausalLM): qwen3 attention, softmax top-k renormalised, no shared
  expert.
- mixtral (MixtralForCausalLM): softmax over the top-k logits (= renormalised top-k).
- deepseek_v2 / deepseek_v3 (DeepseekV2/V3ForCausalLM): multi-head latent attention,
  first_k_dense_replace dense layers, n_shared_experts always-on experts; V2 softmax routing
  (greedy or group_limited_greedy: a group scored by its best expert) with
  routed_scaling_factor when not renormalised; V3 sigmoid scores, e_score_correction_bias
  for the selection, groups scored by the sum of their two best experts (noaux_tc),
  renormalised and scaled by routed_scaling_factor. DeepSeek's interleaved rotary layout
  (rope_interleave) is a fixed permutation of the rotary channels of q and k, the same as a
  permutation of the projection weights: with seeded weights it is not built (ignored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .decoder_config import DecoderConfig

#: fields no family's maths reads: ids, dtype, versions, training-only coefficients,
#: remote-code class maps; max_window_layers only matters with a sliding window (refused)
IGNORED = frozenset({
    "_name_or_path", "_source", "architectures", "auto_map", "bos_token_id", "eos_token_id",
    "pad_token_id", "torch_dtype", "dtype", "transformers_version", "use_cache",
    "initializer_range", "attention_dropout", "output_router_logits", "router_aux_loss_coef",
    "aux_loss_alpha", "seq_aux", "pretraining_tp", "max_window_layers", "ep_size",
    "num_nextn_predict_layers", "rope_interleave", "return_dict", "output_attentions",
    "output_hidden_states", "tie_encoder_decoder", "is_decoder", "layer_types",
})

COMMON = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta",
          "rope_scaling", "tie_word_embeddings", "hidden_act", "max_position_embeddings",
          "quantization_config")
QWEN_WINDOW = ("use_sliding_window", "sliding_window")
QWEN_MOE = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
            "decoder_sparse_step", "mlp_only_layers")
DEEPSEEK = ("attention_bias", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
            "qk_rope_head_dim", "v_head_dim", "n_routed_experts", "n_shared_experts",
            "num_experts_per_tok", "moe_intermediate_size", "first_k_dense_replace",
            "moe_layer_freq", "n_group", "topk_group", "topk_method", "scoring_func",
            "norm_topk_prob", "routed_scaling_factor")


@dataclass(frozen=True)
class Family:
    reads: tuple[str, ...]
    required: tuple[str, ...]
    note: str


_REQ = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "vocab_size")
FAMILIES: dict[str, Family] = {
    "llama": Family(COMMON + ("attention_bias", "mlp_bias", "head_dim"), _REQ,
                    "Llama 2/3/3.1 (GQA)"),
    "qwen2": Family(COMMON + QWEN_WINDOW, _REQ, "Qwen2 / Qwen2.5 (q/k/v biases)"),
    "qwen3": Family(COMMON + QWEN_WINDOW + ("head_dim", "attention_bias"), _REQ,
                    "Qwen3 (per-head q/k RMSNorm)"),
    "qwen2_moe": Family(COMMON + QWEN_WINDOW + QWEN_MOE + ("shared_expert_intermediate_size",),
                        _REQ + ("num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                "shared_expert_intermediate_size"),
                        "Qwen1.5-MoE / Qwen2-MoE (softmax top-k, gated shared expert)"),
    "qwen3_moe": Family(COMMON + QWEN_WINDOW + QWEN_MOE + ("head_dim", "attention_bias"),
                        _REQ + ("num_experts", "num_experts_per_tok", "moe_intermediate_size"),
                        "Qwen3-MoE (q/k norm, renormalised softmax top-k)"),
    "mixtral": Family(COMMON + ("num_local_experts", "num_experts_per_tok", "sliding_window",
                                "head_dim"),
                      _REQ + ("num_local_experts", "num_experts_per_tok"),
                      "Mixtral (renormalised softmax top-k)"),
    "deepseek_v2": Family(COMMON + DEEPSEEK,
                          _REQ + ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                  "qk_rope_head_dim", "v_head_dim", "n_routed_experts",
                                  "num_experts_per_tok", "moe_intermediate_size",
                                  "first_k_dense_replace"),
                          "DeepSeek-V2 (MLA, softmax group-limited routing)"),
}
FAMILIES["deepseek_v3"] = Family(FAMILIES["deepseek_v2"].reads,
                                 FAMILIES["deepseek_v2"].required + ("n_group", "topk_group"),
                                 "DeepSeek-V3 / R1 (MLA, sigmoid + bias group-limited routing)")

#: rope_scaling keys each supported type reads ("type"/"rope_type" name it)
ROPE_KEYS = {
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
             "mscale_all_dim", "attention_factor"),
}
ROPE_REQUIRED = {"linear": ("factor",), "llama3": ROPE_KEYS["llama3"], "yarn": ("factor",)}


def supported_model_types() -> dict[str, Family]:
    """The model_types `from_hf` builds, with the fields each reads."""
    return dict(FAMILIES)


def load(config: str | Path | dict) -> dict:
    """The dict of a config.json path (or the dict itself, copied)."""
    if isinstance(config, dict):
        return dict(config)
    path = Path(config)
    if path.is_dir():
        path = path / "config.json"
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"config {str(config)!r}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"config {str(config)!r}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config {str(config)!r}: a config.json holds one JSON object")
    return data


def _int(cfg: dict, key: str, default: Any = None, positive: bool = True) -> int:
    v = cfg.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int) or (positive and v <= 0) or v < 0:
        raise ConfigError(f"config field {key}={v!r}: must be a "
                          f"{'positive' if positive else 'non-negative'} integer")
    return v


def _float(cfg: dict, key: str, default: float) -> float:
    v = cfg.get(key, default)
    v = default if v is None else v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"config field {key}={v!r}: must be a number")
    return float(v)


def _bool(cfg: dict, key: str, default: bool) -> bool:
    v = cfg.get(key, default)
    v = default if v is None else v
    if not isinstance(v, bool):
        raise ConfigError(f"config field {key}={v!r}: must be true or false")
    return v


def _refuse_if(cond: bool, key: str, value: Any, why: str) -> None:
    if cond:
        raise ConfigError(f"config field {key}={value!r} is not supported: {why}")


def _rope_scaling(cfg: dict) -> tuple:
    rs = cfg.get("rope_scaling")
    if rs is None:
        return ()
    if not isinstance(rs, dict):
        raise ConfigError(f"config field rope_scaling={rs!r}: must be an object or null")
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind not in ROPE_KEYS:
        raise ConfigError(f"config field rope_scaling type {kind!r} is not supported (supported: "
                          f"{', '.join(ROPE_KEYS)}); it changes the rotary frequencies")
    extra = sorted(set(rs) - set(ROPE_KEYS[kind]) - {"type", "rope_type"})
    if extra:
        raise ConfigError(f"config field rope_scaling.{extra[0]} is not supported for rope type "
                          f"{kind!r} (reads: {', '.join(ROPE_KEYS[kind]) or 'nothing'})")
    for key in ROPE_REQUIRED.get(kind, ()):
        if rs.get(key) is None:
            raise ConfigError(f"config field rope_scaling.{key} is missing (rope type {kind!r})")
    if kind == "default":
        return ()
    return tuple(sorted((k, v) for k, v in rs.items() if v is not None))


def from_hf(config: str | Path | dict, source: str = "") -> DecoderConfig:
    """A DecoderConfig from a Hugging Face config.json (path, folder or dict); module note."""
    cfg = load(config)
    if not source:
        source = str(cfg.get("_source") or (config if not isinstance(config, dict) else ""))
    mt = cfg.get("model_type")
    if mt is None:
        raise ConfigError("config field model_type is missing (supported: "
                          f"{', '.join(FAMILIES)})")
    if mt not in FAMILIES:
        raise ConfigError(f"config model_type {mt!r} is not supported (supported: "
                          f"{', '.join(FAMILIES)})")
    fam = FAMILIES[mt]
    for key in fam.required:
        if key not in cfg:
            raise ConfigError(f"config field {key} is missing (model_type {mt!r} needs "
                              f"{', '.join(fam.required)})")
    unknown = sorted(set(cfg) - set(fam.reads) - IGNORED)
    if unknown:
        raise ConfigError(f"config field {unknown[0]} is not known for model_type {mt!r}: it "
                          f"may change the maths (reads: {', '.join(fam.reads)}; ignores: "
                          f"{', '.join(sorted(IGNORED))})")
    q = cfg.get("quantization_config")
    _refuse_if(q is not None, "quantization_config", q,
               "quantised checkpoints are not built from a config (decoder(quant=...))")
    act = cfg.get("hidden_act", "silu")
    _refuse_if(act != "silu", "hidden_act", act, "the MLPs are SwiGLU (silu)")
    for key in ("attention_bias", "mlp_bias"):
        if key in fam.reads:
            _refuse_if(_bool(cfg, key, False), key, True, f"{mt} is built without that bias")
    if "use_sliding_window" in fam.reads:
        _refuse_if(_bool(cfg, "use_sliding_window", False), "use_sliding_window", True,
                   "sliding-window attention is not modelled")
    if mt == "mixtral":
        sw = cfg.get("sliding_window")
        _refuse_if(sw is not None, "sliding_window", sw,
                   "sliding-window attention is not modelled")

    heads = _int(cfg, "num_attention_heads")
    fields: dict[str, Any] = dict(
        hidden=_int(cfg, "hidden_size"), layers=_int(cfg, "num_hidden_layers"), heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", heads), ffn=_int(cfg, "intermediate_size"),
        vocab=_int(cfg, "vocab_size"), eps=_float(cfg, "rms_norm_eps", 1e-6),
        rope_theta=_float(cfg, "rope_theta", 10000.0),
        tie_embeddings=_bool(cfg, "tie_word_embeddings", False),
        rope_scaling=_rope_scaling(cfg), source=source, model_type=mt)
    mp = cfg.get("max_position_embeddings")
    if mp is not None:
        fields["max_positions"] = _int(cfg, "max_position_embeddings")
    if cfg.get("head_dim") is not None and "head_dim" in fam.reads:
        hd = _int(cfg, "head_dim")
        if hd * heads != fields["hidden"] or mt.startswith("qwen3"):
            fields["head_size"] = hd
    if mt in ("qwen2", "qwen2_moe"):
        fields["qkv_bias"] = True
    if mt in ("qwen3", "qwen3_moe"):
        fields["qk_norm"] = True
    if mt in ("qwen2_moe", "qwen3_moe"):
        fields.update(experts=_int(cfg, "num_experts"), top_k=_int(cfg, "num_experts_per_tok"),
                      expert_ffn=_int(cfg, "moe_intermediate_size"),
                      norm_topk=_bool(cfg, "norm_topk_prob", mt == "qwen3_moe"),
                      moe_every=_int(cfg, "decoder_sparse_step", 1))
        fields["moe_offset"] = fields["moe_every"] - 1       # (layer + 1) % step == 0
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list) or not all(isinstance(i, int) for i in dense):
            raise ConfigError(f"config field mlp_only_layers={dense!r}: a list of layer indices")
        fields["dense_layers"] = tuple(dense)
        if mt == "qwen2_moe":
            fields["shared_ffn"] = _int(cfg, "shared_expert_intermediate_size", 0,
                                        positive=False)
    if mt == "mixtral":
        fields.update(experts=_int(cfg, "num_local_experts"),
                      top_k=_int(cfg, "num_experts_per_tok"),
                      expert_ffn=fields["ffn"], norm_topk=True)
    if mt.startswith("deepseek"):
        v3 = mt == "deepseek_v3"
        method = cfg.get("topk_method") or ("noaux_tc" if v3 else "greedy")
        scoring = cfg.get("scoring_func") or ("sigmoid" if v3 else "softmax")
        valid = ("noaux_tc",) if v3 else ("greedy", "group_limited_greedy")
        _refuse_if(method not in valid, "topk_method", method,
                   f"{mt} routes with {' or '.join(valid)}")
        _refuse_if(scoring != ("sigmoid" if v3 else "softmax"), "scoring_func", scoring,
                   f"{mt} scores its experts with {'sigmoid' if v3 else 'softmax'}")
        norm = _bool(cfg, "norm_topk_prob", v3)
        top_k = _int(cfg, "num_experts_per_tok")
        scale = _float(cfg, "routed_scaling_factor", 2.5 if v3 else 1.0)
        if not v3 and top_k > 1 and norm:      # V2 scales only the un-normalised weights
            scale = 1.0
        grouped = method != "greedy"
        fields.update(
            q_lora_rank=_int(cfg, "q_lora_rank", 0, positive=False),
            kv_lora_rank=_int(cfg, "kv_lora_rank"), qk_nope_dim=_int(cfg, "qk_nope_head_dim"),
            qk_rope_dim=_int(cfg, "qk_rope_head_dim"), v_head_dim=_int(cfg, "v_head_dim"),
            kv_heads=heads, experts=_int(cfg, "n_routed_experts"), top_k=top_k,
            expert_ffn=_int(cfg, "moe_intermediate_size"),
            shared_ffn=(_int(cfg, "n_shared_experts", 0, positive=False)
                        * _int(cfg, "moe_intermediate_size")),
            shared_gate=False, router=scoring, norm_topk=norm and top_k > 1,
            n_group=_int(cfg, "n_group", 1) if grouped else 1,
            topk_group=_int(cfg, "topk_group", 1) if grouped else 1,
            group_score="top2" if v3 else "max", score_bias=v3, routed_scale=scale,
            first_dense=_int(cfg, "first_k_dense_replace", 0, positive=False),
            moe_every=_int(cfg, "moe_layer_freq", 1), moe_offset=0)
    try:
        return DecoderConfig(**fields)
    except ConfigError as e:
        raise ConfigError(f"config ({mt}): {e}") from None


#: the configs shipped with ascendsim (package data), by preset name
CONFIG_DIR = Path(__file__).resolve().parent / "configs"


def shipped() -> dict[str, Path]:
    """Preset name -> the shipped config.json file (ascendsim/models/configs/<name>.json)."""
    return {p.stem: p for p in sorted(CONFIG_DIR.glob("*.json"))}


__all__ = ["from_hf", "load", "supported_model_types", "shipped", "FAMILIES", "IGNORED",
           "CONFIG_DIR"]
