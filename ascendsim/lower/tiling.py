"""Tilings: how a vector op is split over cores and tiles; the data-move and issue helpers.

Note on the model
-----------------
Cube: see `cube_tiling` (CANN Matmul/Conv tiling: base blocks, L1 operand reuse, nd2nz).

Vector (`vector_work`). The op's elements are split over the vector cores: a prebuilt
dynamic-shape kernel (a framework's eager op on the A2, `VecSpec.split` "dynamic") over the
blocks its run-time tiling gives (lower/dynamic_tiling.py: TBE's ELEWISE, broadcast and
reduce tilings); where the chip's
built-in vector kernels are TBE DSL schedules (`chip.vector_split_bytes`), as TBE's
VectorSchedule splits them, one core per 1 KB of the tensor it tiles, rounded up, up to the
core count (tbe/dsl/static_schedule/vector_schedule.py `_get_block_tiling`,
ENABLE_MULTI_CORE_THRESHOLD = 1024 bytes: a 2560-element fp32 ReduceSum runs on 10 cores; a
kernel that only copies, TBE's TIK copy_only, which strided_slice_d runs when the slice keeps
every element, gives each core n // cores elements rounded up to a 32-byte block, so a
128-element int32 copy runs on 16 cores, `VecSpec.split`); elsewhere at least
`chip.gm_min_efficient_transfer_bytes` of traffic per core, the size at which GM moves reach
full bandwidth; a node with its own `block_dim` (a profile's Block Num) runs on exactly those
blocks however few bytes each moves (`VecSpec.split` "pinned"). The elements are then cut into
tiles as large as the UB allows with double buffering: 2 x (input + output + intermediate
bytes per element) x tile elements <= UB, except in a prebuilt TBE ELEWISE kernel (`split`
"elewise"), whose run-time tiling keeps a block that fits the UB single-buffered as one tile
and double-buffers only longer ones (`elewise_tiles`); a kernel that loops over a fixed group
of rows at a time (`row_tile`: RmsNorm's NORMAL mode one row, the TBE LayerNorm cube path 16)
gets one tile per group and ceil(groups / cores) whole groups per core, the last core the rest
(`split_blocked`). A kernel that binds whole rows to cores (`row_elems`: CANN's Ascend C
RmsNorm on A2 in every tiling mode, ops-nn rms_norm_tiling.cpp blockFactor = ceil(rows / AIV
cores); TBE's NORM-pattern Softmax, whose block split is on the not-reduced axes only) runs on
min(rows, cores) cores whatever the bytes, never splitting a row: one row of 16384 bf16 is one
core's work, looped over in UB tiles (SPLIT_D); where the kernel's tiling fixes its rows per
UB loop (`tile_rows`: RmsNorm MERGE_N's rowFactor), a tile holds at most that many rows. Such
a row longer than a tile is passed over chunk by chunk once per reduction and once more to
write the result, so its main input is read `row_reads` times from GM (RmsNorm SPLIT_D 2: the
sum of squares, then y); the reads after the first hit the L2, which holds the row the core
read a pass earlier, as long as one pass over the rows of all the kernel's cores fits the part
of the L2 the model leaves to reuse (`chip.l2_resident_bytes`); past it they miss
(`reread_miss_fraction`: an LRU cache swept cyclically by more than it holds keeps none of the
sweep; sixteen cores on rows of 4 M fp32 elements sweep 256 MiB a pass). A kernel with its own
rule for when a row is over its UB budget says so (`row_over`: TBE's NORM-pattern Softmax,
lower/seq_types.py `NormSchedule`), and its workspace schedule adds a tensor of `row_ws_bytes`
per element written to GM and read back `row_ws_reads` times, from the L2 while a pass fits
it; past it the re-reads miss, and the workspace lines, evicted dirty before they are read
again, are written back to HBM as well (the L2 is a write-back cache); a NORM kernel that
reduces an axis that is not innermost binds no rows, and its passes sweep `pass_elems` per
core (its R rows of its A share) before a chunk is read again, except the workspace's first
re-read, which follows the workspace of all the block's A slices (`ws_pass_elems`). A
head-loop kernel (`head_elems`: CANN's rotate-half RoPE on A2, ops-transformer
rope_rotate_half_tiling.cpp and
rotate_half_bf16.h) binds whole lines of `row_elems` to min(lines, cores) cores, former cores
one line more (`split_even`, as GetCoreDataTiling splits totalSLines); per UB step of at most
`step_lines` of a core's lines it loads its tables (the inputs after the first: cos, sin) and
runs `step_parts` on them once, then loops over the line's heads, one tile of (step lines x
`head_elems`) elements per head: one strided load, the sequence, one store, double-buffered
(`head_loop_work`). Its time grows with the heads per core, not with the bytes. One tile is
  S -> MTE2 (GM->UB, one move per input) -> V (one instruction per vector op) -> MTE3 (UB->GM).
A vector instruction on b bytes costs max(vector_min_cycles, b / rate(class, dtype)). A kernel
that stores its output in several DMA commands per tile (`VecSpec.out_moves`: the TIK
MaxPoolWithArgmax's one mask store per window position, lower/pool.py) pays the UB -> GM
latency once per command, as `moves` does for a gather's reads.

Scalar: every tile costs `chip.scalar_ops_per_instr` scalar operations (loop, address and
issue work) per instruction it issues, at `chip.scalar_ops_per_cycle`. A row-at-a-time kernel
whose scalar unit reads each row's reduction back before it issues the rest of the row and
the next load (`VecSpec.round_trip`: RmsNorm NORMAL) ends the row's V stage with the scalar
work the vector steps after the reduction do not cover (`round_trip_cycles`).

Bursts: a kernel that moves its rows one GM burst each (`VecSpec.bursts` / `out_bursts`)
paces each move at the chip's cycles a burst (`burst_cycles`); a tile whose load overlaps
the store of the tile before it draws on one chip-wide rate for both directions
(`overlapped_burst_share`, `_burst_runs`: a core's first load and last store run alone).

GM moves get their per-core bandwidth from the chip's path table, de-rated on an L2 miss as
msKPP does: bw_eff = hit*bw + miss*bw/l2_miss_slowdown, and by `chip.gm_same_address_slowdown`
when several cores read the same operand strip at once (the cube's wave sharing); the
simulator further shares L2 and HBM bandwidth among all concurrent moves. Every hardware
figure comes from the chip (with its source); the constants below are search parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import SimulationError
from ..hw.names import GM_SAME_ADDRESS_BYTES
from .program import GM, CoreGroup, Instr, Segment, Stage, gm_tensors
from .seq_types import REDUCE
from .vector_seq import SeqPart, part_cycles, part_steps


def ceil_to(x: int, m: int) -> int:
    return -(-x // m) * m


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ----------------------------------------------------------------------------- data moves
def gm_read(chip, pipe: str, dst: str, nbytes: int, miss: float, kind: str = "copy",
            same_address: bool = False, moves: int = 1, bursts: int = 0,
            per_burst: float = 0.0) -> Instr:
    """A GM -> dst move of `nbytes` with L2 miss fraction `miss` (msKPP de-rate); reads that
    several cores make of the same addresses at once are slowed by the chip's
    `gm_same_address_slowdown`; `moves` DMA commands issued one after another (a gather's one
    move per row) each pay the path's latency; a move of `bursts` separate bursts (a
    DataCopyPad of one row per burst) takes at least `per_burst` cycles a burst
    (`burst_cycles`). A gather's row moves that miss the L2 pay the chip's
    `gm_row_miss_latency_cycles` where it gives one (weighted by `miss`)."""
    bw = chip.path_bytes_per_cycle.get("gm", dst.lower())
    lat = chip.path_latency_cycles.get("gm", dst.lower())
    if moves > 1 and chip.gm_row_miss_latency_cycles:
        lat += miss * max(0.0, chip.gm_row_miss_latency_cycles - lat)
    lat *= max(1, moves)
    eff = bw * (1.0 - miss) + miss * bw / chip.l2_miss_slowdown
    if same_address:
        eff /= chip.gm_same_address_slowdown
    if bursts and per_burst:
        eff = min(eff, nbytes / (bursts * per_burst))
    return Instr(pipe, kind, int(round(lat)), int(nbytes), GM, dst, eff, float(miss),
                 gm_tensors(miss))


def gm_write(chip, pipe: str, src: str, nbytes: int, through: float, moves: int = 1,
             bursts: int = 0, per_burst: float = 0.0) -> Instr:
    """A src -> GM move; `through` = fraction written through to HBM (does not stay in L2);
    `moves` DMA commands issued one after another each pay the path's latency (as `gm_read`);
    a move written as `bursts` short bursts to scattered addresses (a DataCopy with blockLen 1
    and a destination stride) takes at least `per_burst` cycles a burst (`burst_cycles`)."""
    bw = chip.path_bytes_per_cycle.get(src.lower(), "gm")
    lat = chip.path_latency_cycles.get(src.lower(), "gm") * max(1, moves)
    if bursts and per_burst:
        bw = min(bw, nbytes / (bursts * per_burst))
    return Instr(pipe, "copy", int(round(lat)), int(nbytes), src, GM, bw, float(through),
                 gm_tensors(through))


def burst_cycles(chip, cores: int, write: bool = True, share: float = 1.0) -> float:
    """Cycles one core spends per burst of a GM move of many short bursts when `cores` cores
    move such bursts at once: the chip's per-core figure, or its share of the chip-wide rate,
    whichever is slower (`Chip.gm_write_burst_cycles` / `gm_write_bursts_per_cycle` for a
    write, `gm_read_burst_cycles` / `gm_read_bursts_per_cycle` for a read); 0 where the chip
    gives neither (the path rate alone). `share`: the bursts of both directions in flight
    per burst of this move, where a core's loads and stores overlap and draw on the one
    chip-wide rate (`overlapped_burst_share`)."""
    if write:
        per_core, rate = chip.gm_write_burst_cycles, chip.gm_write_bursts_per_cycle
    else:
        per_core, rate = chip.gm_read_burst_cycles, chip.gm_read_bursts_per_cycle
    return max(per_core or 0.0, cores * share / rate if rate else 0.0)


def overlapped_burst_share(reads: float, writes: float) -> tuple[float, float]:
    """(read, write) `burst_cycles` shares of a tile whose load overlaps the store of the tile
    before it (or whose store overlaps the next load) when the chip-wide burst rate is one
    budget for both directions: each move's bursts wait behind the other direction's as well,
    so the pair takes (reads + writes) bursts at the core's share of the rate. A direction
    without bursts of its own (one burst a move) takes no share of the other's."""
    if reads <= 0 or writes <= 0:
        return 1.0, 1.0
    both = reads + writes
    return both / reads, both / writes


