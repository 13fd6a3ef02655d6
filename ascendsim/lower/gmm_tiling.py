"""GroupedMatmul's own tiling on the split chips (fp16 / bf16 x and weight, groups split M):
the base block, the L1 steps and the core split its host tiling fixes.

Sources: ops-transformer gmm/grouped_matmul (read in cannmirror/ops-transformer at 01ca7c9):
op_host/op_tiling/grouped_matmul_tiling.cpp `CalMMTiling`, `CalcStepKaKb`, `GMMSetMMTiling`,
`CalUsedCoreNum`, `GMMSetTplTilingKey`, and op_kernel/grouped_matmul.h `GMMProcess::Process`,
`GMMCompute::MMCompute`; the constants in op_host/grouped_matmul_host_util.h (BEST_BASEN,
MAX_BASEM, L1_PARTA_SIZE; read in hicann/ops-transformer at e24fcbd).

- Base block (`CalMMTiling`): baseN 256 (BEST_BASEN); baseK fills half of L0B (L0B / 2 /
  (baseN x bytes), 64 for 2-byte dtypes), baseM the smaller of half of L0A over baseK and L0C
  over baseN fp32 accumulators (128), rounded down to 16, or M rounded up to 16 when the whole
  x has fewer rows.
- L1 (`CalcStepKaKb`): the operand of the longer block edge takes 256 KB (L1_PARTA_SIZE), the
  other the rest; stepKa = half of A's part / (baseM x baseK x bytes), stepKb likewise (8 and
  4 for 2-byte dtypes: A chunks of 512 of K, B chunks of 256), the larger made a multiple of
  the smaller; depth = 2 x step (double-buffered).
- Core split (`Process`, `MMCompute`): every group's output is cut into blocks of baseM x
  baseN (singleM = baseM, singleN = baseN; the last block of a group takes its tail), each one
  full-K `IterateAll` (SetSingleShape(curSingleM, curSingleN, K)); the blocks of all groups
  form one sequence dealt round robin over the cores (the next group starts on the core after
  the last block of the previous one). The x, weight and output stay ND: every chunk goes
  through the ND -> NZ DMA (the key is cube-only, GROUPED_MATMUL_CUBE_ONLY: no vector head).
  The model moves A and B chunks of one K depth (the smaller step), as for MatMulV3's basic
  tiling.
- Group walk (`Process`, `SetMKN`, `GetSplitValueFromGroupList`, `MMCompute`, and
  grouped_matmul_utils.h `GetTensorAddr`): every core walks the whole group list on its
  scalar unit, reading each group's end from GM (`groupListGm.GetValue`, int64), its K and N
  from the tiling's kList / nList arrays, which stay in GM (`GET_TILING_DATA_MEMBER_ADDR`),
  and, for its blocks, x's, the weight's and y's addresses from their tensor-list
  descriptors in GM (the descriptor's offset word, then the pointer it leads to). Each value
  is used at once (a loop bound, an address), so the first read of every 64-byte line is a
  DataCache miss the next instruction waits for: the group list's lines, one line each of
  kList and nList (the registry's GroupedMatmul has one x, weight and y tensor, so
  `SetMKN` reads entry 0) and one line per descriptor (`gmm_walk_lines`), before the core's
  first block, at the chip's `scalar_gm_miss_cycles` each.
- Tiling copy (`GMM_CUBE_IMP` of grouped_matmul.cpp): before the walk each core copies two
  members of its GMMTilingData from GM to its stack (`GET_TILING_DATA_MEMBER`), gmmBaseParams
  (GMMBaseParams: 18 32-bit and 10 64-bit fields, 152 bytes) and mmTilingData (the Matmul API's
  TCubeTiling, 200 bytes, `hw.names.CUBE_TILING_BYTES`), and takes gmmArray (3 x 128
  int32) by address (grouped_matmul_tiling.h: GMMTilingData = gmmBaseParams, gmmArray,
  mmTilingData, ...; the struct starts on a line, kernel arguments being 512-byte aligned). The
  loads are independent; the model takes the in-order scalar unit to wait out each line's miss
  before the store that uses it, one line after another like the walk, as the engine's
  kernel-start note does for a tiling read (`sim.kernelstart`; Ascend C best practices, "Limit
  the TilingData size": the copy takes microseconds because GM access is slow): 3 lines of
  gmmBaseParams and the 4 that TCubeTiling spans at offset 152 + 1536. The chip's
  `kernel_start_us` holds the tiling read of the kernels it was derived on (one line), so the
  walk takes the copy's lines beyond that one (`gmm_tiling_copy_lines`, 6).
"""

from __future__ import annotations

from ..hw.names import CUBE_TILING_BYTES, DCACHE_LINE_BYTES
from .tiling import cdiv, ceil_to

