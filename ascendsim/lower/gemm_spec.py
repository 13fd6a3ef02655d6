"""The records of a cube op's tiling: `GemmSpec` (the GEMM as the cube sees it) and
`GemmTiling` (the tiling lower/cube_tiling.py picks for it; the module note there explains
the fields)."""

from __future__ import annotations

from dataclasses import dataclass

from .tiling import VecPart, cdiv
from .vector_seq import SeqPart


@dataclass(frozen=True)
class GemmSpec:
    """A (batched) GEMM as the cube sees it; conv fields set for implicit-GEMM convolution."""

    batch: int
    m: int
    k: int                      # padded to the K fractal already (conv: ceil16(Cin)*kh*kw)
    n: int
    in_dtype: str               # cube mode dtype ("float16", "int8")
    in_bytes: int               # bytes per operand element as stored in GM
    out_bytes: int              # bytes per output element
    acc_bytes: int              # accumulator bytes per element in L0C
    miss_a: float = 1.0
    miss_b: float = 1.0
    out_through: float = 1.0
    bias: bool = False
    # implicit-GEMM conv geometry: A is read from GM as a feature-map window
    conv_rows: tuple[int, int, int, int, int] | None = None  # (Wo, Win, stride_h, kh, kw)
    epilogue: tuple[VecPart | SeqPart, ...] = ()   # fused element-wise tail per output
    epi_inputs: tuple[tuple[float, float], ...] = ()     # extra inputs per output element
    shared_a: bool = False      # A strips are read by several cores of a wave at once
    shared_b: bool = False
    nd2nz_a: bool = False       # A is ND in GM: converted to NZ on the GM->L1 move
    nd2nz_b: bool = False
    # an ND operand's rows as stored in GM: (elements per row, whether they run along K);
    # the ND->NZ DMA's rate depends on that stride (matmul_format.nd2nz_stride_factor);
    # (): the aligned rate
    rows_a: tuple[int, bool] = ()
    rows_b: tuple[int, bool] = ()
    blocks: int = 0             # the kernel's block dim when the op fixes it (0: the tiling's)
    batched_b: bool = False     # B differs per batch (BatchMatMul), so no B strip spans batches
    load3d: bool = False        # a forward conv: A reaches L1 by Cin1 slice (lower/l1_chunks.py)
    # the kernel's own core split when the op fixes one (TCubeTiling singleCoreM, singleCoreN):
    # each block owns one singleCoreM x singleCoreN block of one batch's output (blocks = the
    # split's count); None: the base blocks are spread evenly (cube_tiling.block_tiles)
    single_core: tuple[int, int] | None = None
    # the kernel's own base block when the op fixes one (baseM, baseN, baseK, K per L1 chunk;
    # GroupedMatmul: lower/gmm_tiling.py); (): the search's
    base: tuple[int, ...] = ()
    # 64-byte GM lines each core's scalar unit reads, one dependent miss after another,
    # before its first block (GroupedMatmul's tiling copy and group walk: lower/gmm_tiling.py
    # `gmm_tiling_copy_lines`, `gmm_walk_lines`)
    walk_lines: int = 0


@dataclass(frozen=True)
class GemmTiling:
    """A chosen tiling (TCubeTiling names in the comments; see the module note)."""

    m_t: int                    # baseM
    n_t: int                    # baseN
    k_t: int                    # baseK
    k_l1: int                   # stepK * baseK: K elements per GM->L1 chunk
    tiles: int                  # output base blocks (batch x tm x tn)
    block: int                  # blocks launched (block dim); more than the cores: rounds
    est: float                  # estimated cycles
    tm: int = 1                 # base blocks along M (x batch)
    tn: int = 1                 # base blocks along N
    reuse: str = ""             # L1-resident operand: "A", "B" or "" (neither)
    run_a: int = 1              # tiles of one core sharing one resident A strip
    run_b: int = 1
    db_l0c: int = 2             # output tiles L0C holds (1: one tile, see `unit_flag`)
    cub_n: int = 0              # coupled chips: output columns per L0C->UB chunk

    @property
    def step_k(self) -> int:
        """Base K blocks per GM->L1 chunk (TCubeTiling stepKa = stepKb)."""
        return self.k_l1 // self.k_t

    def rounds(self, cores: int) -> int:
        """Rounds the blocks take on `cores` cores (1 unless the block dim exceeds them)."""
        return cdiv(self.block, cores)

    @property
    def a_reads(self) -> float:
        """Times the tiling reads A from GM (1 = each byte once)."""
        return self.tn / self.run_a

    @property
    def b_reads(self) -> float:
        return self.tm / self.run_b
