"""MatMulV3's basic tiling on the split chips: the base block, baseK and the L1 steps that
CANN's run-time tiling fixes, and the L1 reuse its basic kernel has.

Sources: ops-nn matmul/mat_mul_v3 (hicann/ops-nn at 25eefad):
op_host/op_tiling/matmul_v3_base_tiling.cpp `DoBasicTiling`, `ResetBase`,
`SetBaseBlockTiling`, `CalL1Tiling`, and op_kernel/mat_mul_base_kernel.h `MatmulBaseKernel`.

- Base block (`SetBaseBlockTiling`): baseM 128 (256 when L0C is 256 KB, with baseN 256),
  baseN 256, baseK 128 bytes of K (`BASIC_BLOCK_K_128_BYTE / aDtypeSize`). With exactly one
  operand transposed (an nn.Linear weight read as B^T is the common case) the block turns to
  256 x 128 when M is "large" (at least half the cube cores x 256) and N is not, or when both
  are large and 256 x 128 moves less (`sizeMLarge < sizeNLarge`; a tie keeps 128 x 256), or
  when neither is and M > N; with both transposed it is 256 x 128; with neither, 128 x 256.
- L1 (`CalL1Tiling`, a chip with the FixPipe's L0C -> GM path): each operand gets half of L1
  (plus the 256 bytes the tiling counts in), `depthA1 = L1 / 2 / (baseM x baseK x bytes)`,
  `depthB1` likewise with baseN; if both overflow L1, the operand of the smaller block edge
  halves its depth; stepKa = depthA1 / 2, stepKb = depthB1 / 2 (double-buffered), the larger
  made a multiple of the smaller. `UpdateL1TilingStepK` (which lowers a step until its bytes
  are a multiple of 512 or 256) leaves these steps as they are: baseK is 128 bytes.
- Reuse: the basic kernel sets one single shape per base block (`SetSingleShape(baseM, baseN,
  K)`, `Iterate`, `GetTensorC`), so every block loads its own A and B chunks over the whole K
  from GM: no operand strip stays in L1 across blocks (the model's reuse mode "neither"). The
  knowledge-bank tiling (`GetTilingFromRepo`) and the 24-core step tweaks
  (`OptimizeBasicKernelStepK`) that may override these are not modelled.

Matrix-vector products (`matvec_block`). aclnn lays a MatMul's [K, 1] vector out as a
transposed [1, K] row (matmul_util.cpp `IfNEqual1Mat2ToNK`), so MatMulV3 tiles A [M, K] x
B^T [1, K]: N = 1 is below 256, so `DoBasicTiling` takes `DoSmallShapeTiling`, whose
`FormulaicBaseBlockTiling` for a transposed B (with K 256-byte aligned) is
`CalcBase<MN_BY_BASE_K>` over `CALC_MN_BASIC` (L0C of 128 KB): for each (baseM, baseN,
baseK bytes) candidate `CalBaseMBaseN` spreads the M blocks over the cube cores (baseM =
M / cores rounded up to 16, at most the candidate's; baseN = N rounded up to 16), and the
candidate with the least `(baseM + baseN) x rounds` load wins, the first on a tie. The L1
steps are `CalL1Tiling`'s for that block. So a [4096, 4096] fp32 GEMV runs 64 blocks of 64
rows (baseK 128) on the 24 cores, in three rounds for 16 of them. Where another tiling takes
the shape first (`DoSelectTiling`: K from `SPLIT_K_THRES`, the fp32 small-M split-K of
`ShouldUseDeterministicMultiCoreSplitKwithSmallMN`, the fp16 / bf16 M <= 128 shapes of
`DoIncreTiling`, a K not 256-byte aligned) or the operands are NZ (aclnn then runs MatMulV2,
not MatMulV3) the search keeps the shape.
"""

from __future__ import annotations

from .gemm_spec import GemmSpec
from .matmul_format import takes_nd
from .tiling import cdiv