#: GroupedMatmul's baseN (BEST_BASEN), largest baseM (MAX_BASEM) and L1 part of the operand
#: of the longer block edge (L1_PARTA_SIZE)
GMM_BASE_N = 256
GMM_MAX_BASE_M = 256
GMM_L1_PART = 256 * 1024
#: x / weight dtypes of the cube-only key this tiling covers
GMM_DTYPES = ("float16", "bfloat16")
#: accumulator bytes (fp32 in L0C)
_ACC = 4
#: bytes of a group-list entry (int64)
GROUP_LIST_ENTRY_BYTES = 8
#: DataCache lines of the walk besides the group list: kList, nList and the x, weight and y
#: tensor-list descriptors (module note, "Group walk")
GMM_WALK_FIXED_LINES = 5
#: bytes of GMMBaseParams and of the GMMArray that follows it in GMMTilingData (module note,
#: "Tiling copy")
GMM_BASE_PARAMS_BYTES = 152
GMM_ARRAY_BYTES = 3 * 128 * 4
#: tiling lines a kernel start already holds (`kernel_start_us` is the in-block start of
#: kernels that read one line of tiling data)
START_TILING_LINES = 1


def gmm_base(chip, total_m: int, item: int) -> tuple[int, int, int]:
    """(baseM, baseN, baseK) of `CalMMTiling` for x of `total_m` rows of `item`-byte
    elements (module note)."""
    base_n = GMM_BASE_N
    base_k = chip.l0b_bytes // 2 // (base_n * item) // 16 * 16
    base_m = min(chip.l0a_bytes // 2 // (base_k * item), chip.l0c_bytes // (base_n * _ACC))
    base_m = ceil_to(total_m, 16) if base_m > total_m else base_m // 16 * 16
    return min(base_m, GMM_MAX_BASE_M), base_n, base_k


def gmm_steps(chip, base: tuple[int, int, int], item: int) -> tuple[int, int]:
    """(stepKa, stepKb) of `CalcStepKaKb` (no bias; module note)."""
    base_m, base_n, base_k = base
    part_a = GMM_L1_PART if base_m > base_n else chip.l1_bytes - GMM_L1_PART
    part_b = chip.l1_bytes - part_a
    step_a = max(1, part_a // 2 // (base_m * base_k * item))
    step_b = max(1, part_b // 2 // (base_n * base_k * item))
    if step_a > step_b:
        step_a = step_a // step_b * step_b
    elif step_b > step_a:
        step_b = step_b // step_a * step_a
    return step_a, step_b


def gmm_used_cores(chip, total_m: int, groups: int, n: int, base_m: int) -> int:
    """The block dim of `CalUsedCoreNum`: the cube cores, or fewer when the blocks it counts
    (groups + (M - groups) / baseM along M, times N / baseN) are fewer."""
    n_dim = cdiv(n, GMM_BASE_N)
    m_dim = groups + (total_m - groups) // base_m if total_m > groups else total_m
    return min(chip.ai_cores, max(1, m_dim * n_dim))


def gmm_walk_lines(experts: int) -> int:
    """DataCache lines each core's scalar unit fills from GM, one after another, walking a
    group list of `experts` entries before its first block (module note, "Group walk")."""
    return cdiv(experts * GROUP_LIST_ENTRY_BYTES, DCACHE_LINE_BYTES) + GMM_WALK_FIXED_LINES


def gmm_tiling_copy_lines() -> int:
    """DataCache lines of GMMTilingData each core copies at its start beyond the one the
    kernel start holds: gmmBaseParams' lines and those mmTilingData (TCubeTiling) spans after
    the GMMArray (module note, "Tiling copy")."""
    line = DCACHE_LINE_BYTES
    cube_at = GMM_BASE_PARAMS_BYTES + GMM_ARRAY_BYTES
    cube_lines = (cube_at + CUBE_TILING_BYTES - 1) // line - cube_at // line + 1
    return cdiv(GMM_BASE_PARAMS_BYTES, line) + cube_lines - START_TILING_LINES


def gmm_attrs(chip, total_m: int, groups: int, rows: int, k: int, n: int, item: int,
              experts: int | None = None) -> dict:
    """The cube head's attributes for `groups` groups of `rows` x `k` times `k` x `n` out of
    an x of `total_m` rows: `block_dim` (`gmm_used_cores`), `base_block` (baseM and baseN
    as a group's rows and columns use them, baseK, K per L1 chunk) and `walk_lines` (the
    tiling copy, `gmm_tiling_copy_lines`, and the group walk over the `experts` entries of
    the group list, default `groups`: `gmm_walk_lines`). The blocks of all groups dealt
    round robin over the cores give each core as many as the model's even runs do."""
    base = gmm_base(chip, total_m, item)
    base_m, base_n, base_k = base
    k_l1 = min(gmm_steps(chip, base, item)) * base_k
    return {"block_dim": gmm_used_cores(chip, total_m, groups, n, base_m),
            "base_block": [min(base_m, ceil_to(rows, 16)), min(base_n, ceil_to(n, 16)), base_k,
                           min(k_l1, cdiv(k, base_k) * base_k)],
            "walk_lines": gmm_walk_lines(experts or groups) + gmm_tiling_copy_lines()}


__all__ = ["GMM_BASE_N", "GMM_DTYPES", "GMM_L1_PART", "GMM_MAX_BASE_M", "gmm_attrs",
           "gmm_base", "gmm_steps", "gmm_tiling_copy_lines", "gmm_used_cores",
           "gmm_walk_lines"]
