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

Sources: hiascend.com torch_npu API pages for npu_quant_matmul and npu_dynamic_quant (CANN 8.0
"torch_npu.npu_quant_matmul", "torch_npu.npu_dynamic_quant").
"""

from __future__ import annotations

from ...errors import GraphError
from ...kernels import quant as kq
from ..registry import Category, OpDef, Unit, VecClass, register
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

__all__ = ["OUT_DTYPES"]
