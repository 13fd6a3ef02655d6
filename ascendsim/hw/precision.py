"""CANN's precision modes: the dtype a cube op reads float32 operands in, one table.

CANN picks the dtype of each op from a global precision mode (ATC/GE option
``precision_mode``; MindSpore ``device_context.ascend.op_precision.precision_mode``;
torch_npu ``ACL_PRECISION_MODE``). What each mode does to a matrix (cube) op with float32
operands, as CANN's option reference describes it (CANN AOE/ATC ``--precision_mode``,
hiascend.com/document/detail/zh/CANNCommunityEdition/81RC1beta1/devaids/aoe/aoepar_16_042.html):

- ``force_fp16``: an op that supports float16 and float32 runs in float16;
- ``allow_fp32_to_fp16``: matrix ops run in float16; vector ops keep float32 where they have it;
- ``allow_mix_precision`` (= ``allow_mix_precision_fp16``): float32 ops on the built-in
  allow list (``precision_reduce = true``: MatMul, Conv) drop to float16;
- ``must_keep_origin_dtype``: the graph's dtypes are kept; a float32 op whose AI Core kernel has
  no float32 form falls back to an AI CPU kernel or fails (not modelled: an error here);
- ``allow_fp32_to_bf16``: matrix ops run in bfloat16 (Atlas A2 only).

The default is a chip-file figure (`Chip.precision_mode`, sourced): the MindSpore reference
(mindspore.cn/docs/zh-CN/r2.5.0/api_python/device_context/
mindspore.device_context.ascend.op_precision.precision_mode.html) gives ``allow_fp32_to_fp16`` on
the Atlas training series (the 910, whose cube has no float32 mode) and
``must_keep_origin_dtype`` on the Atlas A2 series (910B); ATC's default for an offline
(inference) model is ``force_fp16``. A chip file without the figure gets the mode that matches
its cube: ``must_keep_origin_dtype`` where the cube has a float32 mode, else
``allow_fp32_to_fp16``.

What the model follows: the cube's operand dtype (its timing, through `cube_fp32_dtype`, and
the values: the executor rounds float32 cube operands to that dtype before the kernel, the
result accumulating in float32 as in L0C). Vector ops keep their dtype in every mode (the vector
half of ``force_fp16`` and the mixed-precision lists are not modelled). HF32 (torch_npu's
``allow_hf32`` on the 910B) is not a mode here: no source gives its cube rate.
"""

from __future__ import annotations

from typing import Any

#: mode -> the dtype float32 cube operands are read in ("float32": kept as given)
PRECISION_MODES: dict[str, str] = {
    "force_fp16": "float16",
    "allow_fp32_to_fp16": "float16",
    "allow_mix_precision": "float16",
    "allow_mix_precision_fp16": "float16",
    "must_keep_origin_dtype": "float32",
    "allow_fp32_to_bf16": "bfloat16",
}


def precision_mode(chip: Any) -> str:
    """The chip's precision mode: its `precision_mode` figure, else the one its cube implies."""
    mode = getattr(chip, "precision_mode", None)
    if mode is not None:
        return mode
    return "must_keep_origin_dtype" if chip.cube_mkn.float32 is not None else \
        "allow_fp32_to_fp16"


def cube_fp32_dtype(chip: Any) -> str | None:
    """The cube mode float32 operands run in on `chip` under its precision mode, or None when
    the mode asks for a cube mode the chip lacks (the lowering then names the op)."""
    want = PRECISION_MODES[precision_mode(chip)]
    if getattr(chip.cube_mkn, want) is None:
        return None
    return want


__all__ = ["PRECISION_MODES", "precision_mode", "cube_fp32_dtype"]
