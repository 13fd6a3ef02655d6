"""Cube tiling as CANN's Matmul/Conv tiling: base blocks, L1 operand reuse, ND/NZ on the way in.

Note on the model
-----------------
A cube op is a (batched) GEMM (batch, M, K, N); a Conv an implicit GEMM (`GemmSpec.conv_rows`:
GM holds the NC1HWC0 feature map, img2col happens on MTE1). The tiling has the parameters of
CANN's `TCubeTiling` (Ascend C Matmul tiling API, "TCubeTiling structure", hiascend.com
atlasascendc_api_07_0673):

- base block `baseM x baseN x baseK`: one L0C output tile (baseM*baseN*4 <= L0C) and the
  L0A/L0B slices of one mmad (baseM*baseK, baseK*baseN, each double-buffered: dbL0A/dbL0B).
  L0C holds one tile or, when two fit, two (dbL0C). With one, on chips with the unit flag
  (`unit_flag`: A2/A3) the FixPipe drain of a tile overlaps the next tile's mmads at 512 B
  granularity (Ascend C SetFixPipeConfig `isUnitFlag`; catlass `ENABLE_UNIT_FLAG`); without it
  (910) the next tile's mmads wait for the L0C->UB drain. Either way L0C is accounted as two
  half-tile slots.
- `stepKa = stepKb`: base K blocks per GM->L1 load of an A and a B chunk; `depthA1 = depthB1 =
  2 x step` (L1 double buffering), as MatMulV3's `CalL1TilingV200` (ops-nn
  matmul_v3_base_tiling.cpp: stepKa = depthA1 / 2).
- L1 reuse (`reuse`): CANN's L1 tiling (asc-devkit matmul_constant_tiling_impl.h
  `GetL1Factor`: both full load, A full load, B full load, neither) keeps an operand block in
  L1 across output tiles only when its whole K fits (kAL1 == K): "A" keeps the baseM x K strip
  of A while the core walks its tiles along N; "B" keeps the K x baseN strip of B while it walks
  along M; "" (neither) re-reads both strips from GM for every tile, in stepK chunks. The
  chip's `l1_bytes` decides which fit: strip + two chunks of the other operand (+ bias).
- core split: the output's base blocks (batch x ceil(M/baseM) x ceil(N/baseN)) are spread over
  `ai_cores` in contiguous runs (MatMulV3: "the kernel distributes base blocks over the cores";
  the tail run is shorter); a kernel with its own split (`single_core`, TCubeTiling
  singleCoreM x singleCoreN) gives each block its block of the output (`block_tiles`).

GM traffic follows: A is read `a_reads` times and B `b_reads` times (the re-read factors), with
  a_reads = tn / run_a, b_reads = tm / run_b
where tm, tn = output tiles along M (times batch) and N, and run_x = the tiles of one core that
share a resident strip (min(tiles per core, tn) for "A", 1 when not resident).

Formats. Split chips (910B: FixPipe, `path_bytes_per_cycle.l0c_gm`) take ND operands: the
GM->L1 move converts ND->NZ in flight (`Intrinsic_data_move_out2l1_nd2nz`, reference section
8) at `path_bytes_per_cycle.gm_l1_nd2nz` (msKPP: ~20% below a plain copy; a 2-byte or 4-byte
operand whose stored rows are not a multiple of 256 / 128 elements keeps the share of it that
Huawei's catlass fits give that stride, `stride_factor`, lower/matmul_format.py), each move
paying the ND->NZ DMA's own latency (`path_latency_cycles.gm_l1_nd2nz`, `l1_read_latency`),
and the FixPipe writes ND (MatMulV2/BatchMatMulV2 on Ascend910B take and give ND: no
TransData around them).
Coupled chips (910, 310) need FRACTAL_NZ operands in GM and give NZ (the lowering inserts the
TransData). A constant weight is converted offline on every chip.

TBE. The first-generation 910's MatMul/BatchMatMul kernels are TBE's static matmul schedule
(chip file `matmul_schedule = "tbe"`; TBE te_schedule/mmad_schedule.py), not Ascend C's: it keeps
an operand strip in L1 when it fits half of L1 (`get_tensor_reuse`; when both fit, the one
whose re-reads cost more, A unless baseN > baseM), and it double-buffers L0C only when no strip
is kept (`open_double_buffer`), so with a kept strip each tile's mmads wait for the previous
tile's L0C->UB drain. Its base block comes from a C++ tiling generator that is not public; the
search below picks it.

MatMulV3's basic tiling. On split chips a 2-D MatMul (batch 1, no conv) whose output gives at
least one base block per cube core runs CANN's basic tiling, not a searched one
(lower/matmul_v3_basic.py, from ops-nn matmul_v3_base_tiling.cpp and mat_mul_base_kernel.h):
the base block of `SetBaseBlockTiling` (128 x 256, turned to 256 x 128 for some shapes with
a transposed operand), baseK of 128 bytes, the L1 steps of `CalL1Tiling`, and no operand strip
kept in L1 across blocks (the kernel runs one Iterate per base block). So 32 blocks of 128 x
256 on 24 cores run in two rounds, 8 cores taking two blocks, where a searched tiling would
balance smaller blocks. The search keeps only candidates of that tiling (`_keep_basic`);
shapes with fewer blocks than cores, batched and conv calls (other CANN paths: small-shape,
full-load, BatchMatMulV3's own tiling) keep the search.

Block dim. A profile may show a kernel launched on more blocks than the chip has cores (TBE
MatMul at block_dim 32 on the 30-core first-generation 910): `GemmSpec.blocks` (the MatMul/Gemm
attribute `block_dim`) spreads the base blocks over that many blocks, and the blocks past the
core count run in a later round as cores free up ("If the number of available cores is less
than [block_num], the execution instances will be scheduled and executed in batches", TIK
"AI Core Parallelism", hiascend.com tbeaicpudevg atlasopdev_10_0060).

Conv loads by Cin1 slice: a convolution's A (the feature map) is read from GM as the input
rows its output pixels cover, in loads of whole Cin1 slices (lower/l1_chunks.py).

One tile is the chain
  S -> MTE2 (GM->L1, per K chunk) -> MTE1 (L1->L0A/L0B, per base K) -> M (mmad per base K)
  -> FIX (L0C->GM)                                       split chips
  -> V (L0C->UB + fused epilogue) -> MTE3 (UB->GM)       coupled chips
An mmad of (m, k, n) costs ceil(m/16)*ceil(k/k0)*ceil(n/16) + c0 cycles. On coupled chips the
output leaves L0C through UB in column chunks (TBE's CUB_matrix, a part of CL0_matrix) so that
two chunks fit the UB. The tiler tries every candidate that fits the buffers and keeps the one
with the least GM traffic among those within 2% of the least estimated time (CANN's base-block
choice minimises the load size: MatMulV3 `CalcBase`), then the fastest, then the first, so the
same node always lowers the same way. The time estimate is the slowest pipe over one core's
tiles (uncontended per-core rates, GM traffic capped at the core's share of L2/HBM bandwidth)
plus fill and drain.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from ..errors import SimulationError
from .gemm_spec import GemmSpec, GemmTiling
from .l1_chunks import (  # noqa: F401  (re-exported: the tiling API)
    L1_STEPS,
    a_l1_loads,
    a_tile_bytes,
    cin1_slice,
    conv_steps,
    k_span,
    l1_chunk_candidates,
)
from .matmul_format import nd2nz_stride_factor, takes_nd  # noqa: F401  (re-exported)
from .matmul_v3_basic import basic_base_k, basic_block, basic_l1_steps, matvec_block
from .program import CoreGroup, Instr, Segment, Stage
from .tiling import (
    api_scalar_cycles,
    cdiv,
    ceil_to,
    cube_scalar_stage,
    fix_cycles,
    fix_write,
    gm_read,
    gm_write,
    issued_instrs,
    local_move,
    split_even,
    vec_instrs,
)

#: candidate base block edges for M and N (multiples of the 16-row fractal)
_MN_EDGES = (16, 32, 64, 128, 256, 512)
#: candidate baseK, in K fractals
_K_STEPS = (1, 2, 4, 8, 16)
#: candidate stepK (base K blocks per GM->L1 chunk)
_L1_STEPS = L1_STEPS
#: candidates this close to the fastest estimate count as equally fast (search parameter)
EST_TOLERANCE = 0.02
#: L1 reuse modes, in CANN's order of preference (`GetL1Factor`)
REUSE_MODES = ("A", "B", "")


def operand_read_bytes(spec: GemmSpec, t: GemmTiling) -> tuple[float, float]:
    """(A bytes, B bytes) the tiling reads from GM over the whole op."""
    a = t.tiles / t.run_a * a_tile_bytes(spec, t.m_t)
    b = t.tiles / t.run_b * spec.k * t.n_t * spec.in_bytes
    return a, b


def unit_flag(chip) -> bool:
    """Whether mmad and the L0C drain overlap at 512 B granularity (the unit flag: Ascend C
    SetFixPipeConfig isUnitFlag / asc_get_l0c2gm_unitflag, supported on Atlas A2/A3, not on
    the Atlas training series (910)): split chips with a FixPipe."""
    return takes_nd(chip)


def tbe_matmul(chip, spec: GemmSpec) -> bool:
    """Whether the GEMM runs TBE's matmul schedule (module note, "TBE"): a MatMul/BatchMatMul
    (not an implicit-GEMM conv) on a chip whose file says `matmul_schedule = "tbe"`."""
    return chip.matmul_schedule == "tbe" and spec.conv_rows is None


def tbe_reuse(chip, m_t: int, n_t: int, a_strip: float, b_strip: float) -> str:
    """The operand TBE's matmul schedule keeps in L1 (`get_tensor_reuse`): a strip (the whole
    K of one tile's rows or columns) that fits half of L1; when both fit, it streams the one
    whose re-reads cost less, which keeps A unless baseN > baseM."""
    half = chip.l1_bytes // 2
    a_fit, b_fit = a_strip <= half, b_strip <= half
    if a_fit and b_fit:
        return "A" if m_t >= n_t else "B"
    return "A" if a_fit else "B" if b_fit else ""


def _grid(chip, spec: GemmSpec, m_t: int, n_t: int) -> tuple[int, int, int, int]:
    """(tm, tn, tiles, block): base blocks along M (x batch) and N, in all, and the block dim
    (the op's own when it fixes one, `GemmSpec.blocks`; else one block per core, at most one
    per base block)."""
    m0, _, n0 = chip.cube_shape(spec.in_dtype)
    tm = spec.batch * cdiv(ceil_to(spec.m, m0), m_t)
    tn = cdiv(ceil_to(spec.n, n0), n_t)
    block = spec.blocks if spec.blocks else min(chip.ai_cores, tm * tn)
    return tm, tn, tm * tn, block


def block_tiles(chip, spec: GemmSpec, m_t: int, n_t: int, tiles: int, blocks: int) -> list[int]:
    """Base blocks per launched block, in block order. A kernel with its own core split
    (`GemmSpec.single_core`, TCubeTiling singleCoreM x singleCoreN) gives block (b, i, j) the
    base blocks of rows i and columns j of batch b's output, so the blocks at the M and N tails
    run fewer (Huawei's Matmul sample splits 8192 x 8192 into 4 x 6 blocks of 2048 x 1536: 20
    cores take 96 blocks of 128 x 256 and the 4 of the 512-column tail take 32); otherwise
    `tiles` are spread over `blocks` in contiguous runs, the tail runs one shorter."""
    if spec.single_core is None:
        runs = [n for n, k in split_even(tiles, blocks) for _ in range(k)]
        return runs + [0] * (blocks - len(runs))
    m0, _, n0 = chip.cube_shape(spec.in_dtype)
    m, n = ceil_to(spec.m, m0), ceil_to(spec.n, n0)
    sm, sn = spec.single_core
    one = [cdiv(min(sm, m - i), m_t) * cdiv(min(sn, n - j), n_t)
           for i in range(0, m, sm) for j in range(0, n, sn)]
    return one * spec.batch


def core_tiles(per_block: list[int], cores: int) -> list[tuple[int, int]]:
    """[(base blocks, how many cores run that many)]: block b of `per_block` (its base blocks,
    `block_tiles`) on core b mod `cores`. With more blocks than cores the runtime starts the
    extra blocks as cores free up (rounds), so a core that takes two blocks runs both runs one
    after the other."""
    blocks = len(per_block)
    per_core = [0] * min(cores, blocks)
    for b, n in enumerate(per_block):
        per_core[b % cores] += n
    counts: dict[int, int] = {}
    for n in per_core:
        counts[n] = counts.get(n, 0) + 1
    return sorted(counts.items(), reverse=True)


def gemm_tiling(chip, spec: GemmSpec, op: str) -> GemmTiling:
    """The best-estimated tiling that fits L0A/L0B/L0C/L1 (and UB on coupled chips)."""
    try:
        return _gemm_tiling(chip, tiling_key(spec))
    except _NoFit as exc:
        raise SimulationError(f"op '{op}': {exc}") from None


def load3d_fits(chip, spec: GemmSpec) -> bool:
    """Whether a forward convolution tiles with its feature map loaded by Cin1 slice: some
    tile's double-buffered slices of rows and weights fit L1. A kernel so large that one
    slice of its weights does not (TBE then streams the weights GM->L0B, `BL1_shape` None,
    which the model does not have) keeps base-K chunks."""
    try:
        _gemm_tiling(chip, tiling_key(spec))
    except _NoFit:
        return False
    return True


def tiling_key(spec: GemmSpec) -> GemmSpec:
    """`spec` without the fields the tiling search never reads (the epilogue's instructions,
    the output's write-through share, shared operand strips), so GEMMs that differ only there
    share one search."""
    if spec.epilogue or spec.out_through != 1.0 or spec.shared_a or spec.shared_b:
        return replace(spec, epilogue=(), out_through=1.0, shared_a=False, shared_b=False)
    return spec


class _NoFit(Exception):
    """No tile shape fits the buffers (turned into a SimulationError naming them)."""


def _cub_columns(chip, spec: GemmSpec, m_t: int, n_t: int) -> int:
    """Coupled chips: the widest column chunk of the output tile (n_t halved until it fits)
    whose two UB slots (output + epilogue inputs) fit the UB; 0 if none does."""
    per_elem = spec.out_bytes + sum(b for b, _ in spec.epi_inputs)
    c = n_t
    while c >= 16 and n_t % c == 0:
        if 2 * m_t * c * per_elem <= chip.ub_bytes:
            return c
        c //= 2
    return 0


@functools.lru_cache(maxsize=4096)
def _gemm_tiling(chip, spec: GemmSpec) -> GemmTiling:
    """The search: every candidate's estimate, then CANN's pick."""
    c, est = _search_estimates(chip, spec)
    # CANN picks the base block with the least GM load (MatMulV3 CalcBase minLoadSize):
    # among the candidates within EST_TOLERANCE of the fastest, the least traffic wins
    fastest = float(est.min())
    near = [c.tiling(i, float(est[i]))
            for i in np.flatnonzero(est <= fastest * (1 + EST_TOLERANCE))]
    # with a scalar cost per cube instruction, fewer K steps (a deeper baseK, as CANN's
    # tiling fills L0A/L0B) break the tie
    deep = bool(chip.cube_tile_scalar_cycles_per_instr)
    return min(near, key=lambda t: (sum(operand_read_bytes(spec, t)),
                                    cdiv(spec.k, t.k_t) if deep else 0, t.est))


def _search_estimates(chip, spec: GemmSpec) -> tuple[_Candidates, np.ndarray]:
    """Every candidate of the search (`_candidates`) and its estimate: `_estimates` for all
    candidates at once (the same float operations, so the same floats)."""
    c = _candidates(chip, replace(spec, miss_a=0.0, miss_b=0.0))
    # the GM->L1 read bandwidths per number of cores sharing L2/HBM (as `_BlockFacts`)
    ctx = _SearchContext(chip, spec)
    dens = np.array([_dens(ctx, sharing) for sharing in c.sharings])
    den_a, den_b = dens[c.sharing, 0], dens[c.sharing, 1]
    t_mte2 = 0.0 + c.a_bytes / den_a
    t_mte2 = t_mte2 + c.b_bytes / den_b
    t_mte2 = t_mte2 + c.lat
    period = np.maximum(np.maximum(np.maximum(np.maximum(c.t_m, c.t_mte1), t_mte2), c.t_out),
                        c.t_st)
    if chip.cube_tile_scalar_cycles_per_instr:
        # the scalar unit's work per base block (`_gemm_stages`) paces it where the pipes
        # are shorter
        period = np.maximum(period, api_scalar_cycles(chip, c.span // c.k_l1, c.nk))
    period = np.where(c.wait, np.maximum(period, c.t_m + c.t_out), period)
    return c, c.per_core * period + (t_mte2 * c.k_l1 / c.span) + c.t_out + c.t_st


def _dens(ctx: _SearchContext, sharing: int) -> tuple[float, float]:
    """The A and B GM->L1 read bandwidths per core with `sharing` cores on L2/HBM at once."""
    dens = ctx.dens.get(sharing)
    if dens is None:
        chip, spec = ctx.chip, ctx.spec
        miss = (spec.miss_a + spec.miss_b) / 2
        got = []
        for nd, m_x in ((spec.nd2nz_a, spec.miss_a), (spec.nd2nz_b, spec.miss_b)):
            bw = _gm_l1_bw(chip, nd)
            core_bw = bw * (1 - m_x) + m_x * bw / ctx.slow
            got.append(min(core_bw, ctx.l2_bw / sharing,
                           ctx.hbm_bw / (sharing * max(miss, 1e-9))))
        dens = ctx.dens[sharing] = (got[0], got[1])
    return dens


class _Candidates:
    """Every candidate tiling of one GEMM shape (a spec without its miss fractions, which
    only the read bandwidths depend on), in search order, as arrays: the GemmTiling fields
    but the estimate, and the terms of the estimate that do not depend on the misses."""

    #: GemmTiling fields kept (ints; `reuse` as an index into REUSE_MODES), in class order
    FIELDS = ("m_t", "n_t", "k_t", "k_l1", "tiles", "block", "tm", "tn", "reuse", "run_a",
              "run_b", "db_l0c", "cub")

    def __len__(self) -> int:
        return len(self.k_l1)

    def tiling(self, i: int, est: float) -> GemmTiling:
        """Candidate `i` with its estimate."""
        f = [int(getattr(self, name)[i]) for name in self.FIELDS]
        f[8] = REUSE_MODES[f[8]]
        return GemmTiling(*f[:6], est, *f[6:])


#: the stepK candidates as an array (the grid's second axis)
_R = np.array(_L1_STEPS, dtype=np.int64)
#: `_candidates`' row columns: these ints, then wait and the three reuse modes, then these
#: floats
_INT_COLUMNS = ("m_t", "n_t", "k_t", "tiles", "block", "tm", "tn", "db_l0c", "cub", "nk",
                "sharing", "run_a_kept", "run_b_kept", "bias")
_FLOAT_COLUMNS = ("a_tile", "b_tile", "t_m", "t_mte1", "t_out", "t_st", "per_core")   # (doc)


@functools.lru_cache(maxsize=1024)
def _candidates(chip, spec: GemmSpec) -> _Candidates:
    """The candidates that fit L0A/L0B/L0C/L1 (and UB on coupled chips), in search order
    (base block M then N, baseK, stepK, reuse mode), each with what its estimate
    (`_estimate_rows`) needs that does not depend on the misses; `_NoFit` naming the
    buffer when none fits. The grid of stepK x reuse mode is checked with arrays (the same
    integer and float operations as one at a time: the values stay below 2**53). Over 60
    lines: the loops that build the rows and the array pass over the stepK x reuse grid
    share the rows' columns; it runs once per distinct GEMM and is kept in one piece."""
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    mp, np_ = ceil_to(spec.m, m0), ceil_to(spec.n, n0)
    kp = ceil_to(spec.k, k0)
    tbe = tbe_matmul(chip, spec)
    ctx = _SearchContext(chip, spec)
    in_b, acc_b = spec.in_bytes, spec.acc_bytes
    bt = chip.bt_bytes if spec.bias else 0
    # one row per (base block, baseK) that fits L0A/L0B/L0C (and has a UB column chunk)
    rows: list[tuple] = []
    sharings: dict[int, int] = {}
    for m_t in _MN_EDGES:
        if m_t > max(mp, m0) * 2 and m_t > m0:
            continue
        a_strip = a_tile_bytes(spec, m_t)
        for n_t in _MN_EDGES:
            if n_t > max(np_, n0) * 2 and n_t > n0:
                continue
            tile_acc = m_t * n_t * acc_b
            db_l0c = 2 if 2 * tile_acc <= chip.l0c_bytes else 1
            b_strip = spec.k * n_t * in_b
            modes = (True, True, True)              # REUSE_MODES: A, B, neither
            if tbe:
                keep = tbe_reuse(chip, m_t, n_t, a_strip, b_strip)
                modes = tuple(m == keep for m in REUSE_MODES)
                if keep:
                    db_l0c = 1
            # a bias on split chips is read from the BiasTable (MatMulV3 CheckBTSize)
            if bt and n_t * acc_b > bt:
                continue
            cub = _cub_columns(chip, spec, m_t, n_t) if chip.coupled else n_t
            if tile_acc > chip.l0c_bytes or not cub:
                continue
            f = None
            for ks in _K_STEPS:
                k_t = ks * k0
                if k_t > kp and ks > 1:
                    continue
                if 2 * m_t * k_t * in_b > chip.l0a_bytes or 2 * k_t * n_t * in_b > \
                        chip.l0b_bytes:
                    continue
                if f is None:
                    f = _BlockFacts(ctx, m_t, n_t)
                    sharing = sharings.setdefault(min(f.block, ctx.cores), len(sharings))
                nk = cdiv(spec.k, k_t)
                mmad = cdiv(m_t, ctx.m0) * (k_t // ctx.k0) * cdiv(n_t, ctx.n0) + ctx.c0
                t_mte1 = nk * (m_t * k_t * spec.in_bytes / ctx.l1_l0a
                               + k_t * n_t * spec.in_bytes / ctx.l1_l0b)
                rows.append((m_t, n_t, k_t, f.tiles, f.block, f.tm, f.tn, db_l0c, cub, nk,
                             sharing, f.run_a_kept, f.run_b_kept,
                             n_t * acc_b if spec.bias else 0,
                             db_l0c == 1 and not ctx.unit_flag, *modes, a_strip, b_strip,
                             nk * mmad, t_mte1, f.t_out, f.t_st, f.per_core))
    c = _Candidates()
    if rows:
        # every row's numbers in one array (the ints are below 2**53: exact as floats)
        arr = np.array(rows, dtype=np.float64)
        n_int = len(_INT_COLUMNS)
        ints = arr[:, :n_int].astype(np.int64)
        col = {k: i for i, k in enumerate(_INT_COLUMNS)}
        wait, modes_ok = arr[:, n_int] != 0, arr[:, n_int + 1:n_int + 4] != 0
        floats = arr[:, n_int + 4:]
        nk, k_t, n_t = ints[:, col["nk"]], ints[:, col["k_t"]], ints[:, col["n_t"]]
        a_tile, b_tile = floats[:, 0], floats[:, 1]
        # (row, stepK, mode) grid (`l1_chunk_candidates`): a stepK divides the K blocks; a
        # convolution's chunks are whole Cin1 slices
        piece = cin1_slice(spec, k0)
        if piece:
            steps = np.array(conv_steps(spec.k // piece), dtype=np.int64)
            k_l1 = np.broadcast_to(piece * steps[None, :], (len(k_t), len(steps)))
            r_ok = (k_l1 % k_t[:, None] == 0) | (steps[None, :] == spec.k // piece)
            span = np.full(len(k_t), spec.k, dtype=np.int64)
        else:
            k_l1 = k_t[:, None] * _R[None, :]
            r_ok = (_R[None, :] <= nk[:, None]) & (nk[:, None] % _R[None, :] == 0)
            span = nk * k_t
        a_chunk = np.ceil(a_tile[:, None] * k_l1 / spec.k)
        b_chunk = k_l1 * n_t[:, None] * in_b
        bias = ints[:, col["bias"], None]
        need = np.empty(k_l1.shape + (3,))
        need[:, :, 0] = a_tile[:, None] + 2 * b_chunk + bias      # A kept in L1
        need[:, :, 1] = b_tile[:, None] + 2 * a_chunk + bias      # B kept in L1
        need[:, :, 2] = 2 * (a_chunk + b_chunk) + bias            # neither
        ok = (need <= chip.l1_bytes) & r_ok[:, :, None] & modes_ok[:, None, :]
        row, step, mode = np.nonzero(ok)              # (C order: the search order)
        ci, cf = ints[row], floats[row]
        for name in ("m_t", "n_t", "k_t", "tiles", "block", "tm", "tn", "db_l0c", "cub",
                     "sharing", "nk"):
            setattr(c, name, ci[:, col[name]])
        c.k_l1 = k_l1[row, step]
        c.reuse = mode
        c.run_a = np.where(mode == 0, ci[:, col["run_a_kept"]], 1)
        c.run_b = np.where(mode == 1, ci[:, col["run_b_kept"]], 1)
        c.wait = wait[row]
        # (each as `_estimate_rows` computes it)
        c.a_bytes = cf[:, 0] / c.run_a
        c.b_bytes = cf[:, 1] / c.run_b
        c.span = span[row]
        c.lat = (c.span // c.k_l1) * ctx.lat
        c.t_m, c.t_mte1, c.t_out, c.t_st, c.per_core = cf[:, 2:].T
        c.sharings = sorted(sharings, key=sharings.__getitem__)
    if not rows or not len(c):
        raise _NoFit(_no_fit(chip, spec))
    basic = basic_block(chip, spec)
    if basic is not None:
        _keep_basic(chip, spec, c, basic)
    base = spec.base or matvec_block(chip, spec)
    if base:
        _keep_base(c, base)
    return c


def _keep_base(c: _Candidates, base: tuple[int, ...]) -> None:
    """Narrow the candidates to a kernel's own base block (`GemmSpec.base`: baseM, baseN,
    baseK, K per L1 chunk), no operand kept in L1 across blocks (each block loads its own A
    and B); each filter only where a candidate passes it."""
    m_t, n_t, k_t, k_l1 = base
    for test in (lambda: (c.m_t == m_t) & (c.n_t == n_t),
                 lambda: c.reuse == REUSE_MODES.index(""), lambda: c.k_t == k_t,
                 lambda: c.k_l1 == np.minimum(k_l1, c.span)):
        keep = test()
        if keep.any():
            _keep(c, keep)


def _keep_basic(chip, spec: GemmSpec, c: _Candidates, basic: tuple[int, int]) -> None:
    """Narrow the candidates to MatMulV3's basic tiling (lower/matmul_v3_basic.py): its base
    block, no operand kept in L1 across blocks, its baseK and the smaller of its two L1 steps
    (the model moves A and B chunks of one K depth); each filter only where a candidate
    passes it."""
    k_t = basic_base_k(spec)
    step = min(basic_l1_steps(chip, spec, *basic)) * k_t
    for test in (lambda: (c.m_t == basic[0]) & (c.n_t == basic[1]),
                 lambda: c.reuse == REUSE_MODES.index(""),
                 lambda: c.k_t == k_t,
                 lambda: c.k_l1 == np.minimum(step, c.span)):
        keep = test()
        if keep.any():
            _keep(c, keep)


def _keep(c: _Candidates, mask: np.ndarray) -> None:
    """Keep only the candidates of `mask` (every per-candidate array of `c`)."""
    n = len(c)
    for name, value in list(vars(c).items()):
        if isinstance(value, np.ndarray) and value.shape[:1] == (n,):
            setattr(c, name, value[mask])


def _no_fit(chip, spec: GemmSpec) -> str:
    """Why no tile shape fits: the buffer the smallest candidate tile overflows."""
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    mp, np_ = ceil_to(spec.m, m0), ceil_to(spec.n, n0)
    smallest = None
    for m_t in _MN_EDGES:
        if m_t > max(mp, m0) * 2 and m_t > m0:
            continue
        for n_t in _MN_EDGES:
            if n_t > max(np_, n0) * 2 and n_t > n0:
                continue
            if spec.bias and chip.bt_bytes and n_t * spec.acc_bytes > chip.bt_bytes:
                continue
            tile_acc = m_t * n_t * spec.acc_bytes
            for ks in _K_STEPS:
                k_t = ks * k0
                if k_t > ceil_to(spec.k, k0) and ks > 1:
                    continue
                need = (2 * m_t * k_t * spec.in_bytes, 2 * k_t * n_t * spec.in_bytes, tile_acc)
                if smallest is None or sum(need) < sum(smallest[1]):
                    smallest = ((m_t, n_t, k_t), need)
    (m_t, n_t, k_t), (a, b, c) = smallest
    bufs = [("L0A", a, chip.l0a_bytes), ("L0B", b, chip.l0b_bytes), ("L0C", c, chip.l0c_bytes)]
    name, req, cap = next(((n, r, c) for n, r, c in bufs if r > c),
                          ("L1", 2 * (m_t + n_t) * k_t * spec.in_bytes, chip.l1_bytes))
    if name == "L1" and chip.coupled and not _cub_columns(chip, spec, m_t, n_t):
        name, req, cap = "UB", 2 * m_t * 16 * spec.out_bytes, chip.ub_bytes
    return (f"{name} of core 0 ({cap} B) cannot hold the minimum cube tile "
            f"{m_t}x{k_t}x{n_t} with double buffering ({req} B)")


def _gm_l1_bw(chip, nd2nz: bool) -> float:
    pb = chip.path_bytes_per_cycle
    return (pb.gm_l1_nd2nz or pb.gm_l1) if nd2nz else pb.gm_l1


class _SearchContext:
    """What every candidate of one search reads of the chip and the spec (looked up once)."""

    __slots__ = ("chip", "spec", "m0", "k0", "n0", "c0", "l2_bw", "hbm_bw", "l1_l0a",
                 "l1_l0b", "lat", "coupled", "l0c_ub", "ub_gm", "l0c_gm", "unit_flag",
                 "cores", "slow", "dens")

    def __init__(self, chip, spec: GemmSpec) -> None:
        self.chip, self.spec = chip, spec
        self.m0, self.k0, self.n0 = chip.cube_shape(spec.in_dtype)
        self.c0 = chip.cube_mmad_overhead_cycles
        self.l2_bw = chip.l2_bandwidth_bytes_per_s / chip.clock_hz
        self.hbm_bw = chip.hbm_bandwidth_bytes_per_s / chip.clock_hz
        pb = chip.path_bytes_per_cycle
        self.l1_l0a, self.l1_l0b = pb.l1_l0a, pb.l1_l0b
        self.lat = l1_read_latency(chip, spec.nd2nz_a) + l1_read_latency(chip, spec.nd2nz_b)
        self.coupled = chip.coupled
        if chip.coupled:
            self.l0c_ub, self.ub_gm, self.l0c_gm = pb.l0c_ub, pb.ub_gm, None
        else:
            self.l0c_ub, self.ub_gm, self.l0c_gm = None, None, pb.l0c_gm
        self.unit_flag = unit_flag(chip)
        self.cores = chip.ai_cores
        self.slow = chip.l2_miss_slowdown
        #: per number of cores sharing L2/HBM: the A and B read bandwidths
        self.dens: dict[int, tuple[float, float]] = {}


class _BlockFacts:
    """What the candidates of one base block (m_t x n_t) share."""

    __slots__ = ("m_t", "n_t", "tm", "tn", "tiles", "block", "per_core", "den_a", "den_b",
                 "a_tile", "b_tile", "t_out", "t_st", "run_a_kept", "run_b_kept")

    def __init__(self, ctx: _SearchContext, m_t: int, n_t: int) -> None:
        chip, spec = ctx.chip, ctx.spec
        self.m_t, self.n_t = m_t, n_t
        tm, tn, tiles, block = _grid(chip, spec, m_t, n_t)
        self.tm, self.tn, self.tiles, self.block = tm, tn, tiles, block
        runs = block_tiles(chip, spec, m_t, n_t, tiles, block)
        per_block = max(runs)
        # the busiest core's base blocks
        self.per_core = core_tiles(runs, ctx.cores)[0][0]
        sharing = min(block, ctx.cores)                      # cores sharing L2/HBM at once
        self.den_a, self.den_b = _dens(ctx, sharing)
        self.a_tile = a_tile_bytes(spec, m_t)
        self.b_tile = spec.k * n_t * spec.in_bytes
        out = m_t * n_t
        if ctx.coupled:
            self.t_out = out * spec.acc_bytes / ctx.l0c_ub
            self.t_st = out * spec.out_bytes / ctx.ub_gm
        else:
            self.t_out = fix_cycles(ctx.chip, m_t, n_t, spec.acc_bytes)
            self.t_st = 0.0
        # a resident strip serves the tiles of one block's run (rounds start new runs); a
        # batched B strip serves only the M tiles of its own batch
        self.run_a_kept = min(per_block, tn)
        self.run_b_kept = min(per_block, tm // spec.batch if spec.batched_b else tm)


def _estimates(chip, spec: GemmSpec, m_t: int, n_t: int, k_t: int,
               variants: list[tuple[int, str]], db_l0c: int, cub: int) -> list[tuple]:
    """A candidate's estimated time for each (k_l1, reuse) of one base block, as GemmTiling
    field tuples: the slowest pipe's period over the tiles of one core, plus the pipeline's
    fill (the first L1 chunk) and drain (the last output). What the variants share is
    computed once (the search runs ~1000 candidates per GEMM spec; it keeps what the
    candidates of one spec and one base block share: `_SearchContext`, `_BlockFacts`)."""
    ctx = _SearchContext(chip, spec)
    return _estimate_rows(ctx, _BlockFacts(ctx, m_t, n_t), k_t, variants, db_l0c, cub)


def _estimate_rows(ctx: _SearchContext, f: _BlockFacts, k_t: int,
                   variants: list[tuple[int, str]], db_l0c: int, cub: int) -> list[tuple]:
    """`_estimates` from the search's shared facts."""
    spec = ctx.spec
    m_t, n_t = f.m_t, f.n_t
    nk = cdiv(spec.k, k_t)
    span = k_span(spec, ctx.k0, k_t)
    mmad = cdiv(m_t, ctx.m0) * (k_t // ctx.k0) * cdiv(n_t, ctx.n0) + ctx.c0
    t_m = nk * mmad
    t_mte1 = nk * (m_t * k_t * spec.in_bytes / ctx.l1_l0a
                   + k_t * n_t * spec.in_bytes / ctx.l1_l0b)
    a_tile, b_tile, den_a, den_b = f.a_tile, f.b_tile, f.den_a, f.den_b
    lat = ctx.lat
    t_out, t_st = f.t_out, f.t_st
    wait = db_l0c == 1 and not ctx.unit_flag
    per_core, tiles, block, tm, tn = f.per_core, f.tiles, f.block, f.tm, f.tn
    rows = []
    for k_l1, reuse in variants:
        run_a = f.run_a_kept if reuse == "A" else 1
        run_b = f.run_b_kept if reuse == "B" else 1
        t_mte2 = 0.0
        t_mte2 += (a_tile / run_a) / den_a
        t_mte2 += (b_tile / run_b) / den_b
        t_mte2 += (span // k_l1) * lat
        period = max(t_m, t_mte1, t_mte2, t_out, t_st)
        if ctx.chip.cube_tile_scalar_cycles_per_instr:
            period = max(period, api_scalar_cycles(ctx.chip, span // k_l1, nk))
        if wait:
            period = max(period, t_m + t_out)
        est = per_core * period + (t_mte2 * k_l1 / span) + t_out + t_st
        rows.append((m_t, n_t, k_t, k_l1, tiles, block, est, tm, tn, reuse, run_a, run_b,
                     db_l0c, cub))
    return rows


def gemm_work(chip, spec: GemmSpec, op: str) -> tuple[list[CoreGroup], list[str], GemmTiling]:
    """Core groups for a cube task, with notes (tile shape, block dim, reuse, padding waste)."""
    t = gemm_tiling(chip, spec, op)
    stages = _gemm_stages(chip, spec, t)
    first = walk_stages(chip, spec, stages)
    groups = []
    core = 0
    for count, ncores in core_tiles(block_tiles(chip, spec, t.m_t, t.n_t, t.tiles, t.block),
                                    chip.ai_cores):
        if count:
            segs = ((Segment(stages, count),) if first is stages else
                    (Segment(first, 1),) + ((Segment(stages, count - 1),) if count > 1 else ()))
            groups.append(CoreGroup(tuple(range(core, core + ncores)), segs))
        core += ncores
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    useful = spec.batch * spec.m * spec.n
    padded = t.tiles * t.m_t * t.n_t
    kept = {"A": "A strip (baseM x K) kept in L1 across N tiles",
            "B": "B strip (K x baseN) kept in L1 across M tiles",
            "": "no operand kept in L1 (each tile re-reads its A and B strips)"}[t.reuse]
    fmt = ", ".join(x for x, on in (("A", spec.nd2nz_a), ("B", spec.nd2nz_b)) if on)
    l0c = ("double-buffered" if t.db_l0c == 2 else "one tile (unit flag)" if unit_flag(chip)
           else "one tile (each tile's mmads wait for the previous tile's drain)")
    notes = [f"cube tiling: base block m{t.m_t} x n{t.n_t} x k{t.k_t}, stepK {t.step_k} "
             f"(L1 chunk {t.k_l1}), L0C {l0c}; "
             f"{t.tiles} tiles over block dim {t.block}" + (
                 f" on {chip.ai_cores} cores ({t.rounds(chip.ai_cores)} rounds: the blocks "
                 f"past the core count start as cores free up)"
                 if t.block > chip.ai_cores else ""),
             f"L1 reuse: {kept}; A read {t.a_reads:g}x, B read {t.b_reads:g}x from GM",
             f"cube padding: M {spec.m}->{ceil_to(spec.m, m0)}, N {spec.n}->"
             f"{ceil_to(spec.n, n0)}, K {spec.k}; output tiles cover {padded} elements for "
             f"{useful} useful ({100 * (1 - useful / padded):.1f}% waste)"]
    piece = cin1_slice(spec, k0)
    if piece:
        loads, each = a_l1_loads(spec, t, k0)
        notes.append(f"feature map loaded by Cin1 slice (load3d): {loads} GM->L1 load(s) of A "
                     f"per tile, each {t.k_l1 // piece} slice(s) of {piece} of K, {each} B of "
                     f"input rows for every kernel position")
    if basic_block(chip, spec) == (t.m_t, t.n_t):
        notes.append("MatMulV3's basic tiling (at least one block per cube core): base block "
                     "and baseK from SetBaseBlockTiling, L1 steps from CalL1Tiling, each "
                     "block's A and B loaded anew (one Iterate per block)")
    if fmt:
        notes.append(f"ND operand(s) {fmt} converted to NZ on the GM->L1 move (nd2nz)")
    if tbe_matmul(chip, spec):
        notes.append("TBE matmul schedule (chip file matmul_schedule): "
                     "a strip that fits half of L1 is kept; L0C is double-buffered only "
                     "when no strip is kept")
    return groups, notes, t


def walk_stages(chip, spec: GemmSpec, stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """A core's first tile: `stages` with the scalar unit's once-only work ahead of it,
    `spec.walk_lines` dependent DataCache misses of `scalar_gm_miss_cycles` each (GroupedMatmul's
    group walk, lower/gmm_tiling.py), as the head of the S stage; `stages` itself when there
    is none, the chip gives no figure or no stage runs on S."""
    cycles = spec.walk_lines * (chip.scalar_gm_miss_cycles or 0)
    if cycles <= 0 or not any(st.pipe == "S" for st in stages):
        return stages
    walk = Instr("S", "scalar", cycles)
    return tuple(replace(st, head=(walk, *st.head)) if st.pipe == "S" else st for st in stages)


def _gemm_stages(chip, spec: GemmSpec, t: GemmTiling) -> tuple[Stage, ...]:
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    nk = cdiv(spec.k, t.k_t)
    n_l1, a_chunk = a_l1_loads(spec, t, k0)
    a_strip = a_tile_bytes(spec, t.m_t)
    b_strip = spec.k * t.n_t * spec.in_bytes
    b_chunk = math.ceil(b_strip / t.run_b / n_l1)
    mte2 = (l1_read(chip, a_chunk, spec.miss_a, spec.shared_a, spec.nd2nz_a,
                    stride_factor(spec, spec.rows_a, t.k_l1, t.m_t)),
            l1_read(chip, b_chunk, spec.miss_b, spec.shared_b, spec.nd2nz_b,
                    stride_factor(spec, spec.rows_b, t.k_l1, t.n_t)))
    head: tuple[Instr, ...] = ()
    if spec.bias:
        head += (gm_read(chip, "MTE2", "L1", t.n_t * spec.acc_bytes, 1.0, kind="bias"),)
    out = t.m_t * t.n_t
    epi_in = tuple(gm_read(chip, "MTE2", "UB", math.ceil(b * out), miss)
                   for b, miss in spec.epi_inputs)
    head += epi_in
    a_l0 = t.m_t * t.k_t * spec.in_bytes
    b_l0 = t.k_t * t.n_t * spec.in_bytes
    a_kind = "img2col" if spec.conv_rows is not None else "copy"
    mte1 = (local_move(chip, "MTE1", "L1", "L0A", a_l0, a_kind),
            local_move(chip, "MTE1", "L1", "L0B", b_l0))
    mmad_cycles = cdiv(t.m_t, m0) * (t.k_t // k0) * cdiv(t.n_t, n0)
    mmad = (Instr("M", "mmad", int(mmad_cycles + chip.cube_mmad_overhead_cycles)),)
    # L1 slots: two chunks of each streamed operand; a resident strip is counted half in
    # each of the two slots, so the peak is strip + two chunks of the other operand
    a_slot = math.ceil(a_strip / 2) if t.reuse == "A" else math.ceil(a_strip / n_l1)
    b_slot = math.ceil(b_strip / 2) if t.reuse == "B" else math.ceil(b_strip / n_l1)
    l1_slot = a_slot + b_slot + (t.n_t * spec.acc_bytes if spec.bias else 0)
    # L0C: two tiles, or one tile as two half slots (unit flag, module note)
    l0c_slot = out * spec.acc_bytes // (2 if t.db_l0c == 1 else 1)
    # one tile in L0C without the unit flag: each tile's mmads wait for the previous tile's
    # L0C->UB drain (charged to M as a wait before the tile)
    m_head: tuple[Instr, ...] = ()
    if t.db_l0c == 1 and not unit_flag(chip):
        drain = local_move(chip, "V", "L0C", "UB", out * spec.acc_bytes).cycles
        m_head = (Instr("M", "wait_l0c", drain),)
    stages = [Stage("MTE2", mte2, units=n_l1, head=head, out_bufs=(("L1", l1_slot),)),
              Stage("MTE1", mte1, units=nk, out_bufs=(("L0A", a_l0), ("L0B", b_l0))),
              Stage("M", mmad, units=nk, head=m_head, out_bufs=(("L0C", l0c_slot),))]
    n_epi = 0
    if chip.coupled:
        # the tile leaves L0C through UB in column chunks of cub_n (TBE's CUB_matrix)
        chunks = t.n_t // t.cub_n
        part = t.m_t * t.cub_n
        epi = vec_instrs(chip, spec.epilogue, part)
        move = local_move(chip, "V", "L0C", "UB", part * spec.acc_bytes)
        epi_ub = math.ceil(sum(b for b, _ in spec.epi_inputs) * part)
        vec = ((move,) + epi) * chunks
        n_epi = issued_instrs(spec.epilogue) * chunks
        stages.append(Stage("V", vec, out_bufs=(("UB", part * spec.out_bytes + epi_ub),)))
        stages.append(Stage("MTE3", (gm_write(chip, "MTE3", "UB", out * spec.out_bytes,
                                              spec.out_through),)))
    else:
        stages.append(Stage("FIX", (fix_write(chip, t.m_t, t.n_t, spec.acc_bytes,
                                              spec.out_bytes, spec.out_through),)))
    return (cube_scalar_stage(chip, n_l1, nk, len(head) + n_epi + 2),) + tuple(stages)


def stride_factor(spec: GemmSpec, rows: tuple[int, bool], k_width: int, mn_width: int
                  ) -> float:
    """The share of the aligned ND->NZ rate an ND operand's chunks keep (`nd2nz_stride_
    factor`): its stored rows (`GemmSpec.rows_a` / `rows_b`) are the DMA's source stride, and
    a chunk takes `k_width` elements of each when they run along K, else `mn_width`. The
    tiling search (`_dens`) prices the aligned rate; the stages pay this one."""
    if not rows:
        return 1.0
    stride, along_k = rows
    return nd2nz_stride_factor(min(stride, k_width if along_k else mn_width), stride,
                               spec.in_dtype)


def l1_read_latency(chip, nd2nz: bool) -> float:
    """Fixed cycles of one GM->L1 operand move: `path_latency_cycles.gm_l1_nd2nz` for an ND
    operand on a chip with that path, else the plain copy's. Huawei's A2/A3 pipe model ends
    an ND->NZ move its GM read latency after the previous one (hicann/pypto framework/src/
    cost_model/simulation_ca/A2A3/model/pipe.cpp `CalcNdNzOutL1`, 307 + 4 cycles set by
    SimulatorA2A3.cpp `Run`); no measured curve gives the ND->NZ move's latency."""
    pl = chip.path_latency_cycles
    if nd2nz and chip.path_bytes_per_cycle.gm_l1_nd2nz and pl.gm_l1_nd2nz:
        return pl.gm_l1_nd2nz
    return pl.gm_l1


def l1_read(chip, nbytes: int, miss: float, shared: bool, nd2nz: bool,
            stride_share: float = 1.0) -> Instr:
    """A GM->L1 operand chunk; an ND operand moves at the nd2nz rate, times the share of it
    its source stride leaves (`stride_factor`), and pays the ND->NZ move's latency
    (`l1_read_latency`)."""
    ins = gm_read(chip, "MTE2", "L1", nbytes, miss, kind="nd2nz" if nd2nz else "copy",
                  same_address=shared)
    if not nd2nz or not chip.path_bytes_per_cycle.gm_l1_nd2nz:
        return ins
    scale = chip.path_bytes_per_cycle.gm_l1_nd2nz / chip.path_bytes_per_cycle.gm_l1 \
        * stride_share
    return Instr(ins.pipe, ins.kind, int(round(l1_read_latency(chip, True))), ins.nbytes,
                 ins.src, ins.dst, ins.bw * scale, ins.hbm, ins.tensors)
