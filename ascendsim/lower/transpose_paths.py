"""CANN's TIK Transpose on the A2 and A3 as kernel paths of lower/vector_seq.py
(opp/built-in/op_impl/ai_core/tbe/impl/dynamic/transpose.py of CANN 8.1.RC1, public copy
leideng/CANN-8.1.RC1 at 4332a01; ops-math's Ascend C Transpose is registered for the 950
only). A permutation that moves the last axis is reordered in UB by vnchwconv, by element
width: `_reorder_s7_b16` passes a 2-byte tile once; `_reorder_s7_b32` and `_reorder_s7_b64`
run a 4- or 8-byte tile as 2-byte lanes through vnchwconv (repeat = the tile's columns, 16
blocks of 32 B each: the whole tile; b64 in two halves), then eight UB-to-UB data_moves of the
columns in bursts of 2 or 4 blocks (the whole tile again), then vnchwconv again (the columns'
repeats, twice that for b64). One that keeps the last axis is strided DMA only; 1-byte data
takes the kernel's scenario 5, not modelled here. vector_seq takes `TRANSPOSE_PATHS` into its
PATHS; other chips keep the registry's cost fields."""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.tensor import Value, itemsize
from .seq_types import A2_A3_CHIPS, OpSequence
from .seq_types import elem as _e
from .vector_rows import norm_perm


def _moves_last_axis(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """Whether CANN's TIK Transpose on an A2 / A3 reorders the data in UB with vnchwconv: a
    2-, 4- or 8-byte dtype whose permutation, size-1 axes dropped, moves the last axis."""
    if chip_name not in A2_A3_CHIPS or not ins or itemsize(ins[0].dtype) not in (2, 4, 8):
        return False
    shape = ins[0].shape
    perm = norm_perm(attrs.get("perm"), len(shape))
    kept = [p for p in perm if shape[p] != 1]
    return len(kept) > 1 and kept[-1] != max(kept)


def _wide_moves_last_axis(ins: Sequence[Value], attrs: dict, fmt: str, chip_name: str) -> bool:
    """`_moves_last_axis` for a 4- or 8-byte dtype (`TRANSPOSE_WIDE`)."""
    return bool(ins) and itemsize(ins[0].dtype) in (4, 8) and _moves_last_axis(
        ins, attrs, fmt, chip_name)


TRANSPOSE_NOTE = ("CANN's TIK Transpose on the A2 / A3 (impl/dynamic/transpose.py; ops-math's "
                  "Ascend C kernel is registered for the 950 only): each UB tile is reordered "
                  "by vnchwconv, 16 x 16 blocks at a time, half the UB in and half out, no "
                  "double buffering; in a binary build its core split and its run-time tiling "
                  "read into UB (lower/dynamic_tiling.py, chip tik_tiling_start_us)")
#: the reorder of a 4- or 8-byte tile (module note): two vnchwconv passes over its bytes and
#: one UB-to-UB copy, charged at the unary (vcopy) rate; pypto's A2/A3 pipe model (hicann/pypto
#: cost_model/simulation_ca/A2A3/model/pipe.cpp `CalcMovUbUb`) gives a cycle a burst, 2-4 times
#: that for these 64- and 128-byte bursts, small beside the two vnchwconv passes
TRANSPOSE_WIDE = (_e("vnchwconv", "transpose", 2.0), _e("data_move (UB->UB)", "unary"))

TRANSPOSE_PATHS = (
    (_wide_moves_last_axis, OpSequence(
        TRANSPOSE_WIDE, buffers=1, note=TRANSPOSE_NOTE + "; 4- and 8-byte data reordered as "
        "2-byte lanes in two vnchwconv passes with a UB-to-UB copy between them "
        "(_reorder_s7_b32 / _b64)")),
    (_moves_last_axis, OpSequence((_e("vnchwconv", "transpose"),), buffers=1,
                                  note=TRANSPOSE_NOTE)),
)

__all__ = ["TRANSPOSE_NOTE", "TRANSPOSE_PATHS", "TRANSPOSE_WIDE"]
