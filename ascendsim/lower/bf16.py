"""bfloat16 on the vector unit: which chips take it, and what the vector work becomes.

The 910B's vector unit has no bf16 arithmetic: Ascend C's Add, Mul, Exp, ... take half,
float and integer types on Atlas A2 but not bfloat16_t, while Cast converts bf16 <-> fp32
(asc-devkit docs/api/context/Add.md, Cast.md). CANN's bf16 kernels therefore cast each bf16
input to fp32 (vconv), run the op's fp32 instructions, and cast the result back. A chip file
says so with `vector_bfloat16 = "float32"`; a chip without the figure (910, 310) has no bf16
on its vector unit, and a vector op on bf16 data is an UnsupportedOpError naming the op and
the chip (the cube's bf16 check is `lowering.cube_dtype`).

The model: a bf16 op's own instructions are timed as the fp32 op (4 bytes per element at
the fp32 rates), plus one vconv per element of every bf16 input and output, at the unary
rate (msKPP's figure for one-operand instructions; no vconv measurement was found). Ops that
only move data (the MOVE class) and Cast itself handle bf16 directly: no conversions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import UnsupportedOpError
from ..ir.registry import OpDef, VecClass
from ..ir.tensor import Value

#: ops the vector unit runs on bf16 data as it is: the conversion itself (vconv)
NATIVE_BF16_OPS = frozenset({"Cast"})
#: the VecPart kind of the bf16 <-> fp32 conversions (what `explain()` reports)
VCONV_KIND = "vec_vconv_bf16"


def bf16_vector_work(chip: Any, opdef: OpDef, node: str, ins: Sequence[Value],
                     outs: Sequence[Value]) -> tuple[str, float] | None:
    """For a vector op touching bfloat16 data: (the dtype it computes in, vconv
    instructions per element of its largest operand); None when it touches no bf16 or moves
    it as it is. UnsupportedOpError when the chip's vector unit has no bf16."""
    vals = [v for v in (*ins, *outs) if v is not None]
    bf = [v for v in vals if v.dtype == "bfloat16"]
    if not bf:
        return None
    if chip.vector_bfloat16 is None:
        raise UnsupportedOpError(opdef.op_type, node, detail=(
            f"bfloat16 data needs bf16 support in the vector unit, and {chip.name} has none "
            f"(its chip file has no vector_bfloat16); use a 910B-family chip or Cast to "
            f"float16"))
    if opdef.vec_class == VecClass.MOVE or opdef.op_type in NATIVE_BF16_OPS:
        return None
    big = max(v.numel for v in vals) or 1
    return chip.vector_bfloat16, sum(v.numel for v in bf) / big


def bf16_notes(parts: Sequence[Any]) -> list[str]:
    """The `explain()` note of a vector task that converts bf16 data (VecParts of VCONV_KIND)."""
    if not any(p.kind == VCONV_KIND for p in parts):
        return []
    return ["bfloat16 data computed in fp32: vconv bf16->fp32 of each input, the op's fp32 "
            "instructions, vconv fp32->bf16 of each output (no bf16 arithmetic on the AIV)"]
