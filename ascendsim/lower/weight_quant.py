"""Lowering of WeightQuantBatchMatmulV2 (W8A16, W4A16): the weight's antiquant on the vector
unit, then a float GEMM on the cube.

Note on the model
-----------------
Where the antiquant runs. On the 910B (Atlas A2, split AIC/AIV) CANN's
WeightQuantBatchMatmulV2 "custom" kernel is a mix kernel: the AIV cores copy slices of the
int8 / int4 weight from GM into UB, cast them to the compute dtype and apply
(w + offset) * scale there (vconv, vadd, vmul; bf16 through fp32), and write the float
slices to a GM workspace of a few rotating slots (`weightCache_`); the AIC runs a float
Matmul whose B is that workspace, one step behind the vector cores (CrossCoreSetFlag /
CrossCoreWaitFlag between them). Source: CANN ops-nn
matmul/weight_quant_batch_matmul_v2/op_kernel/weight_quant_batch_matmul_v2_custom.h
(ProcessVector -> AntiquantWeight: CopyInAntiquantParams, WeightCopyInAndCast,
AntiQuantCompute, WeightCopyOut; ProcessCube: SetTensorB(weightCache_)). The cube never sees
int8 or int4: the dequantisation is not in the cube path.

So the task has two phases: an AIV phase that reads the quantised weight (K*N bytes for
int8, K*N/2 for int4, at their own width, from HBM the first time) plus the scales and
offsets, and writes K*N float elements into the workspace, which stays in L2 (a rotating
buffer of a few slices: never written back); and an AIC phase, a float GEMM whose A is x and
whose B is read from that workspace (L2 hits). The phases overlap as the kernel's flags
allow (task type MIX_AIV, sim/mix.py: the AIC starts after the AIV's first tiles and ends
one tile after it). What it costs against a float MatMul: HBM bytes of the weight drop to a
half (int8) or a quarter (int4); in exchange the vector cores pass every weight element
through three or more instructions and the weight crosses L2 twice in float (written by the
AIV, read by the AIC). Decode (M small: weight-bandwidth bound) gains; prefill (compute
bound) gains nothing and pays the vector work where it does not hide under the cube.

On a coupled chip (310P) the same two phases run in turn on the same cores (the kernel
there keeps the float weight in the core's own buffers; the workspace here stands for it).

Not modelled: CANN's other 910B kernels for this op (the "msd" kernels that split the
activation into int8 parts for the int8 cube at small M, the fixpipe kernel of UINT64
scales), which the tiling picks for some shapes.
"""

from __future__ import annotations

import math

from ..errors import UnsupportedOpError
from ..hw.names import ENGINE_AICORE, TASK_AI_CORE, TASK_MIX_AIV
from ..ir.tensor import itemsize
from .context import Lowering, TaskSpec
from .cube import ACC_BYTES, cube_dtype, operand_misses
from .cube_tiling import GemmSpec, takes_nd
from .formats import ND, NZ
from .memo import gemm_work, vector_work
from .movement import ensure
from .program import Phase
from .tiling import VecSpec, ceil_to
from .vector_seq import ELEM, SeqPart

#: weight bytes per element as stored in GM, by the weight's graph dtype (int32 = INT4Pack)
WEIGHT_BYTES = {"int8": 1.0, "int32": 0.5}
#: the quantised weight dtype a graph dtype stands for (the chip's `weight_quant` names it)
WEIGHT_KIND = {"int8": "int8", "int32": "int4"}


def weight_kind(dtype: str) -> str:
    """'int8' or 'int4' for a WeightQuantBatchMatmulV2 weight of graph dtype `dtype`."""
    return WEIGHT_KIND[dtype]


def check_weight_quant(chip, kind: str, op: str, node: str | None = None) -> None:
    """UnsupportedOpError unless the chip's CANN has weight-only quantised matmuls of
    weight dtype `kind` (the chip file's `weight_quant`, sourced)."""
    have = tuple((chip.weight_quant or "").split(",")) if chip.weight_quant else ()
    if kind not in have:
        what = (f"only {', '.join(have)} weights" if have
                else "no WeightQuantBatchMatmulV2 kernel")
        raise UnsupportedOpError(op, node, detail=(
            f"{kind} weight-only quantisation (W{kind[3:]}A16) needs CANN's "
            f"WeightQuantBatchMatmulV2 with {kind} weights, and {chip.name} has {what} "
            f"(chip file weight_quant: {chip.sources.get('weight_quant', 'absent')})"))


def antiquant_parts(kind: str, dtype: str, offset: bool) -> tuple[SeqPart, ...]:
    """The vector instructions per weight element of the antiquant (module note): vconv of
    the int8/int4 weight, then + offset and * scale; bf16 computes in fp32 between vconvs."""
    src = "s8" if kind == "int8" else "s4"
    if dtype == "bfloat16":
        head = (SeqPart(f"vconv {src}->f16", "unary", "float16", 2, ELEM, 1.0),
                SeqPart("vconv f16->f32", "unary", "float32", 4, ELEM, 1.0))
        work, item, tail = "float32", 4, (SeqPart("vconv f32->bf16", "unary", "float32", 4,
                                                  ELEM, 1.0),)
    else:
        head = (SeqPart(f"vconv {src}->f16", "unary", "float16", 2, ELEM, 1.0),)
        work, item, tail = "float16", 2, ()
    body = ((SeqPart("vadd (antiquant offset)", "binary", work, item, ELEM, 1.0),)
            if offset else ()) + (SeqPart("vmul (antiquant scale)", "binary", work, item,
                                          ELEM, 1.0),)
    return head + body + tail


