"""Transpose on the A2 / A3 runs as CANN's TIK kernel (impl/dynamic/transpose.py): a
permutation that moves the last axis is reordered in UB by vnchwconv, 24 cycles per 512-byte
repeat (pto-isa's A2/A3 cost table), far below the unary copy rate; one that keeps the last
axis is strided DMA only. 4- and 8-byte tiles pass vnchwconv twice, as 2-byte lanes, with a
UB-to-UB copy between the passes (`_reorder_s7_b32`, `_reorder_s7_b64`). 1-byte data takes
scenario 5: each byte spread to its own 32-byte block by two b8 vnchwconv calls, reordered by
UB-to-UB moves and packed back by two more calls (`_reorder_s5`, int8 case)."""

import pytest

import ascendsim as asim
from ascendsim.errors import ConfigError
from ascendsim.hw import load_chip


def _transpose(shape: tuple[int, ...], perm: tuple[int, ...], chip: str,
               dtype: str = "float16") -> tuple[str, float]:
    """The sequence line of `explain` and the V cycles summed over the task's blocks."""
    g = asim.Graph("t")
    x = g.input("x", shape=shape, dtype=dtype)
    g.output(g.transpose(x, perm=list(perm)))
    res = asim.simulate(g, chip=chip)
    task = res.trace.tasks[0]
    line = next(s for s in res.explain(task.op_name).splitlines() if "vector sequence" in s)
    v = sum(i.end - i.start for i in res.trace.intervals
            if i.task_id == task.task_id and i.pipe == "V")
    return line, v


def test_a_transpose_of_the_last_axis_runs_vnchwconv_at_its_rate():
    shape = (8, 256, 384)
    line, v = _transpose(shape, (0, 2, 1), "ascend910b4")
    assert "vnchwconv" in line and "transpose.py" in line
    rate = load_chip("ascend910b4").vector_rate("transpose")
    nbytes = 8 * 256 * 384 * 2
    # every byte passes vnchwconv once; the blocks' instruction start-ups add a little
    assert nbytes / rate <= v <= 1.2 * nbytes / rate


def test_a_transpose_that_keeps_the_last_axis_has_no_reorder():
    line, _ = _transpose((8, 4, 16384), (1, 0, 2), "ascend910b4")
    assert "vnchwconv" not in line


def test_size_one_axes_do_not_count_as_moved():
    # [1, 256, 384] -> [256, 1, 384]: the data does not move at all within its rows
    line, _ = _transpose((1, 256, 384), (1, 0, 2), "ascend910b4")
    assert "vnchwconv" not in line


def test_the_reorder_is_slower_than_a_copy_on_the_a2_only():
    _, v_a2 = _transpose((8, 256, 384), (0, 2, 1), "ascend910b4")
    _, v_kept = _transpose((8, 256, 384), (1, 0, 2), "ascend910b4")
    assert v_a2 > 5 * v_kept       # 21.3 against 256 B/cycle
    line, _ = _transpose((8, 256, 384), (0, 2, 1), "ascend910")
    assert "vnchwconv" not in line  # no rate for the first-generation 910's reorder


def test_a_chip_without_the_rate_says_so():
    with pytest.raises(ConfigError, match="ascend910.*transpose"):
        load_chip("ascend910").vector_rate("transpose")


@pytest.mark.parametrize("dtype, item", [("float32", 4), ("int32", 4), ("int64", 8)])
def test_wide_dtypes_pass_vnchwconv_twice_and_copy_once(dtype, item):
    shape = (8, 256, 384)
    line, v = _transpose(shape, (0, 2, 1), "ascend910b4", dtype)
    assert "2 x vnchwconv" in line and "data_move (UB->UB)" in line
    chip = load_chip("ascend910b4")
    nbytes = 8 * 256 * 384 * item
    # two vnchwconv passes and one copy at the unary rate; block start-ups add a little
    floor = 2 * nbytes / chip.vector_rate("transpose") + nbytes / chip.vector_rate("unary")
    assert floor <= v <= 1.2 * floor


