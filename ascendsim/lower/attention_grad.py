"""Lowering of FlashAttentionScoreGrad: the fused attention backward as one mix kernel.

Note on the model (the forward's, lower/attention.py, with the backward's work per block)
-----------------------------------------------------------------------------------------
Work split as the forward: a tile is one query block of one (batch, head) (`sq` rows), its
units the key blocks of `tk` keys it sees (causal: at or below the diagonal). The block sizes
come from the forward's search with twice the head size, since the backward keeps about twice
the operands per block on chip (Q and dO in L0A, K and V in L0B, S and dP in L0C).

Per tile (once): Q, dO and O blocks GM -> L1; delta = rowsum(dO * O) on the vector unit.
Per unit (a key block):
  MTE2: K and V blocks (and the mask block);
  M:    5 GEMMs: S = Q K^T (recomputed, as every flash-attention backward: P is never
        stored), dP = dO V^T, dV += P^T dO, dK += dS^T Q, dQ += dS K; the softmax row max
        and sum are CANN's kernel's inputs (from the forward), whose reads (2 floats per
        query row) are left out;
  V:    P = exp(S * scale - max) / sum (vsub, vexp, vmul), dS = P * (dP - delta) * scale
        (vsub, vmul, vmuls), casts of P and dS to fp16 for the cube;
  FIX/MTE3: the dK and dV partials of this query block (fp32) atomically added to a GM
        workspace (they stay in L2: hbm fraction = the output's write-through); dQ is
        accumulated on chip and written once per tile.
The final fp32 -> fp16 cast of the dK/dV workspace is folded in (not a separate task).
"""

from __future__ import annotations

import math

from ..hw.names import ENGINE_AICORE, TASK_AI_CORE, TASK_MIX_AIC
from ..ir.ops.llm_grads import attention_grad_flops
from ..ir.tensor import itemsize
from .attention import (
    ACC,
    MAX_UNITS,
    attention_blocks,
    attention_dims,
    keys_read,
    visible_blocks,
)
from .context import Lowering, TaskSpec
from .formats import ND, padded_bytes
from .program import CoreGroup, Instr, Phase, Segment, Stage
from .tiling import cdiv, gm_read, gm_write, local_move, scalar_stage, split_even, vec_instr

#: GEMMs per key block in the backward (QK^T recompute, dO V^T, dV, dK, dQ)
BACKWARD_GEMMS = 5