#: MatMulV3's basic block (SetBaseBlockTiling): baseN, and baseM per L0C size (bytes)
BASIC_BLOCK_N = 256
BASIC_BLOCK_M = {131072: 128, 262144: 256}
#: the other edge of the basic block when it turns (BASIC_BLOCK_SIZE_128 / _256)
BASIC_BLOCK_SHORT, BASIC_BLOCK_LONG = 128, 256
#: baseK of the basic tiling, in bytes of K (BASIC_BLOCK_K_128_BYTE)
BASIC_BLOCK_K_BYTES = 128
#: bytes CalL1Tiling adds to L1 before halving it ("256B reserved for rpc")
L1_TILING_EXTRA_BYTES = 256
#: CALC_MN_BASIC (L0C of 128 KB): the (baseM, baseN, baseK bytes) candidates of CalcBase
CALC_MN_BASIC = ((64, 64, 512), (128, 128, 256), (128, 256, 128))
#: the L0C size CALC_MN_BASIC is for (a 256 KB L0C takes CALC_MN_BASIC_L0C_256)
CALC_MN_L0C_BYTES = 131072
#: SPLIT_K_THRES: K from which MatMulV3's split-K tilings take a shape
SPLIT_K_THRES = 27392
#: ShouldUseDeterministicMultiCoreSplitKwithSmallMN: fp32 with M <= 64 and K >= 6144 splits K
FP32_SPLIT_K_SMALL_M, FP32_SPLIT_K_MIN_K = 64, 6144
#: DoIncreTiling: fp16 / bf16 shapes with M at most this take the TBE (V2) tiling
INCRE_MAX_M = 128
#: Is256BAlign: A's K must fill whole 256-byte blocks for CalcBase's path
K_ALIGN_BYTES = 256
#: the M / N granularity of CalBaseMBaseN (BASIC_ALIGN_16)
MN_ALIGN = 16


def transposes(spec: GemmSpec) -> tuple[bool, bool]:
    """(transA, transB) from the operands' stored rows (`GemmSpec.rows_a` / `rows_b`: A's
    rows run along K unless transposed, B's along N unless transposed); False where unknown."""
    ta = bool(spec.rows_a) and not spec.rows_a[1]
    tb = bool(spec.rows_b) and spec.rows_b[1]
    return ta, tb


def turned_block(spec: GemmSpec, cores: int) -> bool:
    """Whether SetBaseBlockTiling turns the 128 x 256 block to 256 x 128 (module note)."""
    ta, tb = transposes(spec)
    if ta == tb:
        return ta
    large = (cores >> 1) * BASIC_BLOCK_LONG
    m_large, n_large = spec.m >= large, spec.n >= large
    if m_large and n_large:
        size_m = (cdiv(spec.m, BASIC_BLOCK_LONG) * spec.n
                  + cdiv(spec.n, BASIC_BLOCK_SHORT) * spec.m)
        size_n = (cdiv(spec.m, BASIC_BLOCK_SHORT) * spec.n
                  + cdiv(spec.n, BASIC_BLOCK_LONG) * spec.m)
        return size_m < size_n
    if m_large:
        return True
    return not n_large and spec.m > spec.n


def basic_block(chip, spec: GemmSpec) -> tuple[int, int] | None:
    """(baseM, baseN) of MatMulV3's basic tiling when it applies to `spec` on `chip`: a split
    chip (its FixPipe writes ND), a 2-D MatMul (not conv, no batch, no kernel-fixed block
    dim), M and N at least the block, and at least one block per cube core (fewer go to its
    small-shape tiling, not modelled here: the search keeps them); None otherwise."""
    if not takes_nd(chip) or spec.conv_rows is not None or spec.batch != 1 or (
            spec.blocks and spec.single_core is None):
        return None
    m_t = BASIC_BLOCK_M.get(chip.l0c_bytes)
    if m_t is None:
        return None
    n_t = BASIC_BLOCK_N
    if m_t == BASIC_BLOCK_SHORT and turned_block(spec, chip.ai_cores):
        m_t, n_t = BASIC_BLOCK_LONG, BASIC_BLOCK_SHORT
    if spec.m < m_t or spec.n < n_t:
        return None
    if cdiv(spec.m, m_t) * cdiv(spec.n, n_t) < chip.ai_cores:
        return None
    return m_t, n_t


