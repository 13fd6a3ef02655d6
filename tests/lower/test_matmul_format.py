"""CANN's ND/NZ choice for a 2-D MatMul on a split chip (lower/matmul_format.py) and what it
makes the lowering launch for a matrix-vector product (GEMV): which kernels, in which
formats, and their cycles against a roofline derived from the chip's bandwidths."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.ir import Graph
from ascendsim.lower.matmul_format import (
    matmul_formats,
    nd2nz_dma_gbps,
    nd2nz_dma_gbps_b32,
    nd2nz_head,
    nd2nz_stride_factor,
    param_weight_inner,
)

CORES = 24    # the 910B2's AI Cores (AIC)


# ----------------------------------------------------------------------------- the rule
@pytest.mark.parametrize("m, k, n, dtype, nd_in, nd_out", [
    (4096, 4096, 1, "float16", False, False),    # GEMV: B's inner axis N = 1
    (4096, 4096, 1, "bfloat16", False, False),
    (256, 256, 1, "float16", False, False),      # M*K = 65536: one above the small limit
    (255, 256, 1, "float16", True, True),        # M*K = 65280 and K*N small: ND
    (64, 64, 1, "float16", True, True),
    (1024, 65536, 1, "float16", True, True),     # K >= 15000, 8*0 blocks < 12: split K
    (4096, 4096, 1, "float32", True, True),      # float32 always ND
    (4096, 4096, 4096, "float16", True, True),   # both inner axes in [128, 65535]
    (4096, 96, 4096, "float16", True, True),     # short K, a multiple of 16
    (4096, 100, 4096, "float16", False, True),   # short K, not 16-aligned; N % 256 == 0
    (4096, 4096, 100, "float16", False, False),  # short N, not 16-aligned: NZ out too
    (4096, 1, 4096, "float16", True, True),      # K = 1
    (4096, 70000, 256, "float16", False, True),  # K > 65535, 32*2 blocks: NZ in, ND out
])
def test_nd_nz_rule_follows_cann(m, k, n, dtype, nd_in, nd_out):
    f = matmul_formats(m, k, n, dtype, CORES)
    assert (f.nd_in, f.nd_out) == (nd_in, nd_out), f.reason


def test_split_k_exemption_depends_on_the_core_count():
    """(M//128)*(N//128) = 8 output blocks: under half of 24 cores (ND), not under half of 16
    (then the inner axis K = 65536 > 65535 decides: NZ)."""
    assert matmul_formats(1024, 65536, 128, "float16", 24).nd_in
    assert not matmul_formats(1024, 65536, 128, "float16", 16).nd_in


# ----------------------------------------------------------------------------- lowering
def _gemv(m: int, k: int, dtype: str) -> Graph:
    g = Graph("gemv")
    mat = g.input("mat", (m, k), dtype)
    vec = g.input("vec", (k, 1), dtype)
    g.output(g.add_node("MatMul", [mat, vec], name="mv")[0])
    return g


def _tasks(m: int, k: int, dtype: str, chip: str = "ascend910b"):
    res = asim.simulate(_gemv(m, k, dtype), chip, fusion=False, mode="sink")
    return res, res.trace.tasks


def test_fp16_gemv_on_910b_runs_on_nz_operands_through_transdata():
    _, tasks = _tasks(4096, 4096, "float16")
    assert [t.op_type for t in tasks] == ["TransData", "TransData", "MatMul", "TransData"]
    assert [t.op_name for t in tasks] == [
        "trans_data_mat_ND_to_FRACTAL_NZ", "trans_data_vec_ND_to_FRACTAL_NZ", "mv",
        "trans_data_mv_FRACTAL_NZ_to_ND"]


@pytest.mark.parametrize("m, k, dtype", [(4096, 4096, "float32"), (64, 64, "float16"),
                                         (1024, 65536, "bfloat16")])
def test_gemvs_the_rule_keeps_nd_launch_the_matmul_alone(m, k, dtype):
    _, tasks = _tasks(m, k, dtype)
    assert [t.op_type for t in tasks] == ["MatMul"]


def test_gemv_on_a_coupled_chip_is_unchanged_by_the_split_chip_rule():
    """The 910 always converts MatMul operands to NZ (its own rule), for float32 too."""
    _, tasks = _tasks(1024, 1024, "float16", "ascend910")
    assert [t.op_type for t in tasks].count("MatMul") == 1
    assert tasks[0].op_type == "TransData"


def test_fp16_gemv_kernels_within_their_roofline():
    """Roofline per kernel, from the chip file: the ND->NZ TransData of the cold 4096x4096
    matrix reads it from HBM (>= bytes / HBM bandwidth); the NZ MatMul reads the converted
    matrix (kept in L2 by the model: >= bytes / L2 bandwidth) and its cube work (N padded to
    16) is far below that. Each kernel stays within 2.5x of its bound (tiles, fills, the
    conversion's vector passes)."""
    chip = get_chip("ascend910b")
    res, tasks = _tasks(4096, 4096, "float16")
    mat_bytes = 4096 * 4096 * 2
    td = res.chip.seconds(tasks[0].duration)
    mm = res.chip.seconds(tasks[2].duration)
    td_roof = mat_bytes / chip.hbm_bandwidth_bytes_per_s
    mm_roof = max(mat_bytes / chip.l2_bandwidth_bytes_per_s,
                  2 * 4096 * 4096 * 16 / chip.peak_flops("float16"))
    assert td_roof <= td <= 2.5 * td_roof
    assert mm_roof <= mm <= 2.5 * mm_roof
    # the vector conversion of the [K, 1] vector pads it to 16 columns and stays small
    assert res.chip.seconds(tasks[1].duration) < 0.1 * td


def test_explain_names_the_format_choice():
    res, _ = _tasks(4096, 4096, "float16")
    text = res.explain("mv")
    assert "FRACTAL_NZ by TransData" in text and "IsNdToNzOnTheFly" in text


# ----------------------------------------------------------------------------- nd2nz head
def test_rows_wider_than_the_nd2nz_dma_stride_get_a_vector_head():
    """A = 1024 x 65536: its rows exceed the ND->NZ DMA's 65535-element source stride, so the
    MatMul kernel (one task) converts A on the AIV cores into an NZ workspace first, then the
    cube reads the workspace: the task costs at least the conversion's HBM traffic (read A,
    write the workspace, which does not fit in L2) plus the cube's read of it, and more than
    the same MatMul with rows 128 elements narrower (65408, 256-byte aligned: converted on
    the fly)."""
    chip = get_chip("ascend910b")
    res, tasks = _tasks(1024, 65536, "float16")
    assert [t.op_type for t in tasks] == ["MatMul"]
    mm = tasks[0]
    assert mm.task_type == "MIX_AIC"
    assert "exceed the ND->NZ DMA stride" in res.explain("mv")
    a_bytes = 1024 * 65536 * 2
    roof = 3 * a_bytes / chip.hbm_bandwidth_bytes_per_s
    t = res.chip.seconds(mm.duration)
    assert roof <= t <= 2.5 * roof
    res_n, tasks_n = _tasks(1024, 65408, "float16")
    assert "exceed the ND->NZ DMA stride" not in res_n.explain("mv")
    assert t > 1.5 * res_n.chip.seconds(tasks_n[0].duration)


@pytest.mark.parametrize("k, n, dtype, heads", [
    (4096, 4096, "float16", (False, False)),   # 8192 B rows: 256-byte aligned
    (1000, 4096, "float16", (True, False)),    # 2000 B: not aligned, not an on-the-way size
    (4096, 1000, "bfloat16", (False, True)),
    (96, 4096, "float16", (False, False)),     # 192 B: the DMA converts it on the way
    (192, 4096, "float16", (False, False)),    # 384 B: on the way
    (144, 4096, "float16", (True, False)),     # 288 B: neither
    (1000, 1000, "float32", (False, False)),   # float32 below the stride limit stays ND
    (70000, 1000, "float32", (True, False)),   # beyond the DMA's stride: every dtype
    (1000, 1, "float16", (True, False)),       # a vector B (n = 1) is left out
])
def test_matmulv3_head_nd2nz_rule(k, n, dtype, heads):
    """MatMulV3's nd2nzA/B (ops-nn matmul_v3_base_tiling.cpp GetMoreArgs): an ND operand
    whose inner axis is not 256-byte aligned, and not one of the sizes the DMA converts on
    the way, is converted by the vector cores at the kernel's head."""
    assert nd2nz_head(k, n, dtype) == heads


def _mm_graph(m: int, k: int, n: int, dtype: str = "float16") -> Graph:
    g = Graph("mm")
    g.output(g.add_node("MatMul", [g.input("a", (m, k), dtype), g.input("b", (k, n), dtype)],
                        name="mm")[0])
    return g


def test_unaligned_inner_axis_makes_the_matmul_a_mix_kernel_with_a_vector_head():
    """K = 1000 fp16 (2000 B rows) keeps ND in the aclnn rule but not on the DMA: the MatMul is
    one MIX_AIC task whose AIV head converts A; it takes longer than the K = 1024 MatMul
    (more cube work, aligned rows) and at least the conversion's own traffic longer than
    the same kernel without the head would."""
    res = asim.simulate(_mm_graph(4096, 1000, 4096), "ascend910b", fusion=False, mode="sink")
    (mm,) = res.trace.tasks
    assert mm.task_type == "MIX_AIC"
    assert "not 256-byte aligned" in res.explain("mm")
    ref = asim.simulate(_mm_graph(4096, 1024, 4096), "ascend910b", fusion=False, mode="sink")
    (mm_ref,) = ref.trace.tasks
    assert mm_ref.task_type != "MIX_AIC"
    a_bytes = 4096 * 1000 * 2
    chip = get_chip("ascend910b")
    t, t_ref = res.chip.seconds(mm.duration), ref.chip.seconds(mm_ref.duration)
    assert t > t_ref
    assert t - t_ref * 1000 / 1024 >= 2 * a_bytes / chip.l2_bandwidth_bytes_per_s


# ----------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("k, n, inner", [
    (4096, 22016, 4096),   # nn.Linear's [N, K]: rows of K
    (4096, 4000, 4096),    # N unaligned as well: [N, K] still
    (3696, 8192, 8192),    # K not a multiple of 256, N is: ATB stores [K, N]
    (1000, 1000, 1000),    # neither: [N, K], rows of K (a head converts them)
])
def test_a_parameter_is_laid_out_as_atb_check_transpose_picks(k, n, inner):
    assert param_weight_inner(k, n) == inner