def fix_row_cycles(chip, n_cols: int, acc_bytes: int) -> int:
    """FixPipe cycles per output row of an L0C tile `n_cols` wide (split chips): the FixPipe
    reads the row's accumulators (`acc_bytes` each, fp32 / int32) and writes one GM burst per
    row. Huawei's A2/A3 pipe model charges each row whole cycles of its burst, ceil(N / 16) x
    16 x 4 bytes of L0C (hicann/pypto framework/src/cost_model/simulation_ca/A2A3/model/
    pipe.cpp `CalcFixL0cOut`), and msKPP sizes its measured L0C -> GM curve, which
    `path_bytes_per_cycle.l0c_gm` is fitted to, by the source tensor's bytes, i.e. L0C bytes
    (Ascend mskpp prof_data/mov_prof.py `MovPref.size`): so the row's L0C bytes at that rate,
    rounded up to whole cycles."""
    burst = math.ceil(n_cols / 16) * 16 * acc_bytes
    return math.ceil(burst / chip.path_bytes_per_cycle.l0c_gm)


def fix_cycles(chip, rows: int, n_cols: int, acc_bytes: int) -> int:
    """Transfer cycles (without the path latency) of a FixPipe write of a rows x n_cols L0C
    tile to GM (`fix_row_cycles` per row)."""
    return rows * fix_row_cycles(chip, n_cols, acc_bytes)


