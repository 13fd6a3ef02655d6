"""Quantised-inference ops (W8A8 as the 910B runs it, CANN names).

- DynamicQuant (torch_npu.npu_dynamic_quant, CANN DynamicQuant): per-token symmetric int8 of
  activations x (..., K): scale = max|x| / 127 per row (float32), y = round(x / scale) (int8).
- QuantBatchMatmul (CANN QuantBatchMatmulV3, torch_npu.npu_quant_matmul): x1 int8 (..., M, K)
  @ x2 int8 (K, N) accumulated in int32 on the cube's int8 mode, dequantised in the epilogue
  by `scale` (N,) (per output channel of the weight, float32) and the optional
  `pertoken_scale` (..., M) (DynamicQuant's), plus an optional bias (N,); output
  `output_dtype` (float16 / bfloat16).

The lowering costs QuantBatchMatmul as a cube op (registry unit CUBE): its int8 operands run
in the chip's int8 cube mode at one byte per element; the per-channel scale is read like a
GEMM bias (the epilogue's dequant).

- WeightQuantBatchMatmulV2 (CANN aclnnWeightQuantBatchMatmulV2, torch_npu
  npu_weight_quant_batchmatmul): weight-only quantisation (W8A16, W4A16). x float (..., M, K)
  @ ANTIQUANT(weight) + bias, ANTIQUANT(w) = (w + antiquant_offset) * antiquant_scale; the
  weight int8 (K, N) or int4 in CANN's INT4Pack layout (int32 (K, N / 8), eight int4 per
  word, aclnnConvertWeightToINT4Pack); the scale/offset per tensor (1,), per channel (N,) or
  per group ((ceil(K / group_size), N), `antiquant_group_size` a multiple of 32 in
  [32, K - 1]). Output in x's dtype. Lowered by lower/weight_quant.py (where the 910B runs
  the antiquant: its vector cores, into a workspace the cube reads).
- AscendQuantV2 / AscendAntiQuantV2 (torch_npu npu_quantize / npu_anti_quant): int8 of
  round(x * scale + offset), and (x + offset) * scale back to float, scale/offset broadcast
  on the last axis: the int8 KV cache's quantisation of new keys/values and its dequant.

Sources: hiascend.com torch_npu API pages for npu_quant_matmul and npu_dynamic_quant (CANN 8.0
"torch_npu.npu_quant_matmul", "torch_npu.npu_dynamic_quant"); CANN ops-nn
matmul/weight_quant_batch_matmul_v2/docs/aclnnWeightQuantBatchMatmulV2.md (dtypes, shapes,
group sizes, products); torch_npu npu_quantize / npu_anti_quant API pages.
"""

from __future__ import annotations

import numpy as np

from ...errors import GraphError
from ...kernels import quant as kq
from ..registry import Category, OpDef, Unit, VecClass, broadcast_shapes, register
from ..tensor import as_storage
from .elementwise import FLOATS, check_dtype

OUT_DTYPES = ("float16", "bfloat16", "float32")


def _dq_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    return [(x.shape, "int8"), (tuple(x.shape[:-1]), "float32")]