def _linear(m: int, k: int, n: int, const: bool) -> Graph:
    g = Graph("linear")
    x = g.input("x", (m, k), "float16")
    w = g.weight("w", (k, n), "float16") if const else g.input("w", (k, n), "float16")
    g.output(g.add_node("MatMul", [x, w], name="mm")[0])
    return g


@pytest.mark.parametrize("k, n", [(4096, 11008), (3696, 8192)])
def test_a_constant_weight_is_converted_by_the_kernel_like_a_runtime_operand(k, n):
    """On the A2 a model's weight stays ND (MindIE's ATB casts to NZ only on the 910 and 310P;
    torch keeps nn.Linear parameters ND): the MatMul reads it through the on-the-fly ND->NZ
    conversion, in the layout ATB's loader picks, so it takes as long as the same MatMul on a
    runtime B of the same bytes (within 2 %), and off the cube's peak, where reading it as NZ
    (the model before) left the kernel cube-bound."""
    m = 2048
    res = asim.simulate(_linear(m, k, n, True), "ascend910b", fusion=False, mode="sink")
    (mm,) = res.trace.tasks
    text = res.explain("mm")
    assert "kept ND as a model parameter" in text and "B converted to NZ" in text
    assert "'w' rows of" not in text     # rows of K 4096 / N 8192: on the fly, no head
    ref = asim.simulate(_linear(m, k, n, False), "ascend910b", fusion=False, mode="sink")
    (mm_ref,) = ref.trace.tasks
    assert mm.duration == pytest.approx(mm_ref.duration, rel=0.02)
    chip = get_chip("ascend910b")
    # the cube's peak bounds both from below; ND reads keep the kernel off it
    peak_s = 2 * m * k * n / chip.peak_flops("float16")
    assert res.chip.seconds(mm.duration) > 1.05 * peak_s