def lower_attention_grad(low: Lowering, node) -> None:
    """One task for FlashAttentionScoreGrad (see the module note). Over 60 lines: the
    kernel's stages are built in one pass, each line one move or instruction of the
    per-block work the module note lists, which reads best unbroken."""
    chip = low.chip
    dims = attention_dims(low, node, 5)
    ins, mask, cdt, in_b = dims.ins, dims.mask, dims.cdt, dims.in_b
    b, h, s, d, hkv, t, causal = dims.b, dims.h, dims.s, dims.d, dims.hkv, dims.t, dims.causal
    m0, k0, n0, split, vec_share = dims.m0, dims.k0, dims.n0, dims.split, dims.vec_share
    q, k = low.value(ins[0]), low.value(ins[1])
    sq, tk = attention_blocks(chip, s, 2 * d, in_b, m0, vec_share)
    per_head = visible_blocks(s, t, sq, tk, causal, False)
    keys, fill = keys_read(per_head, t, tk)
    tiles = b * h * len(per_head)
    blocks_per_tile = max(1, round(sum(per_head) / len(per_head)))
    units = min(blocks_per_tile, MAX_UNITS)
    per_unit = blocks_per_tile / units
    block = min(chip.ai_cores, tiles)
    kv_reads = b * h * keys * d * in_b * 2
    miss_kv = max(low.miss(ins[1], kv_reads / 2), low.miss(ins[2], kv_reads / 2))
    miss_q = max(low.miss(i, padded_bytes(low.value(i), ND)) for i in (ins[0], ins[3], ins[4]))
    outs = [o for o in node.outputs if o]
    through = low.through(outs, [ND] * len(outs))
    kv_blk = tk * d * in_b
    q_blk = sq * d * in_b
    sc_blk = sq * tk * in_b
    # ---- per tile: Q, dO, O in; delta = rowsum(dO * O)
    head = tuple(gm_read(chip, "MTE2", "L1", q_blk, miss_q, kind=kind)
                 for kind in ("copy_q", "copy_dy", "copy_out"))
    mte2 = tuple(gm_read(chip, "MTE2", "L1", round(kv_blk * per_unit * fill), miss_kv)
                 for _ in range(2))
    if mask is not None:
        mte2 += (gm_read(chip, "MTE2", "L1", round(sq * tk * itemsize(mask.dtype) * per_unit),
                         low.miss(ins[5], padded_bytes(mask, ND)), kind="copy_mask"),)
    # L0A: Q, dO, P^T, dS^T, dS; L0B: K, V, dO, Q, K
    mte1 = tuple(local_move(chip, "MTE1", "L1", dst, round(nbytes * per_unit))
                 for dst, nbytes in (("L0A", 2 * q_blk + 3 * sc_blk),
                                     ("L0B", 3 * kv_blk + 2 * q_blk)))
    over = chip.cube_mmad_overhead_cycles
    score_gemm = cdiv(sq, m0) * cdiv(d, k0) * cdiv(tk, n0) + over       # S, dP
    kv_gemm = cdiv(tk, m0) * cdiv(sq, k0) * cdiv(d, n0) + over          # dV, dK
    q_gemm = cdiv(sq, m0) * cdiv(tk, k0) * cdiv(d, n0) + over           # dQ
    mm = tuple(Instr("M", "mmad", math.ceil(c * per_unit))
               for c in (score_gemm, score_gemm, kv_gemm, kv_gemm, q_gemm))
    score_b = sq * tk * ACC / vec_share * per_unit
    vec = tuple(vec_instr(chip, cls, "float32", score_b, kind) for cls, kind in (
        ("binary", "vec_sub_max"), ("exp", "vec_exp"), ("binary", "vec_scale_sum"),
        ("binary", "vec_sub_delta"), ("binary", "vec_mul_p"), ("binary", "vec_scale"),
        ("unary", "vec_cast_p"), ("unary", "vec_cast_ds")))
    if mask is not None:
        vec += (vec_instr(chip, "binary", "float32", score_b, "vec_mask"),)
    head_vec = (vec_instr(chip, "binary", "float32", sq * d * ACC / vec_share, "vec_dy_out"),
                vec_instr(chip, "reduce", "float32", sq * d * ACC / vec_share, "vec_delta"))
    partial = round(2 * kv_blk / in_b * ACC * per_unit)       # dK, dV partials (fp32)
    stages = [Stage("MTE2", mte2, units=units, head=head,
                    out_bufs=(("L1", 2 * kv_blk + 2 * sc_blk),)),
              Stage("MTE1", mte1, units=units,
                    out_bufs=(("L0A", 2 * sq * max(d, tk) * in_b), ("L0B", 2 * kv_blk))),
              Stage("M", mm, units=units, out_bufs=(("L0C", 2 * sq * tk * ACC),))]
    dq_write = gm_write(chip, "MTE3", "UB", q_blk, through)
    if split:
        stages.append(Stage("FIX", (gm_write(chip, "FIX", "L0C",
                                             round(2 * sq * tk * ACC * per_unit), 0.0),
                                    gm_write(chip, "FIX", "L0C", partial, through)),
                            units=units))
        vmove: tuple[Instr, ...] = ()
        last = Stage("MTE3", (dq_write,))
    else:       # coupled: the partials leave through UB with the vector stage's output
        vmove = (local_move(chip, "V", "L0C", "UB", round(2 * sq * tk * ACC * per_unit)),)
        last = Stage("MTE3", (gm_write(chip, "MTE3", "UB", partial, through),), units=units,
                     head=(dq_write,))
    stages.append(Stage("V", vmove + vec, units=units, head=head_vec,
                        out_bufs=(("UB", math.ceil(2 * sc_blk / vec_share)),)))
    stages.append(last)
    n_instr = units * (len(mte2) + len(mte1) + len(mm) + len(vec) + 2) + 6
    chain = (scalar_stage(chip, n_instr),) + tuple(stages)
    groups, core = [], 0
    for count, ncores in split_even(tiles, block):
        groups.append(CoreGroup(tuple(range(core, core + ncores)), (Segment(chain, count),)))
        core += ncores
    flops = attention_grad_flops([q, k], [], node.attrs)
    notes = [f"fused attention backward: B {b}, heads {h} (kv heads {hkv}), S {s}, T {t}, "
             f"D {d}{', causal' if causal else ''}"
             f"{', additive mask' if mask is not None else ''}",
             f"tiling: query block {sq} rows per head, key block {tk}; {tiles} tiles x "
             f"~{blocks_per_tile} key blocks over block dim {block} (simulated as {units} "
             f"unit(s) of {per_unit:.3g} block(s))",
             f"{BACKWARD_GEMMS} GEMMs per key block (S = Q K^T recomputed, softmax "
             f"statistics from the forward); dK/dV partials atomically added in an fp32 GM "
             f"workspace (L2); K/V L2 miss {miss_kv:.2f}"]
    low.add_task(TaskSpec(node.name, node.op_type, TASK_MIX_AIC if split else TASK_AI_CORE,
                          [Phase(ENGINE_AICORE, tuple(groups))], ins, list(node.outputs),
                          [low.format_of(i) for i in ins], [ND] * len(node.outputs), flops,
                          notes, cube_dtype=cdt))


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"flash_attention_grad": lower_attention_grad}

__all__ = ["lower_attention_grad", "BACKWARD_GEMMS", "LOWERINGS"]
