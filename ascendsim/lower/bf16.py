"""bfloat16 on the vector unit: which chips take it, and what the vector work becomes.

The 910B's vector unit has no bf16 arithmetic: Ascend C's Add, Mul, Exp, ... take half,
float and integer types on Atlas A2 but not bfloat16_t, while Cast converts bf16 <-> fp32
(asc-devkit docs/api/context/Add.md, Cast.md). CANN's bf16 kernels therefore cast each bf16
input to fp32 (vconv), run the op's fp32 instructions, and cast the result back. A chip file
says so with `vector_bfloat16 = "float32"`; a chip without the figure (910, 310) has no bf16
on its vector unit, and a vector op on bf16 data is an UnsupportedOpError naming the op and
the chip (the cube's bf16 check is `cube.cube_dtype`).

The model: a bf16 op's own instructions are timed as the fp32 op (4 bytes per element at
the fp32 rates), plus one vconv per element of every bf16 input and output, 64 elements a
repeat at the unary rate (lower/vector_seq.py `vconv_part`); its UB
tile holds two fp32 working buffers per element besides the bf16 queues
(`BF16_WORK_BYTES`). Ops that
only move data (the MOVE class) and Cast itself handle bf16 directly: no conversions.
A TBE NORM kernel that reads its input in several stages (the workspace schedule) casts it
again in each of them (`norm_casts`, `cloned_input_cast`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..errors import UnsupportedOpError
from ..ir.registry import OpDef, VecClass
from ..ir.tensor import Value
from .vector_seq import SeqPart, vconv_part

#: UB bytes per element of a bf16 op's main input for the fp32 working buffers its casts
#: fill: two fp32 buffers, as CANN's bf16 kernels allocate them (ops-nn swi_glu_bf16.hpp
#: inputTempBuffer and outputTempBuffer, tileLength x sizeof(float) each; rms_norm_split_d.h
#: x_fp32_buf and sqx_buf, ub_factor x sizeof(float) each); the fp16 sequences that cast to
#: fp32 count the same (vector_seq.resolve)
BF16_WORK_BYTES = 2 * 4
#: ops the vector unit runs on bf16 data as it is: the conversion itself (vconv)
NATIVE_BF16_OPS = frozenset({"Cast"})
#: what `explain()` says of a vector op on bf16 data
BF16_NOTE = ("bfloat16 data computed in fp32: vconv bf16->fp32 of each input, the op's fp32 "
             "instructions, vconv fp32->bf16 of each output (no bf16 arithmetic on the AIV)")


def bf16_vector_work(chip: Any, opdef: OpDef, node: str, ins: Sequence[Value],
                     outs: Sequence[Value]) -> str | None:
    """For a vector op touching bfloat16 data: the dtype it computes in; None when it
    touches no bf16 or moves it as it is. UnsupportedOpError when the chip's vector unit has
    no bf16."""
    vals = [v for v in (*ins, *outs) if v is not None]
    if not any(v.dtype == "bfloat16" for v in vals):
        return None
    if chip.vector_bfloat16 is None:
        raise UnsupportedOpError(opdef.op_type, node, detail=(
            f"bfloat16 data needs bf16 support in the vector unit, and {chip.name} has none "
            f"(its chip file has no vector_bfloat16); use a 910B-family chip or Cast to "
            f"float16"))
    if opdef.vec_class == VecClass.MOVE or opdef.op_type in NATIVE_BF16_OPS:
        return None
    return chip.vector_bfloat16


def widened(vals: Sequence[Value], dtype: str) -> list[Value]:
    """The values as the op computes on them: every bf16 one in `dtype`."""
    return [replace(v, dtype=dtype) if v.dtype == "bfloat16" else v for v in vals]


def vconv_parts(ins: Sequence[Value], outs: Sequence[Value], per_element: float
                ) -> tuple[list[SeqPart], list[SeqPart]]:
    """The vconvs around a bf16 op's fp32 sequence: bf16->fp32 of each bf16 input before,
    fp32->bf16 of each bf16 output after (`vconv_part`; `per_element`: elements of the task
    per element of a value)."""
    before = [vconv_part("bfloat16", "float32", v.numel * per_element)
              for v in ins if v.dtype == "bfloat16"]
    after = [vconv_part("float32", "bfloat16", v.numel * per_element)
             for v in outs if v.dtype == "bfloat16"]
    return before, after


#: the vconv of a bf16 input as `vconv_parts` names it
INPUT_CAST = vconv_part("bfloat16", "float32", 0.0).instr


def cloned_input_cast(parts: tuple, reads: int) -> tuple:
    """The parts of a TBE NORM kernel on a bf16 input that its workspace schedule reads in
    `reads` separate stages, the input's bf16 -> fp32 cast counted once per stage. The
    schedule splits the graph into sub-graphs at the workspace and reduce tensors, and a
    tensor used on both sides of a reduction that is one cast away from an input is
    cache-cloned, not stored (CANN 8.1.RC1 norm_tilingcase.py `find_workspace_tensor`,
    `_judge_workspace_or_cache_clone`: 7 > 5, whose own count charges the clone's vector op
    twice; norm_schedule.py `NormWorkspaceSchedule._do_cache_clone`, one clone per sub-graph
    reading it; leideng/CANN-8.1.RC1 at 4332a01): Softmax's fp32 cast of x feeds the max
    stage and the x - max stage, each computing it. The first bf16 input cast of `parts`
    (the main input's, `vconv_parts` order) is the one cloned; other parts are kept."""
    if reads <= 1:
        return parts
    at = next((k for k, p in enumerate(parts)
               if isinstance(p, SeqPart) and p.instr == INPUT_CAST), None)
    if at is None:
        return parts
    return (*parts[:at], replace(parts[at], count=parts[at].count * reads), *parts[at + 1:])


def norm_casts(spec: Any, lone: Any) -> Any:
    """`spec` (a VecSpec) of a lone op (`lone`: its node, inputs and OpSequence), its main
    input's cast cloned into each stage that reads the input where the op is a TBE NORM
    kernel taking the workspace schedule (`row_over`; `cloned_input_cast`)."""
    if lone is None or lone[2].norm is None or not spec.row_over:
        return spec
    return replace(spec, parts=cloned_input_cast(spec.parts, spec.row_reads))
