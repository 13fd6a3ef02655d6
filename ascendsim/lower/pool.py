"""Lowering of MaxPoolWithArgmax as CANN's TIK kernel runs it on TBE chips.

Note on the model
-----------------
On chips whose built-in vector kernels are TBE/TIK kernels (`chip.vector_split_bytes`),
CANN's MaxPoolWithArgmax is a hand-written TIK kernel (ops/built-in/tbe/impl/
max_pool_with_argmax.py, class MaxPoolWithargmax; read in public canndev/ops-nn copies).
It works on one (n, c1) plane of the NC1HWC0 input at a time and issues its vector
instructions per group of 16 output pixels (one 16 x 16 fp16 fractal, 256 elements) and per
window position, not over whole tiles:
- the plane (or a band of `cut_h_size` input rows) is copied GM -> L1, then load3dv1
  (img2col) builds, per 16-pixel group, the group's kh*kw window positions in the UB;
- `_calc_max_and_mask`: vector_dup of the running max (2 repeats per group), then for every
  window position and every group one vmax of 2 repeats (MASK 128, REPEAT_2), then for every
  window position and every group one vcmpv_eq of 2 repeats (the position's bit mask);
- `_remove_repeated_fun`: per window position after the first a vor and a vand, and per window
  position a vnot, each over the groups with MASK 16 (16 lanes of uint16: one masked full
  repeat per group), keeping the first maximum only;
- the window positions' masks leave the UB in one data_move each (kh*kw stores per band),
  the maxima in one.
The UB holds the img2col of a band: when Ho*Wo*16*kh*kw*2 bytes exceed half the UB the kernel
cuts H (`_calc_cut_h_size_fun`): img2col_h = UB/2 / (kh*kw*16*2 + 160) pixels, cut_h_size =
(img2col_h // ((W + pad_l + pad_r) // sw + 1) - 1) * sh + kh - sh input rows (at least kh),
bands cut_h_size - (kh - sh) rows apart; the bands' output rows are grouped by 16 anew, so a
20-pixel output row takes 2 groups. Blocks: over the planes, ceil(planes / cores) per block
(over planes x bands when a band's pixels are a multiple of 16).

So the work grows with (bands x window positions) and (groups x window positions), not with
the bytes alone. The model issues exactly those instructions, each costed as vector_seq costs
an instruction (its repeats at the class rate, at least `vector_min_cycles`), counts them for
the scalar issue cost, and pays the path latency once per mask store (`VecSpec.out_moves`).
The kernel has no double buffering (plain for_range loops): one UB slot.

Not modelled: the load3dv1 (L1 -> UB img2col, MTE1) and the GM -> L1 copy run as the one GM
load of the band's rows; the ResNet-50 stem shape (x [*, 4, 112, 112, 16], 3x3 stride 2) runs
CANN's max_pool_with_argmax_resnet50 kernel (ping-pong buffers, one mask store per band) and a
band wider than half the UB the cut-W path: both keep the generic vector lowering. The bytes
written are the pooled output and CANN's uint16 mask (kh*kw x (ceil(Ho*Wo/16) + 1) x 16 per
plane), not the registry's int32 argmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir.graph import Node
from ..ir.registry import get_op
from .context import Lowering, TaskSpec
from .formats import NC1HWC0, padded_bytes
from .movement import ensure
from .tiling import VecSpec, vector_work
from .vector import lower_vector_op
from .vector_seq import ELEM, SeqPart

#: fp16 lanes per 16-pixel group (one fractal: 16 pixels x C0 16) and per vector repeat
_GROUP, _REPEAT = 256, 128
#: bytes per img2col pixel row the kernel reserves besides the window (`32 * 5`)
_ROW_EXTRA = 160
#: the input shape (H, W, C0), window and strides of CANN's ResNet-50 special kernel
#: (max_pool_with_argmax_resnet50.is_max_pool_with_argmax_param)
_RESNET50 = ((112, 112), (3, 3), (2, 2))


@dataclass(frozen=True)
class ArgmaxTiling:
    """The TIK kernel's bands: per plane `bands` bands of `rows` output rows, each `groups`
    16-pixel groups, reading `in_rows` input rows; `units` work units (planes, or planes x
    bands) over `blocks` blocks; `positions` = kh * kw."""

    bands: int
    rows: int
    groups: int
    in_rows: int
    units: int
    blocks: int
    positions: int


def argmax_tiling(h: int, w: int, ho: int, wo: int, kernel: tuple[int, int],
                  strides: tuple[int, int], pads: tuple[int, int, int, int], planes: int,
                  cores: int, ub_bytes: int, l1_bytes: int) -> ArgmaxTiling | None:
    """The bands and blocks of max_pool_with_argmax.py (`_check_if_need_cut_h_w`,
    `_calc_cut_h_size_fun`, `tik_instance_function`; module note) for a plane of h x w
    (pads: top, left, bottom, right); None where the kernel also cuts W (not modelled)."""
    (kh, kw), (sh, sw) = kernel, strides
    pt, pl, pb, pr = pads
    pos = kh * kw
    half = ub_bytes / 2
    if wo * 16 * pos * 2 > half:
        return None
    l1_short = h * w * 16 * 2 > l1_bytes     # the plane does not fit L1: bands of kh rows
    if ho * wo * 16 * pos * 2 <= half and not l1_short:
        g = math.ceil(ho * wo / 16)
        return ArgmaxTiling(1, ho, g, h, planes, _blocks(planes, cores), pos)
    img2col_h = half / (pos * 16 * 2 + _ROW_EXTRA)
    per_row = (w + pl + pr) // sw + 1
    if kh >= sh:
        cut = int((img2col_h // per_row - 1) * sh + kh - sh)
        if cut < kh or cut >= h:
            cut = kh
        step = cut - (kh - sh)
    else:
        cut = int((img2col_h // per_row - 1) * sh)
        cut, step = (kh, sh) if cut < kh else (cut, cut)
    if l1_short or cut * w * 16 * 2 > l1_bytes:
        cut, step = kh, sh
    span = h + pt + pb
    bands = (math.ceil((span - cut) / step) + 1 if cut >= step else math.ceil(span / step))
    rows = max(1, (cut - kh + sh) // sh)
    pixels = wo * rows
    units = planes * bands if pixels % 16 == 0 else planes
    return ArgmaxTiling(bands, rows, math.ceil(pixels / 16), cut, units,
                        _blocks(units, cores), pos)


def _blocks(units: int, cores: int) -> int:
    """block_dim of the kernel: ceil(units / cores) units per block, the last the rest."""
    size = math.ceil(units / cores)
    same = 0 if units % cores == 0 or units % size == 0 else 1
    return units // size + (0 if units // cores == 0 else same)


def argmax_parts(t: ArgmaxTiling, tile: int) -> list[SeqPart]:
    """The vector instructions of one band (module note) as sequence parts on a tile of
    `tile` task elements: each part is `count` instructions of its own repeats."""
    p, g = t.positions, t.groups

    def part(instr: str, vclass: str, count: int, lanes: int) -> SeqPart:
        return SeqPart(instr, vclass, "float16", 2, ELEM, lanes / tile, 0, float(count))

    return [part("vector_dup", "unary", 1, 2 * g * _REPEAT),
            part("vmax", "binary", p * g, _GROUP),
            part("vcmpv_eq", "binary", p * g, _GROUP),
            part("vor+vand (mask 16)", "binary", 2 * (p - 1), g * _REPEAT),
            part("vnot (mask 16)", "unary", p, g * _REPEAT)]


def _geometry(low: Lowering, node: Node) -> tuple | None:
    """(x, y, kernel, strides, pads) of a 2-D MaxPoolWithArgmax the TIK kernel runs, else
    None (another kernel or another chip: the generic vector lowering)."""
    if not low.chip.vector_split_bytes or len(node.outputs) != 2:
        return None
    x, y = low.value(node.inputs[0]), low.value(node.outputs[0])
    if x.rank != 4 or x.dtype != "float16" or not all(
            isinstance(d, int) for d in (*x.shape, *y.shape)):
        return None
    a = node.attrs
    kernel = tuple(int(k) for k in a["kernel_shape"])
    strides = tuple(int(s) for s in (a.get("strides") or (1, 1)))
    pads = tuple(int(p) for p in (a.get("pads") or (0, 0, 0, 0)))
    if len(kernel) != 2 or len(strides) != 2 or len(pads) != 4 or kernel[0] * kernel[1] > 255:
        return None
    if (tuple(x.shape[2:]), kernel, strides) == _RESNET50:
        return None
    # ONNX pads (top, left, bottom, right) as the kernel's
    return x, y, kernel, strides, (pads[0], pads[1], pads[2], pads[3])


def lower_max_pool_with_argmax(low: Lowering, node: Node) -> None:
    """MaxPoolWithArgmax: CANN's TIK kernel where it runs (module note), else the generic
    vector lowering."""
    geo = _geometry(low, node)
    t = None
    if geo is not None:
        x, y, kernel, strides, pads = geo
        n, c, h, w = x.shape
        planes = n * math.ceil(c / 16)
        t = argmax_tiling(h, w, y.shape[2], y.shape[3], kernel, strides, pads, planes,
                          low.vector_cores(), low.chip.ub_bytes, low.chip.l1_bytes)
    if t is None:
        lower_vector_op(low, node)
        return
    wo = y.shape[3]
    tile = t.rows * wo * 16                       # one band's pooled elements
    elems = planes * t.bands * tile
    xin = ensure(low, node.inputs[0], NC1HWC0)
    in_band = t.in_rows * w * 16 * 2             # the band's input rows, GM -> L1
    mask = t.positions * t.groups * 16 * 2       # the band's mask, one store per position
    img2col = t.positions * t.groups * _GROUP * 2
    x_bytes = padded_bytes(x, NC1HWC0)
    spec = VecSpec(elems, ((in_band / tile, low.miss(xin, in_band * planes * t.bands,
                                                     fmt=NC1HWC0)),),
                   2.0 + mask / tile, low.through(list(node.outputs), [NC1HWC0] * 2),
                   tuple(argmax_parts(t, tile)), (img2col + 2 * t.groups * _GROUP) / tile,
                   buffers=1, row_tile=tile, out_moves=1 + t.positions)
    groups, vnotes = vector_work(low.chip, spec, node.name, t.blocks)
    notes = [f"CANN TIK max_pool_with_argmax: {planes} planes x {t.bands} band(s) of "
             f"{t.rows} output row(s) ({t.groups} group(s) of 16 pixels, {t.in_rows} input "
             f"rows), {t.positions} window positions; {t.blocks} blocks over {t.units} units; "
             f"per band {2 * t.positions * t.groups} vmax/vcmpv_eq of 2 repeats, "
             f"{3 * t.positions - 2} mask-16 vor/vand/vnot, {1 + t.positions} stores; "
             f"x read {in_band * t.bands / max(x_bytes // planes, 1):.2g} times"]
    opdef = get_op(node.op_type, node.name)
    ins = [xin]
    flops = int(opdef.flops([low.value(xin)], [low.value(o) for o in node.outputs],
                            node.attrs))
    low.add_task(TaskSpec(node.name, node.op_type, low.vector_task_type(),
                          [low.vector_phase(groups)], ins, list(node.outputs), [NC1HWC0],
                          [NC1HWC0, NC1HWC0], flops, notes + vnotes))


# --- MaxPool (no argmax) with a 3 x 3 window and stride 2: TBE's template kernel ---------

#: window and strides of TBE's max_pool2d_3_3_2_2 template (pooling2d_compute.py `pooling2d`)
_TEMPLATE_3_3_2_2 = ((3, 3), (2, 2))


@dataclass(frozen=True)
class Pool332Tiling:
    """The template's tiles: `c1_factor` planes x `ho_factor` output rows a tile, `tiles`
    tiles (the n x c1 x ho loop), `blocks` blocks; `db` its double buffer; `ub` the UB bytes
    a tile's buffers take (`_get_need_size`)."""

    c1_factor: int
    ho_factor: int
    tiles: int
    blocks: int
    db: bool
    ub: int


