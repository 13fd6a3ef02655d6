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


def basic_l1_steps(chip, spec: GemmSpec, m_t: int, n_t: int) -> tuple[int, int]:
    """(stepKa, stepKb) of CalL1Tiling for a base block m_t x n_t x `basic_base_k` (module
    note); the bias table's reserve is not counted."""
    k_t, item = basic_base_k(spec), max(spec.in_bytes, 1)
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


__all__ = ["BASIC_BLOCK_K_BYTES", "BASIC_BLOCK_LONG", "BASIC_BLOCK_M", "BASIC_BLOCK_N",
           "BASIC_BLOCK_SHORT", "L1_TILING_EXTRA_BYTES", "basic_base_k", "basic_block",
           "basic_l1_steps", "transposes", "turned_block"]