def fix_write(chip, rows: int, n_cols: int, acc_bytes: int, out_bytes: int,
              through: float) -> Instr:
    """An L0C -> GM FixPipe write of a rows x n_cols tile: GM traffic of its output bytes
    (`out_bytes` per element), paced by `fix_cycles` (the move's effective per-core rate)."""
    nbytes = rows * n_cols * out_bytes
    ins = gm_write(chip, "FIX", "L0C", nbytes, through)
    return replace(ins, bw=nbytes / fix_cycles(chip, rows, n_cols, acc_bytes))


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
    steps = 0
    kinds: list[str] = []
    # a step of a run waits out the completion of the step before it (the PipeBarrier<PIPE_V>
    # CANN kernels put between dependent vector instructions); the run's first step does not
    dep = chip.vector_dep_latency_cycles or 0.0

    def close() -> None:
        out.append(Instr("V", _seq_kind(kinds), max(run + math.ceil(dep * max(steps - 1, 0)), 1)))

    for p in parts:
        if isinstance(p, SeqPart):
            run += part_cycles(chip, p, elems)
            steps += part_steps(p, elems)
            kinds.append(p.instr.split()[0])
            continue
        if kinds:
            close()
            run, steps, kinds = 0, 0, []
        out.append(vec_instr(chip, p.vclass, p.dtype, p.bytes_per_elem * elems, p.kind))
    if kinds:
        close()
    return tuple(out)


def round_trip_cycles(chip, parts, elems: float) -> int:
    """Cycles a row-at-a-time kernel's next load waits beyond its vector work (at least 1)
    when its scalar unit reads each row's reduction back (SetFlag / WaitFlag V_S, GetValue)
    before it issues the rest of the row: the reduction's completion
    (`vector_dep_latency_cycles`), then, before the next load's DMA, the row's store and that
    load as TQue round trips with their DMA issue (`vector_tile_scalar_cycles_per_queue`
    each) and the vector instructions after the reduction
    (`vector_tile_scalar_cycles_per_vec_instr` each), less what those instructions take on
    the V pipe, which they occupy meanwhile. The scalar arithmetic of the row's statistic (a
    sqrt and a divide) is not costed: no public cycle figure."""
    seq = [p for p in parts if isinstance(p, SeqPart)]
    last = max((k for k, p in enumerate(seq) if p.shape == REDUCE), default=len(seq) - 1)
    tail = seq[last + 1:]
    dep = chip.vector_dep_latency_cycles or 0.0
    scalar = (dep + 2 * (chip.vector_tile_scalar_cycles_per_queue or 0.0)
              + len(tail) * (chip.vector_tile_scalar_cycles_per_vec_instr or 0.0))
    vector = sum(part_cycles(chip, p, elems) + dep for p in tail)
    return max(1, math.ceil(scalar - vector))


def _seq_kind(kinds: list[str]) -> str:
    return f"vec_{kinds[0]}" if len(kinds) == 1 else "vec_seq"


def issued_instrs(parts, elems: float = 0.0) -> int:
    """Vector instructions the scalar unit issues for the parts (a sequence's every step) on
    a tile of `elems` task elements: each part's `part_steps` (a per-row LOOP part one call
    per row, a COLUMNS part one per column block of the row, a halving reduce one per
    level)."""
    return sum(part_steps(p, elems) if isinstance(p, SeqPart) else 1 for p in parts)


def _scalar_work(cycles: float, units: int = 1) -> Stage:
    """An S stage of `cycles` scalar cycles per unit (at least one), `units` units a tile."""
    return Stage("S", (Instr("S", "scalar", max(math.ceil(cycles), 1)),), units=units)


def scalar_stage(chip, n_instr: int) -> Stage:
    return _scalar_work(n_instr * chip.scalar_ops_per_instr / chip.scalar_ops_per_cycle)


def api_scalar_cycles(chip, loads, steps):
    """Scalar cycles of one base block in a Matmul-API Ascend C kernel (A2/A3): the chip's
    `cube_tile_scalar_cycles_per_instr` for each cube-side instruction the API issues, two
    GM->L1 loads per L1 chunk (`loads`) and per K step (`steps`) two L1->L0 loads and an mmad
    (Huawei's Matmul sample: 449-450 scalar cycles per K step of a Norm-template kernel with
    run-time tiling, whatever its base block or core count). Works on numpy arrays too."""
    return chip.cube_tile_scalar_cycles_per_instr * (2 * loads + 3 * steps)


def cube_scalar_stage(chip, n_l1: int, nk: int, other: int) -> Stage:
    """The scalar work of one cube tile: its L1 chunk loads (two each), its K steps (three
    instructions each) and `other` instructions. With the Matmul API's figure
    (`api_scalar_cycles`) it is issued as the K loop runs, one share per L1 chunk, a loop stage
    beside MTE2; otherwise `scalar_ops_per_instr` per instruction, once before the tile."""
    if not chip.cube_tile_scalar_cycles_per_instr:
        return scalar_stage(chip, n_l1 * 2 + nk * 3 + other)
    rest = other * chip.scalar_ops_per_instr / chip.scalar_ops_per_cycle
    return _scalar_work(math.ceil((api_scalar_cycles(chip, n_l1, nk) + rest) / n_l1), n_l1)


