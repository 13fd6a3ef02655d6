"""Lowering of vector ops (and of a UB-fused group of them) as instruction sequences on V.

Note on the model
-----------------
An op's vector work is its instruction sequence (lower/vector_seq.py): the op's row of
`SEQUENCES` (Softmax: vconv, vcmax, vsub, vexp, vcadd, vdiv, vconv) or, for ops not in that
table, the sequence the registry's cost fields describe (`vec_instrs` instructions of its
`vec_class` plus its `vec_extra`; flops only feed the roofline). Each instruction costs its
256-byte repeats (a partial repeat is a masked full one) at its own rate per dtype
(`chip.vector_rate`), at least `vector_min_cycles`; reductions pay the reduce rate only for
their reduce tree's whole-reduce repeats; a fused node concatenates its members' sequences
and `explain()` shows them. An op whose `reads_inputs` is False (NPUGetFloatStatus) moves no
input bytes; its inputs only order it. An op on NC1HWC0 (FRACTAL_NZ) data whose other
outputs are per-channel (per-column) vectors reads it in place, keeps the format for its
same-rank outputs and writes the vectors in ND (BNTrainingReduce/Update,
LayerNormBetaGammaBackprop). A BINARY-class instruction whose op's operands other than its
largest have ONE element (x + 2.0, Mul by a broadcast scalar, Clip by scalar bounds, Max(x, 0))
is the scalar-operand form vadds/vmuls/vmaxs, which the hardware issues at the one-operand
(unary) rate (msKPP 910B1: 256 B/cycle vs 128 for vadd; `vec_class_of`).

Ops of the registry's categories up to SEGMENT keep the NC1HWC0/NZ format of their main
input (formats.py); the others read and write ND.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import SimulationError
from ..ir.graph import Node
from ..ir.registry import Category, get_op
from ..ir.tensor import Value, itemsize
from .bf16 import BF16_NOTE, BF16_WORK_BYTES, bf16_vector_work, norm_casts, vconv_parts, widened
from .bn_schedule import tbe_launched, tbe_schedule_fields, update_grad_blocks
from .context import Lowering, TaskSpec
from .dynamic_tiling import (
    NORM_OPS,
    DynamicSplit,
    atomic_sum_split,
    broadcast_buffers,
    dynamic_blocks,
    norm_slices,
    norm_split,
    off_block_bursts,
    static_buffers,
    with_idle_blocks,
)
from .formats import NC1HWC0, ND, NZ, is_small_operand, padded_bytes
from .glu_tiling import glu_shares, glu_tiling
from .memo import vector_work
from .movement import ensure
from .seq_types import A2_A3_CHIPS, LOOP, NARROW_FLOATS
from .tiling import VecSpec, cdiv
from .transpose_paths import transpose_bursts
from .trilu_kernel import trilu_spec, trilu_split
from .vector_rows import ROW_RULES, norm_axis, norm_perm, row_on_blocks
from .vector_seq import HEAD_LOOPS, OpSequence, SeqPart, resolve, sequence_for, vclass_of_registry


def vec_class_of(opdef: Any, ins: list[Value]) -> str:
    """The chip vector class an op's registry `vec_class` runs at (module note): a BINARY op
    whose other operands have one element runs at the unary rate (vadds/vmuls/vmaxs take a
    scalar register operand)."""
    return vclass_of_registry(opdef, ins)


def lower_vector(low: Lowering, node, parts: list, category: Category,
                 fused: tuple[str, ...] = (), name: str | None = None,
                 op_type: str | None = None, notes: list[str] | None = None) -> None:
    """One vector task for `node` doing the work of `parts` (the node itself, or the members
    of a UB-fused node), its operands in the format the category keeps (module note)."""
    ext_in = [i for i in node.inputs if i]
    outs = list(node.outputs)
    if len(parts) == 1 and not get_op(parts[0].op_type, parts[0].name).reads_inputs:
        ext_in = []   # ordering-only inputs (module note)
    keeps = category <= Category.SEGMENT
    # the special format of the main input survives element-wise/reduce work
    main = next((i for i in ext_in if not low.is_const(i)), None)
    fmt, out_fmts = ND, [ND] * len(outs)
    if keeps and main is not None and low.format_of(main) in (NC1HWC0, NZ):
        fmt = low.format_of(main)
        keep = keeps_format(low, main, fmt, outs)
        fmt, out_fmts = (ND, out_fmts) if keep is None else (fmt, [fmt if s else ND for s in keep])
    ins = []
    # an operand 8x smaller than the largest value (a per-channel or per-row vector) is read as is
    value = low.value
    ext_vals, out_vals = [value(i) for i in ext_in], [value(o) for o in outs]
    biggest = max([v.numel for v in ext_vals] + [v.numel for v in out_vals])
    for i, v in zip(ext_in, ext_vals):
        small = is_small_operand(v.numel, biggest) or v.rank < 2
        if fmt == ND or small or low.is_const(i):
            ins.append(ensure(low, i, ND) if not low.is_const(i) and not small else i)
        else:
            ins.append(ensure(low, i, fmt))
    in_vals = [value(i) for i in ins]
    in_fmts = [low.format_of(i) for i in ins]
    in_b = [padded_bytes(v, fmt if f == fmt else ND) for f, v in zip(in_fmts, in_vals)]
    out_b = [padded_bytes(v, f) for v, f in zip(out_vals, out_fmts)]
    for k in (gathered := gathered_inputs(parts, ext_in, node.inputs)):
        # a gather reads the rows it selects: as many elements as its output has
        in_b[k] = min(in_b[k], out_vals[0].numel * itemsize(in_vals[k].dtype))
    sized = [*zip(in_b, in_vals), *zip(out_b, out_vals)]
    n = max([1] + [b // itemsize(v.dtype) for b, v in sized])
    vparts, temp, flops, seq_notes = vec_parts(low, parts, n, outs, fmt=fmt)
    dups, dup_notes = last_axis_dups(low, parts, in_vals, out_vals)
    inputs = tuple((b / n, low.miss(i, b, fmt=f)) for i, b, f in zip(ins, in_b, in_fmts))
    lone = lone_path(low, parts, fmt)
    dynamic = binary_blocks(low, parts, ext_in, ext_vals, out_vals)
    spec = head_loop(low, lone, kernel_ub(low, lone, VecSpec(
        n, inputs, sum(out_b) / n, low.through(outs, out_fmts), tuple(vparts + dups), temp,
        **kernel_pipeline(low, lone, n), moves=row_moves(low, parts[0], in_vals, gathered),
        split=vector_split(parts, in_vals, out_vals, dynamic))))
    spec = norm_casts(binary_buffers(low, parts, ext_in, ext_vals, out_vals, spec, dynamic), lone)
    spec = trilu_spec(low, parts, kernel_operands(low, ext_in, ext_vals), spec)
    blocks = schedule_blocks(low, parts, ext_vals, dynamic)
    groups, vnotes = with_idle_blocks(vector_work(low.chip, spec, node.name, blocks[0]),
                                      dynamic or tbe_launched(low.chip, spec, blocks[0]))
    if not ext_in and node.inputs:
        ins = [i for i in node.inputs if i]   # dependencies only: no bytes moved
        in_fmts = [low.format_of(i) for i in ins]
        vnotes = vnotes + ["inputs order the op only (no input bytes read)"]
    phase = low.vector_phase(groups, op_types := [p.op_type for p in parts])
    low.add_task(TaskSpec(name or node.name, op_type or node.op_type,
                          low.vector_task_type(op_types),
                          [phase], ins, outs, in_fmts, out_fmts, flops,
                          (notes or []) + seq_notes + dup_notes + vnotes + blocks[1], fused))


def _leading_axis_blocks(shape: tuple[int, ...], cores: int) -> int:
    """TBE BnGradReduceSchedule (an ElewiseSchedule; te_schedule/bn_grad_reduce_schedule.py):
    blocks over the batch axis of [N, C1, H, W, C0] (a ResNet-50 gradient at batch 16:
    block_dim 16 at C1 = 16 and at C1 = 64 in its MindSpore profile)."""
    return min(shape[0], cores) if shape else 1


#: op type -> its TBE schedule's block count for the main input's logical shape and the core
#: count, on chips whose built-in vector kernels are TBE DSL kernels (`chip.vector_split_bytes`)
#: where the op's special schedule does not split the data as VectorSchedule does
TBE_BLOCKS: dict[str, Any] = {
    "BNTrainingUpdateGrad": update_grad_blocks, "BNTrainingReduceGrad": _leading_axis_blocks,
}


def pinned_blocks(parts: list) -> int:
    """A lone node's own `block_dim` (0: none): the kernel ran on that many blocks, each
    paying its start, however few bytes each moves."""
    return int(parts[0].attrs.get("block_dim") or 0) if len(parts) == 1 else 0


def binary_blocks(low: Lowering, parts: list, ext_in: list[str], ext_vals: list[Value],
                  out_vals: list[Value]) -> DynamicSplit | None:
    """The split (blocks, note, pattern) a TBE tiling gives a kernel (lower/dynamic_tiling.py),
    its scalar constants left out of its operands: a float32 sum's atomic path or the TIK
    Trilu's rows (`trilu_split`) in any build, else a prebuilt dynamic-shape kernel's
    (`Lowering.kernel_build` "binary"); None for another jit-built kernel or where no such
    rule applies."""
    ins = kernel_operands(low, ext_in, ext_vals)
    atomic = (atomic_sum_split(parts, ins, out_vals, low.vector_cores(), low.chip)
              or trilu_split(low, parts, ins))
    if atomic is not None or low.kernel_build != "binary":
        return atomic
    return dynamic_blocks(parts, ins, out_vals, low.vector_cores())


def kernel_operands(low: Lowering, ext_in: list[str], ext_vals: list[Value]) -> list[Value]:
    """The operands a prebuilt kernel's run-time tiling sees: the node's inputs less its
    one-element constants (scalar operands the kernel takes as arguments)."""
    return [v for i, v in zip(ext_in, ext_vals) if not (low.is_const(i) and v.numel == 1)]


def binary_buffers(low: Lowering, parts: list, ext_in: list[str], ext_vals: list[Value],
                   out_vals: list[Value], spec: VecSpec,
                   dynamic: DynamicSplit | None = None) -> VecSpec:
    """`spec` with the UB slots its TBE schedule sets: in a binary build a reduce split by its
    run-time reduce tiling (`dynamic`) single-buffered (reduce_tilingcase.py: a normal
    reduce's tiling cases have double buffering off) and a broadcast-pattern kernel as
    `lower.dynamic_tiling.broadcast_buffers` gives, with its tile bound (single-buffered
    unless a trailing-axes broadcast's row is over its UB limit, at most SPLIT_FACTORS
    elements a tile); in a jit build as `lower.dynamic_tiling.static_buffers` gives."""
    if low.kernel_build != "binary" or spec.ub_elem_bytes:
        return static_buffers(low, parts, ext_in, ext_vals, out_vals, spec, dynamic)
    if dynamic is not None and dynamic.pattern == "reduce":
        return replace(spec, buffers=1)
    ins = kernel_operands(low, ext_in, ext_vals)
    elem = sum(b for b, _ in spec.inputs) + spec.out_bytes + spec.temp_bytes
    kernel = broadcast_buffers(parts, ins, out_vals, max(elem, 1e-9), low.chip.ub_bytes)
    if kernel is None:
        return spec
    slots, cap = kernel
    return replace(spec, buffers=slots,
                   tile_elems=min(spec.tile_elems, cap) if spec.tile_elems else cap)


def vector_split(parts: list, in_vals: list[Value], out_vals: list[Value],
                 dynamic: DynamicSplit | None = None) -> str:
    """How the task's elements are split over its blocks (`VecSpec.split`): "pinned" for a
    node's own block_dim (every block it names runs), "copy" for TBE's copy_only, "elewise"
    for a prebuilt dynamic-shape ELEWISE kernel (its run-time tiling sets its blocks and its
    UB tiles), "dynamic" for another prebuilt dynamic-shape kernel whose run-time tiling sets
    its blocks (`lower.dynamic_tiling`), else ""."""
    if pinned_blocks(parts):
        return "pinned"
    if copies_only(parts, in_vals, out_vals):
        return "copy"
    if dynamic is None or not dynamic.blocks:
        return ""
    return "elewise" if dynamic.pattern == "elewise" else "dynamic"


def schedule_blocks(low: Lowering, parts: list, ext_vals: list[Value],
                    dynamic: DynamicSplit | None = None) -> tuple[int, list[str]]:
    """Cores a lone node's vector task spreads over: its own `block_dim` when it has one (a
    kernel attribute, `ir.graph.KERNEL_ATTRS`), else a prebuilt dynamic-shape kernel's blocks
    (`dynamic`: `lower.dynamic_tiling.dynamic_blocks`), else the vector cores, or fewer where
    its TBE schedule binds blocks to one axis (`TBE_BLOCKS`); and the note saying so."""
    cores = low.vector_cores()
    pinned = pinned_blocks(parts)
    if pinned:
        if pinned > cores:
            raise SimulationError(f"node '{parts[0].name}' ({parts[0].op_type}): block_dim "
                                  f"{pinned} exceeds the {cores} vector cores of "
                                  f"{low.chip.name} (a vector kernel in several waves is not "
                                  f"modelled)")
        return pinned, [f"block_dim {pinned}: the node's own core count"]
    if dynamic is not None and dynamic.blocks:
        return min(dynamic[0], cores), [dynamic[1]]
    rule = TBE_BLOCKS.get(parts[0].op_type) if len(parts) == 1 else None
    if rule is None or not low.chip.vector_split_bytes or not ext_vals:
        return cores, []
    shape = tuple(int(d) for d in ext_vals[0].shape)
    blocks = max(1, min(cores, rule(shape, cores)))
    return blocks, [f"TBE schedule of {parts[0].op_type}: {blocks} block(s) for {list(shape)}"]


#: op types whose TBE kernel is TIK copy_only when the op keeps every element of its input
#: (strided_slice_d.py: input_size == out_size -> copy_only.copy_only), split over cores as
#: copy_only splits (lower/tiling.py `split_cores`)
TBE_COPY_ONLY = frozenset({"Slice"})


def kernel_ub(low: Lowering, lone: LonePath | None, spec: VecSpec) -> VecSpec:
    """`spec` with the UB split of a lone node (`lone_path`) whose kernel's tiling sizes its
    tile from the source (`OpSequence.ub_bytes`, tag S: CANN's SwiGlu), on the chips whose
    vector kernels are Ascend C (no `vector_split_bytes`): that many UB bytes per task
    element, the working buffers being what the queues' slots leave; `spec` as it is where
    the generic split applies."""
    if lone is None or lone[2].ub_bytes is None or low.chip.vector_split_bytes:
        return spec
    nd = lone[0]
    if not nd.outputs:
        return spec
    out = low.sub_value(nd, nd.outputs[0])
    ub_elem = lone[2].ub_bytes(out.dtype, spec.buffers) * out.numel / max(spec.elems, 1)
    moved = sum(b for b, _ in spec.inputs) + spec.out_bytes
    return replace(spec, ub_elem_bytes=ub_elem, temp_bytes=max(0.0, ub_elem / spec.buffers - moved))


def copies_only(parts: list, ins: list[Value], outs: list[Value]) -> bool:
    """Whether a lone node of `TBE_COPY_ONLY` keeps every element of its data input (its
    kernel on TBE chips is a plain copy)."""
    return (len(parts) == 1 and parts[0].op_type in TBE_COPY_ONLY and bool(ins)
            and len(outs) == 1 and outs[0].numel == ins[0].numel)


def gathered_inputs(parts: list, ext_in: list[str], inputs: list[str]) -> list[int]:
    """Positions in `ext_in` of the inputs a lone gather reads only where its output points
    (`OpDef.gathers`: an embedding table)."""
    if len(parts) != 1:
        return []
    gathers = get_op(parts[0].op_type, parts[0].name).gathers
    names = {inputs[i] for i in gathers if i < len(inputs) and inputs[i]}
    return [k for k, name in enumerate(ext_in) if name in names]


def row_moves(low: Lowering, nd: Node, in_vals: list[Value],
              gathered: list[int]) -> tuple[float, ...]:
    """GM moves per task element of each input (`VecSpec.moves`): a gather's table is read one
    row per DMA command when it does not fit half the UB, as TBE's gather_v2_d does: per index
    a reg_mov of the index, then copy_gm_to_ubuf of that row, the gathered rows leaving in one
    copy_ubuf_to_gm per UB batch; a table under half the UB (less 1 KB) is copied into the UB
    once and its rows moved UB -> UB (ops/built-in/tbe/impl/gather_v2_d.py
    `_get_ub_available_size`, `_gather_v2_operation`). The A2/A3 chips run the built-in TIK
    kernels for GatherV2 and Index too: CANN's open ops-nn ships Ascend C kernels for them
    only for arch35, the 950 (index/gather_v2/op_kernel/arch35, index/index/op_kernel/arch35),
    and the dynamic gather_v2.py caches a table of up to 100 KB in the UB (CACHE_UB_SIZE) and
    otherwise reads one row per index (its TILING_MODE_1, 2, 3, 5, 7), the same rule within
    the UB's half; a bf16 table goes to the DSL gather instead (gather_v2.py `gather_v2` ->
    `gather_v2_dsl`), whose DB_MODULE schedule for an aligned row over a table past the UB
    also moves one row per dma_copy (tbe gather_schedule.py, op_tiling gather_dsl.cc). A row
    read that misses the L2 pays the chip's `gm_row_miss_latency_cycles` (`tiling.gm_read`).
    () when no input is read so."""
    if not gathered:
        return ()
    out = []
    for k, v in enumerate(in_vals):
        table = int(v.numel) * itemsize(v.dtype)
        if k not in gathered or v.rank < 1 or table < (low.chip.ub_bytes - 1024) // 2:
            out.append(0.0)
            continue
        axis = int(nd.attrs.get("axis", 0) or 0) % v.rank
        row = math.prod(int(d) for d in v.shape[axis + 1:]) or 1
        out.append(1.0 / row)
    return tuple(out) if any(out) else ()


#: a lone node, its input values and its kernel path (`lone_path`)
LonePath = tuple[Node, list, OpSequence]


def lone_path(low: Lowering, parts: list, fmt: str) -> LonePath | None:
    """(node, its input values, its kernel path) of a lone node with inputs whose op has a
    kernel path (`vector_seq.sequence_for`), picked from the inputs as stored (a bf16 row is 2
    bytes per element to the tiling, though it computes in fp32), as `node_seq` picks it;
    None for a fused group, a node without inputs or one without a path. A bf16 node on a
    chip without bf16 vector work fails here (`bf16_vector_work`)."""
    if len(parts) != 1:
        return None
    nd = parts[0]
    ins = [low.sub_value(nd, i) for i in nd.inputs if i]
    if not ins:
        return None
    outs = [low.sub_value(nd, o) for o in nd.outputs]
    bf16_vector_work(low.chip, get_op(nd.op_type, nd.name), nd.name, ins, outs)
    seq = sequence_for(nd.op_type, ins, nd.attrs, fmt, low.chip.name)
    return None if seq is None else (nd, ins, seq)


def row_bursts(low: Lowering, lone: LonePath, n: int) -> dict[str, Any]:
    """The VecSpec `bursts` / `out_bursts` of a lone kernel whose path moves its rows one GM
    burst each (`OpSequence.row_bursts`): "rows", a row-wise kernel whose row is not a whole
    number of 32-byte blocks lays each row on a block in UB (the sequence's row padding,
    `vector_seq.resolve`) and copies it in and out as one burst (Ascend C's DataCopyPad
    with blockCount = the tile's rows: ops-nn rms_norm_merge_n.h CopyIn / CopyOutY when
    numCol != numColAlign); "rows_out", the same, and every output row written as one burst
    whatever its alignment (DynamicQuant's int8 rows: dynamic_quant_db.h CopyOut); "norm",
    TBE's NORM rows off the blocks (`row_on_blocks`); "halves", each row's two halves read as
    a burst each and each output row written as one, whatever their alignment (SwiGlu:
    `glu_fields`, which also sets the GLU tiling's slots and tiles). The bursts per task
    element of each input and of the output; {}: one burst per move."""
    nd, ins, seq = lone
    if not seq.row_bursts:
        return {}
    main = ins[0]
    if seq.row_bursts == "halves" and main.rank >= 1:
        return glu_fields(low, lone, n)
    outs = [low.sub_value(nd, o) for o in nd.outputs]
    if seq.row_bursts == "transpose":
        cores, perm = low.chip.vector_cores, nd.attrs.get("perm")
        column = off_block_bursts(main.shape, norm_perm(perm, main.rank), cores,
                                  itemsize(main.dtype))
        return {"dma_only": not seq.steps,
                **transpose_bursts(low.chip.l2_bytes, perm, main, outs, n, cores, column)}
    if seq.row_bursts not in ("rows", "rows_out", "norm") or not seq.rows:
        return {}
    length, inner = ROW_RULES[seq.rows](ins, nd.attrs, low.const_value)
    length = max(int(length), 1)
    if inner > 1:
        return {}
    per = main.numel / length / n
    padded = row_on_blocks(length * itemsize(main.dtype), low.chip.ub_align_bytes, seq.row_bursts)
    every_out = padded or seq.row_bursts == "rows_out"
    bursts = tuple(per if padded and v.numel == main.numel else 0.0 for v in ins)
    out = sum(per for v in outs if v.numel == main.numel and every_out)
    return {"bursts": bursts, "out_bursts": out} if any(bursts) or out else {}


def glu_fields(low: Lowering, lone: LonePath, n: int) -> dict[str, Any]:
    """The VecSpec fields of a GLU kernel (SwiGlu, SwiGluGrad: `row_bursts` "halves"): each
    half-row piece of a tile moved as one burst (x's two halves, the forward output's row,
    SwiGluGrad's dy row and dx's two halves: swi_glu_grad_single.hpp `CopyIn`, `CopyOut`); on
    a chip whose vector kernels are Ascend C, the tiles, slots and cores of CANN's GLU tiling
    (`lower.glu_tiling`; the backward kernel's, whose output is x-sized), each core's tiles as
    the kernel hands them out (`core_tiles`); elsewhere the half rows whole."""
    nd, ins, _ = lone
    main = max(ins, key=lambda v: v.numel)
    outs = [low.sub_value(nd, o) for o in nd.outputs]
    grad = any(v.numel == main.numel for v in outs)
    dim = int(nd.attrs.get("dim", -1)) % main.rank
    rows = math.prod(int(d) for d in main.shape[:dim])
    cols = math.prod(int(d) for d in main.shape[dim:]) // 2
    out: dict[str, Any] = {}
    col_tiles = 1
    if not low.chip.vector_split_bytes and rows and cols:
        pinned = pinned_blocks([nd])
        t = glu_tiling(rows, cols, itemsize(main.dtype), pinned or low.vector_cores(),
                       low.chip.ub_bytes, grad)
        col_tiles = cdiv(cols, t.base_cols)
        out = {"buffers": t.buffers, "core_tiles": glu_shares(t, rows, cols, pinned or t.cores)}
    per = rows * col_tiles / n
    half = main.numel / 2
    return {**out, "bursts": tuple(per * v.numel / half if v.numel in (half, main.numel)
                                   else 0.0 for v in ins),
            "out_bursts": sum(per * v.numel / half for v in outs
                              if v.numel in (half, main.numel))}


#: TBE's dynamic broadcast schedule for the A2 / A3 (broadcast_schedule_base.py, public CANN
#: 8.1.RC1 copy leideng/CANN-8.1.RC1 at 4332a01) hands its `vector_broadcast` emitter
#: `last_dup_threshold` = BRC_LAST_DUP_LIMIT = 16: a last-axis broadcast longer than this many
#: elements is materialised row by row (see `last_axis_dups`)
LAST_DUP_LIMIT = 16


def last_axis_dups(low: Lowering, parts: list, in_vals: list[Value], out_vals: list[Value]
                   ) -> tuple[list[SeqPart], list[str]]:
    """The per-row broadcast of a lone element-wise op whose operand [..., 1] is broadcast
    along a last axis of more than `LAST_DUP_LIMIT` elements:
    one `vector_dup` call per output row and per such operand (a LOOP part, issued by the
    scalar unit row by row), and the note saying so; ([], []) otherwise.

    What the sources give: TBE's broadcast schedule for the 910B and 910_93
    (broadcast_schedule_milan.py) lays every element of such an operand on its own 32-byte
    block in UB (`_calc_real_remove_pad`, `_calc_ub_align`: storage_align of the operand's
    second-last axis) and emits `vector_broadcast` with `last_dup_threshold` 16, whose
    lowering is compiled code; TBE's public static lowering of the same broadcast
    (te_schedule/pure_broadcast_intrin.py `last_axis_broadcast`, dengguojie/vue-element-admin
    at 03d8784) fills a row that is whole 32-byte blocks with one scalar `reg_mov` of the
    operand's value and one `vector_dup` of the row (its LFA algorithm; an unaligned row takes
    at least as many calls). Inferred: the threshold is the row length above which the
    dynamic emitter dups row by row; shorter rows take another method that is not public,
    and keep the op's plain sequence. A coupled chip (the first-generation 910) runs static
    TBE kernels, whose broadcast intrinsic is that public lowering itself: cce_intrin_md.py
    `broadcast_for_tensor` (dengguojie/vue-element-admin auto_schedule/python/platform/ at
    3819de2) emits one `reg_mov` of the operand's value and one `vec_broadcast` (vector_dup)
    per call, a call per row where the broadcast is along the last axis; it takes the same
    per-row dups, under the same row threshold (no other is read). A fused group's and a pure
    broadcast's (Expand: category INJECTIVE, another schedule) are not changed; bf16 rows are
    filled in the dtype the chip computes bf16 in (`vector_bfloat16`), and rows of an op whose
    path casts its inputs to fp32 first (`sequence_for`: RealDiv's binary) in fp32."""
    if len(parts) != 1 or len(out_vals) != 1:
        return [], []
    out = out_vals[0]
    if get_op(parts[0].op_type, parts[0].name).category > Category.BROADCAST or out.rank < 2:
        return [], []
    row = int(out.shape[-1])
    operands = sum(1 for v in in_vals
                   if v.rank >= 2 and int(v.shape[-1]) == 1 and 1 < v.numel < out.numel)
    if row <= LAST_DUP_LIMIT or not operands:
        return [], []
    nd = parts[0]
    seq = sequence_for(nd.op_type, in_vals, nd.attrs, ND, low.chip.name, low.kernel_build)
    dtype = ("float32" if seq is not None and seq.fp32 and out.dtype in NARROW_FLOATS else
             low.chip.vector_bfloat16 if out.dtype == "bfloat16" else out.dtype)
    part = SeqPart("vector_dup (a row)", "unary", dtype, itemsize(dtype), LOOP, 1.0, row,
                   float(operands))
    return [part], [f"last-axis broadcast of {operands} operand(s) to rows of {row}: one "
                    f"vector_dup per row and operand, issued row by row (TBE's broadcast "
                    f"schedule: rows longer than {LAST_DUP_LIMIT} elements)"]


def kernel_pipeline(low: Lowering, lone: LonePath | None, n: int) -> dict[str, Any]:
    """The VecSpec fields of a lone node (`lone_path`) whose kernel path sets them: `buffers`
    (UB slots per queue), `row_tile` (task elements per row-group tile), `row_elems` (task
    elements per row when the kernel binds whole rows to cores), `tile_rows` (that kernel's
    rows per UB loop) and `row_reads` (GM reads of the main input when such a row does not
    fit a UB tile), from `OpSequence.buffers`, `row_tile` (RmsNorm's NORMAL mode on A2, one
    row; the TBE LayerNorm cube path, 16 rows), `whole_rows`, `row_budget` (RmsNorm's
    MERGE_N), `row_reads` (RmsNorm on A2), `tile_elems` (`OpSequence.tile`: ArgMaxV2's
    segment on a long row) and `bursts` / `out_bursts` (`row_bursts`), and for TBE's
    NORM-pattern Softmax and LogSoftmax the fields of `norm_rows` (reduced axis innermost) or
    `norm_strided`; {}: the defaults."""
    if lone is None:
        return {}
    nd, ins, seq = lone
    if not (seq.row_tile or seq.whole_rows):
        tbe = tbe_schedule_fields(nd.op_type, ins, n, low.vector_cores(), low.chip.ub_bytes
                                  ) if low.chip.vector_split_bytes else {}
        return {"buffers": seq.buffers, **row_bursts(low, lone, n), **tbe}
    length, inner = ROW_RULES[seq.rows](ins, nd.attrs, low.const_value)
    # rows bound to cores are contiguous ones (a reduction over the innermost axis)
    whole = seq.whole_rows and inner == 1

    def task_elems(elems: int) -> int:
        return max(1, -(-elems * n // max(int(ins[0].numel), 1)))

    narrow = seq.narrow_slots and ins[0].dtype in NARROW_FLOATS
    out = {"buffers": seq.narrow_slots if narrow else seq.buffers,
           "row_reads": seq.row_reads if whole else 1, "round_trip": seq.round_trip,
           "atomic_row": seq.atomic_row, **row_bursts(low, lone, n)}
    per_elem = n / max(int(ins[0].numel), 1)
    if whole and seq.norm is not None:
        out.update(norm_rows(low, seq, int(length), ins[0].dtype, per_elem))
    elif seq.norm is not None and inner > 1:
        out.update(norm_strided(low, seq, int(length), int(inner), ins[0].dtype, per_elem,
                                norm_slices(ins[0], nd.attrs, low.vector_cores())))
    if seq.row_tile:
        out["row_tile"] = task_elems(int(length) * seq.row_tile)
    if seq.tile is not None:
        out["tile_elems"] = task_elems(seq.tile(ins[0].dtype))
    if whole:
        out["row_elems"] = task_elems(int(length))
        if seq.row_budget:
            fit = rows_per_loop(seq.row_budget, int(length), itemsize(ins[0].dtype),
                                low.chip.ub_bytes, seq.row_align_elems)
            out["tile_rows"] = max(1, fit)
            if not fit:   # a row over the kernel's own budget is passed over in chunks
                out["row_over"] = True
    return out


def norm_rows(low: Lowering, seq: OpSequence, length: int, dtype: str,
              per_elem: float) -> dict[str, Any]:
    """The VecSpec fields of a TBE NORM-pattern kernel whose rows are bound to cores
    (`NormSchedule`): whether a row of `length` elements of `dtype` is over its UB budget
    (then its workspace traffic, `norm_fields`; `per_elem`: task elements per element of
    the input)."""
    return norm_fields(low, seq, dtype, norm_row_over(low, seq, length, dtype), per_elem)


def norm_row_over(low: Lowering, seq: OpSequence, length: int, dtype: str) -> bool:
    """Whether a row of `length` elements of `dtype`, padded to whole 32-byte blocks, is over
    a TBE NORM-pattern kernel's UB budget (`norm_budget`): the workspace schedule."""
    budget, block, _ = norm_budget(low, seq, dtype)
    return -(-length // block) * block > budget


#: TBE's NORM tiling (op_tiling norm.cc, NORM_BLOCKS_NUMBER): a reduction over an axis that is
#: not innermost keeps the reduced axis times at least this many 32-byte blocks of the inner
#: axes in the UB, or takes the workspace schedule
NORM_INNER_BLOCKS = 8


def norm_budget(low: Lowering, seq: OpSequence, dtype: str) -> tuple[int, int, int]:
    """A TBE NORM-pattern kernel's UB budget in elements of its widest compute dtype
    (`NormSchedule`: `live` coexisting tensors after `temp_bytes` of scratch, 32-byte
    floored), the elements of `dtype` per 32-byte block, and the compute dtype's bytes."""
    norm = seq.norm
    wide = 4 if seq.fp32 else itemsize(dtype)
    budget = (low.chip.ub_bytes - norm.temp_bytes) // norm.live // 32 * 32 // wide
    return budget, max(1, 32 // itemsize(dtype)), wide


def norm_fields(low: Lowering, seq: OpSequence, dtype: str, over: bool,
                per_elem: float) -> dict[str, Any]:
    """The VecSpec fields both NORM layouts share: over the budget, the workspace schedule
    (the input read `input_reads` times, a compute-dtype workspace tensor written once and
    read `ws_reads` times); a prebuilt dynamic-shape kernel (`Lowering.kernel_build`
    "binary") single-buffered."""
    norm = seq.norm
    out: dict[str, Any] = {"row_over": over, "row_reads": norm.input_reads if over else 1}
    if over:
        out.update(row_ws_bytes=norm_budget(low, seq, dtype)[2] / per_elem,
                   row_ws_reads=norm.ws_reads)
    if low.kernel_build == "binary":
        out["buffers"] = 1
    return out


def norm_strided(low: Lowering, seq: OpSequence, length: int, inner: int, dtype: str,
                 per_elem: float, slices: int = 1) -> dict[str, Any]:
    """The VecSpec fields of a TBE NORM-pattern kernel reducing an axis that is not innermost
    (R rows of `length`, `inner` elements after it; the block split is on the A axes):
    workspace when R x min(inner aligned to a 32-byte block, NORM_INNER_BLOCKS blocks) is over
    the budget (norm.cc `IsNeedWorkspace`; `norm_fields`), each core then passing over its R
    rows of its A share, `slices` A slices a block (norm_schedule.py `NormWorkspaceSchedule`)."""
    budget, block, _ = norm_budget(low, seq, dtype)
    kept = min(-(-inner // block) * block, NORM_INNER_BLOCKS * block)
    over = length * kept > budget
    out = norm_fields(low, seq, dtype, over, per_elem)
    if over:
        out["pass_elems"] = max(1, round(length * inner * per_elem))
        out["ws_pass_elems"] = out["pass_elems"] * max(1, slices)
    return out


def norm_fold_width(low: Lowering, nd: Node, ins: list[Value], fmt: str) -> int:
    """Elements of the inner (not reduced) axes each reduced row of a TBE NORM-pattern
    kernel holds in the UB when its reduced axis is not innermost (`vector_seq._fold_part`),
    or 0 (no such reduction): the inner elements of a block's slice (`norm_split`), all of
    them in the workspace schedule (norm.cc `GetUbTilingInfo`: the UB split on R, each row
    carrying the block's inner A axes), else as many as R rows fit in the UB budget
    (the UB split on A)."""
    if nd.op_type not in NORM_OPS or not ins or not ins[0].shape:
        return 0
    seq = sequence_for(nd.op_type, ins, nd.attrs, fmt, low.chip.name)
    shape = tuple(int(d) for d in ins[0].shape)
    axis = norm_axis(nd.attrs.get("axis", -1), len(shape))
    split = norm_split(shape, axis, itemsize(ins[0].dtype), low.vector_cores())
    if seq is None or seq.norm is None or split is None:
        return 0
    budget, block, _ = norm_budget(low, seq, ins[0].dtype)
    run = -(-split[1] // block) * block
    if shape[axis] * min(run, NORM_INNER_BLOCKS * block) > budget:
        return run
    return min(run, max(block, budget // shape[axis] // block * block))


def norm_entire_reduce(low: Lowering, nd: Node, ins: list[Value], fmt: str) -> bool:
    """Whether a TBE NORM-pattern kernel (Softmax, LogSoftmax, LayerNormV3) reduces its rows
    by the emitter's "entire_reduce" mode (`seq_types.entire_reduce_repeats`): a
    whole-reduce of every repeat, then of the partials, level after level, no element-wise
    fold. CANN 8.1.RC1's tbe/dsl unify_schedule/vector/norm/norm_schedule.py
    (`NormNormalSchedule._calc_emit_insn`) gives every single last-axis reduction of the AR
    pattern that mode outside the single-read case; the fold ("dichotomy_reduce_big_dim")
    only for a compile-time shape reducing a non-last axis, or on the nano chips. vcmax /
    vcmin partials are (value, index) pairs (the static emitter's `__tail_vcmax_proc`,
    cce_intrin_md.py, reads them with a skip-one mask). It holds in the common schedule: the
    reduced axis innermost, ND data, a row within the UB budget on an A2 / A3 chip; the
    workspace schedule (`NormWorkspaceSchedule._calc_emit_insn`) sets no mode."""
    seq = sequence_for(nd.op_type, ins, nd.attrs, fmt, low.chip.name) if ins else None
    if seq is None or seq.norm is None or fmt != ND or low.chip.name not in A2_A3_CHIPS:
        return False
    length, inner = ROW_RULES[seq.rows](ins, nd.attrs, low.const_value)
    return inner == 1 and not norm_row_over(low, seq, int(length), ins[0].dtype)


def rows_per_loop(budget: tuple[float, ...], length: int, item: int, ub_bytes: int,
                  align: int = 0) -> int:
    """Rows a kernel works on per UB loop from its tiling's budget (`OpSequence.row_budget`:
    UB bytes reserved, bytes per aligned column, bytes per row, and optionally UB bytes
    reserved per aligned column; columns aligned to 32 bytes, or to `align` elements where the
    kernel lays its rows out on more): RmsNorm MERGE_N rowFactor = (UB - 1024) /
    (numColAlign * 16 + 260) (rms_norm_tiling.cpp); RmsNormGrad's short rows ubFactor =
    (UB - 1024 - colAlign * 10) / (colAlign * 24 + 268) (rms_norm_grad_tiling.cpp); the 910's
    TIK LayerNorm (layer_norm_paths.LAYER_NORM_TIK_BUDGET). 0: not one row fits."""
    reserved, per_col, per_row, *rest = budget
    per_block = max(1, 32 // item, align)
    col_align = -(-length // per_block) * per_block
    reserved += col_align * (rest[0] if rest else 0)
    return max(0, int((ub_bytes - reserved) // (col_align * per_col + per_row)))


def head_loop(low: Lowering, lone: LonePath | None, spec: VecSpec) -> VecSpec:
    """`spec` with the geometry of a head-loop kernel (`VecSpec.head_elems`: task elements
    per line and per head slice, lines per UB step, V work per step on the tables) when it
    is a lone node (`lone_path`) whose kernel path loops over heads (`OpSequence.head_loop`:
    CANN's RoPE kernel on A2); else `spec` as it is. The geometry is the kernel tiling's, on
    the node's own dtypes (a bf16 op's UB split is its 2-byte one)."""
    if lone is None or not lone[2].head_loop:
        return spec
    _, ins, seq = lone
    geometry, step_parts = HEAD_LOOPS[seq.head_loop]
    loop = geometry(ins, low.chip.ub_bytes)
    if loop is None:
        return spec
    scale = spec.elems / max(int(ins[0].numel), 1)
    heads = max(1, loop.line_elems // loop.head_elems)
    return replace(spec, row_elems=max(1, round(loop.line_elems * scale)),
                   head_elems=max(1, round(loop.head_elems * scale)),
                   step_lines=loop.step_lines, step_parts=step_parts(ins[0].dtype, heads))


def lower_vector_op(low: Lowering, node: Node) -> None:
    """A vector (or scalar) unit op: one vector task of its own sequence."""
    lower_vector(low, node, [node], get_op(node.op_type, node.name).category)


def keeps_format(low: Lowering, main: str, fmt: str, outs: list[str]) -> list[bool] | None:
    """Whether the op reads its main input in its special format `fmt` in place (None:
    convert it to ND) and, per output, whether the output keeps `fmt`. In place when
    every output keeps the input's rank or is a vector along the format's inner axis:
    for NC1HWC0 a per-channel vector (C,) (BNTrainingReduce's sums), for FRACTAL_NZ a
    per-column vector (last dim) (LayerNormBetaGammaBackprop's dgamma/dbeta, a bias
    gradient); such a vector output is ND."""
    mv = low.value(main)
    same = [low.value(o).rank == mv.rank for o in outs]
    axis = 1 if fmt == NC1HWC0 and mv.rank >= 3 else -1 if fmt == NZ and mv.rank >= 2 \
        else None
    channel = [axis is not None and low.value(o).rank == 1
               and low.value(o).shape[0] == mv.shape[axis] for o in outs]
    if not all(s or c for s, c in zip(same, channel)):
        return None
    return same


def vec_parts(low: Lowering, nodes: list, n: int, ext_outs: list[str], scale: float = 1.0,
              fmt: str = ND) -> tuple[list[SeqPart], float, int, list[str]]:
    """The vector instruction sequences of nodes (lower/vector_seq.py), concatenated, per
    element of a task of `n` elements; UB bytes/element of intermediates and fp32 working
    buffers; total flops; one note per node naming its sequence. `fmt`: the format the
    main input is read in (it can pick a kernel path, vector_seq.PATHS)."""
    parts: list[SeqPart] = []
    temp = 0.0
    total_flops = 0
    notes: list[str] = []
    for nd in nodes:
        opdef = get_op(nd.op_type, nd.name)
        # a gather's table is read where the output points: its work is the output's
        ins = [low.sub_value(nd, i) for k, i in enumerate(nd.inputs)
               if i and k not in opdef.gathers] if opdef.reads_inputs else []
        outs = [low.sub_value(nd, o) for o in nd.outputs]
        seq, work, text, flops, extra = node_seq(low, nd, opdef, ins, outs, n, ext_outs, scale, fmt)
        total_flops += flops
        parts += seq
        temp += work
        notes.append(text if len(nodes) == 1 else f"{nd.name} ({nd.op_type}): {text}")
        for b in extra:
            temp += b
    return parts, temp, total_flops, notes


def node_seq(low: Lowering, nd, opdef, ins: list, outs: list, n: int, ext_outs: list[str],
             scale: float, fmt: str) -> tuple[list[SeqPart], float, str, int, list]:
    """One node's part of `vec_parts`: its sequence, working bytes, note, flops and the
    UB bytes per element of its outputs that stay inside the task. Kept by everything
    it reads but the names (op, attributes, operand shapes/dtypes/layouts, which outputs
    leave the task, n, scale, format), with the constant data it read checked on reuse:
    identical layers resolve once."""
    key = None
    akey = attrs_key(nd.attrs)
    if akey is not None:
        key = (nd.op_type, akey, n, scale, fmt,
               tuple((v.shape, v.dtype, v.layout) for v in ins),
               tuple((v.shape, v.dtype, v.layout, v.name in ext_outs) for v in outs))
        for consts, hit in low.seq_memo.get(key, ()):
            if all(same_const(low.const_value(ins[i].name), c) for i, c in consts):
                seq, work, text, flops, extra = hit
                return list(seq), work, text, flops, extra
    read: list[tuple[int, Any]] = []
    in_names = [v.name for v in ins]

    def const(name: str) -> Any:
        c = low.const_value(name)
        read.append((in_names.index(name) if name in in_names else -1, c))
        return c

    flops = int(opdef.flops(ins, outs, nd.attrs))
    big = max([v.numel for v in ins + outs] + [1])
    bf16 = bf16_vector_work(low.chip, opdef, nd.name, ins, outs)
    stored = ins
    if bf16 is not None:   # bf16 math as fp32 between vconvs (lower/bf16.py); a gamma the
        # kernel casts again for every row has that cast in its sequence (`recast`), and a
        # head loop casts its tables once per UB step (its `step_parts`), not per head
        path = sequence_for(nd.op_type, ins, nd.attrs, fmt, low.chip.name)
        cast_ins = (ins[:1] if path and path.head_loop else
                    ins[:1] + ins[2:] if path and path.recast else ins)
        before, after = vconv_parts(cast_ins, outs, scale / max(n, 1))
        ins, outs = widened(ins, bf16), widened(outs, bf16)
    seq, work, text = resolve(nd.op_type, opdef, ins, outs, nd.attrs,
                              big / max(n, 1) * scale, const,
                              low.chip.ub_align_bytes, fmt, low.chip.name, stored,
                              norm_fold_width(low, nd, stored, fmt),
                              norm_entire_reduce(low, nd, stored, fmt), low.kernel_build)
    if bf16 is not None:
        seq = [*before, *seq, *after]
        text += f"; {BF16_NOTE}"
        if ins:   # the fp32 working buffers the casts fill (lower/bf16.py)
            work = max(work, BF16_WORK_BYTES * ins[0].numel / max(n, 1) * scale)
    extra = [o.numel * itemsize(o.dtype) / max(n, 1) * scale for o in outs
             if o.name not in ext_outs]
    if key is not None and all(i >= 0 for i, _ in read):
        low.seq_memo.setdefault(key, []).append(
            (tuple(read), (tuple(seq), work, text, flops, extra)))
    return seq, work, text, flops, extra


def attrs_key(attrs: dict) -> tuple | None:
    """A node's attributes as a hashable key that tells apart anything that could lower
    differently (types, float bits, -0.0); None when one is not a plain scalar or a
    sequence of them (such a node is not kept by `node_seq`)."""
    out = []
    for k, v in attrs.items():
        kv = _plain_key(v)
        if kv is None:
            return None
        out.append((k, kv))
    return tuple(out)


def _plain_key(v: Any) -> tuple | None:
    t = type(v)
    if t is float:
        return (t, v.hex())
    if t in (int, str, bool) or v is None:
        return (t, v)
    if t in (list, tuple):
        items = []
        for x in v:
            kx = _plain_key(x)
            if kx is None:
                return None
            items.append(kx)
        return (t, tuple(items))
    return None


def same_const(a: Any, b: Any) -> bool:
    """Whether two constants (arrays, scalars or None) are the same data."""
    if a is b:
        return True
    if a is None or b is None or type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b)


#: this module's rows of the dispatcher's table (lower/lowering.py): vector and scalar units
LOWERINGS = {"vector": lower_vector_op, "scalar": lower_vector_op}

__all__ = ["LAST_DUP_LIMIT", "TBE_COPY_ONLY", "copies_only", "last_axis_dups", "lower_vector",
           "lower_vector_op", "keeps_format", "head_loop", "kernel_pipeline", "rows_per_loop",
           "norm_entire_reduce",
           "vec_parts", "node_seq", "vec_class_of", "attrs_key", "same_const", "LOWERINGS"]