def test_a_constant_weight_with_unaligned_rows_takes_the_vector_head():
    """K = N = 1000 (2000-byte rows either way): ATB keeps [N, K] and the kernel converts the
    weight at its head, as for a runtime operand with such rows."""
    res = asim.simulate(_linear(1024, 1000, 1000, True), "ascend910b", fusion=False,
                        mode="sink")
    (mm,) = res.trace.tasks
    assert mm.task_type == "MIX_AIC"
    assert "'w' rows of 2016 B are not 256-byte aligned" in res.explain("mm")


def test_a_constant_weight_on_a_coupled_chip_keeps_its_preconverted_format():
    """The 910 has no ND->NZ on the fly: the runtime input and the output go through TransData,
    the constant weight stays pre-converted (no TransData of its own, no note)."""
    res = asim.simulate(_linear(2048, 4096, 4096, True), "ascend910", fusion=False, mode="sink")
    assert [t.op_type for t in res.trace.tasks] == ["TransData", "MatMul", "TransData"]
    assert "kept ND as a model parameter" not in res.explain("mm")


# ----------------------------------------------------------------------------- DMA stride
def test_nd2nz_dma_rate_follows_catlass_fit():
    """catlass GetBandwidth (select_kernel_b16.h): 25.0 GB/s a core for 256-wide rows out of a
    2047-element stride, 39.1 for 512-wide out of 1023, the 80 GB/s cap when the stride is a
    multiple of 256 elements."""
    assert nd2nz_dma_gbps(256, 2047) == pytest.approx(25.05, abs=0.05)
    assert nd2nz_dma_gbps(512, 1023) == pytest.approx(39.11, abs=0.05)
    assert nd2nz_dma_gbps(256, 2048) == 80.0