def vector_scalar_stage(chip, transfers: int, n_instr: int, n_vec: int) -> Stage:
    """The scalar unit's work for one vector tile of `transfers` GM <-> UB moves, `n_vec`
    vector instructions and `n_instr` instructions in all. On a chip whose vector kernels are
    TQue-framework Ascend C loops (`vector_tile_scalar_cycles_per_queue` set): per transfer its
    queue round trip (AllocTensor / EnQue / DeQue / FreeTensor) and the DMA's set-up and issue,
    per vector instruction its API set-up and issue
    (`vector_tile_scalar_cycles_per_vec_instr`); elsewhere `scalar_ops_per_instr` per issued
    instruction of either kind."""
    per_queue = chip.vector_tile_scalar_cycles_per_queue
    if per_queue is None:
        return scalar_stage(chip, n_instr)
    per_vec = chip.vector_tile_scalar_cycles_per_vec_instr or 0.0
    return _scalar_work(transfers * per_queue + n_vec * per_vec)


def split_even(total: int, parts: int) -> list[tuple[int, int]]:
    """[(amount, how many parts get it)]: `total` over `parts` as evenly as possible."""
    q, r = divmod(total, parts)
    out = []
    if r:
        out.append((q + 1, r))
    if q:
        out.append((q, parts - r))
    return out


def split_blocked(total: int, parts: int) -> list[tuple[int, int]]:
    """[(amount, how many parts get it)]: `total` in blocks of ceil(total / parts), the last
    block taking the rest, as row-wise kernels bind rows to cores (ops-nn rms_norm_tiling.cpp
    blockFactor = ceil(rows / cores), useCoreNum = ceil(rows / blockFactor); TVM's
    split(nparts=cores) in TBE's layer_norm_cube_schedule)."""
    factor = cdiv(total, parts)
    used = cdiv(total, factor)
    rest = total - factor * (used - 1)
    if rest == factor:
        return [(factor, used)]
    return [(factor, used - 1), (rest, 1)]


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
    buffers: int = 2                            # UB slots per queue (kernel's BUFFER_NUM)
    row_tile: int = 0                           # >0: elements per row-group tile (note)
    row_elems: int = 0                          # >0: whole rows of this many per core (note)
    row_reads: int = 1                          # main-input reads when such a row > a tile
    # whether such a row is over the kernel's UB budget, by its own rule (a TBE NORM kernel's,
    # lower.vector.kernel_pipeline); None: when it is longer than a tile
    row_over: bool | None = None
    # a row over it: bytes per element written to a GM workspace and read back row_ws_reads
    # times (a TBE NORM kernel's workspace schedule)
    row_ws_bytes: float = 0.0
    row_ws_reads: int = 0
    # a kernel whose reduced axis is not innermost and over its UB budget (a TBE NORM
    # kernel's workspace schedule over R x A, lower.vector.norm_strided): the elements one
    # core sweeps between reading a chunk and reading it again (its R rows of its A share)
    pass_elems: int = 0
    # such a kernel's elements one core sweeps between writing a workspace chunk and its
    # first re-read: the workspace stage covers every A slice of the block before the result
    # stage reads any back (lower.vector.norm_strided); 0: `pass_elems`
    ws_pass_elems: int = 0
    tile_rows: int = 0                          # >0: such a kernel's rows per UB loop
    # "copy": TBE copy_only's core split (note); "pinned": the kernel's own block count;
    # "dynamic": a prebuilt dynamic-shape kernel's run-time split (lower/dynamic_tiling.py);
    # "elewise": that of a TBE ELEWISE kernel, whose run-time tiling also sizes its UB tiles
    # (`elewise_tiles`)
    split: str = ""
    # per input, GM moves per element (a gather's one DMA per row, 1/row length); () or 0:
    # one move per tile
    moves: tuple[float, ...] = ()
    # DMA commands per tile that write the output (a TIK kernel's one store per window
    # position of its argmax mask, lower/pool.py); 1: one store per tile
    out_moves: int = 1
    # >0: a head-loop kernel (note): elements per head slice of a line of `row_elems`; UB
    # step of at most `step_lines` lines; V work once per step on the tables (inputs 1:)
    head_elems: int = 0
    step_lines: int = 0
    step_parts: tuple[SeqPart, ...] = ()
    # >0: UB bytes per element over all slots and working buffers, as the kernel's tiling
    # sizes its tile (`OpSequence.ub_bytes`, `lower/vector.py` kernel_ub); 0: buffers x
    # (in + out + temp bytes)
    ub_elem_bytes: float = 0.0
    # >0: the kernel's own tile, at most this many task elements (`OpSequence.tile`)
    tile_elems: int = 0
    # per input, GM bursts per element when the kernel moves it one row piece per burst
    # (`lower.vector.row_bursts`); () : one burst per move
    bursts: tuple[float, ...] = ()
    # GM bursts per element of the output moves, likewise
    out_bursts: float = 0.0
    # the kernel's own tiles per core (`lower.glu_tiling.glu_shares`): (task elements per
    # core, cores, tiles per core); (): the generic split
    core_tiles: tuple[tuple[int, int, int], ...] = ()
    # a kernel that reads each tile's reduction back on the scalar unit before it issues the
    # rest of the tile and the next load (`OpSequence.round_trip`, `round_trip_cycles`)
    round_trip: bool = False
    # bytes per row element every core adds atomically into one GM row at its end
    # (`OpSequence.atomic_row`, `atomic_row_tail`)
    atomic_row: float = 0.0
    # a kernel without vector steps that stores each tile from the UB buffer its load filled
    # (the A2 Transpose keeping its last axis): no V stage, the next load waits for the store
    dma_only: bool = False
    core_paced_bursts: bool = False   # bursts paced by the per-core figures (transpose_bursts)


