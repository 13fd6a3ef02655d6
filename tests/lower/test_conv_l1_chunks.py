"""A convolution's GM->L1 feature-map loads go by Cin1 slice (lower/cube_tiling.py, "Conv
loads by Cin1 slice"): one load per tile carries the input rows of its output pixels, halo
included, for every kernel position; load3d expands them on MTE1."""

import math

import numpy as np

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import cube_tiling as ct
from ascendsim.lower import l1_chunks
from ascendsim.lower.cube_tiling import GemmSpec, gemm_tiling

GEN1 = "ascend910b_gen1"
#: YOLOv5's CSP bottleneck 3x3 convolution at batch 16: 32 -> 32 channels on 160x160, pad 1
CONV3 = GemmSpec(1, 16 * 160 * 160, 32 * 9, 32, "float16", 2, 2, 4, miss_a=0.6, miss_b=0.06,
                 conv_rows=(160, 162, 1, 3, 3), blocks=16, load3d=True)


def _window_bytes(spec: GemmSpec, m_t: int) -> float:
    """The input rows m_t output pixels read: (m_t/Wo - 1)*stride + kh rows of Win pixels x
    the padded input channels (the kernel positions share them)."""
    wo, win, sh, kh, kw = spec.conv_rows
    return ((m_t / wo - 1) * sh + kh) * win * (spec.k // (kh * kw)) * spec.in_bytes


def _mte2(chip, spec: GemmSpec, t: ct.GemmTiling):
    return next(s for s in ct._gemm_stages(chip, spec, t) if s.pipe == "MTE2")


def test_a_loads_carry_the_input_rows_once_for_every_kernel_position():
    """The A bytes one tile loads are the input-slice formula, not kh*kw times it (the
    expanded img2col matrix), and each load is a whole number of Cin1 slices."""
    chip = get_chip(GEN1)
    t = gemm_tiling(chip, CONV3, "conv")
    loads, each = l1_chunks.a_l1_loads(CONV3, t, 16)
    window = _window_bytes(CONV3, t.m_t)
    assert loads * each == math.ceil(window / loads) * loads
    assert abs(loads * each - window) < loads
    expanded = t.m_t * CONV3.k * CONV3.in_bytes
    assert loads * each < expanded / 4
    piece = l1_chunks.cin1_slice(CONV3, 16)
    assert piece == 9 * 16 and t.k_l1 % piece == 0
    assert loads == CONV3.k // t.k_l1
    stage = _mte2(chip, CONV3, t)
    assert stage.units == loads
    a_read = stage.instrs[0]
    assert a_read.src == "GM" and a_read.dst == "L1" and a_read.nbytes == each


def test_l1_chunks_are_whole_cin1_slices_tiled_by_base_k():
    """A 3x3 convolution of 64 input channels (Cin1 = 4, a slice = 144 of K): chunks of 1, 2
    or 4 slices tiled exactly by baseK, or the whole K; a MatMul keeps stepK x baseK."""
    spec = GemmSpec(1, 4096, 64 * 9, 64, "float16", 2, 2, 4, conv_rows=(64, 66, 1, 3, 3),
                    load3d=True)
    assert l1_chunks.l1_chunk_candidates(spec, 16, 16) == [144, 288, 576]
    assert l1_chunks.l1_chunk_candidates(spec, 16, 32) == [288, 576]
    assert l1_chunks.l1_chunk_candidates(spec, 16, 256) == [576]
    mm = GemmSpec(1, 4096, 576, 64, "float16", 2, 2, 4)
    assert l1_chunks.l1_chunk_candidates(mm, 16, 16) == [16, 32, 64]
    assert l1_chunks.l1_chunk_candidates(mm, 16, 64) == [64]
    assert l1_chunks.k_span(mm, 16, 128) == 640 and l1_chunks.k_span(spec, 16, 128) == 576


def test_a_1x1_stride_1_conv_loads_the_bytes_of_its_gemm():
    """A 1x1 stride-1 convolution reads each input pixel once: its A bytes per tile are the
    m_t x K strip, as a MatMul's, and its chunks are a MatMul's (a Cin1 slice is one K
    fractal)."""
    chip = get_chip(GEN1)
    spec = GemmSpec(1, 16 * 160 * 160, 32, 32, "float16", 2, 2, 4,
                    conv_rows=(160, 160, 1, 1, 1), blocks=16, load3d=True)
    t = gemm_tiling(chip, spec, "conv")
    loads, each = l1_chunks.a_l1_loads(spec, t, 16)
    assert loads * each == t.m_t * spec.k * spec.in_bytes
    wide = GemmSpec(1, 1568, 512, 128, "float16", 2, 2, 4, conv_rows=(28, 28, 1, 1, 1),
                    load3d=True)
    mm = GemmSpec(1, 1568, 512, 128, "float16", 2, 2, 4)
    for k_t in (16, 32, 64, 128, 256):
        assert l1_chunks.l1_chunk_candidates(wide, 16, k_t) == \
            l1_chunks.l1_chunk_candidates(mm, 16, k_t)


def test_fewer_loads_cut_the_mte2_time_and_the_conv_time():
    """The same base block with the K-block chunks of a MatMul (k_l1 = 32: nine loads of A
    and nine of B per tile, each paying the GM->L1 latency) against the Cin1-slice loads the
    search picks: the loads move the same bytes, and MTE2 saves at least seven latencies per
    tile; the simulated convolution (142 us with K-block loads) falls below 100 us (msprof:
    80.0 us, row cov-hpm-yolo16-conv-3x3-32to32)."""
    chip = get_chip(GEN1)
    t = gemm_tiling(chip, CONV3, "conv")
    k_blocks = ct.GemmTiling(**{**t.__dict__, "k_l1": 32})
    new, old = _mte2(chip, CONV3, t), _mte2(chip, CONV3, k_blocks)
    assert old.units == 9 and new.units < old.units
    moved = [s.units * s.instrs[0].nbytes for s in (new, old)]
    assert abs(moved[0] - moved[1]) <= old.units
    lat = chip.path_latency_cycles.gm_l1
    assert new.tile_cycles() <= old.tile_cycles() - 7 * 2 * lat
    g = asim.Graph("conv")
    x = g.input("x", (16, 32, 160, 160), "float16", "NC1HWC0")
    w = g.const(np.zeros((32, 32, 3, 3), np.float16), "w")
    g.output(*g.add_node("Conv", [x, w], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                          "block_dim": 16}, name="mm"))
    task = asim.simulate(g, GEN1, fusion=False, detail="block").trace.task("mm")
    assert chip.seconds(task.duration) < 100e-6