def test_two_byte_tiles_pass_vnchwconv_once():
    _, v16 = _transpose((8, 256, 384), (0, 2, 1), "ascend910b4", "float16")
    _, v32 = _transpose((8, 256, 384), (0, 2, 1), "ascend910b4", "float32")
    # twice the bytes, twice the passes, plus the copy: well over 4x the 2-byte reorder
    assert v32 > 4 * v16


def test_one_byte_data_spreads_each_byte_to_a_block_and_back():
    shape = (256, 384)
    line, v = _transpose(shape, (1, 0), "ascend910b4", "int8")
    assert "2 x vnchwconv (b8, spread)" in line and "2 x vnchwconv (b8, pack)" in line
    assert "a block per byte" in line
    chip = load_chip("ascend910b4")
    nbytes = 256 * 384
    # four b8 calls, each reading 16 source blocks per block of data, their repeats padded to
    # whole blocks of the 46 x 44 units (17 x 32 / 384 and 12 x 32 / 256), and one 32-byte
    # block copied per byte at the unary rate; block start-ups add a little
    pads = 2 * 17 * 32 / 384 + 2 * 12 * 32 / 256
    floor = (pads * 16 * nbytes / chip.vector_rate("transpose_b8")
             + 32 * nbytes / chip.vector_rate("unary"))
    assert floor <= v <= 1.2 * floor
    _, v16 = _transpose(shape, (1, 0), "ascend910b4", "float16")
    assert v > 20 * v16            # half the bytes, about 50 times the V cycles per byte


def test_one_byte_units_count_their_repeats_in_whole_blocks():
    from ascendsim.lower.transpose_paths import b8_pack_pad, b8_spread_pad

    class _V:
        def __init__(self, shape):
            self.shape, self.rank = shape, len(shape)

    # [4097, 511] int8 (1, 0): units of 46 columns (11 and a tail of 5: 23 blocks for 511
    # bytes) by 41 rows (the step cut from 46 until the tail, 38, holds a block: 99 units of
    # 41 and the tail, 200 blocks for 4097 bytes), op_tiling transpose.cc `CalcLeftVol`,
    # `CalcSrcBorrowAxisIndex`, `CalcDstBorrowAxisIndex`
    swap = [_V((4097, 511))], {"perm": [1, 0]}
    assert b8_spread_pad(*swap) == pytest.approx(23 * 32 / 511)
    assert b8_pack_pad(*swap) == pytest.approx(200 * 32 / 4097)
    # size-1 axes dropped: the same swap
    assert b8_pack_pad([_V((1, 4097, 511))], {"perm": [0, 2, 1]}) == b8_pack_pad(*swap)
    # aligned sides still pad: 89 units of 46 (two blocks each) and a tail of 2 (one block)
    assert b8_spread_pad([_V((4096, 4096))], {"perm": [1, 0]}) == pytest.approx(
        (89 * 2 + 1) * 32 / 4096)
    # a side under the unit, or another permutation: not modelled, no padding
    assert b8_spread_pad([_V((30, 4096))], {"perm": [1, 0]}) == 1.0
    assert b8_pack_pad([_V((4, 256, 384))], {"perm": [0, 2, 1]}) == 1.0


def test_one_byte_data_that_keeps_its_last_axis_is_not_reordered():
    line, _ = _transpose((8, 4, 16384), (1, 0, 2), "ascend910b4", "int8")
    assert "vnchwconv" not in line


