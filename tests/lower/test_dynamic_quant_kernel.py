"""DynamicQuant on the A2 as CANN's Ascend C kernel runs it (ops-nn quant/dynamic_quant,
lower/quant_paths.py): rows of 128..16320 elements, a multiple of 8, take the multi-row kernel
(vector calls over a step of rows); other rows up to 15040 the double-buffered kernel, every
call one a row behind a barrier, unaligned rows copied in one burst each and every int8 output
row copied out as one; longer rows and other chips keep the registry's cost fields."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.ir.tensor import Value
from ascendsim.lower.quant_paths import dynamic_quant_mode


def _dq(rows: int, cols: int, dtype: str = "float16") -> asim.Graph:
    g = asim.Graph("dq")
    y, scale = g.add_node("DynamicQuant", [g.input("x", (rows, cols), dtype)], name="op")
    g.output(y, scale)
    return g


def _notes(res) -> str:
    return "\n".join(res.trace.tasks[0].notes)


@pytest.mark.parametrize("cols, mode", [(1024, "MULTI_ROW"), (4096, "MULTI_ROW"),
                                        (16320, "MULTI_ROW"), (1023, "DB"), (373, "DB"),
                                        (96, "DB"), (15039, "DB"), (16328, ""), (20001, "")])
def test_the_tiling_picks_the_kernel_by_row_length(cols, mode):
    assert dynamic_quant_mode([Value("x", (64, cols), "float16")], "ND", "ascend910b") == mode


def test_other_chips_and_dtypes_keep_the_registry_fields():
    assert dynamic_quant_mode([Value("x", (64, 1024), "float16")], "ND", "ascend910") == ""
    assert dynamic_quant_mode([Value("x", (64, 1024), "float32")], "ND", "ascend910b") == ""
    text = _notes(asim.simulate(_dq(64, 1024), "ascend910"))
    assert "from the registry's cost fields" in text


def test_multi_row_kernel_moves_whole_steps():
    text = _notes(asim.simulate(_dq(1024, 1024), "ascend910b2"))
    assert "multi-row kernel" in text and "rows moved one GM burst each" not in text


def test_general_kernel_pays_its_per_row_calls():
    """Twice the rows of 373 on every one of the 48 cores add at least the extra rows' calls
    waiting out one another: 11 calls a row, `vector_dep_latency_cycles` each."""
    chip = asim.load_chip("ascend910b2")
    one = asim.simulate(_dq(48 * 100, 373), chip)
    two = asim.simulate(_dq(48 * 200, 373), chip)
    assert "double-buffered general kernel" in _notes(one)
    assert two.cycles - one.cycles >= 100 * 11 * chip.vector_dep_latency_cycles


def test_general_kernel_writes_each_int8_row_as_a_burst():
    """Rows of 96 halves (192 bytes, whole 32-byte blocks) are read in one copy, but each int8
    output row (96 bytes) is its own burst."""
    note = next(n for n in asim.simulate(_dq(4800, 96), "ascend910b2").trace.tasks[0].notes
                if n.startswith("rows moved"))
    read, written = (int(w) for w in note.split(":")[1].split()[0:4:3])
    assert read == 0 and written > 0
