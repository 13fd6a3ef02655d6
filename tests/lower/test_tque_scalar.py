"""A vector tile's scalar work (`lower.tiling.vector_scalar_stage`): on the A2 / A3, whose
vector kernels are TQue-framework Ascend C loops, a queue round trip and DMA set-up per
GM <-> UB transfer plus the set-up of each vector instruction (the chip file's
`vector_tile_scalar_cycles_per_queue` / `_per_vec_instr`, a fit to msprof counters of
TQue kernels); elsewhere `scalar_ops_per_instr` per issued instruction."""

from __future__ import annotations

import math

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower.tiling import vector_scalar_stage


def _cycles(stage) -> int:
    return sum(i.cycles for i in stage.instrs)


def test_tque_chip_charges_transfers_and_vector_instructions():
    chip = get_chip("ascend910b")
    q, v = chip.vector_tile_scalar_cycles_per_queue, chip.vector_tile_scalar_cycles_per_vec_instr
    assert q is not None and v is not None
    # relu's tile: one load, one store, one vector instruction (4 instructions in all)
    assert _cycles(vector_scalar_stage(chip, 2, 4, 1)) == math.ceil(2 * q + v)
    # a transfer costs more than a vector call: the queue round trip and the DMA's set-up
    assert (_cycles(vector_scalar_stage(chip, 3, 4, 1))
            > _cycles(vector_scalar_stage(chip, 2, 4, 2)))


def test_other_chips_keep_the_per_instruction_cost():
    chip = get_chip("ascend910")
    assert chip.vector_tile_scalar_cycles_per_queue is None
    want = math.ceil(4 * chip.scalar_ops_per_instr / chip.scalar_ops_per_cycle)
    assert _cycles(vector_scalar_stage(chip, 2, 4, 1)) == want


def test_short_tiles_are_scalar_bound_and_explain_says_why():
    """A RoPE head (a 128-element tile of 2 transfers and 7 vector instructions) is paced by
    its scalar work; `explain` names the bound and what shrinks it."""
    g = asim.Graph("rope")
    x = g.input("x", (4, 1, 64, 128), "float16")
    r = [g.input(n, (4, 1, 1, 128), "float16") for n in ("c", "s")]
    g.output(g.rotary_mul(x, *r, name="op"))
    text = asim.simulate(g, "ascend910b", fusion=False, icache="warm").explain("op")
    assert "bound: scalar" in text
    assert "queue round trip" in text