def ub_slot_elems(chip, spec: VecSpec, op: str) -> tuple[int, float]:
    """(elements per UB slot, UB bytes per element of one slot's tile) of a vector task:
    the UB divided by the slots and every buffer's bytes per element (or the kernel's own
    count, `ub_elem_bytes`), aligned, at most the kernel's own tile (`tile_elems`); a clear
    error when not even one aligned tile fits."""
    per_elem = max(sum(b for b, _ in spec.inputs) + spec.out_bytes + spec.temp_bytes, 1e-9)
    ub_elem = spec.ub_elem_bytes or spec.buffers * per_elem
    slot_elems = int(chip.ub_bytes / ub_elem)
    slot_elems -= slot_elems % spec.align
    if slot_elems < spec.align:
        raise SimulationError(
            f"op '{op}': UB of core 0 ({chip.ub_bytes} B) cannot hold the minimum tile: "
            f"{spec.buffers} slot(s) x {spec.align} elements x {ub_elem / spec.buffers:g} "
            f"B/element = {spec.align * ub_elem:g} B")
    if spec.tile_elems > 0:
        slot_elems = min(slot_elems, spec.tile_elems)
    return slot_elems, per_elem


def vector_work(chip, spec: VecSpec, op: str, cores: int) -> tuple[list[CoreGroup], list[str]]:
    """Core groups and notes for a vector task (see the module note)."""
    slot_elems, per_elem = ub_slot_elems(chip, spec, op)
    if spec.head_elems > 0 and spec.row_elems > 0:
        return head_loop_work(chip, spec, cores)
    # (copy_only splits in 32-byte blocks, not in tiles of `align` elements)
    most = cores if spec.split == "copy" else min(cores, cdiv(spec.elems, spec.align))
    own = spec.split in ("pinned", "dynamic", "elewise")   # the kernel's own block count
    block = max(1, min(most, cores if own else split_cores(chip, spec, cores)))
    # the kernel's own tiles per core, at least as many as the UB slots allow
    shares = [(e, n, max(k, cdiv(e, slot_elems))) for e, n, k in spec.core_tiles] or None
    if shares:
        block, slot_elems = sum(n for _, n, _ in shares), max(cdiv(e, k) for e, _, k in shares)
    if spec.row_elems > 0:
        # whole rows per core, on as many cores as the kernel's tiling binds rows to
        # (min(rows, cores)), whatever the bytes; a core tiles its rows as the UB allows
        rows = cdiv(spec.elems, spec.row_elems)
        block = min(cores, rows)
        if spec.tile_rows > 0:   # the kernel's rows per UB loop, if `buffers` slots hold them
            slot_elems = min(slot_elems, spec.tile_rows * spec.row_elems)
        if not 0 < spec.row_tile <= slot_elems:
            shares = [(round(k * spec.elems / rows), n,
                       cdiv(round(k * spec.elems / rows), slot_elems))
                      for k, n in split_blocked(rows, block)]
    if 0 < spec.row_tile <= slot_elems:
        # a kernel that loops over its rows a fixed group at a time: a tile per group, whole
        # groups per core (at most a core per group)
        slot_elems = spec.row_tile
        total = cdiv(spec.elems, spec.row_tile)
        block = min(block, total)
        shares = [(round(k * spec.elems / total), n, k) for k, n in split_blocked(total, block)]
    # a bound row longer than a tile (or over the kernel's own budget) is passed over chunk
    # by chunk, once per `row_reads`
    over = spec.row_elems > slot_elems if spec.row_over is None else spec.row_over
    swept = spec.row_elems or spec.pass_elems
    reads = spec.row_reads if over and swept and not spec.row_tile else 1
    ws = spec.row_ws_bytes if reads > 1 else 0.0
    reread_miss = reread_miss_fraction(chip, spec, block, ws) if reads > 1 else 0.0
    ws_miss = (reread_miss_fraction(chip, replace(spec, pass_elems=spec.ws_pass_elems), block,
                                    ws) if ws and spec.ws_pass_elems else reread_miss)
    per_burst = _per_burst(chip, spec, block)
    groups: list[CoreGroup] = []
    core = 0
    if spec.split == "elewise":
        shares, slot_elems = elewise_shares(chip, spec, block, per_elem)
    for per_core, ncores, ntiles in shares or [
            (e, n, cdiv(e, slot_elems)) for e, n in split_even(spec.elems, block)]:
        tiles = _burst_runs(chip, spec, block, split_even(per_core, ntiles))
        segs = [Segment(_vector_stages(chip, spec, tile_elems, reads, ws, (reread_miss, ws_miss),
                                       paced), count) for tile_elems, count, paced in tiles]
        segs += atomic_row_tail(chip, spec, block)
        groups.append(CoreGroup(tuple(range(core, core + ncores)), tuple(segs)))
        core += ncores
    tile = slot_elems if spec.core_tiles else min(slot_elems, cdiv(spec.elems, block))
    notes = [f"vector tiling: {spec.elems} elements over {block} core(s), up to {tile} "
             f"elements per tile (UB {chip.ub_bytes} B, {_ub_split(spec, per_elem)})"]
    notes += _elewise_notes(spec, shares)
    notes += _row_pass_notes(chip, spec, block, reads, ws, reread_miss)
    notes += _burst_notes(chip, spec, tile, block, per_burst)
    return groups, notes + _seq_notes(chip, spec, tile)


def atomic_row_tail(chip, spec: VecSpec, block: int) -> list[Segment]:
    """The end of a kernel whose `block` cores each add one row of `spec.atomic_row` bytes a
    row element atomically into the same GM row (RmsNormGrad's CopyDgammaOut: SetAtomicAdd,
    one DataCopyPad of the core's fp32 dgamma; ops-nn rms_norm_grad_split_n_high_precision.h,
    jbgztxdy/ops-nn at 1188a8a). Equal row shares bring the cores there together, and
    requests that fall in one `GM_SAME_ADDRESS_BYTES` range at once are served one after
    another (Ascend C best practices, "Avoiding Same-Address Access"): each of the row's
    ranges takes the cores' requests in turn, the ranges pipelined, so the last core's add
    lands after (block + ranges - 1) UB -> GM latencies, charged to every core. [] if none."""
    if not (spec.atomic_row and spec.row_elems):
        return []
    nbytes = max(1, math.ceil(spec.row_elems * spec.atomic_row))
    ranges = cdiv(nbytes, GM_SAME_ADDRESS_BYTES)
    store = gm_write(chip, "MTE3", "UB", nbytes, 0.0, moves=block + ranges - 1)
    # the tile layout of `_vector_stages` (block detail coalesces stage by stage): no load,
    # no vector work, the scalar unit issuing the one store
    stages = (vector_scalar_stage(chip, 1, 1, 0), Stage("MTE2", (Instr("MTE2", "copy", 1),)),
              Stage("V", (Instr("V", "vec_nop", 1),)), Stage("MTE3", (store,)))
    return [Segment(stages[:2] + stages[3:] if spec.dma_only else stages, 1)]


