"""Kernels that move their rows one GM burst each (`OpSequence.row_bursts`,
`lower.vector.row_bursts`): RmsNorm's MERGE_N mode copies rows that are not whole 32-byte
blocks with one DataCopyPad burst per row, SwiGlu reads each row's two halves as a burst each
and writes each output row as one; each burst takes at least the chip's per-burst cycles
(`lower.tiling.burst_cycles`); where a core's loads overlap its stores, both directions draw on
the one chip-wide burst rate (`lower.tiling.overlapped_burst_share`)."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.lower.tiling import burst_cycles, overlapped_burst_share

ROWS = 48 * 500      # 500 rows on each of the 910B2's 48 vector cores


def _rms(cols: int, dtype: str = "bfloat16") -> asim.Graph:
    g = asim.Graph("rms")
    x = g.input("x", (ROWS, cols), dtype)
    g.output(g.rms_norm(x, g.input("g", (cols,), dtype), name="op"))
    return g


def _swiglu(cols: int, dtype: str = "bfloat16") -> asim.Graph:
    g = asim.Graph("swiglu")
    g.output(g.swi_glu(g.input("x", (ROWS, cols), dtype), dim=-1, name="op"))
    return g


def _bare(chip: str = "ascend910b2"):
    return asim.load_chip(chip).replace(gm_read_burst_cycles=None, gm_read_bursts_per_cycle=None,
                                        gm_write_burst_cycles=None,
                                        gm_write_bursts_per_cycle=None)


def _notes(res) -> str:
    return "\n".join(res.trace.tasks[0].notes)


def test_unaligned_rms_rows_are_paced_per_burst():
    """Rows of 2 bf16 (4 bytes): 500 rows a core each way, so the reads alone take at least
    500 x the per-burst cycles of 48 cores reading at once; without the figures the kernel
    is shorter by at least half that (its loads and stores overlap the vector work)."""
    chip = asim.load_chip("ascend910b2")
    res = asim.simulate(_rms(2), chip)
    assert "rows moved one GM burst each" in _notes(res)
    per = burst_cycles(chip, 48, write=False)
    assert per == pytest.approx(48 / chip.gm_read_bursts_per_cycle)
    assert res.cycles >= 500 * per
    assert res.cycles - asim.simulate(_rms(2), _bare()).cycles >= 0.5 * 500 * per


def test_aligned_rms_rows_move_in_one_burst():
    """Rows of 64 bf16 (128 bytes, whole blocks) are one contiguous copy: no burst pacing, the
    same time as on a chip without the figures."""
    res = asim.simulate(_rms(64), "ascend910b2")
    assert "rows moved one GM burst each" not in _notes(res)
    assert asim.simulate(_rms(64), _bare()).cycles == res.cycles


def test_swiglu_reads_two_bursts_a_row_and_writes_one():
    res = asim.simulate(_swiglu(4), "ascend910b2")
    note = next(n for n in res.trace.tasks[0].notes if n.startswith("rows moved"))
    read, written = (int(w) for w in note.split(":")[1].split()[0:4:3])
    assert read == 2 * written > 0
    assert asim.simulate(_swiglu(4), _bare()).cycles < res.cycles


def test_chips_without_burst_figures_are_unchanged():
    """The first-generation 910 gives no burst figures: its RmsNorm path pays the path rate."""
    res = asim.simulate(_rms(2, "float16"), "ascend910")
    assert "rows moved one GM burst each" not in _notes(res)


def test_read_and_write_bursts_use_their_own_figures():
    chip = asim.load_chip("ascend910b2").replace(gm_read_burst_cycles=12.0,
                                                 gm_read_bursts_per_cycle=4.0,
                                                 gm_write_burst_cycles=10.0,
                                                 gm_write_bursts_per_cycle=2.0)
    assert burst_cycles(chip, 4, write=False) == 12.0
    assert burst_cycles(chip, 48, write=False) == 12.0
    assert burst_cycles(chip, 48) == 24.0


def test_overlapped_loads_and_stores_share_one_chip_wide_rate():
    """Rows of 2 bf16 on 48 cores, 2000 rows a core (MERGE_N: 379 rows a UB loop, six loops):
    each loop's load overlaps the store of the loop before, so a core's 2000 read and 2000
    written bursts take at least their sum at its share of the chip-wide rate (within 5 %:
    the first load and the last store run alone)."""
    chip = asim.load_chip("ascend910b2")
    g = asim.Graph("rms")
    x = g.input("x", (48 * 2000, 2), "bfloat16")
    g.output(g.rms_norm(x, g.input("g", (2,), "bfloat16"), name="op"))
    res = asim.simulate(g, chip)
    per = burst_cycles(chip, 48)
    assert res.cycles >= 0.95 * (2000 + 2000) * per
    assert "while a core's loads and stores overlap" in _notes(res)


def test_overlapped_burst_share():
    """SwiGlu reads two bursts a row for each it writes: the load waits behind 1.5 bursts a
    burst, the store behind 3; a direction moved as one burst a move takes no share."""
    assert overlapped_burst_share(2.0, 1.0) == (1.5, 3.0)
    assert overlapped_burst_share(0.0, 1.0) == (1.0, 1.0)
    chip = asim.load_chip("ascend910b2")
    assert burst_cycles(chip, 48, share=3.0) == pytest.approx(3 * burst_cycles(chip, 48))


def _softmax(cols: int, dtype: str = "float32") -> asim.Graph:
    g = asim.Graph("softmax")
    x = g.input("x", (ROWS, cols), dtype)
    g.output(g.add_node("Softmax", [x], {"axis": -1}, name="op")[0])
    return g


def test_norm_softmax_rows_off_blocks_move_one_burst_each():
    """TBE's softmax over rows of 67 fp32 (268 bytes): each row laid on blocks of its own in
    UB (`vector_rows.row_on_blocks` "norm"), so 500 rows a core read and written as a GM
    burst each; without the burst figures the kernel is shorter by at least the reads'
    share (the queues are single-buffered: the moves do not hide behind the vector work)."""
    chip = asim.load_chip("ascend910b2")
    res = asim.simulate(_softmax(67), chip)
    assert "rows moved one GM burst each" in _notes(res)
    per = burst_cycles(chip, 48, write=False)
    assert res.cycles - asim.simulate(_softmax(67), _bare()).cycles >= 500 * per


@pytest.mark.parametrize("cols, dtype", [(4, "float32"), (2, "float16"), (8, "float32"),
                                         (32, "float16")])
def test_norm_softmax_rows_packing_whole_blocks_are_one_copy(cols, dtype):
    """Rows whose bytes divide a 32-byte block (4 fp32, 2 fp16: the reduce-transpose case
    reads them contiguously) or fill whole blocks move as one copy: no burst pacing."""
    res = asim.simulate(_softmax(cols, dtype), "ascend910b2")
    assert "rows moved one GM burst each" not in _notes(res)
    assert asim.simulate(_softmax(cols, dtype), _bare()).cycles == res.cycles


def test_row_on_blocks_modes():
    from ascendsim.lower.vector_rows import row_on_blocks
    assert row_on_blocks(268, 32, "norm") and row_on_blocks(12, 32, "norm")
    assert not row_on_blocks(16, 32, "norm") and not row_on_blocks(4, 32, "norm")
    assert row_on_blocks(16, 32, "rows") and not row_on_blocks(64, 32, "rows")