def test_nd2nz_dma_b32_rate_follows_catlass_fit():
    """catlass GetBandwidthB32 (select_kernel_b32.h): 39.9 GB/s a core for 256-wide fp32
    rows out of an odd stride, 95 for a contiguous row of 64, x 2.5 for a 128-multiple
    stride up to the cap."""
    assert nd2nz_dma_gbps_b32(256, 5921) == pytest.approx(39.85, abs=0.05)
    assert nd2nz_dma_gbps_b32(64, 64) == 80.0
    assert nd2nz_dma_gbps_b32(32, 2949) == pytest.approx(12.60, abs=0.05)
    assert nd2nz_dma_gbps_b32(32, 4096) == pytest.approx(31.49, abs=0.05)


@pytest.mark.parametrize("width, stride, dtype, share", [
    (256, 2048, "bfloat16", 1.0),           # aligned: the fitted rate as it is
    (256, 2047, "bfloat16", 0.313),
    (512, 1040, "float16", 0.652),          # a multiple of 16 only
    (64, 64, "float16", 1.0),               # a contiguous short row: never faster
    (256, 2048, "float32", 1.0),            # 4-byte: aligned (a multiple of 128)
    (256, 5921, "float32", 0.498),          # GetBandwidthB32: 39.9 of the 80 GB/s cap
    (32, 2949, "float32", 0.400),           # 12.6 GB/s against 31.5 at a 128-multiple
    (256, 2047, "int8", 1.0),               # no fit for 1-byte dtypes
])
def test_stride_share_of_the_aligned_rate(width, stride, dtype, share):
    assert nd2nz_stride_factor(width, stride, dtype) == pytest.approx(share, abs=0.002)


def _gmm(n: int) -> asim.Graph:
    g = Graph("gmm")
    x = g.input("x", (2048, 1024), "bfloat16")
    w = g.input("w", (8, 1024, n), "bfloat16")
    gl = g.const(np.array([256 * (i + 1) for i in range(8)], dtype=np.int64), name="gl")
    g.output(g.grouped_matmul(x, w, gl, name="gmm"))
    return g


def test_an_unaligned_weight_stride_slows_the_grouped_matmul():
    """GroupedMatmul reads its ND weight through the ND->NZ DMA whatever its stride (no
    vector head): N = 2047 leaves the DMA about 0.3 of its rate, so the kernel takes longer
    than N = 2048 by far more than the one column (stated bound: 5 %; each ND->NZ move's
    311-cycle latency, paid at either stride, dilutes the rate's share of the MTE2 time)."""
    odd = asim.simulate(_gmm(2047), "ascend910b2", fusion=False).time_us
    even = asim.simulate(_gmm(2048), "ascend910b2", fusion=False).time_us
    assert odd > 1.05 * even