def _seq_notes(chip, spec: VecSpec, tile: int) -> list[str]:
    """The note of a sequence task's V cycles per tile of `tile` elements."""
    seq = [p for p in spec.parts if isinstance(p, SeqPart)]
    if not seq:
        return []
    return [f"V cycles per tile of {tile} elements: " + ", ".join(
        f"{p.instr} {part_cycles(chip, p, tile)}" for p in seq)]


#: TBE's ELEWISE run-time tiling: a UB tile holds at most this many elements, by the bytes
#: of the kernel's widest dtype (elewise_v3.cc `SPLIT_FACTORS`)
ELEWISE_SPLIT_FACTORS = {1: 32767, 2: 32767, 4: 16383, 8: 8191}


def elewise_tiles(chip, spec: VecSpec, block_elems: int, per_elem: float) -> int:
    """UB tiles of one block of `block_elems` elements of a prebuilt TBE ELEWISE kernel
    (`split` "elewise"), as its run-time tiling cuts them (TBE op_tiling elewise_v3.cc
    `Elewise::SpecialModeTiling`, `DoUbTiling`; public copy dengguojie/vue-element-admin
    ops/built-in/op_tiling/ at 62c5a7f): a block within the single-buffered limit (the UB
    over the `per_elem` bytes every live buffer holds per element, at most the widest
    dtype's `ELEWISE_SPLIT_FACTORS`) is one tile, single-buffered; a longer block turns
    double buffering on and takes ceil(block / limit) tiles of the double-buffered limit
    (half the UB), balanced (TBE's ub_factor is ceil(block / tiles) rounded up to 128
    elements; the model splits the block evenly over the same count)."""
    widest = max([b for b, _ in spec.inputs] + [spec.out_bytes]
                 + [p.item for p in spec.parts if isinstance(p, SeqPart)])
    if block_elems <= elewise_limit(chip.ub_bytes, per_elem, widest):
        return 1
    return cdiv(block_elems, elewise_limit(chip.ub_bytes, 2 * per_elem, widest))


def elewise_limit(ub_bytes: int, elem_bytes: float, widest: float) -> int:
    """Most elements a UB tile of TBE's ELEWISE / broadcast run-time tiling holds: the UB over
    `elem_bytes` per element (0: no UB bound), at most `ELEWISE_SPLIT_FACTORS` of the widest
    dtype's `widest` bytes (a width without a factor takes the 4-byte one)."""
    cap = ELEWISE_SPLIT_FACTORS.get(int(widest), ELEWISE_SPLIT_FACTORS[4])
    return min(int(ub_bytes / elem_bytes), cap) if elem_bytes > 0 else cap


def elewise_shares(chip, spec: VecSpec, block: int, per_elem: float
                   ) -> tuple[list[tuple[int, int, int]], int]:
    """((elements per core, cores, tiles) per group of cores, the largest tile) of a
    prebuilt TBE ELEWISE kernel on `block` cores (`elewise_tiles`)."""
    shares = [(e, n, elewise_tiles(chip, spec, e, per_elem))
              for e, n in split_even(spec.elems, block)]
    return shares, max(cdiv(e, t) for e, _, t in shares)


def _elewise_notes(spec: VecSpec, shares: list | None) -> list[str]:
    """The note of a prebuilt TBE ELEWISE kernel's UB tiling ([] for another kernel)."""
    if spec.split != "elewise" or not shares:
        return []
    tiles = shares[0][2]
    return [f"dynamic ELEWISE UB tiling: {tiles} tile(s) per block, "
            + ("single-buffered" if tiles == 1 else "double-buffered")]


def _per_burst(chip, spec: VecSpec, block: int, shares: tuple[float, float] = (1.0, 1.0)
               ) -> tuple[float, float]:
    """(read, write) cycles per burst of a vector task whose moves are cut into `spec.bursts`
    / `out_bursts` bursts, on `block` cores (`burst_cycles`, with the (read, write) `shares`
    of the chip-wide rate, none of it for `core_paced_bursts`); (0, 0) for one burst a move."""
    if not (spec.bursts or spec.out_bursts):
        return 0.0, 0.0
    s = (0.0, 0.0) if spec.core_paced_bursts else shares
    return burst_cycles(chip, block, False, s[0]), burst_cycles(chip, block, share=s[1])


def _bursts_bind(chip, spec: VecSpec, per_burst: tuple[float, float]) -> bool:
    """Whether bursts at `per_burst` (read, write) cycles each pace the task's loads or its
    stores below the path's byte rate (`gm_read` / `gm_write`)."""
    read_bw = chip.path_bytes_per_cycle.get("gm", "ub")
    cold = [(b, m) for (b, m), k in zip(spec.inputs, spec.bursts) if k > 0]
    reads = sum(b / (read_bw * (1.0 - m) + m * read_bw / chip.l2_miss_slowdown)
                for b, m in cold)
    writes = spec.out_bytes / chip.path_bytes_per_cycle.get("ub", "gm")
    return (sum(spec.bursts) * per_burst[0] > reads
            or spec.out_bursts * per_burst[1] > writes)


