"""Lowering of cube ops: Conv, MatMul/Gemm and GroupedMatmul as (batched) GEMMs on the cube.

A cube op becomes one GEMM (`CubeGeometry`: a conv an implicit GEMM, `opdef.conv`, with
`opdef.transposed` and `opdef.conv_view` picking the geometry), tiled by lower/cube_tiling.py
(`gemm_work`). Its operands are converted to the format the chip's kernel reads (formats.py:
NC1HWC0 for a conv, FRACTAL_NZ for a matmul, ND for a MatMul on split chips, with CANN's ND/NZ
rule of lower/matmul_format.py); the element-wise tail of a UB-fused node is its epilogue.

Note on the model
-----------------
Cube dtype. The cube runs int8 in its int8 mode, bfloat16 in its bf16 mode, float32 in the
mode the chip's CANN precision mode picks (hw/precision.py: the 910B's default keeps its fp32
mode, a quarter of the fp16 rate; the 910's and 310's run fp16), everything else in its float16
mode; GM and buffer bytes stay those of the operand dtype.

Fused epilogue. A cube op at the head of a UB-fused node keeps its cube tiling and the rest
runs on V per output tile; on split chips, as a second phase on the AIV cores, reading the
cube result back through L2 (a mix kernel, its result in a GM workspace).

Feature-map windows. A conv's output tile of m_t pixels reads the input rows its window
covers (`l1_chunks.a_tile_bytes`, in loads of whole Cin1 slices), so consecutive M tiles
re-read the rows they share (the kh - stride halo, and whole rows when a tile ends
mid-row): load3d builds the img2col matrix
from an L1 copy of those rows (TBE conv_schedule: the fmap is loaded to L1 per AL1 tile, then
im2col'd into L0A on MTE1), and the next tile's L1 load fetches the shared rows again. A core
walks its M tiles in order, so those re-reads hit L2 (the same core read them one tile
earlier) even when the feature map is far larger than L2: only the first read of each byte
can miss (`window_rereads`). With 3x3 kernels on narrow rows (YOLOv5's 12- and 32-channel
convolutions on 160-320 px rows, m_t 512) the windows read the input 2-2.3 times.

TBE Conv2D block split. On chips whose cube kernels are TBE's (`matmul_schedule = "tbe"`: the
first-generation 910), Conv2D's tiling gives its block dim as factors [batch, Cout, HoWo] whose
product stays within the cores, and it splits the batch first: TBE's conv schedule
(te_schedule/conv_schedule.py, public copy jizhuoran/caffe-huawei-atlas-convertor
convertor/huawei/te/lang/cce/te_schedule/conv_schedule.py, `get_default_tiling`) sets the batch
factor to the batch when it is at most the core count, else to the largest divisor of the
batch that is, and a later tuning pass raises the batch factor to the batch whenever the
product stays within the cores (`_modify_core_num` in TBE's cube tiling tuning). Every forward
Conv2D of the public MindSpore profiles of the 30-core first-generation 910 ran so: block_dim
16 at batch 16, 32 and 64 (YOLOv5, coverage_ops.toml; ResNet-50's Conv2D + BNTrainingReduce
at batch 16, resnet50_ops_910.toml), leaving 14 cores idle. `tbe_conv_blocks` gives that
split: the batch factor times the factor the remaining cores allow for Cout/HoWo (cores //
batch factor; G: how the closed tiling generator shares them between Cout and HoWo is not
public, the model spreads base blocks in contiguous runs). A `block_dim` attribute (a
profile's) overrides it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from ..errors import GraphError, UnsupportedOpError
from ..hw.names import ENGINE_AICORE, TASK_AI_CORE, TASK_MIX_AIC
from ..hw.precision import PRECISION_MODES, cube_fp32_dtype, precision_mode
from ..ir.graph import Graph, Node
from ..ir.ops.llm import SPLIT_K, SPLIT_M
from ..ir.registry import get_op
from ..ir.tensor import Value, itemsize
from .context import Lowering, TaskSpec
from .cube_tiling import (
    GemmSpec,
    a_tile_bytes,
    gemm_tiling,
    load3d_fits,
    operand_read_bytes,
    takes_nd,
)
from .formats import NC1HWC0, ND, NZ, is_small_operand, padded_bytes, padded_numel
from .gmm_tiling import GMM_DTYPES, gmm_attrs
from .matmul_format import (
    MatmulFormats,
    matmul_formats,
    nd2nz_head,
    nd2nz_head_reason,
    param_weight_inner,
)
from .memo import gemm_work, vector_work
from .movement import ensure
from .program import GmFraction, Phase, Task
from .tiling import VecPart, VecSpec, cdiv, ceil_to
from .vector import vec_parts
from .vector_seq import SeqPart

#: bytes of one L0C accumulator element: mmad accumulates fp16/bf16 in fp32 and int8 in int32
ACC_BYTES = 4
#: cube op types whose binary-build kernel is a TBE dynamic-shape binary (`cube_binary`)
TBE_BINARY_CUBE_OPS = frozenset({"MatMul", "Gemm"})


def cube_dtype(chip: Any, dtype: str, op_type: str = "", node: str | None = None) -> str:
    """The cube mode an operand dtype runs in: int8, the chip's bf16 mode, for fp32 the mode
    the chip's CANN precision mode picks (`hw.precision.cube_fp32_dtype`), else fp16.
    bfloat16 on a chip without a bf16 mode (910, 310) is an UnsupportedOpError naming the op
    and the chip: such a chip cannot run it, and no CANN precision mode converts it."""
    if dtype in ("int8", "uint8"):
        return "int8"
    if dtype == "bfloat16":
        if chip.cube_mkn.bfloat16 is None:
            raise UnsupportedOpError(op_type or "cube op", node, detail=(
                f"bfloat16 operands need a bf16 cube mode, and {chip.name}'s cube has none "
                f"(its cube_mkn lists {chip_cube_modes(chip)}); use a 910B-family chip "
                f"or Cast the operands to float16"))
        return "bfloat16"
    if dtype == "float32":                   # the chip's precision mode decides (hw/precision)
        mode = cube_fp32_dtype(chip)
        if mode is None:
            raise UnsupportedOpError(op_type or "cube op", node, detail=(
                f"{dtype} operands under precision mode {precision_mode(chip)!r} need a "
                f"{PRECISION_MODES[precision_mode(chip)]} cube mode, and {chip.name}'s cube "
                f"has none (its cube_mkn lists {chip_cube_modes(chip)}); CANN would fall back "
                f"to an AI CPU kernel, which is not modelled: pick another precision_mode"))
        return mode
    return "float16"


def chip_cube_modes(chip: Any) -> str:
    """The dtypes the chip's cube has a mode for, for messages ("float16, int8")."""
    modes = chip.cube_mkn
    return ", ".join(f for f in ("float16", "bfloat16", "float32", "int8", "int4")
                     if getattr(modes, f, None) is not None)


