"""Gradient rules of the LLM ops (ops/llm.py) and the CANN backward kernels they build on.

Backward ops (CANN names; formulas as the CANN docs state them):
- RmsNormGrad (ops-nn norm/rms_norm_grad, aclnnRmsNormGrad): inputs dy, x, rstd, gamma;
  dx = rstd * (dy*gamma - xhat * mean(dy*gamma*xhat)), xhat = x*rstd, over gamma's axes;
  dgamma = sum of dy*xhat over the leading axes (float32, as CANN's dgamma output).
- RotaryMulGrad (CANN RotaryMulGrad, torch_npu npu_rotary_mul's backward; half mode as
  ops-transformer rotary_position_embedding_grad states it): dx = cat(cos1*dy1 + sin2*dy2,
  cos2*dy2 - sin1*dy1); dr1 = sum(dy*x), dr2 = sum(dy*rotate_half(x)) over the axes r1/r2
  broadcast along (computed when `need_backward`=1).
- SwiGluGrad (torch_npu npu_swiglu's backward): y = silu(a)*b; da = dy*b*sig(a)*(1 +
  a*(1 - sig(a))), db = dy*silu(a), concatenated along `dim`.
- FlashAttentionScoreGrad (CANN FlashAttentionScoreGrad, npu_fusion_attention's backward):
  inputs query, key, value, dy, attention_in (the forward's output), optional additive
  atten_mask; outputs dq, dk, dv (BNSD, GQA: a kv head sums the cotangents of its query-head
  group). Like every flash-attention backward it recomputes S = Q K^T per key block (the
  probabilities are never stored): 5 GEMMs per block (Q K^T, dO V^T, dV, dK, dQ). CANN's
  kernel also reads the forward's softmax_max/softmax_sum; the forward op here returns
  attention_out only, so the values kernel recomputes the row max and sum from S (the
  lowering times CANN's kernel, statistics given: their reads, 2 floats per query row, are
  left out).
- GroupedMatmul group_type 2 (groups split K; op-plugin builds npu_grouped_matmul's weight
  gradient this way): dW[e] = x_e^T dy_e; dx is GroupedMatmul of dy and weight^T (group_type
  0).
- MoeInitRoutingV2Grad (aclnnMoeInitRoutingV2Grad, dropless): dx[t] = sum_j
  d_expanded[expanded_row_idx[t*k + j]].
- MoeFinalizeRoutingV2Grad (aclnnMoeFinalizeRoutingV2Grad, dropless, no bias):
  d_expanded[expanded_row_idx[t*k + j]] = scales[t, j] * dy[t], d_scales[t, j] =
  <expanded[expanded_row_idx[t*k + j]], dy[t]>.

Rules with no kernel of their own: MoeGatingTopK (see _gating_k_grad),
MoeGatingTopKSoftmax (the cotangent of the k picked probabilities scattered to the E
experts, then the softmax's vjp p*(dp - sum(p*dp)); the expert indices are integers),
KvCacheAppend (the new rows' cotangent is the slice of the cache's cotangent they were
written to; the overwritten cache rows get none: KvCacheAppend of zeros).
IncreFlashAttention has no rule on purpose: it is the decode (inference) kernel, CANN ships
no gradient for it and torch_npu's npu_incre_flash_attention is not differentiable;
training uses FlashAttentionScore. Asking for its gradient raises UnsupportedOpError naming
the op and the node.

Sources: gitee/gitcode ops-nn `norm/rms_norm_grad/README.md`; ops-transformer
`posembedding/rotary_position_embedding_grad/README.md`, `moe/moe_init_routing_v2_grad/docs`,
`moe/moe_finalize_routing_v2_grad/docs`; hiascend.com aclnnMoeFinalizeRoutingV2Grad,
aclnnMoeInitRoutingV2Grad (CANN 8.x API reference); torch_npu npu_fusion_attention
(ptaoplist_000139).
"""

from __future__ import annotations

import numpy as np

