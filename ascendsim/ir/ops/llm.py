"""LLM ops, as CANN / torch_npu define them (forward; gradient rules: ops/llm_grads.py).

- RmsNorm (CANN RmsNorm, torch_npu.npu_rms_norm): y = x * rsqrt(mean(x^2) + epsilon) * gamma
  over the trailing gamma.ndim axes; outputs y and rstd (float32), rstd only with
  num_outputs=2 (CANN always returns both; most graphs read y alone).
- RotaryMul (CANN RotaryMul, torch_npu.npu_rotary_mul, "half" mode): x * r1 +
  rotate_half(x) * r2 with rotate_half(x) = cat(-x2, x1) over the last axis; r1 = cos,
  r2 = sin broadcast to x (HF's apply_rotary_pos_emb, one call per q and k).
- SwiGlu (CANN SwiGlu, torch_npu.npu_swiglu): split `dim` into halves A, B; silu(A) * B.
- GroupedMatmul (CANN GroupedMatmul, torch_npu.npu_grouped_matmul, one x / one weight
  tensor, group_list_type 0): rows of x (T, K) in consecutive groups ending at the
  cumulative counts `group_list` (E,), group e times weight[e] (K, N). Its A8W8 form (the
  quantised MoE of vLLM-Ascend's W8A8 DeepSeek path: npu_dynamic_quant of the routed tokens,
  npu_grouped_matmul with int8 weights, scale=[per expert and channel] and
  per_token_scale=[the dynamic quant's], output_dtype bf16/fp16): int8 x and weight,
  int32 accumulation, times scale[e, n] and per_token_scale[t] in the epilogue.
- MoeGatingTopKSoftmax (CANN, torch_npu.npu_moe_gating_top_k_softmax): softmax of router
  logits (T, E), top k -> (y, expert_idx int32, row_idx int32 = j * T + t).
- MoeGatingTopK (CANN MoeGatingTopK, torch_npu.npu_moe_gating_top_k, the DeepSeek-V3 router;
  also the renormalised and group-limited softmax routers of Mixtral, Qwen3-MoE, DeepSeek-V2):
  scores s = softmax(x) (norm_type 0) or sigmoid(x) (1); selection scores s + bias (the
  optional e_score_correction_bias, selection only); the `k_group` best of `group_count` equal
  expert groups, a group scored by its best selection score (group_select_mode 0) or the sum
  of its best two (1); the k best experts in those groups; weights s at the picks, divided by
  their sum + eps when `renorm`, times `routed_scaling_factor`. Outputs (y (T, k),
  expert_idx int32, scores (T, E)).
- MoeInitRouting: token copies sorted by expert; CANN's MoeInitRouting followed by
  MoeComputeExpertTokens, folded into one op here: outputs expanded_x (T*k, H),
  expanded_row_idx (T*k,) (row of each (t, j) in expanded_x) and group_list (E,) cumulative.
- MoeFinalizeRouting: out[t] = sum_j scales[t, j] * expanded[expanded_row_idx[t*k + j]]
  (CANN's op without its optional residual and bias inputs).
- KvCacheAppend: ScatterUpdate-style write of the new tokens' keys or values (B, N, s, D) into
  a cache (B, N, S_max, D) at `position` (the context length) along `axis`; the simulator
  treats it as in place (only the new tokens cross HBM), the executor returns a copy.
- ScatterPaKvCache (CANN ScatterPaKvCache, torch_npu.npu_scatter_pa_kv_cache): the paged
  KV cache of vLLM-Ascend and MindIE; inputs key (T, ...), key_cache, slot_mapping (T,),
  value (T, ...), value_cache; token t goes to block slot // block_size, row slot %
  block_size, a negative slot skips it. cache_mode "Norm": caches (blocks, block_size, N, D);
  "PA_NZ": (blocks, N * D * itemsize / 32, block_size, 32 / itemsize) or its 5-D form
  (blocks, N, D * itemsize / 32, block_size, 32 / itemsize), each token a column of 32-byte
  pieces. Outputs both caches (in place on device).
- FlashAttentionScore (CANN FlashAttentionScore, torch_npu.npu_fusion_attention, BNSD layout,
  attention_out only): softmax(q k^T * scale_value + mask) v with key/value heads shared by
  head_num / Hkv query heads (GQA); `causal`=1 applies the bottom-right causal mask (CANN
  sparse_mode 3) without a mask tensor; `atten_mask` is additive here (CANN's is boolean).
- IncreFlashAttention (CANN IncreFlashAttention, torch_npu.npu_incre_flash_attention): the
  decode form, one query token per sequence against the whole cache; an int8 cache comes
  with key/value_antiquant_scale and _offset (per channel, broadcast to the cache) and is
  dequantised inside the kernel, (x + offset) * scale (the KV int8 of
  npu_incre_flash_attention's antiquant_scale / antiquant_offset).

Sources: hiascend.com torch_npu API pages for npu_fusion_attention (ptaoplist_000139),
npu_fused_infer_attention_score (ptaoplist_000837), npu_rotary_mul (ptaoplist_000141),
npu_swiglu (ptaoplist_000834); REG_OP definitions of FlashAttentionScore, RotaryMul and SwiGlu
in the torch_npu performance-tuning guide (performance_tuning_0027/0023/0100).
"""

