"""MatMulV3's basic tiling (lower/matmul_v3_basic.py): the base block SetBaseBlockTiling turns
for a transposed operand, CalL1Tiling's L1 steps, and no operand strip kept in L1 across base
blocks (the basic kernel runs one Iterate per block)."""

import re

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import lower
from ascendsim.lower import matmul_v3_basic as mb
from ascendsim.lower.cube_tiling import GemmSpec

B4 = get_chip("ascend910b4")     # 20 cube cores: "large" is M or N >= 10 x 256 = 2560
B2 = get_chip("ascend910b")


def _spec(m, k, n, trans_b=True, trans_a=False, item=2):
    """A bf16 / fp16 GEMM whose stored rows say the transposes (A rows along K unless
    transposed; B rows along K when transposed)."""
    return GemmSpec(1, m, k, n, "float16", item, 2, 4,
                    rows_a=(m if trans_a else k, not trans_a),
                    rows_b=(k if trans_b else n, trans_b))


def test_block_turns_as_set_base_block_tiling_does():
    # one operand transposed: M large, N not -> 256 x 128
    assert mb.basic_block(B4, _spec(4096, 1024, 1024)) == (256, 128)
    # both large and a tie in moved sizes (M = N): 128 x 256 stays
    assert mb.basic_block(B4, _spec(4096, 1024, 4096)) == (128, 256)
    # N large only: 128 x 256
    assert mb.basic_block(B4, _spec(2048, 1024, 8192)) == (128, 256)
    # neither large: 256 x 128 only when M > N
    assert mb.basic_block(B4, _spec(2048, 1024, 1024)) == (256, 128)
    assert mb.basic_block(B4, _spec(1024, 1024, 2048)) == (128, 256)
    # no transpose: 128 x 256; both transposed: 256 x 128
    assert mb.basic_block(B4, _spec(4096, 1024, 1024, trans_b=False)) == (128, 256)
    assert mb.basic_block(B4, _spec(4096, 1024, 1024, trans_a=True)) == (256, 128)
    # the "large" threshold follows the core count: 2560 on 20 cores, 3072 on 24
    assert mb.basic_block(B4, _spec(2816, 1024, 1024)) == (256, 128)
    assert mb.turned_block(_spec(2816, 1024, 1024), B2.ai_cores) is True     # M > N anyway
    assert mb.turned_block(_spec(2816, 1024, 2816), B2.ai_cores) is False    # neither, M = N
    assert mb.turned_block(_spec(2816, 1024, 2816), B4.ai_cores) is False    # both, a tie


def test_l1_steps_fill_half_of_l1_each_double_buffered():
    # 128 x 256 x 64 bf16 on a 512 KB L1: depthA1 = 524544 / 2 / (128 x 64 x 2) = 16, depthB1
    # = 8, together exactly 512 KB: stepKa 8, stepKb 4 (A chunks of 512 of K, B of 256)
    assert mb.basic_l1_steps(B4, _spec(4096, 1024, 4096), 128, 256) == (8, 4)
    assert mb.basic_l1_steps(B4, _spec(4096, 1024, 1024), 256, 128) == (4, 8)
    # fp32 operands: baseK 32 (128 bytes), the same depths
    assert mb.basic_base_k(_spec(4096, 1024, 4096, item=4)) == 32
    assert mb.basic_l1_steps(B4, _spec(4096, 1024, 4096, item=4), 128, 256) == (8, 4)
    # a 256 KB L0C chip's 256 x 256 block: 8 and 8, double-buffered -> 4 and 4
    assert mb.basic_l1_steps(B4, _spec(4096, 1024, 4096), 256, 256) == (4, 4)


def _notes(m, k, n, chip=B4):
    g = asim.Graph("gemm")
    a = g.input("a", (m, k), "bfloat16")
    b = g.input("b", (n, k), "bfloat16")
    g.output(*g.add_node("Gemm", [a, b], {"transB": 1}, name="mm"))
    task = next(t for t in lower(g, chip).tasks if t.op_name == "mm")
    return " ".join(task.notes)


