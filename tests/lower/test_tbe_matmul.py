"""TBE's static matmul schedule on the first-generation 910 (chip file matmul_schedule = "tbe";
TBE te_schedule/mmad_schedule.py): an operand strip that fits half of L1 is kept there
(get_tensor_reuse), and L0C is double-buffered only when no strip is kept
(open_double_buffer), so each tile's mmads wait for the previous tile's L0C->UB drain."""

import re

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import lower
from ascendsim.lower.cube_tiling import GemmSpec, gemm_tiling, tbe_matmul, tbe_reuse


def _gemm(m, k, n):
    g = asim.Graph("gemm")
    g.output(g.matmul(g.input("a", (m, k), "float16"), g.input("b", (k, n), "float16"),
                      name="mm"))
    return g


def _notes(g, chip):
    return " ".join(next(t for t in lower(g, chip).tasks if t.op_name == "mm").notes)


def test_which_chips_run_the_tbe_schedule():
    spec = GemmSpec(1, 256, 256, 256, "float16", 2, 2, 4)
    assert tbe_matmul(get_chip("ascend910"), spec)
    assert tbe_matmul(get_chip("ascend910b_gen1"), spec)          # inherits the 910 file
    assert not tbe_matmul(get_chip("ascend910b"), spec)           # Ascend C MatmulV3
    assert not tbe_matmul(get_chip("ascend310p"), spec)           # not the source's chips
    conv = GemmSpec(1, 256, 144, 64, "float16", 2, 2, 4, conv_rows=(16, 16, 1, 3, 3))
    assert not tbe_matmul(get_chip("ascend910"), conv)            # conv has its own schedule


def test_the_kept_strip_follows_tbes_half_l1_rule():
    chip = get_chip("ascend910")                                  # 1 MB L1: half is 512 KB
    half = chip.l1_bytes // 2
    assert tbe_reuse(chip, 128, 64, half, half) == "A"            # both fit: A unless n > m
    assert tbe_reuse(chip, 64, 128, half, half) == "B"
    assert tbe_reuse(chip, 64, 128, half, half + 1) == "A"        # only A fits
    assert tbe_reuse(chip, 128, 64, half + 1, 100) == "B"
    assert tbe_reuse(chip, 128, 64, half + 1, half + 1) == ""     # neither: both stream


def test_a_kept_strip_means_one_l0c_tile_and_a_wait_for_the_drain():
    """K = 768: every strip fits half of L1, so TBE keeps one and L0C holds one tile; the same
    GEMM under CANN's Ascend C tiling (figure removed) double-buffers L0C and is faster. The
    wait adds a tile's drain, 1/6 of its mmads at K = 768 (4 B per output element at 128
    B/cycle against 48 K-steps of a 16x16 block per cycle), and the kept strip can change the
    base block the search picks (more GM traffic); hence 1.0-1.35 (1.26 today)."""
    chip = get_chip("ascend910")
    g = _gemm(4096, 768, 768)
    text = _notes(g, chip)
    assert "TBE matmul schedule" in text
    assert re.search(r"L1 reuse: (A|B) strip", text)
    assert "L0C one tile (each tile's mmads wait" in text
    spec = GemmSpec(1, 4096, 768, 768, "float16", 2, 2, 4)
    t = gemm_tiling(chip, spec, "mm")
    assert t.db_l0c == 1 and t.reuse in ("A", "B")
    plain = chip.replace(matmul_schedule=None)
    assert "TBE" not in _notes(g, plain)
    tbe = asim.simulate(g, chip, fusion=False).trace.task("mm").duration
    ascendc = asim.simulate(g, plain, fusion=False).trace.task("mm").duration
    assert 1.0 < tbe / ascendc < 1.35, tbe / ascendc


def test_no_strip_fits_keeps_l0c_double_buffered_when_two_tiles_fit():
    """K = 8192: a 128-row A strip is 2 MB, beyond half of L1, so TBE streams both operands
    and double-buffers L0C (two 128x128 fp32 tiles fit its 256 KB)."""
    chip = get_chip("ascend910")
    spec = GemmSpec(1, 1024, 8192, 1024, "float16", 2, 2, 4)
    t = gemm_tiling(chip, spec, "mm")
    assert t.reuse == ""
    assert t.db_l0c == 2 or t.m_t * t.n_t * 4 * 2 > chip.l0c_bytes


def test_a_batched_b_is_read_once_per_batch_at_least_a_shared_one_is_not():
    """BatchMatMul [48, 128, 128] x [48, 128, 64]: every batch has its own B, so a B strip kept
    in L1 cannot serve another batch's tiles: B's GM reads are at least its 48 x 16 KB. The
    same A against one shared [128, 64] weight may keep that weight across batches."""
    from ascendsim.lower.cube_tiling import operand_read_bytes
    for chip in (get_chip("ascend910"), get_chip("ascend910b")):
        own = GemmSpec(48, 128, 128, 64, "float16", 2, 2, 4, batched_b=True)
        shared = GemmSpec(48, 128, 128, 64, "float16", 2, 2, 4)
        b_own = operand_read_bytes(own, gemm_tiling(chip, own, "bmm"))[1]
        b_shared = operand_read_bytes(shared, gemm_tiling(chip, shared, "bmm"))[1]
        assert b_own >= 48 * 128 * 64 * 2, (chip.name, b_own)
        assert b_shared < b_own, (chip.name, b_shared, b_own)
    # the lowering sets the flag from the operands' shapes
    g = asim.Graph("bmm")
    g.output(g.matmul(g.input("a", (48, 128, 128), "float16"),
                      g.input("b", (48, 128, 64), "float16"), name="mm"))
    task = asim.simulate(g, "ascend910", fusion=False).trace.task("mm")
    reads = task.traffic.get(("L2", "read"), 0) + task.traffic.get(("DDR", "read"), 0)
    assert reads >= 48 * (128 * 128 + 128 * 64) * 2