from __future__ import annotations

import numpy as np

from ...errors import GraphError
from ...kernels import llm as kl
from ...kernels import llm_grad as klg
from ...kernels import quant as kq
from ..registry import Category, OpDef, Unit, VecClass, broadcast_shapes, register
from ..tensor import as_storage, itemsize
from .elementwise import FLOATS, INTS, check_dtype, same_dtype
from .norm import norm_axis


def static_dims(shape, what: str) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in shape):
        raise GraphError(f"{what} needs a static shape, got {tuple(shape)}")
    return tuple(shape)


# ----------------------------------------------------------------------------- RmsNorm
def _rms_infer(ins, attrs, consts):
    x, gamma = ins[0], ins[1]
    check_dtype(x, FLOATS)
    same_dtype([x, gamma])
    if tuple(x.shape[x.rank - gamma.rank:]) != tuple(gamma.shape) or gamma.rank > x.rank:
        raise GraphError(f"gamma '{gamma.name}' {tuple(gamma.shape)} is not the trailing shape "
                         f"of x '{x.name}' {tuple(x.shape)}")
    n = attrs["num_outputs"]
    if n not in (1, 2):
        raise GraphError(f"num_outputs must be 1 or 2, got {n!r}")
    # rstd is float32 (CANN), float64 for float64 x (gradient checks run in float64)
    rstd = (tuple(x.shape[:x.rank - gamma.rank]) + (1,) * gamma.rank,
            "float64" if x.dtype == "float64" else "float32")
    return [(x.shape, x.dtype), rstd][:n]


def _rms_kernel(args, attrs):
    y, rstd = kl.rms_norm(args[0], args[1], float(attrs["epsilon"]))
    return [y, rstd][:int(attrs["num_outputs"])]


# ----------------------------------------------------------------------------- RotaryMul
def _rotary_infer(ins, attrs, consts):
    x, r1, r2 = ins[0], ins[1], ins[2]
    check_dtype(x, FLOATS)
    same_dtype([x, r1, r2])
    if attrs["rotary_mode"] != "half":
        raise GraphError(f"rotary_mode {attrs['rotary_mode']!r} is not supported (only 'half')")
    d = x.shape[-1]
    if isinstance(d, int) and d % 2:
        raise GraphError(f"last dim of '{x.name}' ({d}) must be even")
    for r in (r1, r2):
        if broadcast_shapes(x.shape, r.shape) != tuple(x.shape):
            raise GraphError(f"'{r.name}' {tuple(r.shape)} does not broadcast to x "
                             f"{tuple(x.shape)}")
    return [(x.shape, x.dtype)]


# ----------------------------------------------------------------------------- SwiGlu
def _swiglu_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    axis = norm_axis(attrs["dim"], x.rank, x)
    d = x.shape[axis]
    if isinstance(d, int) and d % 2:
        raise GraphError(f"dim {attrs['dim']} of '{x.name}' ({d}) is not even")
    shape = list(x.shape)
    shape[axis] = d // 2 if isinstance(d, int) else f"{d}/2"
    return [(tuple(shape), x.dtype)]