def _burst_runs(chip, spec: VecSpec, block: int, runs: list[tuple[int, int]]
                ) -> list[tuple[int, int, tuple[float, float]]]:
    """A core's tiles (`runs`: (elements, count) in order) with the (read, write) cycles per
    burst of each: a tile's load overlaps the store of the tile before it and its store the
    load of the tile after it, both directions drawing on the chip-wide burst rate
    (`overlapped_burst_share`); the core's first load and last store run alone."""
    alone = _per_burst(chip, spec, block)
    shares = overlapped_burst_share(sum(spec.bursts), spec.out_bursts)
    tiles = sum(c for _, c in runs)
    both = _per_burst(chip, spec, block, shares)
    if tiles < 2 or not _bursts_bind(chip, spec, both):
        return [(e, c, alone) for e, c in runs]
    first, last = runs[0][0], runs[-1][0]
    middle = [(e, c) for e, c in runs]
    middle[0] = (first, middle[0][1] - 1)
    middle[-1] = (middle[-1][0], middle[-1][1] - 1)
    return ([(first, 1, (alone[0], both[1]))]
            + [(e, c, both) for e, c in middle if c > 0]
            + [(last, 1, (both[0], alone[1]))])


def _burst_notes(chip, spec: VecSpec, tile: int, block: int,
                 per_burst: tuple[float, float]) -> list[str]:
    """The tiling note of a task whose moves are cut into one GM burst per row, with the
    cycles a burst where its loads and stores overlap (`_burst_runs`)."""
    if not (spec.bursts or spec.out_bursts):
        return []
    shared = _per_burst(chip, spec, block,
                        overlapped_burst_share(sum(spec.bursts), spec.out_bursts))
    both = (f" ({shared[0]:.1f} / {shared[1]:.1f} while a core's loads and stores overlap: "
            "one chip-wide burst rate for both)" if shared != per_burst else "")
    return [f"rows moved one GM burst each: {sum(spec.bursts) * tile:.0f} read and "
            f"{spec.out_bursts * tile:.0f} written per tile of {tile} elements, at least "
            f"{per_burst[0]:.1f} / {per_burst[1]:.1f} cycles a burst on {block} core(s)"
            + both]


def _row_pass_notes(chip, spec: VecSpec, block: int, reads: int, ws: float,
                    reread_miss: float) -> list[str]:
    """The tiling notes of a row-bound kernel that passes over its rows more than once."""
    notes = []
    if ws:
        what = (f"a row of {spec.row_elems} elements" if spec.row_elems else
                "the reduced axis (not innermost) times up to 8 blocks of the inner axes")
        notes.append(f"{what} exceeds the kernel's UB budget: "
                     f"workspace schedule, its input read from GM {reads} times and "
                     f"{ws:g} B/element written to a GM workspace and read back "
                     f"{spec.row_ws_reads} times, chunk by chunk")
    elif reads > 1:
        notes.append(f"a row of {spec.row_elems} elements exceeds the UB tile: its main input "
                     f"is read from GM {reads} times, chunk by chunk (one pass per reduction, "
                     f"one to write)")
    if reread_miss:
        notes.append(f"the passes after the first miss the L2: one pass over the rows of "
                     f"{block} core(s) is {_pass_bytes(spec, block, ws) / 2**20:.0f} MiB, more "
                     f"than the L2 keeps ({chip.l2_resident_bytes / 2**20:.0f} MiB)")
    return notes


