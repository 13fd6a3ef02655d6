"""CANN's TBE Sigmoid and Gelu on the A2 and A3 as kernel paths of lower/vector_seq.py: the
dynamic computes of CANN 8.1.RC1 (opp/built-in/op_impl/ai_core/tbe/impl/dynamic/sigmoid.py
`sigmoid_compute`, gelu.py `gelu_compute_v2`; public copy leideng/CANN-8.1.RC1) in their default
high_precision mode, which compute a 2-byte float input in float32. vector_seq takes
`SIGMOID_PATHS` and `GELU_PATHS` into its PATHS; other chips keep the registry's cost fields."""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.tensor import Value
from .seq_types import A2_A3_CHIPS, NARROW_FLOATS, OpSequence
from .seq_types import elem as _e


def _a2_transcendental(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether TBE's dynamic Sigmoid / Gelu runs its A2 / A3 compute: an A2 / A3 chip (an
    Ascend910B / Ascend910_93 SoC, which supports tik.vcopy and inf / nan) and a float input."""
    return chip_name in A2_A3_CHIPS and bool(ins) and ins[0].dtype in (*NARROW_FLOATS,
                                                                       "float32")


#: TBE's dynamic sigmoid_compute on the A2 / A3 in its default high_precision mode (CANN
#: 8.1.RC1 opp/built-in/op_impl/ai_core/tbe/impl/dynamic/sigmoid.py, public copy
#: leideng/CANN-8.1.RC1): float16 cast to float32 (bfloat16 too: support_bfp16), vmuls -1,
#: vexp, vadds 1, then 1 / (.) as a vdiv by a broadcast tensor of ones (the SoC supports
#: inf / nan, so no vrec), cast back. The ones tensor carries broadcast_flag
#: "brdcast_for_vdiv", which the (unpublished) schedule handles apart: its fill is not costed
_SIGMOID_A2 = OpSequence(
    (_e("vmuls", "unary"), _e("vexp", "exp"), _e("vadds", "unary"), _e("vdiv", "div")),
    fp32=True,
    note="TBE sigmoid_compute on the A2 / A3 (impl/dynamic/sigmoid.py, high_precision): "
         "computed in float32, 1 / (1 + exp(-x)) as a vdiv by a broadcast tensor of ones")
#: TBE's dynamic gelu_compute on a SoC after v200 (tik.vcopy: the A2 / A3), gelu_compute_v2
#: (impl/dynamic/gelu.py of the same release): float16 cast to float32 (high_precision or no
#: impl_mode), x * x, * x, * 0.044715, + x (_tanh_parameter_compute), * -1.5957691, vexp,
#: + 1, x / (.), cast back
_GELU_A2 = OpSequence(
    (_e("vmul", "binary"), _e("vmul", "binary"), _e("vmuls", "unary"), _e("vadd", "binary"),
     _e("vmuls", "unary"), _e("vexp", "exp"), _e("vadds", "unary"), _e("vdiv", "div")),
    fp32=True,
    note="TBE gelu_compute_v2 on the A2 / A3 (impl/dynamic/gelu.py, high_precision): "
         "computed in float32, x / (1 + exp(-1.5957691 (x + 0.044715 x^3)))")


SIGMOID_PATHS = ((_a2_transcendental, _SIGMOID_A2),)
GELU_PATHS = ((_a2_transcendental, _GELU_A2),)