# ----------------------------------------------------------------------------- GroupedMatmul
#: CANN GroupedMatmul group_type: the groups split M (x's rows; the forward) or K (the
#: contraction: x (K, T) and weight (T, N) -> (E, K, N), the weight gradient)
SPLIT_M, SPLIT_K = 0, 2


#: output dtypes of the int8 (A8W8) GroupedMatmul
GMM_QUANT_OUT = ("float16", "bfloat16", "float32")


def _gmm_quant_check(x, w, gl, scale, pertoken, out) -> None:
    """The A8W8 form: int8 x and weight, scale (E, N) float32 per expert and output
    channel, per_token_scale (T,), output_dtype one of GMM_QUANT_OUT."""
    if x.dtype != "int8" or w.dtype != "int8":
        raise GraphError(f"GroupedMatmul with a scale takes int8 x and weight; got {x.dtype} "
                         f"'{x.name}' and {w.dtype} '{w.name}'")
    if scale is None or pertoken is None:
        raise GraphError(f"GroupedMatmul with int8 x '{x.name}' needs both scale (E, N) and "
                         f"per_token_scale (T,) to dequantise")
    if w.rank == 3 and tuple(scale.shape) != (w.shape[0], w.shape[2]):
        raise GraphError(f"GroupedMatmul scale '{scale.name}' {tuple(scale.shape)} is not "
                         f"(E, N) = {(w.shape[0], w.shape[2])}")
    if tuple(pertoken.shape) != (x.shape[0],):
        raise GraphError(f"GroupedMatmul per_token_scale '{pertoken.name}' "
                         f"{tuple(pertoken.shape)} is not ({x.shape[0]},)")
    if out not in GMM_QUANT_OUT:
        raise GraphError(f"GroupedMatmul output_dtype {out!r}: one of "
                         f"{', '.join(GMM_QUANT_OUT)}")


def _gmm_infer(ins, attrs, consts):
    x, w, gl = ins[0], ins[1], ins[2]
    scale = ins[3] if len(ins) > 3 else None
    pertoken = ins[4] if len(ins) > 4 else None
    out_dtype = x.dtype
    if x.dtype == "int8" or scale is not None:
        if attrs["group_type"] != SPLIT_M:
            raise GraphError("GroupedMatmul: the int8 form (scale, per_token_scale) needs "
                             "group_type 0")
        _gmm_quant_check(x, w, gl, scale, pertoken, attrs.get("output_dtype"))
        out_dtype = attrs["output_dtype"]
    else:
        check_dtype(x, FLOATS)
        same_dtype([x, w])
    check_dtype(gl, INTS, "group_list")
    if attrs["group_type"] == SPLIT_K:
        if x.rank != 2 or w.rank != 2 or gl.rank != 1 or x.shape[1] != w.shape[0]:
            raise GraphError(f"GroupedMatmul group_type 2 needs x (K, T), weight (T, N), "
                             f"group_list (E,); got {tuple(x.shape)}, {tuple(w.shape)}, "
                             f"{tuple(gl.shape)}")
        return [((gl.shape[0], x.shape[0], w.shape[1]), x.dtype)]
    if attrs["group_type"] != SPLIT_M:
        raise GraphError(f"GroupedMatmul group_type {attrs['group_type']!r} is not supported "
                         f"(0: groups split M, 2: groups split K)")
    if x.rank != 2 or w.rank != 3 or gl.rank != 1:
        raise GraphError(f"GroupedMatmul needs x (T, K), weight (E, K, N), group_list (E,); "
                         f"got {tuple(x.shape)}, {tuple(w.shape)}, {tuple(gl.shape)}")
    if x.shape[1] != w.shape[1] or w.shape[0] != gl.shape[0]:
        raise GraphError(f"GroupedMatmul: x {tuple(x.shape)}, weight {tuple(w.shape)} and "
                         f"group_list {tuple(gl.shape)} do not agree on K or E")
    return [((x.shape[0], w.shape[2]), out_dtype)]