def _qbmm_infer(ins, attrs, consts):
    x1, x2, scale = ins[0], ins[1], ins[2]
    pertoken = ins[3] if len(ins) > 3 else None
    bias = ins[4] if len(ins) > 4 else None
    if x1.dtype != "int8" or x2.dtype != "int8":
        raise GraphError(f"QuantBatchMatmul takes int8 x1 and x2; got {x1.dtype} "
                         f"'{x1.name}' and {x2.dtype} '{x2.name}'")
    if x1.rank < 2 or x2.rank != 2 or x1.shape[-1] != x2.shape[0]:
        raise GraphError(f"QuantBatchMatmul needs x1 (..., M, K) and x2 (K, N); got "
                         f"{tuple(x1.shape)}, {tuple(x2.shape)}")
    n = x2.shape[1]
    if tuple(scale.shape) not in ((n,), (1,)):
        raise GraphError(f"QuantBatchMatmul scale '{scale.name}' {tuple(scale.shape)} is not "
                         f"({n},) or (1,)")
    if pertoken is not None and tuple(pertoken.shape) != tuple(x1.shape[:-1]):
        raise GraphError(f"QuantBatchMatmul pertoken_scale '{pertoken.name}' "
                         f"{tuple(pertoken.shape)} is not {tuple(x1.shape[:-1])}")
    if bias is not None and tuple(bias.shape) != (n,):
        raise GraphError(f"QuantBatchMatmul bias '{bias.name}' {tuple(bias.shape)} is not "
                         f"({n},)")
    out = attrs["output_dtype"]
    if out not in OUT_DTYPES:
        raise GraphError(f"QuantBatchMatmul output_dtype {out!r}: one of "
                         f"{', '.join(OUT_DTYPES)}")
    return [(tuple(x1.shape[:-1]) + (n,), out)]


def _qbmm_kernel(args, attrs):
    pertoken = args[3] if len(args) > 3 else None
    bias = args[4] if len(args) > 4 else None
    # as_storage rounds to the output dtype (bfloat16 is stored in float32, rounded)
    return [as_storage(kq.quant_batch_matmul(args[0], args[1], args[2], pertoken, bias),
                       attrs["output_dtype"])]


register(OpDef("DynamicQuant", _dq_infer, lambda args, attrs: kq.dynamic_quant(args[0]),
               Category.REDUCE, inputs=("x",), num_outputs=2,
               flops=lambda i, o, a: 4 * i[0].numel, vec_class=VecClass.REDUCE, vec_instrs=5,
               doc="per-token symmetric int8 of x: (y int8, scale float32 per row)"))
register(OpDef("QuantBatchMatmul", _qbmm_infer, _qbmm_kernel, Category.CUBE, unit=Unit.CUBE,
               inputs=("x1", "x2", "scale", "pertoken_scale?", "bias?"),
               attrs={"output_dtype": "float16"},
               flops=lambda i, o, a: 2 * o[0].numel * int(i[0].shape[-1]),
               doc="CANN QuantBatchMatmulV3: int8 GEMM, int32 accumulation, dequant by "
                   "per-channel scale and per-token scale in the epilogue"))



def _int4_packed(w) -> bool:
    return w.dtype == "int32"


