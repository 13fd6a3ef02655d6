"""An ND->NZ GM->L1 move pays the ND->NZ DMA's own latency (`path_latency_cycles.gm_l1_nd2nz`,
Huawei's A2/A3 pipe model), a plain GM->L1 copy the msKPP one (`gm_l1`)."""

from ascendsim.hw import get_chip
from ascendsim.lower import cube_tiling as ct
from ascendsim.lower.cube_tiling import GemmSpec


def _bmm(batch: int) -> GemmSpec:
    """The cannbot attention-probs x V BatchMatMul: [B x 12, 256, 256] x [.., 256, 32] fp16, ND."""
    return GemmSpec(batch=12 * batch, m=256, k=256, n=32, in_dtype="float16", in_bytes=2,
                    out_bytes=2, acc_bytes=4, nd2nz_a=True, nd2nz_b=True, rows_a=(256, True),
                    rows_b=(32, False), batched_b=True)


def test_nd2nz_move_pays_its_own_latency():
    chip = get_chip("ascend910b4")
    lat = chip.path_latency_cycles
    assert lat.gm_l1_nd2nz == 311 and lat.gm_l1 == 167
    nd = ct.l1_read(chip, 32768, 0.0, False, True)
    plain = ct.l1_read(chip, 32768, 0.0, False, False)
    assert (nd.kind, nd.cycles) == ("nd2nz", 311)
    assert (plain.kind, plain.cycles) == ("copy", 167)
    assert ct.l1_read_latency(chip, True) == 311 and ct.l1_read_latency(chip, False) == 167


def test_chip_without_nd2nz_path_keeps_the_copy_latency():
    chip = get_chip("ascend910")        # coupled: NZ operands in GM, no ND->NZ DMA path
    assert not chip.path_bytes_per_cycle.gm_l1_nd2nz
    assert ct.l1_read_latency(chip, True) == chip.path_latency_cycles.gm_l1
    assert ct.l1_read(chip, 4096, 0.0, False, True).cycles == chip.path_latency_cycles.gm_l1


def test_bmm_moves_carry_the_latency_and_the_search_prices_it():
    """Every MTE2 move of the ND BatchMatMul pays 311 cycles, and the search's estimate counts
    that latency for both operands (fewer, larger K chunks than at the copy latency)."""
    chip = get_chip("ascend910b4")
    spec = _bmm(32)
    groups, _, t = ct.gemm_work(chip, spec, "bmm")
    moves = [i for g in groups for seg in g.segments for st in seg.stages if st.pipe == "MTE2"
             for i in st.head + st.instrs]
    assert moves and all(i.kind == "nd2nz" and i.cycles == 311 for i in moves)
    ctx = ct._SearchContext(chip, spec)
    assert ctx.lat == 2 * 311
    # one L1 chunk of the whole K per tile: two moves a batch, 2 x 311 cycles of latency
    assert t.k_l1 == spec.k