from ...errors import GraphError, UnsupportedOpError
from ...kernels import llm_grad as klg
from ..registry import (
    Category,
    OpDef,
    Unit,
    VecClass,
    broadcast_shapes,
    register,
    register_grads,
)
from .elementwise import FLOATS, check_dtype, same_dtype
from .llm import SPLIT_K, attention_pairs, static_dims
from .norm import norm_axis

_B, _R = VecClass.BINARY, VecClass.REDUCE


def _like(a, b, what: str) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise GraphError(f"{what} '{b.name}' has shape {tuple(b.shape)}; expected "
                         f"{tuple(a.shape)} as '{a.name}'")


# ----------------------------------------------------------------------------- RmsNormGrad
def _rms_grad_infer(ins, attrs, consts):
    dy, x, rstd, gamma = ins
    check_dtype(x, FLOATS)
    same_dtype([dy, x, gamma])
    _like(x, dy, "dy")
    lead = x.rank - gamma.rank
    if gamma.rank > x.rank or tuple(x.shape[lead:]) != tuple(gamma.shape) or \
            tuple(rstd.shape) != tuple(x.shape[:lead]) + (1,) * gamma.rank:
        raise GraphError(f"RmsNormGrad: x '{x.name}' {tuple(x.shape)}, rstd '{rstd.name}' "
                         f"{tuple(rstd.shape)} and gamma '{gamma.name}' {tuple(gamma.shape)} "
                         f"do not agree (gamma: x's trailing axes, rstd: one per row)")
    acc = "float64" if x.dtype == "float64" else "float32"
    return [(x.shape, x.dtype), (gamma.shape, acc)]


# ----------------------------------------------------------------------------- RotaryMulGrad
def _rotary_grad_infer(ins, attrs, consts):
    x, r1, r2, dy = ins
    check_dtype(x, FLOATS)
    same_dtype([x, r1, r2, dy])
    _like(x, dy, "dy")
    if int(x.shape[-1]) % 2:
        raise GraphError(f"RotaryMulGrad: last dim of '{x.name}' ({x.shape[-1]}) must be even")
    return [(x.shape, x.dtype), (r1.shape, x.dtype), (r2.shape, x.dtype)]


def _rotary_grad_kernel(args, attrs):
    dx, dr1, dr2 = klg.rotary_mul_grad(args[0], args[1], args[2], args[3])
    if not int(attrs["need_backward"]):
        dr1, dr2 = np.zeros_like(dr1), np.zeros_like(dr2)
    return [dx, dr1, dr2]


# ----------------------------------------------------------------------------- SwiGluGrad
def _swiglu_grad_infer(ins, attrs, consts):
    dy, x = ins
    check_dtype(x, FLOATS)
    same_dtype([dy, x])
    axis = norm_axis(attrs["dim"], x.rank, x)
    want = list(x.shape)
    want[axis] = int(x.shape[axis]) // 2
    if tuple(dy.shape) != tuple(want) or int(x.shape[axis]) % 2:
        raise GraphError(f"SwiGluGrad: dy '{dy.name}' {tuple(dy.shape)} is not half of x "
                         f"'{x.name}' {tuple(x.shape)} along dim {attrs['dim']}")
    return [(x.shape, x.dtype)]


# ----------------------------------------------------------------------------- attention
def _fag_infer(ins, attrs, consts):
    q, k, v, dy, out = ins[:5]
    mask = ins[5] if len(ins) > 5 else None
    check_dtype(q, FLOATS)
    same_dtype([q, k, v, dy, out])
    qs, ks = static_dims(q.shape, f"query '{q.name}'"), static_dims(k.shape, f"key '{k.name}'")
    vs = static_dims(v.shape, f"value '{v.name}'")
    if len(qs) != 4 or len(ks) != 4 or ks != vs or qs[0] != ks[0] or qs[3] != ks[3] or \
            qs[1] % ks[1] or int(attrs["head_num"] or qs[1]) != qs[1]:
        raise GraphError(f"FlashAttentionScoreGrad: query {qs}, key {ks}, value {vs} are not "
                         f"BNSD with one batch and head size and query heads a multiple of "
                         f"the key/value heads (head_num={attrs['head_num']})")
    _like(q, dy, "dy")
    _like(q, out, "attention_in")
    full = (qs[0], qs[1], qs[2], ks[2])
    if mask is not None:
        if broadcast_shapes(mask.shape, full) != full:
            raise GraphError(f"atten_mask '{mask.name}' {tuple(mask.shape)} does not "
                             f"broadcast to {full}")
    return [(q.shape, q.dtype), (k.shape, k.dtype), (v.shape, v.dtype)]


