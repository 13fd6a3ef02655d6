"""Block detail inside a tile: a long unit loop as identical chunk tiles the engine coalesces.

Note on the model
-----------------
Block detail coalesces a core group's identical tiles (`block.block_processes`: a prefix run
exactly measures the pace, the rest runs as one window per pipe). A group with few tiles gets
nothing from that, yet each of its tiles may be a long loop of units (a weight gradient's or a
long-K GEMM's K loop: hundreds to thousands of k-steps on MTE2/MTE1/M, then one L0C drain on
V/FIX and one store on MTE3 per tile), every unit a few events. `chunked` rewrites the tiles
of such a group, for block detail only, as consecutive chunk tiles each holding an equal share
of the loop, so that the engine's coalescing applies to the chunks.

Chunks. The loop stages are the longest contiguous run of stages, around the one with the most
units, that each run two or more units per tile; the chunks per tile are the largest divisor
of the greatest common divisor of their unit counts that leaves `CHUNK_UNITS` units or more of
the busiest stage in a chunk. A chunk runs units / chunks of every loop stage, with the same
instructions and the same handoffs between the loop stages as the tile (a tile's handoffs on
such a link are a multiple of the chunk count: the same slots, flags and buffers). The stages
before the loop (the scalar setup) do their tile's work in its first chunk, those after it
(the L0C drain, the store) in its last chunk, as the tile does them before and after its loop,
and the heads of the loop stages (their once-per-tile instructions) stay in the first chunk.
In the other chunks a per-tile stage runs one `HANDOFF_KIND` instruction of no cycles that only
passes the handoff on (the chain's flags need a consumer per handoff): it moves nothing, and
the engine counts it as no instruction. Every instruction, byte and cycle of the tile is in
exactly one chunk, in the order the tile runs them. A group is chunked when it has fewer tiles
than the engine's `COALESCE_MIN`, a tile has `UNIT_MIN` units or more on a stage, and the group
gets `CHUNKS_MIN` chunk tiles or more (below that, the prefix's drain and the last chunk's
refill, about a chunk's time each, would weigh on the window).

What the engine makes of them (`block.block_processes` with chunks). The first `PREFIX_TILES`
chunks run exactly (the kernel's setup, the pipeline's fill and a few chunks of the loop, the
L2 deciding every move); the last chunk also runs exactly, after the window, on a fresh set of
flags: the last tile's drain after its loop (the end of the loop, then the L0C drain and the
store) in order. The chunks between run as the window of any coalesced group, the L2 deciding
each of its lock-step slices when it starts, at a pace from the prefix that differs from a
tile's in two ways (`pace_profile`): the per-tile stages are not paced (their work is per tile:
their totals only bound the window), and the pace is the busiest loop stage's own work per
chunk (busy cycles less fabric contention, less the heads, which run once per tile), not the
spacing of the chunk completions: the loop is a chain of double-buffered handoffs of fixed
work, whose steady pace is its busiest stage's, and the spacing of a few short chunks still
holds the pipeline's fill. The per-tile stages' work on the tiles before the last is spread
over the window (in the tile, the drain of tile i overlaps the loop of tile i + 1 as well,
double buffered). Against tile detail: within 2 % on the weight gradients of ResNet-50 and
long-K GEMMs (tests/sim/test_unit_block.py). Tile detail never uses this. """

from __future__ import annotations

import functools
import math

from ..lower.program import CoreGroup, Instr, Segment, Stage

#: chunk long tiles in block detail (bench/unit_block.py compares both forms)
ENABLED = True
#: block detail chunks a group with fewer tiles than the engine's COALESCE_MIN only if a tile
#: has at least this many units on one stage (shorter loops step exactly as before) ...
UNIT_MIN = 128
#: ... and it gets at least this many chunk tiles (module note)
CHUNKS_MIN = 32
#: a chunk holds at least this many units of its busiest stage
CHUNK_UNITS = 16
#: the kind of the no-cycle instruction that passes a chunk's handoff through a per-tile stage
HANDOFF_KIND = "handoff"


def chunked(g: CoreGroup, min_tiles: int) -> tuple[tuple[Segment, ...], bool]:
    """The segments block detail runs for `g`, and whether they are chunk tiles: its own
    when it has `min_tiles` tiles or more or no long unit loop, else its tiles split into
    chunk tiles (module note)."""
    if g.tiles >= min_tiles or not ENABLED:
        return g.segments, False
    segments = _chunk_segments(g.segments, min_tiles)
    return segments, segments is not g.segments


@functools.lru_cache(maxsize=256)
def _chunk_segments(segments: tuple[Segment, ...], min_tiles: int) -> tuple[Segment, ...]:
    out: list[Segment] = []
    total = 0
    for sg in segments:
        split = _split_tile(sg.stages)
        if split is None:
            out.append(sg)
            total += sg.count
            continue
        for _ in range(sg.count):
            out.extend(split)
        total += sg.count * sum(s.count for s in split)
    if total < max(min_tiles, CHUNKS_MIN) or len(out) == len(segments):
        return segments
    return tuple(_merge(out))