def test_output_bursts_are_kept_rows_or_tile_columns():
    from ascendsim.lower.transpose_paths import ROW_UNIT, output_burst_elems
    # (0, 2, 1, 3) keeps the last axis: a burst is one 128-element row
    assert output_burst_elems((64, 32, 512, 128), (0, 2, 1, 3)) == 128
    # (1, 0, 2, 3) keeps the two trailing axes: one run of 512 x 128
    assert output_burst_elems((64, 32, 512, 128), (1, 0, 2, 3)) == 512 * 128
    # a moved last axis: one tile column of at most ROW_UNIT rows
    assert output_burst_elems((8192, 8192), (1, 0)) == ROW_UNIT
    assert output_burst_elems((100, 8192), (1, 0)) == 100     # output rows of 100


def test_only_bursts_that_evict_dirty_lines_are_charged():
    from ascendsim.lower.transpose_paths import l2_writeback_share
    l2 = load_chip("ascend910b2").l2_bytes
    assert l2_writeback_share(64 << 20, 64 << 20, l2) == 0.0     # fits the L2
    big = 268 << 20
    share = l2_writeback_share(big, big, l2)
    # past the fill, every allocation evicts; half the evicted lines are dirty output lines
    assert share == pytest.approx((1 - l2 / (2 * big)) * 0.5)


def test_a_transpose_past_the_l2_paces_its_row_stores_as_bursts():
    def notes(shape: tuple[int, ...]) -> str:
        g = asim.Graph("t")
        x = g.input("x", shape=shape, dtype="float16")
        g.output(g.transpose(x, perm=[0, 2, 1, 3]))
        res = asim.simulate(g, chip="ascend910b2")
        return res.explain(res.trace.tasks[0].op_name)

    assert "GM burst each" in notes((64, 32, 512, 128))     # 268 MB in and out
    assert "GM burst each" not in notes((8, 128, 16, 64))   # an attention head's, in L2


def test_eight_byte_data_moves_one_burst_per_command():
    from ascendsim.lower.transpose_paths import single_burst_moves
    # int64 [4096, 8192] (1, 0): 88 rows a core (4096 / 48 up to a block), tiles of 64 columns
    assert single_burst_moves((4096, 8192), (1, 0), 8, 48) == (64.0, 88.0)
    # the pad loops of narrower data, and a permutation that keeps the last axis: not these
    assert single_burst_moves((4096, 8192), (1, 0), 4, 48) is None
    assert single_burst_moves((64, 32, 128), (1, 0, 2), 8, 48) is None


def test_eight_byte_tiles_follow_the_tiling_views():
    from ascendsim.lower.transpose_paths import b64_transpose_moves, transpose_ncrs
    # the views of a reversal: trailing input axes as columns, the axes after them as rows
    assert transpose_ncrs((3, 7, 11, 13, 1013), (4, 3, 2, 1, 0)) == [
        (1014013, 3), (144859, 21), (13169, 231), (1013, 3003)]
    # Model002_b64 takes the first view with 16 x 48 rows: [1013 cols, 3003 rows], 64 rows a
    # core; 16 column tiles (15 of 64, one of 56 stepped back onto a block), one row tile:
    # 64 x 16 row loads and 1,016 column stores of 64 rows (512 B, not the 24-byte output row)
    assert b64_transpose_moves((3, 7, 11, 13, 1013), (4, 3, 2, 1, 0), 48) == (64832, 1024, 1016)
    # int64 [4096, 8192]: 88 x 128 row loads and 8,192 column stores, 19,456 commands a core
    assert b64_transpose_moves((4096, 8192), (1, 0), 48) == (88 * 8192, 11264, 8192)
    # no view with rows enough for every core: scenario 7 falls back (not modelled here)
    assert b64_transpose_moves((64, 300), (1, 0), 48) is None