# ----------------------------------------------------------------------------- geometry
@dataclass(frozen=True)
class CubeGeometry:
    """A cube op as a batched GEMM (batch x M x K x N), with a conv's row geometry for the
    img2col reads, whether a bias is accumulated in L0C, and the note `explain` shows."""

    batch: int
    m: int
    k: int
    n: int
    conv_rows: tuple[int, int, int, int, int] | None
    bias: bool
    note: str
    #: the batch is a split of K over cores whose partial outputs are accumulated in GM
    #: (TBE's weight gradient: float32 atomic adds, `tbe_filter_grad_geometry`)
    k_split: int = 1
    #: a forward convolution: its feature map reaches L1 by Cin1 slice for load3d
    #: (lower/l1_chunks.py); not a weight gradient read as a Conv
    load3d: bool = False


class Shaped(NamedTuple):
    """A shape standing in for a Value where only `.shape` is read (a weight gradient's view)."""

    shape: tuple


def conv_geometry(attrs: dict, transposed: bool, xv: Value, wv: Value, out_v: Value, k0: int,
                  has_bias: bool) -> CubeGeometry:
    """A convolution as an implicit GEMM: M = N*Ho*Wo, K = ceil(Cin/group)*kh*kw, N = Cout/group,
    one GEMM per group (a transposed conv's K is divided by the stride product)."""
    group = int(attrs.get("group", 1) or 1)
    n_, cin = int(out_v.shape[0]), int(xv.shape[1])
    cout = int(out_v.shape[1])
    ks = [int(d) for d in wv.shape[2:]]
    kh, kw = ks[0], int(np.prod(ks[1:])) if len(ks) > 1 else 1
    spatial_out = [int(d) for d in out_v.shape[2:]]
    m = n_ * int(np.prod(spatial_out))
    k = ceil_to(cin // group, k0) * kh * kw
    strides = attrs.get("strides") or [1] * len(ks)
    conv_rows = None
    if transposed:
        k = ceil_to(max(k // int(np.prod(strides)), k0), k0)
    else:
        pads = attrs.get("pads") or [0] * (2 * len(ks))
        win = int(xv.shape[-1]) + (int(pads[len(ks) - 1]) + int(pads[-1])
                                   if len(pads) >= 2 else 0)
        wo = spatial_out[-1] if len(spatial_out) > 1 else 1
        if len(ks) == 1:
            kh, kw = 1, ks[0]
        conv_rows = (wo, win, int(strides[0]), kh, kw)
    n = cout // group
    note = (f"implicit GEMM: M = N*Ho*Wo = {m}, K = ceil{k0}(Cin/group = {cin // group})"
            f"*kh*kw = {k}, N = Cout/group = {n}, group {group}")
    return CubeGeometry(group, m, k, n, conv_rows, has_bias, note)


def batch_factor(batch: int, limit: int) -> int:
    """TBE's batch factor of a conv's block dim: the largest divisor of `batch` (>= 1) not
    above `limit` (at least 1), as both TBE conv schedules take it."""
    return next(d for d in range(min(batch, max(1, limit)), 0, -1) if batch % d == 0)


def tbe_filter_grad_geometry(geo: CubeGeometry, batch: int, hw: int, k0: int, blocks: int
                             ) -> CubeGeometry:
    """TBE's Conv2DBackpropFilter on the 910 generation splits the batch, its reduction axis,
    over cores first (the schedule's block_dim [batch_dim, n_dim, m_dim, group_dim]; its
    default `_get_block_dim` takes the largest factor of the batch up to the core count, then
    Cin1, then H): each core reduces K over its samples' Ho*Wo positions (padded to k0 per
    sample, `hw_pad_1`) into a whole dW partial and adds it into the float32 output in GM
    with atomic writes (the schedule's rfactor over the fused multi-core batch axis,
    `fused_atomic_write`). As a GEMM: `batch_dim` independent parts of the whole output
    (M x N), each with K = its samples x ceil(Ho*Wo, k0), every part writing its partial."""
    split = batch_factor(batch, blocks)
    if split == 1:
        return geo
    k = ceil_to(hw, k0) * (batch // split)
    note = (f"TBE weight gradient: batch {batch} split over {split} cores (block_dim "
            f"batch_dim), each a whole dW partial M {geo.m} x N {geo.n} over K = "
            f"{batch // split} sample(s) x ceil{k0}(Ho*Wo = {hw}) = {k}, accumulated in the "
            f"float32 output by atomic adds ({split} partial writes)")
    return CubeGeometry(split, geo.m, k, geo.n, None, False, note, k_split=split)


def tbe_conv_blocks(chip: Any, images: int, m: int, n: int) -> int:
    """The block dim of a forward Conv2D of `images` images on a TBE chip (module note, "TBE
    Conv2D block split"): batch factor = the batch when it fits the cores, else its largest
    divisor that does, times the factor the remaining cores allow, at most one block per
    16 x 16 fractal of the (M, N) = (N*Ho*Wo, Cout) output; 0 (the cube tiling chooses) on
    other chips."""
    cores = int(chip.ai_cores)
    if chip.matmul_schedule != "tbe" or images < 1:
        return 0
    batch_dim = batch_factor(images, cores)
    return min(batch_dim * max(1, cores // batch_dim), cdiv(m, 16) * cdiv(n, 16))


def gemm_geometry(attrs: dict, xv: Value, wv: Value, out_v: Value, k0: int,
                  extra: Value | None) -> CubeGeometry:
    """A MatMul/Gemm as a batched GEMM; an extra rank <= 1 operand is a bias (L0C). M and K
    come from A (a matrix-vector product keeps A's M rows: its output drops N, not M), N from
    B; the batch is the output's leading dims beyond the matrix (or vector) ones."""
    ta = int(attrs.get("transA", 0) or 0)
    os_ = [int(d) for d in out_v.shape]
    xs = [int(d) for d in xv.shape]
    if xv.rank >= 2:
        m, k = (xs[-1], xs[-2]) if ta else (xs[-2], xs[-1])
    else:
        m, k = 1, xs[0]
    k = ceil_to(k, k0)
    n = os_[-1] if wv.rank >= 2 else 1
    matrix_dims = 2 if (xv.rank >= 2 and wv.rank >= 2) else 1 if (xv.rank >= 2 or wv.rank >= 2) \
        else 0
    batch = int(np.prod(os_[:len(os_) - matrix_dims])) if len(os_) > matrix_dims else 1
    bias = extra is not None and extra.rank <= 1
    return CubeGeometry(batch, m, k, n, None, bias, f"GEMM: batch {batch}, M {m}, K {k}, N {n}")


# ----------------------------------------------------------------------------- lowering
@dataclass
class CubeOperands:
    """A cube head's operands as the kernel reads them: names (after any TransData), values,
    whether the kernel takes ND (split-chip MatMul), CANN's format choice, the cube mode and
    the GEMM geometry, with the notes so far."""

    x_name: str
    w_name: str
    xv: Value
    wv: Value
    extra: list[str]
    conv: bool
    nd: bool
    formats: MatmulFormats | None
    cdt: str
    geo: CubeGeometry
    notes: list[str]
    w_param: bool = False   # B is a constant weight kept ND (`param_weight_inner` long rows)


@dataclass
class CubeOutputs:
    """A cube task's outputs and epilogue: output names and format, the tail's extra inputs,
    the head's output and its padded elements, output bytes per head output element, the
    write-through, and the epilogue's sequence and inputs."""

    out_names: list[str]
    out_fmt: str
    tail_in: list[str]
    head_out: Value
    per_out: int
    out_bytes: float
    through: Any
    epi_parts: list[SeqPart]
    epi_inputs: tuple


def cube_operands(low: Lowering, head) -> CubeOperands:
    """The operands of a cube head in the formats its kernel reads (TransData inserted where
    needed), its cube mode and its GEMM geometry."""
    chip = low.chip
    opdef = get_op(head.op_type, head.name)
    conv = opdef.conv
    x_name, w_name = head.inputs[0], head.inputs[1]
    extra = [i for i in head.inputs[2:] if i]
    # split chips' MatMul kernels take ND (nd2nz on the GM->L1 move) and give ND, unless
    # CANN's ND/NZ rule sends a 2-D MatMul through TransData to NZ (lower/matmul_format.py)
    nd = not conv and takes_nd(chip)
    formats = split_matmul_formats(low, head.op_type, x_name, w_name) if nd else None
    if formats is not None and not formats.nd_in:
        nd = False
    # a constant weight is a model parameter the stack keeps ND in the layout the kernel reads
    # best (lower/matmul_format.py, "Constant weights"): converted on the fly like any ND operand
    w_param = nd and low.is_const(w_name) and head.op_type == "MatMul"
    need = NC1HWC0 if conv else ND if nd else NZ
    x_name = ensure(low, x_name, need) if low.format_of(x_name) != NZ or not nd else x_name
    if not low.is_const(w_name) and (low.format_of(w_name) != NZ or not nd):
        w_name = ensure(low, w_name, need)
    xv, wv = low.sub_value(head, x_name), low.sub_value(head, w_name)
    out_v = low.sub_value(head, head.outputs[0])
    cdt = cube_dtype(chip, xv.dtype, head.op_type, head.name)
    m0, k0, n0 = chip.cube_shape(cdt)
    notes: list[str] = []
    if cdt == "bfloat16":
        notes.append(f"bfloat16 operands run in the cube's bf16 mode (cube_mkn.bfloat16 "
                     f"{m0}x{k0}x{n0} per cycle), accumulated in fp32 in L0C")
    if xv.dtype in ("float32", "float64") and cdt == "float16":
        notes.append(f"{xv.dtype} operands run in the cube's float16 mode (CANN precision "
                     f"mode {precision_mode(chip)}); GM bytes stay {xv.dtype}")
    if conv and opdef.conv_view is not None:     # a weight gradient: the Conv it equals
        v_attrs, *shapes = opdef.conv_view(head.attrs, xv.shape, wv.shape, out_v.shape)
        geo = conv_geometry(v_attrs, False, *(Shaped(sh) for sh in shapes), k0, False)
        notes.append(f"{head.op_type}: the Conv of X^T {shapes[0]} by dY^T {shapes[1]}, "
                     f"read in place (no transposes)")
        if chip.matmul_schedule == "tbe":
            notes.append(geo.note)
            geo = tbe_filter_grad_geometry(
                geo, int(shapes[0][1]), int(np.prod(shapes[1][2:])), k0,
                int(head.attrs.get("block_dim") or 0) or chip.ai_cores)
    elif conv:
        geo = conv_geometry(head.attrs, opdef.transposed, xv, wv, out_v, k0, bool(extra))
        geo = replace(geo, load3d=geo.conv_rows is not None)
    else:
        geo = gemm_geometry(head.attrs, xv, wv, out_v, k0,
                            low.value(extra[0]) if extra else None)
    notes.append(geo.note)
    if formats is not None:
        notes.append(f"formats: {formats.reason}")
    if w_param:
        inner = param_weight_inner(geo.k, geo.n)
        layout = "[N, K] as a Linear layer's" if inner == geo.k else "[K, N]"
        notes.append(f"constant weight {w_name} kept ND as a model parameter, laid out "
                     f"{layout} (rows of {inner}), converted to NZ by the kernel")
    return CubeOperands(x_name, w_name, xv, wv, extra, conv, nd, formats, cdt, geo, notes,
                        w_param)


def own_split(head, geo, blocks: int, notes: list[str]) -> tuple[tuple[int, int] | None, int]:
    """(split, block dim): the MatMul/Gemm attribute `single_core` ([singleCoreM, singleCoreN]:
    the output block each core owns, as a kernel with a fixed split sets it) and its block
    count, or (None, `blocks`) without one. A K split (partial sums) or a block dim other than
    the split's count is an error."""
    split = head.attrs.get("single_core")
    if split is None:
        return None, blocks
    sm, sn = (int(v) for v in split)
    count = geo.batch * cdiv(geo.m, sm) * cdiv(geo.n, sn)
    if geo.k_split > 1:
        raise UnsupportedOpError(head.op_type, head.name, detail=(
            f"single_core {[sm, sn]} on a GEMM the model splits along K ({geo.k_split} "
            f"partial sums); give no single_core"))
    if blocks and blocks != count:
        raise GraphError(f"node '{head.name}' ({head.op_type}): block_dim {blocks} differs "
                         f"from the {count} blocks of single_core {[sm, sn]} on a "
                         f"{geo.m} x {geo.n} output")
    notes.append(f"the kernel's own core split: blocks of {sm} x {sn} of the output ({count} "
                 f"blocks; single_core)")
    return (sm, sn), count


def conv_blocks(chip: Any, head, ops: CubeOperands) -> int:
    """A forward Conv's block dim on TBE chips (`tbe_conv_blocks`); 0 (the cube tiling
    chooses) for other cube ops, weight gradients and transposed convs, whose schedules
    split otherwise."""
    opdef = get_op(head.op_type, head.name)
    if not ops.conv or opdef.conv_view is not None or opdef.transposed:
        return 0
    return tbe_conv_blocks(chip, int(ops.xv.shape[0]), ops.geo.m, ops.geo.n)


def cube_outputs(low: Lowering, node, head, tail: list, ops: CubeOperands) -> CubeOutputs:
    """The outputs of a cube task and its fused element-wise tail (per output element,
    its extra inputs read from GM); adds the epilogue's notes to `ops.notes`."""
    formats = ops.formats
    out_names = list(node.outputs)
    out_fmt = NC1HWC0 if ops.conv else ND if ops.nd or (formats and formats.nd_out) else NZ
    out_vals = [low.value(o) for o in out_names]
    n_out = max(padded_numel(v, out_fmt) for v in out_vals)
    tail_in = [i for i in node.inputs if i and i not in head.inputs]
    if not ops.geo.bias:
        tail_in += ops.extra
    tail_in = [ensure(low, i, out_fmt) if (not low.is_const(i) and not
               is_small_operand(low.value(i).numel, n_out)) else i for i in tail_in]
    # output bytes per output element of the head's output
    head_out = low.sub_value(head, head.outputs[0])
    per_out = padded_numel(head_out, out_fmt)
    out_bytes = sum(padded_bytes(v, out_fmt) for v in out_vals) / per_out
    through = low.through(out_names, [out_fmt if low.value(o).rank == head_out.rank
                                      else ND for o in out_names])
    epi_parts: list[SeqPart] = []
    epi_inputs: tuple = ()
    if tail:
        epi_parts, _, _, epi_notes = vec_parts(low, tail, per_out, out_names)
        ops.notes += [f"epilogue {t}" for t in epi_notes]
        epi_inputs = tuple((padded_bytes(low.value(i), ND if is_small_operand(
                                         low.value(i).numel, n_out) else out_fmt) / per_out,
                            low.miss(i, padded_bytes(low.value(i), ND)))
                           for i in tail_in)
    return CubeOutputs(out_names, out_fmt, tail_in, head_out, per_out, out_bytes, through,
                       epi_parts, epi_inputs)


def lower_cube(low: Lowering, node, head, tail: list, fused: tuple[str, ...] = (),
               name: str | None = None, op_type: str | None = None) -> None:
    """One cube task for `head` (`node` itself, or the cube op at the head of a UB-fused
    `node`, `tail` its element-wise epilogue): operands, L2 misses, heads converting ND
    operands too wide for the DMA, the GEMM tiling, and on split chips the epilogue as an
    AIV phase (the parts are made in this order: it is the order of their tasks and memo
    templates)."""
    chip = low.chip
    ops = cube_operands(low, head)
    outs = cube_outputs(low, node, head, tail, ops)
    geo, notes = ops.geo, ops.notes
    in_b = itemsize(ops.xv.dtype)
    blocks = int(head.attrs.get("block_dim") or 0) or conv_blocks(chip, head, ops)
    single, blocks = own_split(head, geo, blocks, notes)
    probe = GemmSpec(geo.batch, geo.m, geo.k, geo.n, ops.cdt, in_b,
                     max(1, round(outs.out_bytes)), ACC_BYTES, conv_rows=geo.conv_rows,
                     blocks=blocks if ops.conv else 0, load3d=geo.load3d)
    if probe.load3d and not load3d_fits(chip, probe):
        probe, geo = replace(probe, load3d=False), replace(geo, load3d=False)
        notes.append("one Cin1 slice of the weights does not fit L1 with any tile: base-K "
                     "chunks (TBE would stream them GM->L0B, not modelled)")
    miss_a, miss_b, fits, gm, gn, block = operand_misses(low, probe, node.name, ops.x_name,
                                                         ops.w_name, ops.xv, ops.wv)
    phases, workspace, head_a, head_b, miss_a, miss_b = nd2nz_heads(low, ops, miss_a, miss_b)
    split_tail = bool(tail) and not chip.coupled
    # partial sums of a K split are written as float32 (atomic adds into the output)
    out_b = ACC_BYTES if geo.k_split > 1 else max(1, round(outs.out_bytes)) \
        if not split_tail else itemsize(outs.head_out.dtype)
    spec = GemmSpec(geo.batch, geo.m, geo.k, geo.n, ops.cdt, in_b, out_b, ACC_BYTES,
                    miss_a, miss_b, 0.0 if split_tail else outs.through, geo.bias, geo.conv_rows,
                    () if split_tail else tuple(outs.epi_parts),
                    () if split_tail else outs.epi_inputs, shared_a=gn > 1 and block > 1,
                    shared_b=gm > 1 and block > 1,
                    nd2nz_a=ops.nd and low.format_of(ops.x_name) == ND and not head_a,
                    nd2nz_b=ops.nd and (low.format_of(ops.w_name) == ND or ops.w_param)
                    and not head_b,
                    rows_a=stored_rows(head, ops, "a"), rows_b=stored_rows(head, ops, "b"),
                    blocks=blocks, single_core=single, base=tuple(head.attrs.get("base_block", ())),
                    walk_lines=int(head.attrs.get("walk_lines", 0)),
                    batched_b=geo.k_split > 1 or (
                        not ops.conv and geo.batch > 1 and ops.wv.rank > 2
                        and ops.wv.numel > int(ops.wv.shape[-1]) * int(ops.wv.shape[-2])),
                    load3d=geo.load3d)
    groups, cnotes, _ = gemm_work(chip, spec, node.name)
    notes += cnotes
    notes.append(f"L2: A miss {miss_a:.2f}, B miss {miss_b:.2f} when not resident "
                 f"(operands {'fit' if fits else 'do not fit'} in half of L2, wave "
                 f"{gm}x{gn}); the output is written to L2 (the simulated L2 decides hits "
                 f"and write-backs)")
    if geo.bias:
        notes.append("bias accumulated in L0C (no extra pass over the output)")
    phases.append(Phase(ENGINE_AICORE, tuple(groups), binary=cube_binary(low, head)))
    task_type = TASK_MIX_AIC if head_a or head_b else TASK_AI_CORE
    if split_tail:
        phases.append(epilogue_phase(low, node.name, outs, notes))
        task_type = TASK_MIX_AIC
        workspace += padded_bytes(outs.head_out, outs.out_fmt)  # the cube result waits in GM
    add_cube_task(low, node, head, tail, ops, outs, TaskSpec(
        name or node.name, op_type or node.op_type, task_type, phases, [], outs.out_names,
        [], [], 0, notes, fused, cube_dtype=ops.cdt)).workspace_bytes = workspace


def cube_binary(low: Lowering, head) -> str:
    """The kind of a prebuilt dynamic-shape cube kernel (`Phase.binary`): "generic" for a
    MatMul / Gemm in a binary build (`Lowering.kernel_build`), whose kernels on the A2 / A3
    are TBE's dynamic-shape binaries (CANN 8.1.RC1 opp kernel/config/ascend910b/
    batch_matmul_v2.json: opMode "dynamic", shapes [-2]), so each block runs the binary's
    generic prologue (chip `binary_block_start_us`); "" for a jit build or any other cube op
    (GroupedMatmul and the quant matmuls are Ascend C kernels, convs not read). The shapes
    aclnn sends to the Ascend C MatMulV3 / BatchMatMulV3 instead are not told apart here."""
    if low.kernel_build != "binary" or head.op_type not in TBE_BINARY_CUBE_OPS:
        return ""
    return "generic"


def add_cube_task(low: Lowering, node, head, tail: list, ops: CubeOperands, outs: CubeOutputs,
                  spec: TaskSpec) -> Task:
    """Add a cube task: `spec` with the operands (A, B, the bias, the epilogue's inputs),
    their formats, the output formats and the flops (the head's and its epilogue's)."""
    ins = list(dict.fromkeys([ops.x_name, ops.w_name] + ([ops.extra[0]] if ops.geo.bias
                                                          else []) + outs.tail_in))
    flops = int(get_op(head.op_type).flops(
        [low.sub_value(head, i) for i in head.inputs if i], [outs.head_out], head.attrs))
    if tail:
        flops += vec_parts(low, tail, outs.per_out, outs.out_names)[2]
    # per-channel outputs of an epilogue (Conv + BNTrainingReduce's sums) are ND vectors
    spec.out_fmts = [outs.out_fmt if low.value(o).rank == outs.head_out.rank else ND
                     for o in outs.out_names]
    spec.ins, spec.in_fmts, spec.flops = ins, [low.format_of(i) for i in ins], flops
    return low.add_task(spec)


def stored_rows(head, ops: CubeOperands, operand: str) -> tuple[int, bool]:
    """An ND operand's rows as stored in GM (GemmSpec.rows_a / rows_b): their length in
    elements, the source stride of the ND->NZ DMA, and whether they run along K. A is [M, K]
    (its rows along K) unless transA; B is [K, N] unless transB, and a constant weight is laid
    out as the stack keeps it (`param_weight_inner`). () for a conv or a vector operand (a
    matrix-vector product's B, N = 1, which CANN lays out as one row of K: `nd2nz_head`)."""
    v = ops.xv if operand == "a" else ops.wv
    if ops.conv or v.rank < 2 or (operand == "b" and ops.geo.n == 1):
        return ()
    trans_a = bool(int(head.attrs.get("transA", 0) or 0))
    if operand == "a":
        return int(v.shape[-1]), not trans_a
    if ops.w_param and ops.xv.rank >= 2:
        k = int(ops.xv.shape[-2 if trans_a else -1])
        along_k = param_weight_inner(ops.geo.k, ops.geo.n) == ops.geo.k
        return (k if along_k else ops.geo.n), along_k
    return int(v.shape[-1]), bool(int(head.attrs.get("transB", 0) or 0))


def nd2nz_heads(low: Lowering, ops: CubeOperands, miss_a: Any, miss_b: Any
                ) -> tuple[list[Phase], int, bool, bool, Any, Any]:
    """The AIV phases at the head of a split chip's MatMul that convert ND operands the
    on-the-fly ND->NZ DMA does not take (MatMulV3's nd2nzA/B, `nd2nz_head_phase`): the
    phases, the workspace bytes they write, whether A and B are converted, and A's and B's
    miss fractions (a converted operand's is its workspace's); adds their notes to
    `ops.notes`."""
    geo = ops.geo
    # B's rows: N long as the graph lays it out, as the stack keeps a constant weight
    b_inner = param_weight_inner(geo.k, geo.n) if ops.w_param else geo.n
    head_a, head_b = nd2nz_head(geo.k, b_inner, ops.xv.dtype) \
        if ops.nd and ops.formats is not None else (False, False)
    head_a = head_a and low.format_of(ops.x_name) == ND
    head_b = head_b and (low.format_of(ops.w_name) == ND or ops.w_param)
    phases: list[Phase] = []
    workspace = 0
    for operand, v, on in ((ops.x_name, ops.xv, head_a), (ops.w_name, ops.wv, head_b)):
        if on:
            inner = geo.k if operand == ops.x_name else b_inner
            ph, ws_fits, hnotes = nd2nz_head_phase(
                low, operand, v, nd2nz_head_reason(inner, v.dtype) or "")
            phases.append(ph)
            ops.notes += hnotes
            workspace += padded_bytes(v, NZ)
            if operand == ops.x_name:
                miss_a = 0.0 if ws_fits else 1.0
            else:
                miss_b = 0.0 if ws_fits else 1.0
    return phases, workspace, head_a, head_b, miss_a, miss_b


def epilogue_phase(low: Lowering, name: str, outs: CubeOutputs, notes: list[str]) -> Phase:
    """The AIV phase of a mix kernel on a split chip: the fused epilogue reading the cube
    result back through L2; adds its notes to `notes`."""
    vspec = VecSpec(outs.per_out, ((itemsize(outs.head_out.dtype), 0.0),) + outs.epi_inputs,
                    outs.out_bytes, outs.through, tuple(outs.epi_parts))
    vgroups, vnotes = vector_work(low.chip, vspec, name, low.chip.vector_cores)
    notes += ["mix kernel: the cube result goes through L2 to the AIV cores"] + vnotes
    return low.vector_phase(vgroups)


def nd2nz_head_phase(low: Lowering, name: str, v: Value, why: str
                     ) -> tuple[Phase, bool, list[str]]:
    """The AIV phase at a MatMul kernel's head that converts an ND operand the ND->NZ DMA does
    not take (`why`, lower/matmul_format.py) into an NZ workspace; returns the phase, whether
    the workspace stays in L2 (the cube then reads it from there) and notes."""
    src_b, dst_b = padded_bytes(v, ND), padded_bytes(v, NZ)
    n = max(padded_numel(v, ND), padded_numel(v, NZ))
    # the workspace is no graph value: the cache does not track it, so the lowering
    # says whether it stays in L2 (the chip's residency limit), as for other workspaces
    fits = dst_b <= low.chip.l2_resident_bytes
    spec = VecSpec(n, ((src_b / n, low.miss(name, src_b)),), dst_b / n,
                   0.0 if fits else 1.0,
                   (VecPart("unary", v.dtype, max(src_b, dst_b) / n, "vec_transdata"),))
    groups, vnotes = vector_work(low.chip, spec, f"nd2nz head {name}", low.vector_cores())
    notes = [f"'{name}' {why}: the AIV cores convert it to an NZ workspace at the kernel's head "
             f"({src_b} B -> {dst_b} B, {'kept in L2' if fits else 'through HBM'}), then "
             f"the cube reads the workspace (MatMulV3 V_HEAD_ND2NZ)"] + vnotes
    return low.vector_phase(groups), fits, notes


def split_matmul_formats(low: Lowering, op_type: str, x_name: str, w_name: str
                         ) -> MatmulFormats | None:
    """CANN's ND/NZ choice for a 2-D MatMul (A 2-D, B 2-D or a vector) on a split chip,
    None for other cube ops (lower/matmul_format.py)."""
    xv, wv = low.value(x_name), low.value(w_name)
    if op_type != "MatMul" or xv.rank != 2 or wv.rank not in (1, 2):
        return None
    m, k = (int(d) for d in xv.shape)
    n = int(wv.shape[-1]) if wv.rank == 2 else 1
    # a constant weight's rows as the stack lays it out (`param_weight_inner`)
    b_inner = param_weight_inner(k, n) if low.is_const(w_name) and wv.rank == 2 else None
    return matmul_formats(m, k, n, xv.dtype, low.chip.ai_cores, b_inner)


def window_rereads(spec: GemmSpec, m_t: int, tm: int, a_unique: float) -> float:
    """How many times one pass over a convolution's M tiles reads each feature-map byte
    (>= 1; 1 for a MatMul): consecutive output tiles read overlapping input rows (the kh -
    stride halo rows, and whole rows when a tile's m_t pixels end mid-row). A core walks its
    M tiles in order, so the overlap was read by the same core one tile earlier and is still
    in L2 (module note, "Feature-map windows"): only the first read of each byte can miss,
    whatever the tensor's size."""
    if spec.conv_rows is None or a_unique <= 0:
        return 1.0
    return max(1.0, a_tile_bytes(spec, m_t) * tm / a_unique)


def operand_misses(low: Lowering, probe: GemmSpec, op: str, x_name: str, w_name: str,
                   xv: Value, wv: Value) -> tuple[float, float, bool, int, int, int]:
    """L2 miss fractions of a cube op's A and B reads: a first tiling gives the tile grid
    and the wave of cores (gm x gn) that share each strip; returns (miss A, miss B,
    whether the operands fit the L2 residency limit, gm, gn, block dim)."""
    m0, _, n0 = low.chip.cube_shape(probe.in_dtype)
    t0 = gemm_tiling(low.chip, probe, op)
    tm, tn = cdiv(ceil_to(probe.m, m0), t0.m_t), cdiv(ceil_to(probe.n, n0), t0.n_t)
    gn = min(tn, max(1, math.isqrt(t0.block)))
    gm = max(1, min(tm * probe.batch, cdiv(t0.block, gn)))
    a_unique = padded_bytes(xv, low.format_of(x_name) if low.format_of(x_name) !=
                            "const" else ND)
    w_unique = wv.numel * itemsize(wv.dtype)
    fits = a_unique + w_unique <= low.chip.l2_resident_bytes
    # the reads as the CANN tiling does them (L1-resident strips are not re-read): the
    # cold miss fraction is the share of them that first touches each byte
    a_reads, b_reads = operand_read_bytes(probe, t0)
    halo = window_rereads(probe, t0.m_t, t0.tm, a_unique)
    miss_a = low.miss(x_name, max(a_reads / halo, a_unique), fits, gn)
    if halo > 1.0:
        miss_a = GmFraction(miss_a / halo, miss_a.tensors)
    miss_b = low.miss(w_name, max(b_reads, w_unique), fits, gm)
    return miss_a, miss_b, fits, gm, gn, t0.block


def lower_cube_op(low: Lowering, node: Node) -> None:
    """A cube unit op (Conv, MatMul, Gemm, ...): one cube task."""
    lower_cube(low, node, node, [])


# ----------------------------------------------------------------------------- grouped
def touched_experts(experts: int, copies: int) -> int:
    """Experts a GroupedMatmul of `copies` token copies (tokens x top_k) runs: all of them
    once the copies can cover them, else at most one per copy (decode: a batch of 4 tokens
    at top-8 of 128 experts reads 32 experts' weights, not 128). min(E, copies) is the most
    that can be touched, the bound when the tokens pick different experts."""
    return max(1, min(experts, copies))


def lower_grouped_matmul(low: Lowering, node: Node, head: Node | None = None,
                         tail: list | None = None, inner: tuple[str, ...] = (),
                         display: str | None = None) -> None:
    """GroupedMatmul as E GEMMs of ceil(T / E) rows (tokens spread evenly over the experts,
    the stated assumption), every touched expert's weight read once (`touched_experts`:
    fewer than E when the T token copies cannot cover them all, as in decode). group_type 2
    (the weight gradient, groups split the contraction T): E GEMMs (K x ceil(T / E)) @
    (ceil(T / E) x N). `head`/`tail`: the GroupedMatmul and its element-wise epilogue inside
    a UB-fused node."""
    head = head or node
    x_name, w_name = head.inputs[0], head.inputs[1]
    x, w = low.sub_value(head, x_name), low.sub_value(head, w_name)
    out = low.sub_value(head, head.outputs[0])
    split_k = int(head.attrs.get("group_type", SPLIT_M)) == SPLIT_K
    if split_k:
        kdim, t = (int(v) for v in x.shape)
        e, n = int(out.shape[0]), int(out.shape[2])
        rows = cdiv(t, e)
        per_expert = {x_name: (e, kdim, rows), w_name: (e, rows, n)}
    else:
        experts, kdim, n = (int(v) for v in w.shape)
        t = int(x.shape[0])
        e = touched_experts(experts, t)
        rows = cdiv(t, e)
        per_expert = {x_name: (e, rows, kdim), out.name: (e, rows, n)}
        if e < experts:         # only the touched experts' weights are read
            per_expert[w_name] = (e, kdim, n)
    saved = low.sub
    shapes = saved.copy(f"{node.name}_per_expert") if saved is not None else \
        Graph(f"{node.name}_per_expert")
    for name, shape in per_expert.items():
        dtype = x.dtype if name != out.name else out.dtype
        for alias in (name, f"{name}@{NZ}"):
            shapes.values[alias] = Value(alias, shape, dtype)
    shapes.values.setdefault(out.name, out)
    head_node = Node(head.name, head.op_type, (x_name, w_name), head.outputs,
                     {**head.attrs, **gmm_own_tiling(low, x, w, (t, e, rows), kdim, n,
                                                     split_k)})
    low.sub = shapes
    try:
        lower_cube(low, node, head_node, list(tail or ()), inner, name=node.name,
                   op_type=display or node.op_type)
    finally:
        low.sub = saved
    what = (f"{e} experts x (K {kdim} x {rows} token rows) @ ({rows} x N {n}) (weight "
            f"gradient, group_type 2)" if split_k else f"{e} experts x {rows} rows each" + (
                f"; {t} token copies touch at most {e} of the {w.shape[0]} experts, whose "
                f"weights alone are read" if e < int(w.shape[0]) else ""))
    low.tasks[-1].notes += (f"grouped matmul: {what} (T = {t} token copies assumed spread "
                            f"evenly)",)


def gmm_own_tiling(low: Lowering, x: Value, w: Value, groups: tuple[int, int, int], kdim: int,
                   n: int, split_k: bool) -> dict:
    """GroupedMatmul's own base block and core split (lower/gmm_tiling.py) as the per-group
    head's attributes, for the form its tiling covers: a split chip, groups splitting M, x and
    weight of one 2-byte float dtype; {} (the search's tiling) otherwise. `groups`: (x's rows,
    the groups, the rows of each)."""
    if split_k or not takes_nd(low.chip) or x.dtype not in GMM_DTYPES or w.dtype != x.dtype:
        return {}
    t, e, rows = groups
    return gmm_attrs(low.chip, t, e, rows, kdim, n, itemsize(x.dtype), int(w.shape[0]))


#: cube heads of UB-fused nodes with a lowering of their own (by the registry's `lowering`)
CUBE_HEADS: dict[str, Callable] = {"grouped_matmul": lower_grouped_matmul}


def lower_cube_head(low: Lowering, node, head, tail: list, inner: tuple[str, ...],
                    display: str) -> None:
    """The cube op at the head of a UB-fused node with its element-wise `tail`: the head's
    own lowering when its registry entry names one in `CUBE_HEADS`, else `lower_cube`."""
    own = CUBE_HEADS.get(get_op(head.op_type, head.name).lowering)
    if own is not None:
        own(low, node, head, tail, inner, display)
    else:
        lower_cube(low, node, head, tail, inner, node.name, display)


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"cube": lower_cube_op, "grouped_matmul": lower_grouped_matmul}

__all__ = ["ACC_BYTES", "cube_dtype", "chip_cube_modes", "CubeGeometry", "Shaped",
           "conv_geometry", "gemm_geometry", "CubeOperands", "CubeOutputs", "cube_operands",
           "cube_outputs", "lower_cube", "add_cube_task", "nd2nz_heads", "stored_rows",
           "epilogue_phase",
           "nd2nz_head_phase",
           "split_matmul_formats", "operand_misses", "lower_cube_op", "touched_experts",
           "lower_grouped_matmul",
           "gmm_own_tiling", "CUBE_HEADS", "lower_cube_head", "LOWERINGS"]
