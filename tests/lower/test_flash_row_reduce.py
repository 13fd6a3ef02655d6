"""The fused attention's row max and row sum on the A2 / A3 as SoftmaxFlashV2 builds them
(lower/attention.py module note, "Row reductions"): element-wise folds to one 64-value repeat,
from 512 columns a BlockReduce over the first 8 repeats, then two BlockReduce passes; the
whole-reduce (vcadd) rate only for rows under one repeat. Rates: the 910B's
`block_reduce_fp32` (1 cycle a repeat), `binary` (2), `reduce_fp32` (7)."""

from __future__ import annotations

import pytest

from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip
from ascendsim.lower.attention import flash_row_cycles, row_reduce
from ascendsim.lower.vector_seq import repeat_cycles


def test_a2_rates_of_the_reduce_instructions():
    chip = get_chip("ascend910b")
    assert repeat_cycles(chip, "block_reduce", "float32") == pytest.approx(1.0)
    assert repeat_cycles(chip, "block_reduce", "float16") == pytest.approx(7.0, rel=1e-3)
    # vcadd fp32 as pto-isa and GE autofuse give it, the same 7 cycles as its fp16 form
    assert repeat_cycles(chip, "reduce", "float32") == pytest.approx(7.0, rel=1e-3)
    assert repeat_cycles(chip, "reduce", "float16") == pytest.approx(7.0, rel=1e-2)


@pytest.mark.parametrize("cols, cycles", [
    (32, 7.0),            # under one repeat: one whole-reduce repeat
    (64, 2.0),            # one repeat: the two BlockReduce passes only
    (256, 3 * 2.0 + 2),   # three element-wise folds, then the two passes
    (512, 8 + 2.0),       # one BlockReduce over the first 8 repeats, then the two passes
    (640, 8 + 2 * 2.0 + 2),
])
def test_row_cycles_follow_softmax_flash_v2(cols, cycles):
    assert flash_row_cycles(get_chip("ascend910b"), cols) == pytest.approx(cycles, rel=1e-3)


def test_row_reduce_scales_with_rows_and_keeps_whole_reduce_elsewhere():
    a2 = get_chip("ascend910b4")
    assert row_reduce(a2, 64, 256, 64 * 256 * 4, "vec_rowsum").cycles == 64 * 8
    # a chip without the BlockReduce rate keeps one whole-reduce pass over the scores
    coupled = get_chip("ascend910")
    assert coupled.vector_op_bytes_per_cycle.block_reduce_fp32 is None
    whole = row_reduce(coupled, 64, 256, 64 * 256 * 4, "vec_rowsum").cycles
    assert whole == pytest.approx(64 * 256 * 4 / coupled.vector_rate("reduce", "float32"),
                                  abs=1)
    with pytest.raises(ConfigError, match="block_reduce"):
        coupled.vector_rate("block_reduce", "float32")
