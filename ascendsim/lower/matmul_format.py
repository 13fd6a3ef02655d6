"""Which formats a 2-D MatMul runs in on a split chip (910B): ND in flight, or NZ via TransData.

Note on the model
-----------------
On split chips the MatMul kernels read ND operands and convert them to FRACTAL_NZ on the GM->L1
move (`takes_nd`), but not for every shape. CANN's aclnn MatMul path (ops-nn
`matmul/common/op_host/op_api/matmul_util.cpp`, `SetMmSupportFormat` -> `IsFormatSupportNd` ->
`IsNdToNzOnTheFly`, Atlas A2 = DAV_2201) keeps ND only when the on-the-fly conversion is
efficient; otherwise it converts both operands to NZ with TransData tasks, runs the NZ kernel
and converts the output back (`ExecMmOpWithBias`: TransData -> MatMul -> TransData). For
float16 and bfloat16 operands (float32 always stays ND) with A = M x K, B = K x N, no
transposes, the rule is, in order:

1. both operands small (M*K and K*N each at most `ND_SMALL_LIMIT` elements): ND;
2. K == 1: ND;
3. K >= `SPLIT_K_MIN_K` and (M // 128) * (N // 128) < cube cores / 2 (few output blocks, a
   split-K kernel; the source's `std::ceil` wraps an integer division, so it floors): ND;
4. otherwise ND only when each operand's inner (contiguous) axis, K for A and N for B, is in
   [`INNER_MIN`, `INNER_MAX`] or is below `INNER_MIN` and a multiple of 16.

When the rule says NZ, the output is NZ too (and converted back to ND after the kernel) unless
N is a multiple of `NZ_ND_OUT_ALIGN` elements (`CheckMMV3NzNzNdSupport`: MatMulV3 NZ x NZ -> ND;
256 for 2-byte dtypes). A matrix-vector product (B = K x 1: aclnnAddmv and aclnnMv unsqueeze
the vector) has N = 1 as B's inner axis, so a float16/bfloat16 GEMV larger than the small
limit and below the split-K rule runs on NZ operands, paying a TransData of the whole matrix
and the vector padded to 16 columns.

Inside the ND path the MatMulV3 kernel itself decides, per operand, whether its ND rows go
through the on-the-fly ND->NZ DMA or are converted first by the vector cores, at the head of
the kernel, into a GM workspace in NZ that the cube then reads (a MIX_AIC task;
`MixNd2NzType::V_HEAD_ND2NZ`, "all cores do nd2nz at the head"). ops-nn
matmul_v3_base_tiling.cpp `GetMoreArgs` sets nd2nzA / nd2nzB for an ND operand when its inner
axis (K for A, N for B) is not 256-byte aligned (`Is256BAlign`) or exceeds
ND2NZ_ON_THE_FLY_LIMIT = 65535 elements, unless its inner bytes are one of the sizes the DMA
converts on the way (`IsOnTheWay`, SUPPORT_ND2NZ_GM2L0: 32, 64, 96, 128, 160, 192, 224, 256,
384 B) or it is float32 (without HF32) with an inner axis below the limit. The limit is the
DMA's own: its source row stride (`copy_gm_to_cbuf_multi_nd2nz` srcDValue, CCE intrinsic API)
is a 16-bit count, [1, 65535] elements. `nd2nz_head` says which operands (A's rows are K long,
B's N long; a matrix-vector product's B, which CANN lays out as a 1 x K row, would convert only
K elements, which this model leaves out). Left out as well: the `NeedNd2NzVnchw` variant for
short unaligned inner axes under an outer axis above 8192, and the `mataConflictFlag` cases
that convert B when N is a multiple of 16384.

The rule is the aclnn (op-by-op, torch_npu) path's; this model applies it to every 2-D MatMul
node on a split chip. Batched MatMuls (BatchMatMul's own util) keep ND.

Constant weights. A graph's constant MatMul weight is a model parameter, and the A2 / A3
stacks keep parameters ND: MindIE's ATB models cast Linear weights to FRACTAL_NZ only on the
chips that need it (atb_llm `NPUSocInfo.need_nz`: soc versions 100-104, the first-generation
910, and 200-205, the 310P; `LinearUtils.weight_format_cast` returns any other chip's weight
as it is), torchair's LLM examples load Hugging Face nn.Linear parameters with no format cast
(Ascend/torchair npu_tuned_model/llm/llama at 433f5a2), and torch_npu keeps a parameter ND
unless the user casts it. The kernel therefore converts the weight like any ND operand (on
the GM->L1 move, or at its head when its rows need it), where this model had read a constant
weight as if converted to NZ before the run. Its layout is the one ATB's loader picks
(`LinearUtils.check_transpose`, on by default: ATB_LLM_ENABLE_AUTO_TRANSPOSE = "1"):
nn.Linear's [N, K] (rows of K, the kernel's transpose flag) unless K is not a multiple of 256
elements and N is, then [K, N] (`param_weight_inner`); the rule above reads B's inner axis
from that layout. The ATB sources were read through the code index (atb_llm utils/initial.py,
utils/layers/linear/linear_utils.py, utils/env.py), the repository copy not resolved.
Convolutions keep their pre-converted weights (GE's Const folding; torch's conv weights are
not the A2 MatMul path).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.tensor import itemsize

#: IsNdToNzOnTheFly kInnerAxisMaxLimit: the largest inner axis (and the "small" size) for ND
INNER_MAX = 65535
#: IsNdToNzOnTheFly kInnerAxisMinLimit: below this an inner axis must be 16-aligned for ND
INNER_MIN = 128
#: elements of each operand under which both stay ND (kInnerAxisMaxLimit reused as a size)
ND_SMALL_LIMIT = 65535
#: IsSplitKThenForbiddenNd2Nz smallMNsplitKThres: K at or above this may keep ND (split K)
SPLIT_K_MIN_K = 15000
#: IsSplitKThenForbiddenNd2Nz align128: the M/N block edge that counts output blocks
SPLIT_K_BLOCK = 128
#: CheckMMV3NzNzNdSupport ALIGN_UNIT_MAP for 2-byte dtypes: N multiple giving an ND output
NZ_ND_OUT_ALIGN = 256
#: element alignment of a short inner axis that still allows ND (`& 0xF`)
SHORT_INNER_ALIGN = 16
#: the ND->NZ DMA's largest source row stride, in elements (srcDValue, uint16)
ND2NZ_DMA_MAX_STRIDE = 65535
#: MatMulV3 `Is256BAlign`: an inner axis of a multiple of 256 bytes converts on the fly
ND2NZ_ALIGN_BYTES = 256
#: MatMulV3 SUPPORT_ND2NZ_GM2L0: inner-axis sizes in bytes the DMA converts on the way
ND2NZ_ON_THE_WAY_BYTES = (32, 64, 96, 128, 160, 192, 224, 256, 384)
#: ATB's check_transpose: a weight keeps [N, K] unless K is not a multiple of this and N is
PARAM_TRANSPOSE_ALIGN = 256
#: dtypes the rule applies to (IsFormatSupportNd: others always take ND on DAV_2201)
RULE_DTYPES = ("float16", "bfloat16")
#: Huawei's fit of the on-the-fly ND -> NZ DMA's per-core rate for 2-byte dtypes on the A2 / A3
#: (cannmirror/catlass examples/102_dynamic_optimized_matmul/include/select_kernel_b16.h
#: `GetBandwidth`): a polynomial in the tile's row width d (GB/s, coefficients of d^0..d^6),
#: raised by the source row stride's alignment (elements: the first multiple that divides it),
#: capped; a contiguous short row (d == stride <= 128, a multiple of 16) moves at a fixed rate
ND2NZ_DMA_WIDTH_POLY = (0.1, 0.312849910814454512664184, -0.002146456956750821074703,
                        0.000007301215580838747961, -0.000000006738536427145036,
                        -0.000000000012456944162142, 0.000000000000020146121020)
ND2NZ_DMA_STRIDE_GAIN = ((256, 100 / 30), (128, 80 / 30), (64, 50 / 30), (16, 40 / 30))
ND2NZ_DMA_CAP_GBPS = 80.0
ND2NZ_DMA_SHORT_ROW = (128, 16, 60.0)
#: the same fit for 4-byte dtypes (select_kernel_b32.h `GetBandwidthB32`, cannmirror/catlass
#: at 4c667a5): its polynomial in d, its stride gains (100 / 40, 80 / 40, 60 / 40, 50 / 40 for
#: a stride a multiple of 128, 64, 32, 16 elements), and for a contiguous row (d == stride)
#: 95 GB/s when 16 <= d <= 64 and a multiple of 8 or d a multiple of 128, else the polynomial
#: plus 40 (d a multiple of 64) or 17 (of 32); the cap is the 2-byte fit's
ND2NZ_DMA_B32_WIDTH_POLY = (4.295633544322609, 0.3035859339962211, -0.0015784588599109292,
                            0.000006657887925107158, -0.00000001611519890867614,
                            0.000000000019396510970002, -0.000000000000009004592101)
ND2NZ_DMA_B32_STRIDE_GAIN = ((128, 100 / 40), (64, 80 / 40), (32, 60 / 40), (16, 50 / 40))
ND2NZ_DMA_B32_ROW_RATE = 95.0
ND2NZ_DMA_B32_ROW_GAIN = ((64, 40.0), (32, 17.0))


@dataclass(frozen=True)
class MatmulFormats:
    """The formats a MatMul's operands and output take in GM, and why."""

    nd_in: bool          # operands read as ND (converted on the GM->L1 move)
    nd_out: bool         # output written as ND
    reason: str