def _input_rows(ho_factor: int) -> int:
    """Input rows a tile of `ho_factor` output rows reads: a 3-row window at stride 2."""
    return (ho_factor - 1) * 2 + 3


def _bind_factor(cherry: int, cores: int) -> int:
    """`_find_core_factor` of max_pool2d_3_3_2_2_schedule.py: the units a block takes so that
    ceil(ceil(cherry / f) / cores) * f is least (the largest f of a tie)."""
    best, factor = cherry * cores, 1
    for f in range(cherry, 0, -1):
        gap = math.ceil(math.ceil(cherry / f) / cores) * f
        if gap < best:
            best, factor = gap, f
    return factor


def pool332_tiling(n: int, c1: int, w: int, ho: int, wo: int, cores: int,
                   ub_bytes: int) -> Pool332Tiling | None:
    """The UB tiling and core binding of TBE's max_pool2d_3_3_2_2_schedule.py (`_tiling`,
    `schedule`; module note of `lower_max_pool`), fp16 NC1HWC0 [n, c1, h, w, 16] to
    [n, c1, ho, wo, 16]; None where it cuts W (not modelled)."""
    def need(cf: int, hf: int) -> int:
        return cf * 32 * (_input_rows(hf) * w + 2 * hf * w + 2 * hf * wo)

    bind_c1 = n < cores and n < c1
    for half, db in ((ub_bytes // 2, True), (ub_bytes, False)):
        fit = [cf for cf in range(c1, 0, -1) if need(cf, ho) <= half]
        if fit:
            cf = (min(fit, key=lambda f: (math.ceil(math.ceil(c1 / f) / cores) * f, -f))
                  if bind_c1 else fit[0])
            hf = ho
        else:
            cf, hf = 1, next((h for h in range(ho, 0, -1) if need(1, h) <= half), 0)
            if not hf:
                continue
        outer = math.ceil(c1 / cf) if bind_c1 else n
        units = math.ceil(outer / _bind_factor(outer, cores))
        tiles = n * math.ceil(c1 / cf) * math.ceil(ho / hf)
        return Pool332Tiling(cf, hf, tiles, units, db, need(cf, hf))
    return None


def pool332_parts(t: Pool332Tiling, wo: int, tile: int) -> list[SeqPart]:
    """The four vmax stages of one tile (max_pool2d_3_3_2_2_compute.py): x_rw1 / x_rw2 over
    the tile's (ho_factor - 1) * 2 + 3 input rows, x_rh1 / x_rh2 over its output rows, each
    one instruction a row of wo x 16 fp16 lanes per plane."""
    rows = _input_rows(t.ho_factor)

    def part(instr: str, count: int) -> SeqPart:
        return SeqPart(instr, "binary", "float16", 2, ELEM, wo * 16 / tile, 0, float(count))

    return [part("vmax (x_rw1, x_rw2)", 2 * t.c1_factor * rows),
            part("vmax (x_rh1, x_rh2)", 2 * t.c1_factor * t.ho_factor)]


def _pool332_geometry(low: Lowering, node: Node) -> tuple | None:
    """(x, y) of a MaxPool TBE's 3 x 3 stride-2 template runs (fp16, one output, TBE chip),
    else None."""
    if not low.chip.vector_split_bytes or len(node.outputs) != 1:
        return None
    x, y = low.value(node.inputs[0]), low.value(node.outputs[0])
    a = node.attrs
    window = (tuple(int(k) for k in a["kernel_shape"]),
              tuple(int(s) for s in (a.get("strides") or (1, 1))))
    if x.dtype != "float16" or x.rank != 4 or window != _TEMPLATE_3_3_2_2 or not all(
            isinstance(d, int) for d in (*x.shape, *y.shape)):
        return None
    return x, y


def lower_max_pool(low: Lowering, node: Node) -> None:
    """MaxPool: TBE's max_pool2d_3_3_2_2 template where it runs, else the generic vector
    lowering.

    pooling2d (te_compute/pooling2d_compute.py, 2019; public copy jizhuoran/
    caffe-huawei-atlas-convertor convertor/huawei/te/ at ff9768e) sends a MAX pooling with a
    3 x 3 window and stride 2 outside L1 fusion to max_pool2d_3_3_2_2_compute.py: a tile of
    input rows is copied GM -> UB, two vmax stages fold the window's columns (x_rw1, x_rw2:
    every input row, wo x 16 lanes) and two its rows (x_rh1, x_rh2: every output row), and the
    tile is copied out. Its schedule (te_schedule/max_pool2d_3_3_2_2_schedule.py) binds the
    blocks to C1 when the batch is below the cores and C1 (`_find_core_factor`), else to the
    batch; a tile is whole output heights of as many planes as half the UB holds (bound to
    C1: the count giving a block the fewest planes), double buffered, else one plane and as
    many output rows as fit. Where a node's own block_dim differs from that binding another schedule
    ran (a later build's), and the generic lowering stays. The pad rows' vector_dup are not
    costed."""
    geo = _pool332_geometry(low, node)
    t = None
    if geo is not None:
        x, y = geo
        n, c, h, w = x.shape
        ho, wo = y.shape[2], y.shape[3]
        t = pool332_tiling(n, math.ceil(c / 16), w, ho, wo, low.vector_cores(),
                           low.chip.ub_bytes)
        pinned = int(node.attrs.get("block_dim") or 0)
        if t is not None and pinned and pinned != t.blocks:
            t = None
    if t is None:
        lower_vector_op(low, node)
        return
    tile = t.c1_factor * t.ho_factor * wo * 16         # one tile's pooled elements
    in_tile = t.c1_factor * _input_rows(t.ho_factor) * w * 16 * 2
    xin = ensure(low, node.inputs[0], NC1HWC0)
    spec = VecSpec(t.tiles * tile, ((in_tile / tile, low.miss(xin, in_tile * t.tiles,
                                                              fmt=NC1HWC0)),),
                   2.0, low.through(list(node.outputs), [NC1HWC0]),
                   tuple(pool332_parts(t, wo, tile)), (t.ub - in_tile) / tile - 2.0,
                   buffers=2 if t.db else 1, row_tile=tile, split="pinned")
    groups, vnotes = vector_work(low.chip, spec, node.name, t.blocks)
    notes = [f"TBE max_pool2d_3_3_2_2: {t.tiles} tiles of {t.c1_factor} plane(s) x "
             f"{t.ho_factor} output rows on {t.blocks} blocks"
             f"{', double buffered' if t.db else ''}; per tile "
             f"{2 * t.c1_factor * (_input_rows(t.ho_factor) + t.ho_factor)} vmax of a row"]
    flops = int(get_op(node.op_type, node.name).flops(
        [low.value(xin)], [low.value(o) for o in node.outputs], node.attrs))
    low.add_task(TaskSpec(node.name, node.op_type, low.vector_task_type(),
                          [low.vector_phase(groups)], [xin], list(node.outputs), [NC1HWC0],
                          [NC1HWC0], flops, notes + vnotes))


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"max_pool_with_argmax": lower_max_pool_with_argmax, "max_pool": lower_max_pool}

__all__ = ["ArgmaxTiling", "Pool332Tiling", "argmax_parts", "argmax_tiling",
           "lower_max_pool", "lower_max_pool_with_argmax", "pool332_parts", "pool332_tiling",
           "LOWERINGS"]