def _fag_kernel(args, attrs):
    mask = args[5] if len(args) > 5 else None
    return klg.flash_attention_grad(args[0], args[1], args[2], args[3], args[4], mask,
                                    float(attrs["scale_value"]), bool(attrs["causal"]))


def attention_grad_flops(ins, outs, attrs) -> int:
    """5 GEMMs per query-key pair (recomputed Q K^T, dO V^T, dV, dQ, dK: 2 D flops each) and
    ~8 vector flops (exp, dP - delta, * P, scale)."""
    d = int(ins[0].shape[3])
    return attention_pairs(ins[0].shape, ins[1].shape, bool(attrs["causal"])) * (10 * d + 8)


# ----------------------------------------------------------------------------- MoE routing
def _init_grad_infer(ins, attrs, consts):
    dex, pos = ins
    check_dtype(dex, FLOATS)
    k = attrs["top_k"]
    if dex.rank != 2 or pos.rank != 1 or not isinstance(k, int) or k < 1 or \
            int(pos.shape[0]) % k or int(pos.shape[0]) != int(dex.shape[0]):
        raise GraphError(f"MoeInitRoutingV2Grad needs grad_expanded_x (T*k, H), "
                         f"expanded_row_idx (T*k,) and top_k dividing T*k; got "
                         f"{tuple(dex.shape)}, {tuple(pos.shape)}, top_k={k!r}")
    return [((int(pos.shape[0]) // k, dex.shape[1]), dex.dtype)]


def _finalize_grad_infer(ins, attrs, consts):
    dy, ex, scales, pos = ins
    same_dtype([dy, ex])
    if dy.rank != 2 or ex.rank != 2 or scales.rank != 2 or pos.rank != 1 or \
            dy.shape[0] != scales.shape[0] or dy.shape[1] != ex.shape[1] or \
            int(scales.shape[0]) * int(scales.shape[1]) != int(pos.shape[0]):
        raise GraphError(f"MoeFinalizeRoutingV2Grad needs grad_y (T, H), expanded_x (T*k, H), "
                         f"scales (T, k), expanded_row_idx (T*k,); got {tuple(dy.shape)}, "
                         f"{tuple(ex.shape)}, {tuple(scales.shape)}, {tuple(pos.shape)}")
    return [(ex.shape, ex.dtype), (scales.shape, scales.dtype)]


# ----------------------------------------------------------------------------- registry
# vec_instrs per element of the largest operand:
#   RmsNormGrad 1 vcadd (row sum) + 8: vmul xhat, vmul dy*g, vmul g*xhat, vmul xhat*mean,
#     vsub, vmul rstd, vmul dy*xhat, vadd (dgamma accumulation)
#   RotaryMulGrad 7 (need_backward) / 4: vmul dy*cos, vmul dy*sin, rotate (vmuls -1 copy),
#     vadd; dr1 vmul, dr2 rotate + vmul (their broadcast-axis sums ride on the vadd chain)
#   SwiGluGrad per input element: sigmoid (vmuls, vexp, vadds, vdiv on the half a), vmul
#     silu, vsub 1-sig, vmul, vadds, vmul sig, vmul b, vmul dy; vmul silu*dy for db
#   MoeInitRoutingV2Grad 2 (gather + vadd), MoeFinalizeRoutingV2Grad 3 (vmuls scale, vmul
#     ex*dy, vcadd)
_OPS = [
    OpDef("RmsNormGrad", _rms_grad_infer,
          lambda args, attrs: list(klg.rms_norm_grad(*args)), Category.REDUCE,
          inputs=("dy", "x", "rstd", "gamma"), num_outputs=2,
          flops=lambda i, o, a: 9 * i[1].numel, vec_class=_R, vec_instrs=1,
          vec_extra=((_B, 8),), builder="rms_norm_grad",
          doc="CANN RmsNormGrad: (dx, dgamma float32) from dy, x, rstd, gamma"),
    OpDef("RotaryMulGrad", _rotary_grad_infer, _rotary_grad_kernel, Category.OPAQUE,
          inputs=("x", "r1", "r2", "dy"), attrs={"need_backward": 1}, num_outputs=3,
          flops=lambda i, o, a: (6 if int(a["need_backward"]) else 3) * i[0].numel,
          vec_class=_B, vec_instrs=lambda i, o, a: 7 if int(a["need_backward"]) else 4,
          builder="rotary_mul_grad",
          doc="CANN RotaryMulGrad: (dx, dr1, dr2) of RotaryMul half mode"),
    OpDef("SwiGluGrad", _swiglu_grad_infer,
          lambda args, attrs: [klg.swiglu_grad(args[0], args[1],
                                               int(attrs["dim"]) % np.ndim(args[1]))],
          Category.INJECTIVE, inputs=("y_grad", "x"), attrs={"dim": -1},
          flops=lambda i, o, a: 7 * i[1].numel, vec_class=_B, vec_instrs=5,
          vec_extra=((VecClass.EXP, 0.5), (VecClass.DIV, 0.5)), builder="swi_glu_grad",
          doc="CANN SwiGluGrad: the cotangent of SwiGlu's input"),
    OpDef("FlashAttentionScoreGrad", _fag_infer, _fag_kernel, Category.OPAQUE,
          unit=Unit.CUBE,
          inputs=("query", "key", "value", "dy", "attention_in", "atten_mask?"),
          attrs={"scale_value": 1.0, "head_num": 0, "input_layout": "BNSD", "causal": 0},
          num_outputs=3, flops=attention_grad_flops, vec_class=VecClass.EXP, vec_instrs=6,
          builder="flash_attention_score_grad", lowering="flash_attention_grad",
          doc="CANN FlashAttentionScoreGrad (dq, dk, dv); recomputes S = Q K^T per key block"),
    OpDef("MoeInitRoutingV2Grad", _init_grad_infer,
          lambda args, attrs: [klg.moe_init_routing_grad(args[0], args[1],
                                                         int(attrs["top_k"]))],
          Category.OPAQUE, inputs=("grad_expanded_x", "expanded_row_idx"),
          attrs={"top_k": 1}, flops=lambda i, o, a: i[0].numel, vec_class=VecClass.MOVE,
          vec_instrs=2, builder="moe_init_routing_v2_grad",
          doc="CANN MoeInitRoutingV2Grad: sum of each token's k expanded rows"),
    OpDef("MoeFinalizeRoutingV2Grad", _finalize_grad_infer,
          lambda args, attrs: klg.moe_finalize_routing_grad(*args), Category.OPAQUE,
          inputs=("grad_y", "expanded_x", "scales", "expanded_row_idx"), num_outputs=2,
          flops=lambda i, o, a: 4 * i[1].numel, vec_class=_B, vec_instrs=3,
          builder="moe_finalize_routing_v2_grad",
          doc="CANN MoeFinalizeRoutingV2Grad: (grad_expanded_x, grad_scales)"),
]
for _op in _OPS:
    register(_op)


# ----------------------------------------------------------------------------- rules
def _as(ctx, v, dtype: str):
    return v if v.dtype == dtype else ctx.g.cast(v, to=dtype)


def _rms_norm_grad(ctx, douts):
    """Through y; rstd is a statistic of x (its cotangent would need a second pass), so a
    gradient reaching it is refused. Uses the node's rstd output when it has one (training
    steps make RmsNorm return it), else recomputes it (RmsNorm with num_outputs=2)."""
    g, node = ctx.g, ctx.node
    if len(douts) > 1 and douts[1] is not None:
        raise GraphError(f"RmsNorm '{node.name}' gradient: only through y (rstd is a "
                         f"statistic)")
    if not (ctx.needs(0) or ctx.needs(1)):
        return [None, None]
    x, gamma = ctx.ins[0], ctx.ins[1]
    eps = float(ctx.attrs["epsilon"])
    rstd = ctx.outs[1] if len(ctx.outs) > 1 else \
        g.rms_norm(x, gamma, epsilon=eps, num_outputs=2)[1]
    dx, dgamma = g.rms_norm_grad(douts[0], x, rstd, gamma)
    return [dx if ctx.needs(0) else None, _as(ctx, dgamma, gamma.dtype) if ctx.needs(1)
            else None]


def _rotary_grad(ctx, douts):
    x, r1, r2 = ctx.ins[:3]
    need = int(ctx.needs(1) or ctx.needs(2))
    if not (need or ctx.needs(0)):
        return [None, None, None]
    dx, dr1, dr2 = ctx.g.rotary_mul_grad(x, r1, r2, douts[0], need_backward=need)
    return [dx if ctx.needs(0) else None, dr1 if ctx.needs(1) else None,
            dr2 if ctx.needs(2) else None]


def _swiglu_grad(ctx, douts):
    return [ctx.g.swi_glu_grad(douts[0], ctx.ins[0], dim=int(ctx.attrs["dim"]))]


def _grouped_matmul_grad(ctx, douts):
    """dx = GroupedMatmul(dy, weight^T) (groups split M, as the forward); dweight =
    GroupedMatmul(x^T, dy, group_type 2) (groups split the contraction)."""
    g, node = ctx.g, ctx.node
    if int(ctx.attrs.get("group_type", 0)) == SPLIT_K:
        raise GraphError(f"GroupedMatmul '{node.name}' gradient: group_type 2 (a weight "
                         f"gradient) is not differentiated again")
    x, w, groups = ctx.ins[:3]
    dy = douts[0]
    out: list = [None, None, None]
    if ctx.needs(0):
        out[0] = g.grouped_matmul(dy, g.transpose(w, perm=[0, 2, 1]), groups)
    if ctx.needs(1):
        out[1] = g.grouped_matmul(g.transpose(x, perm=[1, 0]), dy, groups,
                                  group_type=SPLIT_K)
    return out


def _gating_grad(ctx, douts):
    """y[t, j] = p[t, idx[t, j]], p = softmax(x): dp = dy scattered to the picked experts,
    dx = p * (dp - sum(p * dp)). expert_idx and row_idx are integers (no cotangent)."""
    g, x = ctx.g, ctx.ins[0]
    if douts[0] is None or not ctx.needs(0):
        return [None]
    p = g.softmax(x, axis=1)
    dp = g.scatter_elements(ctx.zeros(ctx.shape(x), x.dtype), ctx.outs[1], douts[0], axis=1)
    pdp = g.mul(p, dp)
    return [g.sub(pdp, g.mul(p, g.reduce_sum(pdp, ctx.ints([1]), keepdims=1)))]


def _gating_k_grad(ctx, douts):
    """MoeGatingTopK: y = c * s[idx] / (sum s[idx] + eps) (renorm) or c * s[idx], s the
    softmax or sigmoid scores (the forward's third output). d_picked = (c*dy - sum(dy*y)) /
    (sum s[idx] + eps) or c*dy, scattered to the E experts, then the softmax vjp s*(ds -
    sum(s*ds)) or the sigmoid's ds*s*(1 - s). The bias only moves the selection (no
    cotangent); the indices are integers. The scores' own cotangent (rarely read) is added."""
    g, a, x = ctx.g, ctx.attrs, ctx.ins[0]
    if not ctx.needs(0) or (douts[0] is None and douts[2] is None):
        return [None, None]
    s, idx = ctx.outs[2], ctx.outs[1]
    c = ctx.scalar(float(a["routed_scaling_factor"]), x.dtype)
    ds = None
    if douts[0] is not None:
        dy = douts[0]
        if int(a["renorm"]):
            picked = g.gather_elements(s, idx, axis=1)
            tot = g.add(g.reduce_sum(picked, ctx.ints([1]), keepdims=1),
                        ctx.scalar(float(a["eps"]), x.dtype))
            dot = g.reduce_sum(g.mul(dy, ctx.outs[0]), ctx.ints([1]), keepdims=1)
            dpick = g.div(g.sub(g.mul(dy, c), dot), tot)
        else:
            dpick = g.mul(dy, c)
        ds = g.scatter_elements(ctx.zeros(ctx.shape(x), x.dtype), idx, dpick, axis=1)
    if douts[2] is not None:
        ds = douts[2] if ds is None else g.add(ds, douts[2])
    if int(a["norm_type"]) == 0:
        sds = g.mul(s, ds)
        dx = g.sub(sds, g.mul(s, g.reduce_sum(sds, ctx.ints([1]), keepdims=1)))
    else:
        dx = g.mul(ds, g.mul(s, g.sub(ctx.scalar(1.0, x.dtype), s)))
    return [dx, None]


def _init_routing_grad(ctx, douts):
    if douts[0] is None or not ctx.needs(0):
        return [None, None]
    k = int(ctx.ins[1].shape[1])
    return [ctx.g.moe_init_routing_v2_grad(douts[0], ctx.outs[1], top_k=k), None]


def _finalize_routing_grad(ctx, douts):
    if not (ctx.needs(0) or ctx.needs(1)):
        return [None, None, None]
    dex, dsc = ctx.g.moe_finalize_routing_v2_grad(douts[0], ctx.ins[0], ctx.ins[1],
                                                  ctx.ins[2])
    return [dex if ctx.needs(0) else None, dsc if ctx.needs(1) else None, None]


def _cache_append_grad(ctx, douts):
    """The update's cotangent is the written window of the cache's; the cache rows it
    overwrote get none (the same append of zeros, in place on the device)."""
    g, a = ctx.g, ctx.attrs
    cache, upd = ctx.ins[0], ctx.ins[1]
    axis = int(a["axis"]) % cache.rank
    pos, n = int(a["position"]), int(upd.shape[axis])
    out: list = [None, None]
    if ctx.needs(0):
        out[0] = g.kv_cache_append(douts[0], ctx.zeros(ctx.shape(upd), upd.dtype),
                                   position=pos, axis=axis)
    if ctx.needs(1):
        out[1] = g.slice(douts[0], ctx.ints([pos]), ctx.ints([pos + n]), ctx.ints([axis]))
    return out


def _flash_attention_grad(ctx, douts):
    g, node, a = ctx.g, ctx.node, ctx.attrs
    if ctx.needs(3):
        raise GraphError(f"FlashAttentionScore '{node.name}' gradient: atten_mask "
                         f"'{node.inputs[3]}' is not differentiable (CANN's mask is boolean)")
    if not (ctx.needs(0) or ctx.needs(1) or ctx.needs(2)):
        return [None] * len(ctx.ins)
    mask = [ctx.ins[3]] if len(ctx.ins) > 3 and ctx.ins[3] is not None else []
    dq, dk, dv = g.flash_attention_score_grad(
        *ctx.ins[:3], douts[0], ctx.outs[0], *mask, scale_value=float(a["scale_value"]),
        head_num=int(a["head_num"]), causal=int(a["causal"]))
    return [dq if ctx.needs(0) else None, dk if ctx.needs(1) else None,
            dv if ctx.needs(2) else None, None]


def _incre_flash_attention_grad(ctx, douts):
    raise UnsupportedOpError(ctx.node.op_type, ctx.node.name, detail=(
        "not differentiable: IncreFlashAttention is the decode (inference) kernel and CANN "
        "has no gradient for it; a training graph uses FlashAttentionScore (the prefill "
        "form, whose gradient is FlashAttentionScoreGrad)"))


register_grads({"RmsNorm": _rms_norm_grad, "RotaryMul": _rotary_grad, "SwiGlu": _swiglu_grad,
                "GroupedMatmul": _grouped_matmul_grad, "MoeGatingTopKSoftmax": _gating_grad,
                "MoeGatingTopK": _gating_k_grad,
                "MoeInitRouting": _init_routing_grad,
                "MoeFinalizeRouting": _finalize_routing_grad,
                "KvCacheAppend": _cache_append_grad,
                "FlashAttentionScore": _flash_attention_grad,
                "IncreFlashAttention": _incre_flash_attention_grad})

__all__ = ["attention_grad_flops"]