def _inner_ok(n: int) -> bool:
    return INNER_MIN <= n <= INNER_MAX or (n < INNER_MIN and n % SHORT_INNER_ALIGN == 0)


def matmul_formats(m: int, k: int, n: int, dtype: str, cube_cores: int,
                   b_inner: int | None = None) -> MatmulFormats:
    """The aclnn format choice for a 2-D MatMul A (m x k) @ B (k x n) on a split chip (see the
    module note); `cube_cores` is the chip's AI Core (AIC) count; `b_inner`: the length of B's
    rows in GM (default n; `param_weight_inner` for a constant weight)."""
    b_axis, b_inner = ("N", n) if b_inner is None else ("B's rows", b_inner)
    if dtype not in RULE_DTYPES:
        return MatmulFormats(True, True, f"{dtype} operands stay ND (the ND/NZ rule covers "
                                         f"float16 and bfloat16 only)")
    if m * k <= ND_SMALL_LIMIT and k * n <= ND_SMALL_LIMIT:
        return MatmulFormats(True, True, f"both operands at most {ND_SMALL_LIMIT} elements: ND")
    if k == 1:
        return MatmulFormats(True, True, "K = 1: ND")
    blocks = (m // SPLIT_K_BLOCK) * (n // SPLIT_K_BLOCK)
    if k >= SPLIT_K_MIN_K and blocks < cube_cores // 2:
        return MatmulFormats(True, True, f"K {k} >= {SPLIT_K_MIN_K} with {blocks} "
                                         f"{SPLIT_K_BLOCK}x{SPLIT_K_BLOCK} output blocks < "
                                         f"{cube_cores // 2} (split K): ND")
    if _inner_ok(k) and _inner_ok(b_inner):
        return MatmulFormats(True, True, f"inner axes K {k} and {b_axis} {b_inner} convert on "
                                         f"the fly: ND")
    bad = " and ".join(f"{name} {v}" for name, v in (("K", k), (b_axis, b_inner))
                       if not _inner_ok(v))
    out_nd = n % NZ_ND_OUT_ALIGN == 0
    return MatmulFormats(False, out_nd, (
        f"inner axis {bad} outside [{INNER_MIN}, {INNER_MAX}] and not a short multiple of "
        f"{SHORT_INNER_ALIGN}: operands converted to FRACTAL_NZ by TransData (CANN "
        f"matmul_util IsNdToNzOnTheFly), output "
        + ("ND (N multiple of 256: MatMulV3 NZ x NZ -> ND)" if out_nd
           else "NZ, converted back to ND")))


def nd2nz_head_reason(inner: int, dtype: str) -> str | None:
    """Why MatMulV3 converts an ND operand whose rows hold `inner` elements of `dtype` at the
    kernel's head (see the module note), or None when the ND->NZ DMA converts it on the way."""
    size = inner * itemsize(dtype)
    if inner > ND2NZ_DMA_MAX_STRIDE:
        return f"rows of {inner} elements exceed the ND->NZ DMA stride ({ND2NZ_DMA_MAX_STRIDE})"
    if dtype == "float32" or size % ND2NZ_ALIGN_BYTES == 0 or size in ND2NZ_ON_THE_WAY_BYTES:
        return None
    return (f"rows of {size} B are not {ND2NZ_ALIGN_BYTES}-byte aligned nor a size the DMA "
            f"converts on the way")


def nd2nz_dma_gbps(width: int, stride: int) -> float:
    """Per-core GB/s of the ND -> NZ DMA moving rows `width` elements wide out of GM rows
    `stride` elements long, 2-byte dtypes (`ND2NZ_DMA_WIDTH_POLY`, catlass `GetBandwidth`
    without its row-count term, which does not depend on the stride)."""
    short, align, short_rate = ND2NZ_DMA_SHORT_ROW
    if width == stride and width <= short and width % align == 0:
        rate = short_rate
    else:
        rate = sum(c * width ** i for i, c in enumerate(ND2NZ_DMA_WIDTH_POLY))
    gain = next((g for step, g in ND2NZ_DMA_STRIDE_GAIN if stride % step == 0), 1.0)
    return min(rate * gain, ND2NZ_DMA_CAP_GBPS)


def nd2nz_dma_gbps_b32(width: int, stride: int) -> float:
    """Per-core GB/s of the ND -> NZ DMA for 4-byte dtypes (`ND2NZ_DMA_B32_WIDTH_POLY`,
    catlass `GetBandwidthB32` without its row-count term, as `nd2nz_dma_gbps`)."""
    rate = sum(c * width ** i for i, c in enumerate(ND2NZ_DMA_B32_WIDTH_POLY))
    if width == stride:
        if (16 <= width <= 64 and width % 8 == 0) or width % 128 == 0:
            rate = ND2NZ_DMA_B32_ROW_RATE
        else:
            rate += next((g for step, g in ND2NZ_DMA_B32_ROW_GAIN if width % step == 0), 0.0)
    gain = next((g for step, g in ND2NZ_DMA_B32_STRIDE_GAIN if stride % step == 0), 1.0)
    return min(rate * gain, ND2NZ_DMA_CAP_GBPS)


#: per item size: the catlass rate function and the stride it counts as aligned (elements)
_ND2NZ_DMA_FITS = {2: (nd2nz_dma_gbps, ND2NZ_DMA_STRIDE_GAIN[0][0]),
                   4: (nd2nz_dma_gbps_b32, ND2NZ_DMA_B32_STRIDE_GAIN[0][0])}


def nd2nz_stride_factor(width: int, stride: int, dtype: str) -> float:
    """The share of the aligned rate (`path_bytes_per_cycle.gm_l1_nd2nz`, fitted on rows of
    8192 elements) the ND -> NZ DMA keeps when its source rows are `stride` elements long,
    moving `width` elements of each: the catlass fit for the dtype's size (2 or 4 bytes) at
    that stride over its rate at the next stride its fit counts aligned (a multiple of 256
    or 128 elements), at most 1; 1 for other sizes (no fit). A weight of [K, 2047] bf16 read
    256 columns at a time keeps 0.31 of the aligned rate."""
    fit = _ND2NZ_DMA_FITS.get(itemsize(dtype))
    if fit is None or width < 1 or stride < 1:
        return 1.0
    rate, aligned = fit
    width = min(width, stride)
    ref = rate(width, -(-max(width + 1, stride) // aligned) * aligned)
    return min(1.0, rate(width, stride) / ref)


def param_weight_inner(k: int, n: int) -> int:
    """The length of a constant weight's rows as the A2 stacks keep it (module note, "Constant
    weights"): K (a Linear layer's [N, K]) unless K is not a multiple of
    `PARAM_TRANSPOSE_ALIGN` elements and N is, then N ([K, N])."""
    if k % PARAM_TRANSPOSE_ALIGN and not n % PARAM_TRANSPOSE_ALIGN:
        return n
    return k


def nd2nz_head(k: int, n: int, dtype: str = "float16") -> tuple[bool, bool]:
    """Whether an ND A (rows of k elements) and an ND B (rows of n elements; a vector B, n = 1,
    is left out) are converted at the kernel's head by the vector cores (see the module note)."""
    return (nd2nz_head_reason(k, dtype) is not None,
            n > 1 and nd2nz_head_reason(n, dtype) is not None)


def takes_nd(chip) -> bool:
    """Whether the chip's MatMul/BatchMatMul kernels take and give ND (cube_tiling module note,
    "Formats"): split chips, whose GM->L1 move converts ND->NZ and whose FixPipe writes ND."""
    return not chip.coupled and chip.path_bytes_per_cycle.l0c_gm is not None


__all__ = ["MatmulFormats", "matmul_formats", "nd2nz_dma_gbps", "nd2nz_dma_gbps_b32",
           "nd2nz_head", "nd2nz_head_reason",
           "nd2nz_stride_factor", "ND2NZ_DMA_WIDTH_POLY", "ND2NZ_DMA_STRIDE_GAIN",
           "ND2NZ_DMA_CAP_GBPS", "ND2NZ_DMA_SHORT_ROW",
           "param_weight_inner", "PARAM_TRANSPOSE_ALIGN", "takes_nd",
           "ND2NZ_DMA_MAX_STRIDE", "ND2NZ_ALIGN_BYTES", "ND2NZ_ON_THE_WAY_BYTES", "INNER_MAX",
           "INNER_MIN", "ND_SMALL_LIMIT", "SPLIT_K_MIN_K"]