def _wqbmm_infer(ins, attrs, consts):
    x, w, scale = ins[0], ins[1], ins[2]
    offset = ins[3] if len(ins) > 3 else None
    bias = ins[4] if len(ins) > 4 else None
    check_dtype(x, FLOATS)
    if w.dtype not in ("int8", "int32") or w.rank != 2:
        raise GraphError(f"WeightQuantBatchMatmulV2 weight '{w.name}' must be int8 (K, N) or "
                         f"INT4Pack int32 (K, N / 8); got {w.dtype} {tuple(w.shape)}")
    k = int(w.shape[0])
    n = int(w.shape[1]) * (kq.INT4_PER_INT32 if _int4_packed(w) else 1)
    if x.rank < 2 or int(x.shape[-1]) != k:
        raise GraphError(f"WeightQuantBatchMatmulV2 needs x (..., M, {k}) for weight "
                         f"'{w.name}' (K = {k}); got x {tuple(x.shape)}")
    gs = int(attrs["antiquant_group_size"])
    groups = -(-k // gs) if gs else 1
    if gs and (gs % 32 or not 32 <= gs < k):
        raise GraphError(f"WeightQuantBatchMatmulV2 antiquant_group_size={gs}: a multiple of "
                         f"32 in [32, K - 1 = {k - 1}], or 0 (per channel / per tensor)")
    allowed = {(groups, n)} if gs else {(1,), (n,), (1, n)}
    for what, v in (("antiquant_scale", scale), ("antiquant_offset", offset)):
        if v is not None and tuple(v.shape) not in allowed:
            raise GraphError(f"WeightQuantBatchMatmulV2 {what} '{v.name}' {tuple(v.shape)}: "
                             f"one of {sorted(allowed)}")
    if bias is not None and tuple(bias.shape) not in ((n,), (1, n)):
        raise GraphError(f"WeightQuantBatchMatmulV2 bias '{bias.name}' {tuple(bias.shape)} "
                         f"is not ({n},)")
    return [(tuple(x.shape[:-1]) + (n,), x.dtype)]


def _wqbmm_kernel(args, attrs):
    offset = args[3] if len(args) > 3 else None
    bias = args[4] if len(args) > 4 else None
    # x's storage dtype (float16, or float32 holding bf16: the executor rounds bf16 outputs)
    y = kq.weight_quant_batch_matmul(args[0], args[1], args[2], offset, bias)
    return [y.astype(np.asarray(args[0]).dtype)]


def _check_params(op: str, ins) -> None:
    """scale / offset must broadcast onto x without growing it."""
    x = ins[0]
    for p in ins[1:]:
        if p is not None and broadcast_shapes(p.shape, x.shape) != tuple(x.shape):
            raise GraphError(f"{op}: '{p.name}' {tuple(p.shape)} does not broadcast to x "
                             f"'{x.name}' {tuple(x.shape)}")


def _quant_infer(ins, attrs, consts):
    check_dtype(ins[0], FLOATS)
    _check_params("AscendQuantV2", ins)
    return [(ins[0].shape, "int8")]


def _anti_quant_infer(ins, attrs, consts):
    if ins[0].dtype != "int8":
        raise GraphError(f"AscendAntiQuantV2 takes int8 x; got {ins[0].dtype} '{ins[0].name}'")
    _check_params("AscendAntiQuantV2", ins)
    out = attrs["dst_type"]
    if out not in OUT_DTYPES:
        raise GraphError(f"AscendAntiQuantV2 dst_type {out!r}: one of {', '.join(OUT_DTYPES)}")
    return [(ins[0].shape, out)]


register(OpDef("WeightQuantBatchMatmulV2", _wqbmm_infer, _wqbmm_kernel, Category.CUBE,
               unit=Unit.CUBE,
               inputs=("x", "weight", "antiquant_scale", "antiquant_offset?", "bias?"),
               attrs={"antiquant_group_size": 0},
               flops=lambda i, o, a: 2 * o[0].numel * int(i[0].shape[-1]),
               lowering="weight_quant_matmul",
               doc="CANN WeightQuantBatchMatmulV2: float x @ antiquant(int8 / int4 weight) "
                   "(W8A16, W4A16), per-channel or per-group scale and offset"))
register(OpDef("AscendQuantV2", _quant_infer,
               lambda args, attrs: [kq.ascend_quant(args[0], args[1],
                                                    args[2] if len(args) > 2 else None)],
               Category.BROADCAST, inputs=("x", "scale", "offset?"),
               flops=lambda i, o, a: 2 * i[0].numel, vec_class=VecClass.BINARY, vec_instrs=3,
               doc="int8 of round(x * scale + offset) (torch_npu.npu_quantize)"))
register(OpDef("AscendAntiQuantV2", _anti_quant_infer,
               lambda args, attrs: [as_storage(kq.ascend_anti_quant(
                   args[0], args[1], args[2] if len(args) > 2 else None), attrs["dst_type"])],
               Category.BROADCAST, inputs=("x", "scale", "offset?"),
               attrs={"dst_type": "float16"},
               flops=lambda i, o, a: 2 * i[0].numel, vec_class=VecClass.BINARY, vec_instrs=3,
               doc="(x + offset) * scale of int8 x to float (torch_npu.npu_anti_quant)"))

__all__ = ["OUT_DTYPES"]