def _gmm_flops(ins, outs, attrs) -> int:
    if attrs.get("group_type", SPLIT_M) == SPLIT_K:     # every row of T in one group
        return 2 * ins[0].numel * int(ins[1].shape[-1])
    return 2 * outs[0].numel * int(ins[0].shape[-1])


def _gmm_kernel(args, attrs):
    if attrs["group_type"] == SPLIT_K:
        return [klg.grouped_matmul_split_k(args[0], args[1], args[2])]
    if len(args) > 3:               # A8W8: exact integer products, dequantised per row
        return [as_storage(kq.grouped_matmul_dequant(args[0], args[1], args[2], args[3],
                                                     args[4]), attrs["output_dtype"])]
    return [kl.grouped_matmul(args[0], args[1], args[2])]


# ----------------------------------------------------------------------------- MoE routing
def _gating_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    k = attrs["k"]
    if x.rank != 2 or not isinstance(k, int) or not 1 <= k <= x.shape[1]:
        raise GraphError(f"MoeGatingTopKSoftmax needs x (T, E) and 1 <= k <= E; got "
                         f"{tuple(x.shape)}, k={k!r}")
    t = x.shape[0]
    return [((t, k), x.dtype), ((t, k), "int32"), ((t, k), "int32")]


def _gating_k_infer(ins, attrs, consts):
    x, bias = ins[0], (ins[1] if len(ins) > 1 else None)
    check_dtype(x, FLOATS)
    k, kg, gc = attrs["k"], attrs["k_group"], attrs["group_count"]
    if x.rank != 2 or not isinstance(k, int) or not 1 <= k <= x.shape[1]:
        raise GraphError(f"MoeGatingTopK needs x (T, E) and 1 <= k <= E; got "
                         f"{tuple(x.shape)}, k={k!r}")
    e = x.shape[1]
    if not (isinstance(gc, int) and gc >= 1 and e % gc == 0 and isinstance(kg, int)
            and 1 <= kg <= gc and k <= kg * (e // gc)):
        raise GraphError(f"MoeGatingTopK: {e} experts in group_count={gc!r} groups, "
                         f"k_group={kg!r}, k={k}: the groups must divide the experts and the "
                         f"k_group kept groups hold at least k experts")
    if attrs["norm_type"] not in (0, 1) or attrs["group_select_mode"] not in (0, 1):
        raise GraphError(f"MoeGatingTopK: norm_type {attrs['norm_type']!r} (0 softmax, "
                         f"1 sigmoid), group_select_mode {attrs['group_select_mode']!r} (0 max, "
                         f"1 top-2 sum)")
    if bias is not None:
        same_dtype([x, bias])
        if tuple(bias.shape) != (e,):
            raise GraphError(f"MoeGatingTopK bias '{bias.name}' {tuple(bias.shape)} is not "
                             f"({e},)")
    t = x.shape[0]
    return [((t, k), x.dtype), ((t, k), "int32"), ((t, e), x.dtype)]


def _gating_k_kernel(args, attrs):
    bias = args[1] if len(args) > 1 else None
    return kl.moe_gating_top_k(args[0], bias, int(attrs["k"]), int(attrs["k_group"]),
                               int(attrs["group_count"]), int(attrs["group_select_mode"]),
                               int(attrs["norm_type"]), int(attrs["renorm"]),
                               float(attrs["routed_scaling_factor"]), float(attrs["eps"]))


def _init_routing_infer(ins, attrs, consts):
    x, idx = ins[0], ins[1]
    check_dtype(idx, INTS, "expert_idx")
    e = attrs["num_experts"]
    if x.rank != 2 or idx.rank != 2 or x.shape[0] != idx.shape[0] or int(e) < 1:
        raise GraphError(f"MoeInitRouting needs x (T, H), expert_idx (T, k), num_experts >= 1;"
                         f" got {tuple(x.shape)}, {tuple(idx.shape)}, {e!r}")
    rows = x.shape[0] * idx.shape[1]
    return [((rows, x.shape[1]), x.dtype), ((rows,), "int32"), ((int(e),), "int64")]


def _finalize_infer(ins, attrs, consts):
    ex, scales, pos = ins[0], ins[1], ins[2]
    if ex.rank != 2 or scales.rank != 2 or pos.rank != 1:
        raise GraphError(f"MoeFinalizeRouting needs expanded (T*k, H), scales (T, k), "
                         f"expanded_row_idx (T*k,); got {tuple(ex.shape)}, "
                         f"{tuple(scales.shape)}, {tuple(pos.shape)}")
    return [((scales.shape[0], ex.shape[1]), ex.dtype)]


# ----------------------------------------------------------------------------- KV cache
def _append_infer(ins, attrs, consts):
    cache, upd = ins[0], ins[1]
    same_dtype([cache, upd])
    axis = norm_axis(attrs["axis"], cache.rank, cache)
    c = static_dims(cache.shape, "KvCacheAppend cache")
    u = static_dims(upd.shape, "KvCacheAppend update")
    pos = int(attrs["position"])
    other = [i for i in range(cache.rank) if i != axis]
    if upd.rank != cache.rank or any(c[i] != u[i] for i in other) or not \
            0 <= pos <= c[axis] - u[axis]:
        raise GraphError(f"KvCacheAppend: update '{upd.name}' {u} does not fit cache "
                         f"'{cache.name}' {c} at position {pos} along axis {axis}")
    return [(cache.shape, cache.dtype)]


#: ScatterPaKvCache's cache layouts (its `cache_mode`): "Norm" (ND) and "PA_NZ"
PAGED_CACHE_MODES = ("Norm", "PA_NZ")


def _scatter_cache_infer(ins, attrs, consts):
    """Shapes of ScatterPaKvCache (module note): the caches, as given."""
    key, key_cache, slots, value, value_cache = ins[:5]
    mode = attrs["cache_mode"]
    if mode not in PAGED_CACHE_MODES:
        raise GraphError(f"ScatterPaKvCache: cache_mode {mode!r} is not one of "
                         f"{', '.join(PAGED_CACHE_MODES)}")
    check_dtype(slots, frozenset({"int32", "int64"}), "slot_mapping")
    t = static_dims(key.shape, "ScatterPaKvCache key")[0]
    if tuple(slots.shape) != (t,):
        raise GraphError(f"ScatterPaKvCache: slot_mapping '{slots.name}' {tuple(slots.shape)} "
                         f"is not one slot per token of key '{key.name}' ({t},)")
    for x, cache in ((key, key_cache), (value, value_cache)):
        same_dtype([x, cache])
        xs = static_dims(x.shape, f"ScatterPaKvCache {x.name}")
        cs = static_dims(cache.shape, f"ScatterPaKvCache {cache.name}")
        if len(xs) != 3 or xs[0] != t:
            raise GraphError(f"ScatterPaKvCache: '{x.name}' {xs} is not (T = {t}, heads, "
                             f"head_size)")
        width = xs[1] * xs[2]
        if mode == "PA_NZ":
            if xs[2] * itemsize(x.dtype) % 32:
                raise GraphError(f"ScatterPaKvCache (PA_NZ): the head size of '{x.name}' "
                                 f"{xs} is not a whole number of 32-byte blocks")
            piece = 32 // itemsize(cache.dtype)
            ok = ((len(cs) == 4 and cs[3] == piece and cs[1] * piece == width)
                  or (len(cs) == 5 and cs[4] == piece and cs[1] == xs[1]
                      and cs[2] * piece == xs[2]))
            form = ("(blocks, heads * head_size * itemsize / 32, block_size, 32 / itemsize) "
                    "or (blocks, heads, head_size * itemsize / 32, block_size, 32 / itemsize)")
        else:
            ok = len(cs) == 4 and cs[2:] == xs[1:]
            form = "(blocks, block_size, heads, head_size)"
        if not ok:
            raise GraphError(f"ScatterPaKvCache ({mode}): cache '{cache.name}' {cs} does not "
                             f"hold tokens of '{x.name}' {xs}; a {mode} cache is {form}")
    return [(key_cache.shape, key_cache.dtype), (value_cache.shape, value_cache.dtype)]


def _scatter_cache_kernel(args, attrs):
    nz = attrs["cache_mode"] == "PA_NZ"
    return [kl.paged_cache_scatter(args[1], args[0], args[2], nz),
            kl.paged_cache_scatter(args[4], args[3], args[2], nz)]


# ----------------------------------------------------------------------------- attention
def _attention_infer(heads_attr: str, kv_attr: str | None):
    def infer(ins, attrs, consts):
        q, k, v = ins[0], ins[1], ins[2]
        mask = ins[3] if len(ins) > 3 else None
        check_dtype(q, FLOATS)
        if kv_attr and k.dtype == "int8":     # an int8 KV cache, dequantised in the kernel
            same_dtype([k, v])
            if len(ins) < 7 or ins[4] is None or ins[6] is None:
                raise GraphError(f"IncreFlashAttention: int8 key '{k.name}' / value "
                                 f"'{v.name}' need key_antiquant_scale and "
                                 f"value_antiquant_scale")
            for a in ins[4:]:
                if a is not None and broadcast_shapes(a.shape, k.shape) != tuple(k.shape):
                    raise GraphError(f"IncreFlashAttention antiquant '{a.name}' "
                                     f"{tuple(a.shape)} does not broadcast to the cache "
                                     f"{tuple(k.shape)}")
        else:
            same_dtype([q, k, v])
        qs = static_dims(q.shape, f"query '{q.name}'")
        ks, vs = static_dims(k.shape, f"key '{k.name}'"), static_dims(v.shape, f"value '{v.name}'")
        if len(qs) != 4 or len(ks) != 4 or ks != vs or qs[0] != ks[0] or qs[3] != ks[3]:
            raise GraphError(f"query {qs}, key {ks}, value {vs} are not BNSD with one batch "
                             f"and head size")
        heads = int(attrs[heads_attr] or qs[1])
        kv = int(attrs[kv_attr] or ks[1]) if kv_attr else ks[1]
        if heads != qs[1] or kv != ks[1] or heads % kv:
            raise GraphError(f"{heads_attr}={heads} query heads and {ks[1]} key/value heads: "
                             f"query has {qs[1]} heads and they must be a multiple of the "
                             f"key/value heads")
        if mask is not None and broadcast_shapes(mask.shape, (qs[0], qs[1], qs[2], ks[2])) \
                != (qs[0], qs[1], qs[2], ks[2]):
            raise GraphError(f"atten_mask '{mask.name}' {tuple(mask.shape)} does not broadcast "
                             f"to {(qs[0], qs[1], qs[2], ks[2])}")
        if kv_attr and qs[2] != 1:
            raise GraphError(f"IncreFlashAttention takes one query token per sequence, query "
                             f"'{q.name}' has {qs[2]}")
        return [(q.shape, q.dtype)]
    return infer


def _dequant_kv(x, scale, offset, like):
    """An int8 cache as the kernel reads it: (x + offset) * scale in x's compute dtype."""
    return kq.ascend_anti_quant(x, scale, offset).astype(np.asarray(like).dtype)


def _attention_kernel(scale_attr: str, causal_attr: str | None):
    def kernel(args, attrs):
        mask = args[3] if len(args) > 3 else None
        causal = bool(attrs[causal_attr]) if causal_attr else False
        k, v = args[1], args[2]
        if np.asarray(k).dtype == np.int8:
            extra = list(args[4:]) + [None] * (8 - len(args))
            k = _dequant_kv(k, extra[0], extra[1], args[0])
            v = _dequant_kv(v, extra[2], extra[3], args[0])
        return [kl.flash_attention(args[0], k, v, mask, float(attrs[scale_attr]), causal)]
    return kernel


def attention_pairs(q_shape, k_shape, causal: bool) -> int:
    """Query-key pairs the kernel computes (B * H * visible keys per query)."""
    b, h, s, _ = q_shape
    t = k_shape[2]
    if not causal:
        return b * h * s * t
    visible = np.minimum(t, np.maximum(0, np.arange(s, dtype=np.int64) + t - s + 1)).sum()
    return b * h * int(visible)


def _attention_flops(causal_attr: str | None):
    """2 GEMMs (2 * D flops per pair each) + ~5 softmax flops per pair."""
    def flops(ins, outs, attrs):
        causal = bool(attrs[causal_attr]) if causal_attr else False
        d = int(ins[0].shape[3])
        return attention_pairs(ins[0].shape, ins[1].shape, causal) * (4 * d + 5)
    return flops


# ----------------------------------------------------------------------------- registry
# vec_instrs per element of the largest operand (what a vector lowering times):
#   RmsNorm 4: vmul (square), vcadd (row sum), vmul (x * rstd), vmul (gamma)
#   RotaryMul 4: vmul (x * cos), vcopy/vmuls (-x2 | x1), vmul (* sin), vadd
#   SwiGlu 3 per input element (6 per output: vmuls -1, vexp, vadds 1, vdiv, vmul a, vmul b)
#   MoeGatingTopKSoftmax 8: softmax's 5 and ~3 compare/select passes per k pick
#   MoeGatingTopK 10: its 8 plus the bias add and the group max/sum pass
#   routing ops 1-2: gathers / scaled adds (vector MOVE)
_V, _R, _I, _O = Unit.VECTOR, Category.REDUCE, Category.INJECTIVE, Category.OPAQUE
register(OpDef("RmsNorm", _rms_infer, _rms_kernel, _R, inputs=("x", "gamma"),
               attrs={"epsilon": 1e-6, "num_outputs": 1}, num_outputs="num_outputs",
               flops=lambda i, o, a: 4 * i[0].numel, vec_class=VecClass.REDUCE, vec_instrs=4,
               doc="CANN RmsNorm over the trailing gamma axes; rstd with num_outputs=2"))
register(OpDef("RotaryMul", _rotary_infer,
               lambda args, attrs: [kl.rotary_mul(args[0], args[1], args[2])], _I,
               inputs=("x", "r1", "r2"), attrs={"rotary_mode": "half"},
               flops=lambda i, o, a: 3 * i[0].numel, vec_class=VecClass.BINARY, vec_instrs=4,
               doc="CANN RotaryMul: x * cos + rotate_half(x) * sin"))
register(OpDef("SwiGlu", _swiglu_infer,
               lambda args, attrs: [kl.swiglu(args[0], int(attrs["dim"]) % np.ndim(args[0]))],
               _I, inputs=("x",), attrs={"dim": -1}, flops=lambda i, o, a: 6 * o[0].numel,
               vec_class=VecClass.EXP, vec_instrs=3, builder="swi_glu",
               doc="CANN SwiGlu: silu(first half) * second half of `dim`"))
register(OpDef("GroupedMatmul", _gmm_infer, _gmm_kernel,
               Category.CUBE, unit=Unit.CUBE,
               inputs=("x", "weight", "group_list", "scale?", "per_token_scale?"),
               lowering="grouped_matmul",
               attrs={"group_list_type": 0, "group_type": SPLIT_M, "output_dtype": "float16"},
               flops=_gmm_flops,
               doc="CANN GroupedMatmul: consecutive row groups of x times weight[e] "
                   "(group_type 2: x (K, T) @ weight (T, N) per group of T -> (E, K, N); "
                   "int8 x and weight with scale (E, N) and per_token_scale (T,): int32 "
                   "accumulation dequantised to output_dtype in the epilogue)"))
register(OpDef("MoeGatingTopKSoftmax", _gating_infer,
               lambda args, attrs: kl.moe_gating_top_k_softmax(args[0], int(attrs["k"])), _R,
               inputs=("x",), attrs={"k": 1}, num_outputs=3,
               flops=lambda i, o, a: 8 * i[0].numel, vec_class=VecClass.EXP, vec_instrs=8,
               builder="moe_gating_top_k_softmax",
               doc="CANN MoeGatingTopKSoftmax: (y, expert_idx, row_idx)"))
register(OpDef("MoeGatingTopK", _gating_k_infer, _gating_k_kernel, _R,
               inputs=("x", "bias?"),
               attrs={"k": 1, "k_group": 1, "group_count": 1, "group_select_mode": 0,
                      "norm_type": 0, "renorm": 0, "routed_scaling_factor": 1.0, "eps": 1e-20},
               num_outputs=3, flops=lambda i, o, a: 10 * i[0].numel, vec_class=VecClass.EXP,
               vec_instrs=10, untrainable_inputs=(1,), builder="moe_gating_top_k",
               doc="CANN MoeGatingTopK: softmax/sigmoid scores, group-limited top-k with a "
                   "selection bias, renormalised and scaled: (y, expert_idx, scores)"))
register(OpDef("MoeInitRouting", _init_routing_infer,
               lambda args, attrs: kl.moe_init_routing(args[0], args[1],
                                                       int(attrs["num_experts"])), _O,
               inputs=("x", "expert_idx"), attrs={"num_experts": 0}, num_outputs=3,
               flops=lambda i, o, a: 0, vec_class=VecClass.MOVE, vec_instrs=1,
               doc="tokens sorted by expert: (expanded_x, expanded_row_idx, group_list)"))
register(OpDef("MoeFinalizeRouting", _finalize_infer,
               lambda args, attrs: [kl.moe_finalize_routing(args[0], args[1], args[2])], _O,
               inputs=("expanded_x", "scales", "expanded_row_idx"),
               flops=lambda i, o, a: 2 * i[0].numel, vec_class=VecClass.BINARY, vec_instrs=2,
               doc="weighted un-permute of the experts' outputs back to token order"))
register(OpDef("KvCacheAppend", _append_infer,
               lambda args, attrs: [kl.kv_cache_append(args[0], args[1],
                                                       int(attrs["position"]),
                                                       int(attrs["axis"]) % np.ndim(args[0]))],
               _O, inputs=("cache", "update"), attrs={"position": 0, "axis": 2},
               flops=lambda i, o, a: 0, vec_class=VecClass.MOVE, vec_instrs=1, in_place=0,
               lowering="cache_append",
               doc="write new keys/values into the cache at `position` (in place on device)"))
register(OpDef("ScatterPaKvCache", _scatter_cache_infer, _scatter_cache_kernel, _O,
               inputs=("key", "key_cache", "slot_mapping", "value", "value_cache"),
               attrs={"cache_mode": "Norm"}, num_outputs=2,
               flops=lambda i, o, a: 0, vec_class=VecClass.MOVE, vec_instrs=1, in_place=(1, 4),
               lowering="paged_cache_scatter",
               doc="CANN ScatterPaKvCache (torch_npu.npu_scatter_pa_kv_cache): each token's "
                   "key and value written into a paged cache at its slot (in place on "
                   "device); a negative slot skips the token"))
register(OpDef("FlashAttentionScore", _attention_infer("head_num", None),
               _attention_kernel("scale_value", "causal"), _O, unit=Unit.CUBE,
               inputs=("query", "key", "value", "atten_mask?"),
               attrs={"scale_value": 1.0, "head_num": 0, "input_layout": "BNSD", "causal": 0,
                      "prompt": 0},
               flops=_attention_flops("causal"), vec_class=VecClass.EXP, vec_instrs=6,
               untrainable_inputs=(3,), lowering="flash_attention",
               doc="CANN FlashAttentionScore (attention_out), BNSD, GQA, optional causal; "
                   "prompt=1: the call is FusedInferAttentionScore with S > 1 (the prompt "
                   "flash attention kernel, its own work split)"))
register(OpDef("IncreFlashAttention", _attention_infer("num_heads", "num_key_value_heads"),
               _attention_kernel("scale_value", None), _O, unit=Unit.CUBE,
               inputs=("query", "key", "value", "atten_mask?", "key_antiquant_scale?",
                       "key_antiquant_offset?", "value_antiquant_scale?",
                       "value_antiquant_offset?"),
               attrs={"num_heads": 0, "scale_value": 1.0, "num_key_value_heads": 0,
                      "input_layout": "BNSD"},
               flops=_attention_flops(None), vec_class=VecClass.EXP, vec_instrs=6,
               untrainable_inputs=(3, 4, 5, 6, 7), lowering="flash_attention",
               doc="CANN IncreFlashAttention: one query token against the KV cache (int8 "
                   "with its per-channel antiquant scales and offsets, dequantised inside)"))

__all__ = ["attention_pairs", "SPLIT_M", "SPLIT_K"]