def test_a_weight_gradient_read_as_a_conv_keeps_the_matmul_chunks():
    """A weight gradient is lowered as the Conv of X by dY, whose "kernel" is the whole dY
    plane (one Cin1 slice of a 56x56 plane is 50,176 of K, more than L1 holds with any
    tile): it runs TBE's backprop-filter schedule, not load3d's slices, and keeps the
    MatMul's chunks."""
    view = GemmSpec(1, 256, 32 * 56 * 56, 64, "float16", 2, 4, 4, conv_rows=(1, 56, 1, 56, 56))
    mm = GemmSpec(1, 256, 32 * 56 * 56, 64, "float16", 2, 4, 4)
    assert l1_chunks.cin1_slice(view, 16) == 0
    assert l1_chunks.l1_chunk_candidates(view, 16, 64) == \
        l1_chunks.l1_chunk_candidates(mm, 16, 64)


def test_a_kernel_whose_weight_slice_overflows_l1_keeps_base_k_chunks():
    """A 31x31 kernel (RepLKNet-style): one Cin1 slice of its weights is 31*31*16 = 15,376
    of K, 492 KB for 16 output channels, two of which overflow the 910B's 512 KB L1 with any
    tile; the convolution still lowers, with base-K chunks, and says so."""
    g = asim.Graph("big")
    x = g.input("x", (2, 64, 32, 32), "float16", "NC1HWC0")
    w = g.const(np.zeros((64, 64, 31, 31), np.float16), "w")
    g.output(*g.add_node("Conv", [x, w], {"kernel_shape": [31, 31], "pads": [15] * 4},
                         name="mm"))
    res = asim.simulate(g, "ascend910b", fusion=False, detail="block")
    note = res.explain("mm")
    assert "does not fit L1" in note and "loaded by Cin1 slice" not in note
    assert res.trace.task("mm").duration > 0