def test_each_base_block_reloads_its_operands():
    """The Qwen3 q-projection shape of the 910B4 profile: 32 x 16 blocks of 128 x 256 over 20
    cores; A read once per N block (16x) and B once per M block (32x), where keeping the
    256 KB A strip in L1 (which CalL1Tiling's 512-of-K A chunk does not) would read A once."""
    text = _notes(4096, 1024, 4096)
    assert "base block m128 x n256 x k64" in text
    assert "no operand kept in L1" in text
    a, b = map(float, re.search(r"A read ([\d.]+)x, B read ([\d.]+)x", text).groups())
    assert (a, b) == (16.0, 32.0)
    assert "L1 chunk 256" in text        # the smaller of stepKa, stepKb (4 x 64)


def test_turned_block_for_a_narrow_output():
    # the o-projection shape: [4096, 2048] x [1024, 2048]^T -> 16 x 8 blocks of 256 x 128
    text = _notes(4096, 2048, 1024)
    assert "base block m256 x n128 x k64" in text
    assert "no operand kept in L1" in text


def _matvec(m, k, item=4):
    """A matrix-vector product as aclnn hands it to MatMulV3: N = 1, A ND (converted on the
    GM->L1 move), fp32 (item 4) or fp16."""
    dtype = "float32" if item == 4 else "float16"
    return GemmSpec(1, m, k, 1, dtype, item, item, 4, nd2nz_a=True, nd2nz_b=True)


def test_matvec_takes_calc_base_small_shape_tiling():
    # [4096, 4096] fp32: CalcBase over CALC_MN_BASIC picks 64 x 16 x 512 bytes (load 80 x 3
    # rounds against 144 x 2), CalL1Tiling's stepKa 4: A chunks of 512 of K
    assert mb.matvec_block(B2, _matvec(4096, 4096)) == (64, 16, 128, 512)
    # M 1024: 1024 / 24 rounded up to 16 is 48 (22 blocks, one round), stepKa 5
    assert mb.matvec_block(B2, _matvec(1024, 1024)) == (48, 16, 128, 640)
    # M 256: 16-row blocks; fp16 with M above 128: baseK 256 elements
    assert mb.matvec_block(B2, _matvec(256, 256))[:3] == (16, 16, 128)
    assert mb.matvec_block(B2, _matvec(4096, 4096, item=2))[:3] == (64, 16, 256)


def test_matvec_leaves_other_tilings_their_shapes():
    # K from SPLIT_K_THRES: split-K tilings; fp32 M <= 64 with K >= 6144: deterministic
    # split K; fp16 M <= 128: DoIncreTiling; K not 256-byte aligned; NZ A (MatMulV2); N > 1
    assert mb.matvec_block(B2, _matvec(1024, 65536)) is None
    assert mb.matvec_block(B2, _matvec(64, 8192)) is None
    assert mb.matvec_block(B2, _matvec(128, 4096, item=2)) is None
    assert mb.matvec_block(B2, _matvec(4096, 4100)) is None
    assert mb.matvec_block(B2, GemmSpec(1, 4096, 4096, 1, "float32", 4, 4, 4)) is None
    assert mb.matvec_block(B2, GemmSpec(1, 4096, 4096, 16, "float32", 4, 4, 4,
                                        nd2nz_a=True)) is None


def test_matvec_tiling_runs_its_blocks_over_all_cube_cores():
    # the search alone put 16 blocks of 256 rows on 16 cores; CANN's tiling runs 64 blocks
    # of 64 rows on the 24 cube cores (three rounds for 16 of them)
    from ascendsim.lower.cube_tiling import gemm_tiling
    t = gemm_tiling(B2, _matvec(4096, 4096), "mv")
    assert (t.m_t, t.n_t, t.tiles, t.block) == (64, 16, 64, 24)