def basic_base_k(spec: GemmSpec) -> int:
    """baseK of the basic tiling, in elements of K (128 bytes of the operand dtype)."""
    return max(1, BASIC_BLOCK_K_BYTES // max(spec.in_bytes, 1))


def basic_l1_steps(chip, spec: GemmSpec, m_t: int, n_t: int, k_t: int = 0
                   ) -> tuple[int, int]:
    """(stepKa, stepKb) of CalL1Tiling for a base block m_t x n_t x k_t (default
    `basic_base_k`; module note); the bias table's reserve is not counted."""
    k_t, item = k_t or basic_base_k(spec), max(spec.in_bytes, 1)
    total = chip.l1_bytes + L1_TILING_EXTRA_BYTES
    depth_a = total // 2 // m_t // k_t // item
    depth_b = total // 2 // n_t // k_t // item
    if (depth_a * m_t + depth_b * n_t) * k_t * item > total:
        if m_t <= n_t:
            depth_a //= 2
        else:
            depth_b //= 2
    step_a, step_b = max(depth_a // 2, 1), max(depth_b // 2, 1)
    if step_a >= step_b:
        step_a = step_a // step_b * step_b
    else:
        step_b = step_b // step_a * step_a
    return step_a, step_b


def _matvec_tiled(chip, spec: GemmSpec) -> bool:
    """Whether MatMulV3's small-shape CalcBase tiling takes the matrix-vector product `spec`
    (module note, "Matrix-vector products")."""
    if not takes_nd(chip) or spec.conv_rows is not None or spec.batch != 1 or spec.n != 1:
        return False
    if spec.blocks or spec.single_core is not None or spec.base or not spec.nd2nz_a:
        return False
    fp32 = spec.in_bytes == 4
    return (chip.l0c_bytes == CALC_MN_L0C_BYTES and spec.k < SPLIT_K_THRES
            and spec.k * spec.in_bytes % K_ALIGN_BYTES == 0
            and not (fp32 and spec.m <= FP32_SPLIT_K_SMALL_M and spec.k >= FP32_SPLIT_K_MIN_K)
            and (fp32 or spec.m > INCRE_MAX_M))


def _calc_base(spec: GemmSpec, cores: int) -> tuple[int, int, int]:
    """(baseM, baseN, baseK bytes) of CalcBase<MN_BY_BASE_K> over CALC_MN_BASIC for an M
    that has at least as many blocks as N (a matrix-vector product)."""
    best: tuple[int, int, int, int] | None = None
    for max_m, max_n, k_bytes in CALC_MN_BASIC:
        n_blocks = cdiv(spec.n, max_n)
        per_m = max(cores // n_blocks, 1)
        base_m = min(cdiv(max(spec.m // per_m, 1), MN_ALIGN) * MN_ALIGN, max_m)
        base_m = cdiv(min(spec.m, base_m), MN_ALIGN) * MN_ALIGN
        base_n = cdiv(min(spec.n, max_n), MN_ALIGN) * MN_ALIGN
        blocks = cdiv(spec.m, base_m) * cdiv(spec.n, base_n)
        load = (base_m + base_n) * (blocks // cores + (1 if blocks % cores else 0))
        if best is None or load < best[0]:
            best = (load, base_m, base_n, k_bytes)
    assert best is not None
    return best[1], best[2], best[3]


def matvec_block(chip, spec: GemmSpec) -> tuple[int, int, int, int] | None:
    """MatMulV3's own base block for a matrix-vector product, as `GemmSpec.base` (baseM,
    baseN, baseK, K per A chunk in L1: stepKa x baseK), when its small-shape CalcBase tiling
    takes the shape (module note); None otherwise."""
    if not _matvec_tiled(chip, spec):
        return None
    base_m, base_n, k_bytes = _calc_base(spec, chip.ai_cores)
    k_t = max(1, k_bytes // max(spec.in_bytes, 1))
    step_a, _ = basic_l1_steps(chip, spec, base_m, base_n, k_t)
    return base_m, base_n, k_t, step_a * k_t


__all__ = ["BASIC_BLOCK_K_BYTES", "BASIC_BLOCK_LONG", "BASIC_BLOCK_M", "BASIC_BLOCK_N",
           "BASIC_BLOCK_SHORT", "CALC_MN_BASIC", "L1_TILING_EXTRA_BYTES", "SPLIT_K_THRES",
           "basic_base_k", "basic_block", "basic_l1_steps", "matvec_block", "transposes",
           "turned_block"]