def loop_stages(stages: tuple[Stage, ...]) -> tuple[int, int, int] | None:
    """(first, last, chunks) of a tile's loop (module note), or None when it has none worth
    chunking (fewer than `UNIT_MIN` units on every stage, or fewer than two chunks)."""
    units = [st.units for st in stages]
    top = max(range(len(units)), key=units.__getitem__)
    if units[top] < UNIT_MIN:
        return None
    a = b = top
    while a > 0 and units[a - 1] >= 2:
        a -= 1
    while b < len(units) - 1 and units[b + 1] >= 2:
        b += 1
    common = functools.reduce(math.gcd, units[a:b + 1])
    chunks = max((d for d in range(1, common + 1)
                  if common % d == 0 and units[top] // d >= CHUNK_UNITS), default=1)
    if chunks < 2:
        return None
    return a, b, chunks


def _split_tile(stages: tuple[Stage, ...]) -> tuple[Segment, ...] | None:
    """One tile of `stages` as chunk segments (first, middle, last), or None."""
    found = loop_stages(stages)
    if found is None:
        return None
    a, b, chunks = found
    first, middle, last = [], [], []
    for j, st in enumerate(stages):
        if a <= j <= b:
            per = st.units // chunks
            first.append(Stage(st.pipe, st.instrs, per, st.head, st.out_bufs, st.slots))
            middle.append(Stage(st.pipe, st.instrs, per, (), st.out_bufs, st.slots))
            last.append(middle[-1])
        else:
            idle = _handoff_stage(st.pipe)
            first.append(st if j < a else idle)
            middle.append(idle)
            last.append(st if j > b else idle)
    segs = [Segment(tuple(first), 1)]
    if chunks > 2:
        segs.append(Segment(tuple(middle), chunks - 2))
    segs.append(Segment(tuple(last), 1))
    return tuple(segs)


@functools.lru_cache(maxsize=64)
def _handoff_stage(pipe: str) -> Stage:
    """A per-tile stage in a chunk that is not its tile's: passes the handoff, nothing else."""
    return Stage(pipe, (Instr(pipe, HANDOFF_KIND, 0),), 1)


def _merge(segments: list[Segment]) -> list[Segment]:
    """Consecutive segments of the same stages as one."""
    out: list[Segment] = []
    for sg in segments:
        if out and out[-1].stages == sg.stages:
            out[-1] = Segment(sg.stages, out[-1].count + sg.count)
        else:
            out.append(sg)
    return out


def _stage_busy(stage: Stage) -> float:
    """A stage's uncontended cycles in one tile: its head once, its instructions per unit."""
    return (sum(i.busy() for i in stage.head)
            + stage.units * sum(i.busy() for i in stage.instrs))


def _shape(stages: tuple[Stage, ...]) -> tuple:
    """A tile's instruction structure, without its sizes: per stage its head and unit
    instruction kinds and its unit count."""
    return tuple((tuple(i.kind for i in st.head), st.units, tuple(i.kind for i in st.instrs))
                 for st in stages)


def _prefix_excess(segments: tuple[Segment, ...], prefix: tuple[Segment, ...],
                   n: int) -> tuple[float, ...]:
    """Per stage, the uncontended cycles of the prefix's tiles whose instruction structure no
    later tile of the group shares, beyond as many tiles at the mean of the later tiles (0
    when every prefix tile recurs, as in a group of identical tiles): a head loop's first
    head, which also loads and casts the UB step's tables (lower/tiling.py
    `head_loop_work`), runs once, not with every tile of the window."""
    ntiles = sum(sg.count for sg in prefix)
    rest_n = sum(sg.count for sg in segments) - ntiles
    if rest_n <= 0 or ntiles <= 0:
        return (0.0,) * n
    rest = _segments_after(segments, ntiles)
    later = {_shape(sg.stages) for sg in rest}
    odd = [sg for sg in prefix if _shape(sg.stages) not in later]
    if not odd:
        return (0.0,) * n
    out = []
    for j in range(n):
        mean = sum(sg.count * _stage_busy(sg.stages[j]) for sg in rest) / rest_n
        out.append(max(0.0, sum(sg.count * (_stage_busy(sg.stages[j]) - mean) for sg in odd)))
    return tuple(out)


def _segments_after(segments: tuple[Segment, ...], k: int) -> list[Segment]:
    """The segments of a group after its first `k` tiles."""
    out: list[Segment] = []
    left = k
    for sg in segments:
        if left >= sg.count:
            left -= sg.count
        elif left > 0:
            out.append(Segment(sg.stages, sg.count - left))
            left = 0
        else:
            out.append(sg)
    return out


def pace_profile(segments: tuple[Segment, ...], prefix: tuple[Segment, ...],
                 chunks: bool) -> tuple[tuple[bool, ...], tuple[float, ...]]:
    """Per stage of a coalesced group, whether its work recurs with every (chunk) tile, and
    the uncontended cycles of the prefix's work that does not (the once-per-tile heads of a
    chunked tile's loop stages): the engine's pace is the paced stages' prefix busy cycles,
    less those, per tile. A chunked tile's per-tile stages (they pass a handoff in some
    chunks) are not paced: their work is per tile, not per chunk; their totals only bound the
    window."""
    n = len(segments[0].stages)
    if not chunks:
        return (True,) * n, _prefix_excess(segments, prefix, n)
    paced = tuple(not any(i.kind == HANDOFF_KIND for sg in segments
                          for i in sg.stages[j].instrs)
                  for j in range(n))
    once = tuple(sum(sg.count * sum(i.busy() for i in sg.stages[j].head) for sg in prefix)
                 for j in range(n))
    return paced, once