def lower_weight_quant_matmul(low: Lowering, node) -> None:
    """One WeightQuantBatchMatmulV2 task (module note): the antiquant phase on the vector
    cores, then the float GEMM on the cube reading the antiquantised weight from L2."""
    chip = low.chip
    ins = list(node.inputs) + [""] * (5 - len(node.inputs))
    x_name, w_name, s_name, o_name, b_name = ins[:5]
    xv, wv = low.value(x_name), low.value(w_name)
    out = low.value(node.outputs[0])
    kind = weight_kind(wv.dtype)
    check_weight_quant(chip, kind, node.op_type, node.name)
    k, n = int(wv.shape[0]), int(out.shape[-1])
    m = math.prod(int(d) for d in xv.shape[:-1])
    nd = takes_nd(chip)
    x_name = ensure(low, x_name, ND if nd else NZ)
    cdt = cube_dtype(chip, xv.dtype, node.op_type, node.name)
    _, k0, _ = chip.cube_shape(cdt)
    f_b = itemsize(xv.dtype)
    elems = k * n
    # phase 1: antiquant of the weight on the vector cores into the L2-resident workspace
    w_b = WEIGHT_BYTES[wv.dtype]
    inputs = [(w_b, low.miss(w_name, elems * w_b))]
    for p in (s_name, o_name):
        if p:
            pv = low.value(p)
            pb = pv.numel * itemsize(pv.dtype)
            inputs.append((pb / elems, low.miss(p, pb)))
    parts = antiquant_parts(kind, xv.dtype, bool(o_name))
    vspec = VecSpec(elems, tuple(inputs), float(f_b), 0.0, parts)
    vgroups, vnotes = vector_work(chip, vspec, f"{node.name} antiquant", low.vector_cores())
    anti = low.vector_phase(vgroups)
    # phase 2: the float GEMM, B from the workspace (L2 hits)
    probe = GemmSpec(1, m, ceil_to(k, k0), n, cdt, f_b, itemsize(out.dtype), ACC_BYTES,
                     miss_b=0.0, blocks=chip.ai_cores)
    # A's misses as a MatMul's (its re-reads across N tiles hit L2); B's are the workspace's
    miss_a = operand_misses(low, probe, node.name, x_name, w_name, low.value(x_name), wv)[0]
    spec = GemmSpec(1, m, ceil_to(k, k0), n, cdt, f_b, itemsize(out.dtype), ACC_BYTES,
                    miss_a, 0.0, low.through([out.name], [ND if nd else NZ]),
                    bool(b_name), nd2nz_a=nd and low.format_of(x_name) == ND, nd2nz_b=nd,
                    blocks=chip.ai_cores)
    groups, cnotes, _ = gemm_work(chip, spec, node.name)
    gemm = Phase(ENGINE_AICORE, tuple(groups))
    scale_kind = ("per group" if low.value(s_name).rank == 2 and
                  int(low.value(s_name).shape[0]) > 1 else "per channel"
                  if low.value(s_name).numel > 1 else "per tensor")
    notes = [f"W{kind[3:]}A16 ({scale_kind} scales{', offsets' if o_name else ''}): the "
             f"vector cores read the {kind} weight ({elems * w_b:,.0f} B, "
             f"{w_b:g} B/element against {f_b} in {xv.dtype}), antiquant it "
             f"({' -> '.join(p.instr for p in parts)}) into a {xv.dtype} workspace that "
             f"stays in L2 ({elems * f_b:,} B written), and the cube reads its B from there "
             f"(CANN WeightQuantBatchMatmulV2 custom kernel: vector one step ahead of the "
             f"cube)", f"GEMM: M {m}, K {k}, N {n} in the cube's {cdt} mode"]
    notes += [f"antiquant {t}" for t in vnotes] + cnotes
    ins_used = [i for i in (x_name, w_name, s_name, o_name, b_name) if i]
    flops = 2 * m * n * k
    task_type = TASK_AI_CORE if chip.coupled else TASK_MIX_AIV
    low.add_task(TaskSpec(node.name, node.op_type, task_type, [anti, gemm], ins_used,
                          [out.name], [low.format_of(i) for i in ins_used],
                          [ND if nd else NZ], flops, notes, cube_dtype=cdt))


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"weight_quant_matmul": lower_weight_quant_matmul}

__all__ = ["WEIGHT_BYTES", "WEIGHT_KIND", "weight_kind", "check_weight_quant",
           "antiquant_parts", "lower_weight_quant_matmul", "LOWERINGS"]
