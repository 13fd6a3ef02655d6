"""Tilings: how a cube (GEMM / implicit-GEMM conv) or vector op is split over cores and tiles.

Note on the model
-----------------
Cube (`gemm_work`). A MatMul is a GEMM (batch, M, K, N); a Conv is an implicit GEMM with
M = N*Ho*Wo, K = ceil16(Cin/group)*kh*kw, N = ceil16(Cout/group) per group (the feature map
is NC1HWC0 with C0 = the cube's K fractal: 17 channels cost like 32; img2col happens in flight
on MTE1, so GM is read as a feature-map window, not as the expanded matrix). M and N are padded
to the 16-row fractal, K to the dtype's K fractal (16 fp16, 32 int8). The output is cut into
m_t x n_t tiles (one L0C slot; two slots = double buffering, accumulator fp32/int32), each
computed as a K loop of k_t steps (one L0A and one L0B slot each, double-buffered) fed from L1
in chunks of k_l1 (two L1 slots of (A + B) chunks). One tile is the chain
  S (scalar issue) -> MTE2 (GM->L1, per chunk) -> MTE1 (L1->L0A/L0B, per k step)
  -> M (mmad, per k step) -> V (L0C->UB + fused epilogue, coupled chips) -> MTE3 (UB->GM)
or, on split chips, ... -> M -> FIX (L0C->GM). An mmad of (m, k, n) costs
ceil(m/16)*ceil(k/k0)*ceil(n/16) + c0 cycles (reference section 2). Tiles are spread over
`ai_cores` as evenly as possible; the tiler tries every candidate (m_t, n_t, k_t, k_l1) that
fits the buffers and keeps the one with the least estimated time (uncontended per-core rates,
with GM traffic capped at the core's share of L2/HBM bandwidth); ties go to the first
candidate, so the same node always lowers the same way.

Vector (`vector_work`). The op's elements are split over the vector cores (at least
`chip.gm_min_efficient_transfer_bytes` of traffic per core, the size at which GM moves reach
full bandwidth) and cut into tiles as large as the UB allows with double buffering:
2 x (input + output + intermediate bytes per element) x tile elements <= UB. One tile is
  S -> MTE2 (GM->UB, one move per input) -> V (one instruction per vector op) -> MTE3 (UB->GM).
A vector instruction on b bytes costs max(vector_min_cycles, b / rate(class, dtype)).

Scalar: every tile costs `chip.scalar_ops_per_instr` scalar operations (loop, address and
issue work) per instruction it issues, at `chip.scalar_ops_per_cycle`.

GM moves get their per-core bandwidth from the chip's path table, de-rated on an L2 miss as
msKPP does: bw_eff = hit*bw + miss*bw/l2_miss_slowdown, and by `chip.gm_same_address_slowdown`
when several cores read the same operand strip at once (the cube's wave sharing); the
simulator further shares L2 and HBM bandwidth among all concurrent moves. Every hardware
figure comes from the chip (with its source); the constants below are search parameters.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..errors import SimulationError
from .program import GM, CoreGroup, Instr, Segment, Stage, gm_tensors
from .vector_seq import SeqPart, part_cycles

#: candidate tile edges for M and N (multiples of the 16-row fractal)
_MN_EDGES = (16, 32, 64, 128, 256, 512)
#: candidate multiples of the K fractal for one k step
_K_STEPS = (1, 2, 4, 8, 16)
#: candidate k steps per L1 chunk
_L1_STEPS = (1, 2, 4, 8, 16)


def ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ----------------------------------------------------------------------------- data moves
def gm_read(chip, pipe: str, dst: str, nbytes: int, miss: float, kind: str = "copy",
            same_address: bool = False) -> Instr:
    """A GM -> dst move of `nbytes` with L2 miss fraction `miss` (msKPP de-rate); reads that
    several cores make of the same addresses at once are slowed by the chip's
    `gm_same_address_slowdown`."""
    bw = chip.path_bytes_per_cycle.get("gm", dst.lower())
    lat = chip.path_latency_cycles.get("gm", dst.lower())
    eff = bw * (1.0 - miss) + miss * bw / chip.l2_miss_slowdown
    if same_address:
        eff /= chip.gm_same_address_slowdown
    return Instr(pipe, kind, int(round(lat)), int(nbytes), GM, dst, eff, float(miss),
                 gm_tensors(miss))


def gm_write(chip, pipe: str, src: str, nbytes: int, through: float) -> Instr:
    """A src -> GM move; `through` = fraction written through to HBM (does not stay in L2)."""
    bw = chip.path_bytes_per_cycle.get(src.lower(), "gm")
    lat = chip.path_latency_cycles.get(src.lower(), "gm")
    return Instr(pipe, "copy", int(round(lat)), int(nbytes), src, GM, bw, float(through),
                 gm_tensors(through))


def local_move(chip, pipe: str, src: str, dst: str, nbytes: int, kind: str = "copy") -> Instr:
    """An on-core move (L1->L0A/L0B, L0C->UB): fixed latency + bytes at the path bandwidth."""
    bw = chip.path_bytes_per_cycle.get(src.lower(), dst.lower())
    lat = chip.path_latency_cycles.get(src.lower(), dst.lower()) or 0
    return Instr(pipe, kind, int(round(lat)) + math.ceil(nbytes / bw), int(nbytes), src, dst)


def vec_instr(chip, vclass: str, dtype: str, nbytes: float, kind: str = "") -> Instr:
    rate = chip.vector_rate(vclass, dtype)
    cyc = max(chip.vector_min_cycles, nbytes / rate)
    return Instr("V", kind or f"vec_{vclass}", math.ceil(cyc))


def vec_instrs(chip, parts, elems: float) -> tuple[Instr, ...]:
    """V-pipe instructions for the parts of a vector task on a tile of `elems` elements.

    A run of instruction-sequence parts (`SeqPart`, lower/vector_seq.py) is issued back to
    back on the V pipe; it becomes ONE simulated instruction whose cycles are the sum of the
    parts' (repeats, masks, reduce trees), so the event count does not grow with the length
    of a sequence. A legacy `VecPart` (a format conversion) is one instruction of its bytes."""
    out: list[Instr] = []
    run = 0
    kinds: list[str] = []
    for p in parts:
        if isinstance(p, SeqPart):
            run += part_cycles(chip, p, elems)
            kinds.append(p.instr.split()[0])
            continue
        if kinds:
            out.append(Instr("V", _seq_kind(kinds), max(run, 1)))
            run, kinds = 0, []
        out.append(vec_instr(chip, p.vclass, p.dtype, p.bytes_per_elem * elems, p.kind))
    if kinds:
        out.append(Instr("V", _seq_kind(kinds), max(run, 1)))
    return tuple(out)


def _seq_kind(kinds: list[str]) -> str:
    return f"vec_{kinds[0]}" if len(kinds) == 1 else "vec_seq"


def issued_instrs(parts) -> int:
    """Vector instructions the scalar unit issues for the parts (a sequence's every step)."""
    return sum(max(1, math.ceil(p.count)) if isinstance(p, SeqPart) else 1 for p in parts)


def scalar_stage(chip, n_instr: int) -> Stage:
    cyc = math.ceil(n_instr * chip.scalar_ops_per_instr / chip.scalar_ops_per_cycle)
    return Stage("S", (Instr("S", "scalar", max(cyc, 1)),))


def split_even(total: int, parts: int) -> list[tuple[int, int]]:
    """[(amount, how many parts get it)]: `total` over `parts` as evenly as possible."""
    q, r = divmod(total, parts)
    out = []
    if r:
        out.append((q + 1, r))
    if q:
        out.append((q, parts - r))
    return out


# ----------------------------------------------------------------------------- vector ops
@dataclass(frozen=True)
class VecPart:
    """One vector instruction class applied per element: `bytes_per_elem` bytes through V."""

    vclass: str
    dtype: str
    bytes_per_elem: float
    kind: str = ""


@dataclass(frozen=True)
class VecSpec:
    """A vector task: `elems` elements; per element bytes read per input, written, kept."""

    elems: int
    inputs: tuple[tuple[float, float], ...]     # (bytes per element, L2 miss fraction)
    out_bytes: float                            # bytes written per element
    out_through: float                          # fraction of the output written to HBM
    parts: tuple[VecPart | SeqPart, ...]      # legacy byte parts or sequence steps
    temp_bytes: float = 0.0                     # UB bytes per element for intermediates
    align: int = 32                             # elements per tile multiple


def vector_work(chip, spec: VecSpec, op: str, cores: int) -> tuple[list[CoreGroup], list[str]]:
    """Core groups and notes for a vector task (see the module note)."""
    per_elem = sum(b for b, _ in spec.inputs) + spec.out_bytes + spec.temp_bytes
    per_elem = max(per_elem, 1e-9)
    slot_elems = int(chip.ub_bytes / (2 * per_elem))
    slot_elems -= slot_elems % spec.align
    need = 2 * spec.align * per_elem
    if slot_elems < spec.align:
        raise SimulationError(
            f"op '{op}': UB of core 0 ({chip.ub_bytes} B) cannot hold the minimum tile: "
            f"2 slots x {spec.align} elements x {per_elem:g} B/element = {need:g} B")
    traffic = spec.elems * (sum(b for b, _ in spec.inputs) + spec.out_bytes)
    block = max(1, min(cores, int(traffic // chip.gm_min_efficient_transfer_bytes),
                       cdiv(spec.elems, spec.align)))
    groups: list[CoreGroup] = []
    core = 0
    for per_core, ncores in split_even(spec.elems, block):
        ntiles = cdiv(per_core, slot_elems)
        segs = []
        for tile_elems, count in split_even(per_core, ntiles):
            segs.append(Segment(_vector_stages(chip, spec, tile_elems), count))
        groups.append(CoreGroup(tuple(range(core, core + ncores)), tuple(segs)))
        core += ncores
    tile = min(slot_elems, cdiv(spec.elems, block))
    notes = [f"vector tiling: {spec.elems} elements over {block} core(s), up to "
             f"{tile} elements per tile "
             f"(UB {chip.ub_bytes} B, 2 slots x {per_elem:g} B/element)"]
    seq = [p for p in spec.parts if isinstance(p, SeqPart)]
    if seq:
        notes.append(f"V cycles per tile of {tile} elements: " + ", ".join(
            f"{p.instr} {part_cycles(chip, p, tile)}" for p in seq))
    return groups, notes


def _vector_stages(chip, spec: VecSpec, e: int) -> tuple[Stage, ...]:
    loads = tuple(gm_read(chip, "MTE2", "UB", math.ceil(b * e), miss) for b, miss in spec.inputs
                  if b > 0)
    if not loads:
        loads = (Instr("MTE2", "copy", 1),)
    vec = vec_instrs(chip, spec.parts, e) or (Instr("V", "vec_nop", 1),)
    store = (gm_write(chip, "MTE3", "UB", max(math.ceil(spec.out_bytes * e), 1),
                      spec.out_through),)
    in_ub = math.ceil(sum(b for b, _ in spec.inputs) * e)
    out_ub = math.ceil((spec.out_bytes + spec.temp_bytes) * e)
    n_instr = len(loads) + max(issued_instrs(spec.parts), 1) + len(store)
    return (scalar_stage(chip, n_instr),
            Stage("MTE2", loads, out_bufs=(("UB", in_ub),)),
            Stage("V", vec, out_bufs=(("UB", out_ub),)),
            Stage("MTE3", store))


# ----------------------------------------------------------------------------- cube ops
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


@dataclass(frozen=True)
class GemmTiling:
    m_t: int
    n_t: int
    k_t: int
    k_l1: int
    tiles: int
    block: int
    est: float


def _a_tile_bytes(spec: GemmSpec, m_t: int) -> float:
    """GM bytes of A for one output tile over the whole K.

    MatMul: the m_t x K strip. Conv (implicit GEMM): the feature-map window the tile's m_t
    output pixels read, (m_t/Wo*stride + kh - stride) input rows of Win pixels x Cin_pad, but
    never more than the expanded m_t x K matrix (a strided 1x1 conv reads only the pixels it
    uses).
    """
    full = m_t * spec.k * spec.in_bytes
    if spec.conv_rows is None:
        return full
    wo, win, sh, kh, kw = spec.conv_rows
    cin = spec.k / (kh * kw)
    rows_in = (m_t / wo) * sh + max(kh - sh, 0)
    return min(full, rows_in * win * cin * spec.in_bytes)


def gemm_tiling(chip, spec: GemmSpec, op: str) -> GemmTiling:
    """The best-estimated tiling that fits L0A/L0B/L0C/L1 with double buffering."""
    try:
        return _gemm_tiling(chip, spec)
    except _NoFit as exc:
        raise SimulationError(f"op '{op}': {exc}") from None


class _NoFit(Exception):
    """No tile shape fits the buffers (turned into a SimulationError naming them)."""


@functools.lru_cache(maxsize=4096)
def _gemm_tiling(chip, spec: GemmSpec) -> GemmTiling:
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    mp, np_ = ceil_to(spec.m, m0), ceil_to(spec.n, n0)
    best: GemmTiling | None = None
    smallest = None
    for m_t in _MN_EDGES:
        if m_t > max(mp, m0) * 2 and m_t > m0:
            continue
        for n_t in _MN_EDGES:
            if n_t > max(np_, n0) * 2 and n_t > n0:
                continue
            l0c = 2 * m_t * n_t * spec.acc_bytes
            # coupled chips stage the output tile (and the epilogue's extra inputs) in UB
            ub = 2 * m_t * n_t * (spec.out_bytes + sum(b for b, _ in spec.epi_inputs))
            if chip.coupled and ub > chip.ub_bytes:
                continue
            for ks in _K_STEPS:
                k_t = ks * k0
                if k_t > ceil_to(spec.k, k0) and ks > 1:
                    continue
                l0a, l0b = 2 * m_t * k_t * spec.in_bytes, 2 * k_t * n_t * spec.in_bytes
                need = (l0a, l0b, l0c)
                if smallest is None or sum(need) < sum(smallest[1]):
                    smallest = ((m_t, n_t, k_t), need)
                if l0a > chip.l0a_bytes or l0b > chip.l0b_bytes or l0c > chip.l0c_bytes:
                    continue
                nk = cdiv(spec.k, k_t)
                for r in _L1_STEPS:
                    if r > nk or nk % r:
                        continue
                    k_l1 = k_t * r
                    a_chunk = math.ceil(_a_tile_bytes(spec, m_t) * k_l1 / spec.k)
                    l1 = 2 * (a_chunk + k_l1 * n_t * spec.in_bytes
                              + (n_t * spec.acc_bytes if spec.bias else 0))
                    if l1 > chip.l1_bytes:
                        continue
                    t = _estimate(chip, spec, m_t, n_t, k_t, k_l1)
                    if best is None or t.est < best.est * (1 - 1e-9):
                        best = t
    if best is None:
        (m_t, n_t, k_t), (a, b, c) = smallest
        bufs = [("L0A", a, chip.l0a_bytes), ("L0B", b, chip.l0b_bytes),
                ("L0C", c, chip.l0c_bytes)]
        name, req, cap = next(((n, r, c) for n, r, c in bufs if r > c),
                              ("L1", 2 * (m_t + n_t) * k_t * spec.in_bytes, chip.l1_bytes))
        raise _NoFit(f"{name} of core 0 ({cap} B) cannot hold the minimum cube tile "
                     f"{m_t}x{k_t}x{n_t} with double buffering ({req} B)")
    return best


def _estimate(chip, spec: GemmSpec, m_t: int, n_t: int, k_t: int, k_l1: int) -> GemmTiling:
    """A candidate tile's estimated time: the slowest pipe's period over the tiles of one
    core, plus the pipeline's fill (the first L1 chunk) and drain (the last output)."""
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    mp, np_ = ceil_to(spec.m, m0), ceil_to(spec.n, n0)
    c0, cores = chip.cube_mmad_overhead_cycles, chip.ai_cores
    l2_bw = chip.l2_bandwidth_bytes_per_s / chip.clock_hz
    hbm_bw = chip.hbm_bandwidth_bytes_per_s / chip.clock_hz
    tiles = spec.batch * cdiv(mp, m_t) * cdiv(np_, n_t)
    block = min(cores, tiles)
    per_core = cdiv(tiles, block)
    nk = cdiv(spec.k, k_t)
    mmad = cdiv(m_t, m0) * (k_t // k0) * cdiv(n_t, n0) + c0
    t_m = nk * mmad
    pb = chip.path_bytes_per_cycle
    t_mte1 = nk * (m_t * k_t * spec.in_bytes / pb.l1_l0a + k_t * n_t * spec.in_bytes / pb.l1_l0b)
    gm_bytes = _a_tile_bytes(spec, m_t) + spec.k * n_t * spec.in_bytes
    miss = (spec.miss_a + spec.miss_b) / 2
    core_bw = pb.gm_l1 * (1 - miss) + miss * pb.gm_l1 / chip.l2_miss_slowdown
    share = min(core_bw, l2_bw / block, hbm_bw / (block * max(miss, 1e-9)))
    t_mte2 = gm_bytes / share + (nk * k_t // k_l1) * 2 * chip.path_latency_cycles.gm_l1
    out = m_t * n_t
    if chip.coupled:
        t_out = out * spec.acc_bytes / pb.l0c_ub
        t_st = out * spec.out_bytes / pb.ub_gm
    else:
        t_out = out * spec.out_bytes / pb.l0c_gm
        t_st = 0.0
    period = max(t_m, t_mte1, t_mte2, t_out, t_st)
    est = per_core * period + (t_mte2 * k_l1 / (nk * k_t)) + t_out + t_st
    return GemmTiling(m_t, n_t, k_t, k_l1, tiles, block, est)


def gemm_work(chip, spec: GemmSpec, op: str) -> tuple[list[CoreGroup], list[str], GemmTiling]:
    """Core groups for a cube task, with notes (tile shape, block dim, padding waste)."""
    t = gemm_tiling(chip, spec, op)
    stages = _gemm_stages(chip, spec, t)
    groups = []
    core = 0
    for count, ncores in split_even(t.tiles, t.block):
        groups.append(CoreGroup(tuple(range(core, core + ncores)), (Segment(stages, count),)))
        core += ncores
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    useful = spec.batch * spec.m * spec.n
    padded = t.tiles * t.m_t * t.n_t
    notes = [f"cube tiling: tile m{t.m_t} x n{t.n_t}, k step {t.k_t}, L1 chunk {t.k_l1}; "
             f"{t.tiles} tiles over block dim {t.block}",
             f"cube padding: M {spec.m}->{ceil_to(spec.m, m0)}, N {spec.n}->"
             f"{ceil_to(spec.n, n0)}, K {spec.k}; output tiles cover {padded} elements for "
             f"{useful} useful ({100 * (1 - useful / padded):.1f}% waste)"]
    return groups, notes, t


def _gemm_stages(chip, spec: GemmSpec, t: GemmTiling) -> tuple[Stage, ...]:
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    nk = cdiv(spec.k, t.k_t)
    n_l1 = nk * t.k_t // t.k_l1
    a_chunk = math.ceil(_a_tile_bytes(spec, t.m_t) / n_l1)
    b_chunk = t.k_l1 * t.n_t * spec.in_bytes
    mte2 = (gm_read(chip, "MTE2", "L1", a_chunk, spec.miss_a, same_address=spec.shared_a),
            gm_read(chip, "MTE2", "L1", b_chunk, spec.miss_b, same_address=spec.shared_b))
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
    epi = vec_instrs(chip, spec.epilogue, out)
    l1_slot = a_chunk + b_chunk + (t.n_t * spec.acc_bytes if spec.bias else 0)
    stages = [Stage("MTE2", mte2, units=n_l1, head=head, out_bufs=(("L1", l1_slot),)),
              Stage("MTE1", mte1, units=nk, out_bufs=(("L0A", a_l0), ("L0B", b_l0))),
              Stage("M", mmad, units=nk, out_bufs=(("L0C", out * spec.acc_bytes),))]
    epi_ub = math.ceil(sum(b for b, _ in spec.epi_inputs) * out)
    if chip.coupled:
        move = local_move(chip, "V", "L0C", "UB", out * spec.acc_bytes)
        stages.append(Stage("V", (move,) + epi,
                            out_bufs=(("UB", out * spec.out_bytes + epi_ub),)))
        stages.append(Stage("MTE3", (gm_write(chip, "MTE3", "UB", out * spec.out_bytes,
                                              spec.out_through),)))
    else:
        stages.append(Stage("FIX", (gm_write(chip, "FIX", "L0C", out * spec.out_bytes,
                                             spec.out_through),)))
    n_instr = n_l1 * 2 + nk * 3 + len(head) + issued_instrs(spec.epilogue) + 2
    return (scalar_stage(chip, n_instr),) + tuple(stages)