def head_loop_work(chip, spec: VecSpec, cores: int) -> tuple[list[CoreGroup], list[str]]:
    """Core groups of a head-loop kernel (module note): whole lines on min(lines, cores)
    cores, former cores one line more (`split_even`); per UB step of at most `step_lines`
    of a core's lines, the first head's tile also loads the tables (inputs after the first)
    and runs `step_parts` on them, then every head is one tile of (step lines x head_elems)
    elements: one strided load, the sequence, one store."""
    lines = cdiv(spec.elems, spec.row_elems)
    block = min(cores, lines)
    heads = max(1, spec.row_elems // spec.head_elems)
    main = replace(spec, inputs=spec.inputs[:1], moves=spec.moves[:1])
    # the first head of a step: its tables' bytes and work, per element of that head's tile
    first = replace(spec, inputs=spec.inputs[:1] + tuple(
        (b * heads, miss) for b, miss in spec.inputs[1:]), parts=spec.parts + tuple(
        replace(p, elems=p.elems * heads) for p in spec.step_parts), moves=())
    groups: list[CoreGroup] = []
    core = 0
    for k, ncores in split_even(lines, block):
        segs: list[Segment] = []
        full, rest = divmod(k, max(spec.step_lines, 1))
        for step in [spec.step_lines] * full + ([rest] if rest else []):
            e = step * spec.head_elems
            segs.append(Segment(_vector_stages(chip, first, e), 1))
            if heads > 1:
                segs.append(Segment(_vector_stages(chip, main, e), heads - 1))
        groups.append(CoreGroup(tuple(range(core, core + ncores)), tuple(segs)))
        core += ncores
    most = cdiv(lines, block)
    notes = [f"head loop: {lines} line(s) of {heads} head(s) x {spec.head_elems} elements "
             f"over {block} core(s), up to {most} line(s) per core in UB steps of up to "
             f"{spec.step_lines}; per head one load, the sequence and one store"]
    seq = [p for p in spec.parts if isinstance(p, SeqPart)]
    tile = min(most, spec.step_lines) * spec.head_elems
    if seq:
        notes.append(f"V cycles per head tile of {tile} elements: " + ", ".join(
            f"{p.instr} {part_cycles(chip, p, tile)}" for p in seq))
    return groups, notes


def _ub_split(spec: VecSpec, per_elem: float) -> str:
    """How the tile's UB bytes per element are counted, for the tiling note."""
    slots = f"{spec.buffers} slot{'s' if spec.buffers > 1 else ''}"
    if spec.ub_elem_bytes:
        return (f"{spec.ub_elem_bytes:g} B/element over {slots} and working buffers, as the "
                f"kernel's tiling sizes it")
    return f"{slots} x {per_elem:g} B/element"


def split_cores(chip, spec: VecSpec, cores: int) -> int:
    """Cores (of `cores`) a vector task's data asks for (module note): where the chip gives
    `vector_split_bytes`, TBE's split (copy_only's for a `split = "copy"` task, else
    VectorSchedule's one core per `vector_split_bytes` of the tensor split, rounded up);
    else one core per `gm_min_efficient_transfer_bytes` of GM traffic (rounded down)."""
    if chip.vector_split_bytes and spec.split == "copy":
        # TBE copy_only (TIK): n // cores elements per core, at least one, rounded up to a
        # 32-byte block; as many cores as that takes
        item = max([b for b, _ in spec.inputs] + [spec.out_bytes, 1e-9])
        per_block = max(1, int(32 // item))
        per_core = cdiv(max(1, spec.elems // cores), per_block) * per_block
        return cdiv(spec.elems, per_core)
    if chip.vector_split_bytes:
        widest = max([b for b, _ in spec.inputs] + [spec.out_bytes])
        return max(1, math.ceil(spec.elems * widest / chip.vector_split_bytes - 1e-9))
    traffic = spec.elems * (sum(b for b, _ in spec.inputs) + spec.out_bytes)
    return int(traffic // chip.gm_min_efficient_transfer_bytes)


def _pass_bytes(spec: VecSpec, block: int, ws: float) -> float:
    """Bytes one pass over a row-bound kernel's rows touches on all its `block` cores: each
    core's row of the main input and of the workspace tensor (`ws` bytes per element); for a
    kernel reducing an axis that is not innermost, each core's `pass_elems` (at most the
    task's elements)."""
    main = spec.inputs[0][0] if spec.inputs else 0.0
    if spec.row_elems:
        return block * spec.row_elems * (main + ws)
    return min(spec.elems, block * spec.pass_elems) * (main + ws)


def reread_miss_fraction(chip, spec: VecSpec, block: int, ws: float) -> float:
    """L2 miss fraction of the passes after the first over a row-bound kernel's rows (module
    note): a chunk is read again after every core has streamed one pass over its row (and
    written its workspace row), so the re-read hits while that pass fits the L2 the model
    leaves to reuse (`chip.l2_resident_bytes`) and misses once it does not (an LRU cache
    swept cyclically by more than it holds keeps none of the sweep)."""
    return 1.0 if _pass_bytes(spec, block, ws) > chip.l2_resident_bytes else 0.0


def _vector_stages(chip, spec: VecSpec, e: int, reads: int = 1,
                   ws: float = 0.0, misses: tuple[float, float] = (0.0, 0.0),
                   per_burst: tuple[float, float] = (0.0, 0.0)) -> tuple[Stage, ...]:
    """One tile's stages; `reads`: GM reads of the main (first) input's bytes, the reads after
    the first missing the L2 by `reread_miss` (`reread_miss_fraction`: 0 when the core's row,
    read a pass earlier, is still there; `misses` = (that fraction, the workspace's first
    re-read's: `VecSpec.ws_pass_elems`); `ws`: bytes per element of a workspace tensor
    written to GM and read back `spec.row_ws_reads` times, the first read at the second
    fraction, the others at the first; the write is left in the L2 while its first re-read
    hits, and written back to HBM at that fraction (a line the sweep evicts before its
    re-read is dirty: the write-back L2 writes it out first);
    `per_burst`: (read, write) cycles per burst of a move of `spec.bursts` / `out_bursts`
    bursts per element (`burst_cycles`)."""
    moves = spec.moves or (0.0,) * len(spec.inputs)
    bursts = spec.bursts or (0.0,) * len(spec.inputs)
    loads = tuple(gm_read(chip, "MTE2", "UB", math.ceil(b * e), miss,
                          moves=math.ceil(m * e - 1e-9) if m else 1,
                          bursts=math.ceil(k * e - 1e-9), per_burst=per_burst[0])
                  for (b, miss), m, k in zip(spec.inputs, moves, bursts) if b > 0)
    reread_miss, ws_miss = misses
    if reads > 1 and spec.inputs and spec.inputs[0][0] > 0:
        loads += (gm_read(chip, "MTE2", "UB", math.ceil(spec.inputs[0][0] * e) * (reads - 1),
                          reread_miss),)
    if ws:
        loads += tuple(gm_read(chip, "MTE2", "UB", math.ceil(ws * e),
                               ws_miss if k == 0 else reread_miss)
                       for k in range(spec.row_ws_reads))
    if not loads:
        loads = (Instr("MTE2", "copy", 1),)
    vec = vec_instrs(chip, spec.parts, e) or (Instr("V", "vec_nop", 1),)
    if spec.round_trip:
        vec += (Instr("V", "wait_scalar", round_trip_cycles(chip, spec.parts, e)),)
    store = (gm_write(chip, "MTE3", "UB", max(math.ceil(spec.out_bytes * e), 1),
                      spec.out_through, moves=spec.out_moves,
                      bursts=math.ceil(spec.out_bursts * e - 1e-9),
                      per_burst=per_burst[1]),)
    if ws:
        store += (gm_write(chip, "MTE3", "UB", math.ceil(ws * e), ws_miss),)
    in_ub = math.ceil(sum(b for b, _ in spec.inputs) * e)
    out_ub = math.ceil((spec.out_bytes + spec.temp_bytes) * e)
    n_vec = max(issued_instrs(spec.parts, e), 1)
    s_stage = vector_scalar_stage(chip, len(loads) + len(store),
                                  len(loads) + n_vec + max(spec.out_moves, 1), n_vec)
    if spec.dma_only:
        return (s_stage, Stage("MTE2", loads, out_bufs=(("UB", in_ub),), slots=spec.buffers),
                Stage("MTE3", store))
    return (s_stage,
            Stage("MTE2", loads, out_bufs=(("UB", in_ub),), slots=spec.buffers),
            Stage("V", vec, out_bufs=(("UB", out_ub),), slots=spec.buffers),
            Stage("MTE3", store))