def test_eight_byte_bursts_are_paced_in_the_l2_too(monkeypatch):
    from ascendsim.lower import transpose_paths

    def time_us() -> float:
        g = asim.Graph("t")
        x = g.input("x", shape=(1024, 4096), dtype="int64")     # 64 MB in and out: in the L2
        g.output(g.transpose(x, perm=[1, 0]))
        return asim.simulate(g, chip="ascend910b2").time_us

    paced = time_us()
    monkeypatch.setattr(transpose_paths, "single_burst_moves", lambda *a: None)
    # 65,536 row loads and 32,768 column stores a 48-core kernel spreads 1,365 / 683 a core
    # at 43.2 cycles a burst: tens of microseconds the byte rate alone does not charge
    assert paced > time_us() + 20.0


def test_tile_rows_and_columns_off_the_blocks_count_a_burst_each():
    from ascendsim.lower.dynamic_tiling import off_block_bursts
    # [1023, 1023] fp16: Model006 on the rows, 32 a core (`Split`): a 32-row burst a column
    # out; rows of 1,023 in, cut into tiles of 256 columns (4 a row)
    assert off_block_bursts((1023, 1023), (1, 0), 48, 2) == (1023 / 4, 32)
    # [2049, 513] fp16: 48 rows a core; [255, 8193] bf16: the columns split (176 a core), all
    # 255 rows in two tile columns of at most ROW_UNIT
    assert off_block_bursts((2049, 513), (1, 0), 48, 2) == (513 / 3, 48)
    assert off_block_bursts((255, 8193), (1, 0), 48, 2) == (176, 255 / 2)
    # output rows of whole blocks (512 fp32 = 2 KB): only the loads; 1024 fp16 both ways
    # (scenario 11): none
    assert off_block_bursts((512, 2049), (1, 0), 48, 4) == (48, 0.0)
    assert off_block_bursts((1024, 1024), (1, 0), 48, 2) == (0.0, 0.0)


def test_off_block_tile_columns_pace_the_store_at_the_per_core_burst_figure():
    g = asim.Graph("t")
    x = g.input("x", shape=(1023, 1023), dtype="float16")
    g.output(g.transpose(x, perm=[1, 0]))
    res = asim.simulate(g, chip="ascend910b", kernel_build="binary")
    task = res.trace.tasks[0]
    per_core: dict[int, int] = {}
    for i in res.trace.intervals:
        if i.task_id == task.task_id and i.pipe == "MTE3":
            per_core[i.core] = per_core.get(i.core, 0) + i.end - i.start
    chip = load_chip("ascend910b")
    # the busiest core stores 1023 tile columns of 32 rows, each at least the per-core
    # figure (9.9 cycles), not the chip-wide rate's 29 on 32 busy cores
    busiest = max(per_core.values())
    assert 1023 * chip.gm_write_burst_cycles <= busiest < 1023 * 20


def test_off_block_bursts_past_the_l2_draw_on_the_chip_wide_burst_rate(monkeypatch):
    from ascendsim.lower import vector
    from ascendsim.lower.tiling import burst_cycles

    def run() -> tuple[float, int]:
        g = asim.Graph("t")
        x = g.input("x", shape=(363, 367, 373), dtype="int32")   # 199 MB in and out
        g.output(g.transpose(x, perm=[2, 0, 1]))
        res = asim.simulate(g, chip="ascend910b2")
        task = res.trace.tasks[0]
        mte2: dict[int, int] = {}
        for i in res.trace.intervals:
            if i.task_id == task.task_id and i.pipe == "MTE2":
                mte2[i.core] = mte2.get(i.core, 0) + i.end - i.start
        return res.time_us, max(mte2.values())

    paced, loads = run()
    # [133221, 373] -> [373, 133221]: 2,776 rows a core, each in three tile rows of about
    # 124 elements (497 B, off the blocks): 8,328 read bursts, each at least the chip-wide
    # rate's share on 48 cores (43 cycles), not the per-core 9.9
    chip = load_chip("ascend910b2")
    assert loads >= 2776 * 3 * burst_cycles(chip, 48, write=False)
    monkeypatch.setattr(vector, "off_block_bursts", lambda *a: (0.0, 0.0))
    assert paced > 1.8 * run()[0]
