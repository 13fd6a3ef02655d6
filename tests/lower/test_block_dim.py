"""A cube op whose block dim is fixed (MatMul/Gemm attribute `block_dim`, as a profile shows
it): the base blocks are spread over that many blocks, and blocks past the core count run in
a second round on the cores that free up (hpm-bert-0001: MatMul at block dim 32 on the
30-core first-generation 910)."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.hw import get_chip
from ascendsim.lower.cube import tbe_conv_blocks
from ascendsim.lower.cube_tiling import block_tiles, core_tiles
from ascendsim.lower.gemm_spec import GemmSpec

GEN1 = "ascend910b_gen1"      # 30 AI Cores


def _gemm(m, k, n, block_dim=0):
    g = asim.Graph("gemm")
    a, b = g.input("a", (m, k), "float16"), g.input("b", (n, k), "float16")
    g.output(*g.add_node("Gemm", [a, b], {"transB": 1, "block_dim": block_dim}, name="mm"))
    return g


def _task(g, chip):
    return asim.simulate(g, chip, fusion=False, detail="block").trace.task("mm")


def _even(tiles, blocks):
    return block_tiles(get_chip(GEN1), GemmSpec(1, 16, 16, 16, "float16", 2, 2, 4), 16, 16,
                       tiles, blocks)


def test_blocks_past_the_core_count_land_on_the_first_cores():
    # 768 base blocks in 32 runs of 24: blocks 30 and 31 go to cores 0 and 1
    assert core_tiles(_even(768, 32), 30) == [(48, 2), (24, 28)]
    # one block per core: the contiguous runs as before (a shorter tail run)
    assert core_tiles(_even(100, 30), 30) == [(4, 10), (3, 20)]
    # more blocks than base blocks: empty blocks cost nothing
    assert core_tiles(_even(3, 8), 30) == [(1, 3), (0, 5)]


def test_block_dim_32_on_30_cores_takes_two_rounds():
    """32 equal blocks on 30 cores: two cores run two blocks, so the op takes about twice one
    block's time; on a 32-core chip the same 32 blocks run in one round. Bounds: 1.8-2.1x
    (the second round runs on 2 cores, which see less L2/HBM contention)."""
    g = _gemm(4096, 768, 768, block_dim=32)
    two_rounds = _task(g, get_chip(GEN1))
    one_round = _task(g, get_chip(GEN1).replace(ai_cores=32))
    ratio = two_rounds.duration / one_round.duration
    assert 1.8 <= ratio <= 2.1, ratio
    note = " ".join(asim.simulate(g, GEN1, fusion=False).explain("mm").splitlines())
    assert "block dim 32 on 30 cores (2 rounds" in note


def test_block_dim_0_keeps_the_tilings_own_split():
    g0, g30 = _gemm(4096, 768, 768), _gemm(4096, 768, 768, block_dim=30)
    chip = get_chip(GEN1)
    assert _task(g0, chip).duration == _task(g30, chip).duration
    assert _task(g0, chip).block_dim == 30


def test_a_block_dim_at_the_core_count_is_faster_than_one_past_it():
    chip = get_chip(GEN1)
    assert (_task(_gemm(4096, 768, 768, 30), chip).duration
            < _task(_gemm(4096, 768, 768, 31), chip).duration)


def test_negative_block_dim_is_a_graph_error_naming_it():
    with pytest.raises(GraphError, match=r"node .*attribute .block_dim. must be >= 0"):
        _gemm(64, 64, 64, block_dim=-1)
    g = asim.Graph("mm")
    with pytest.raises(GraphError, match="block_dim"):
        g.add_node("MatMul", [g.input("a", (16, 16), "float16"),
                              g.input("b", (16, 16), "float16")], {"block_dim": "x"})


def _filter_grad(block_dim=0):
    """ResNet-50's 3x3 256 -> 256 weight gradient at batch 16 on 14x14 (hpm-r50g-dw-3x3-256,
    profiled at block_dim 32 on the 30-core first-generation 910)."""
    g = asim.Graph("dw")
    x = g.input("x", (16, 256, 14, 14), "float16", "NC1HWC0")
    dy = g.input("dy", (16, 256, 14, 14), "float16", "NC1HWC0")
    g.output(*g.add_node("Conv2DBackpropFilter", [x, dy],
                         {"filter_shape": [256, 256, 3, 3], "kernel_shape": [3, 3],
                          "strides": [1, 1], "pads": [1, 1, 1, 1], "block_dim": block_dim},
                         name="mm"))
    return g


def test_weight_gradient_takes_the_profiled_block_dim():
    """Conv2DBackpropFilter takes `block_dim` as MatMul does: 144 base blocks over 32 blocks on
    30 cores leave two cores a second block's work, against the tiling's own 30-way split.
    Bounds 1.3-2.0x: the tiling's split spreads 144 blocks 4.8 per core, the profiled one
    gives two cores 2 x 4.5; the second round runs on 2 cores with less contention."""
    chip = get_chip(GEN1)
    own, profiled = _task(_filter_grad(), chip), _task(_filter_grad(32), chip)
    assert 1.3 <= profiled.duration / own.duration <= 2.0
    note = " ".join(asim.simulate(_filter_grad(32), GEN1, fusion=False).explain("mm").splitlines())
    assert "block dim 32 on 30 cores (2 rounds" in note
    with pytest.raises(GraphError, match=r"node .*attribute .block_dim. must be >= 0"):
        _filter_grad(-1)


def _conv(block_dim=0, batch=16, cin=32, cout=32, hw=160):
    """YOLOv5's 1x1 32 -> 32 convolution on 160x160 at batch 16 (cov-hpm-yolo16-conv-1x1-32to32,
    profiled at block_dim 16 on the 30-core first-generation 910)."""
    g = asim.Graph("conv")
    x = g.input("x", (batch, cin, hw, hw), "float16", "NC1HWC0")
    w = g.const(np.zeros((cout, cin, 1, 1), np.float16), "w")
    g.output(*g.add_node("Conv", [x, w], {"kernel_shape": [1, 1], "block_dim": block_dim},
                         name="mm"))
    return g


def test_conv_takes_the_profiled_block_dim():
    """Conv takes `block_dim` as MatMul does: this streaming convolution moves its 52 MB on
    that many cores, so 8 blocks take 1.5-2.2x the time of 16 (less than 2x where 16 cores
    already share L2/HBM bandwidth)."""
    chip = get_chip(GEN1)
    eight, sixteen = _task(_conv(8), chip), _task(_conv(16), chip)
    assert 1.5 <= eight.duration / sixteen.duration <= 2.2
    note = " ".join(asim.simulate(_conv(8), GEN1, fusion=False).explain("mm").splitlines())
    assert "over block dim 8" in note
    with pytest.raises(GraphError, match=r"node .*attribute .block_dim. must be >= 0"):
        _conv(-1)


def test_tbe_conv_splits_the_batch_first():
    """TBE Conv2D on the first-generation 910 takes a block per image (the batch's largest
    divisor within the cores when the batch exceeds them), as every forward Conv2D of the
    YOLOv5 profiles ran (block_dim 16 at batch 16, 32 and 64 on 30 cores); a split chip's
    Ascend C tiling is not TBE's; a profiled block_dim overrides the split."""
    gen1, a2 = get_chip(GEN1), get_chip("ascend910b")
    for batch in (16, 32, 64):
        assert tbe_conv_blocks(gen1, batch, batch * 160 * 160, 32) == 16
    assert tbe_conv_blocks(gen1, 8, 8 * 160 * 160, 32) == 24      # 8 images x 3 per image
    assert tbe_conv_blocks(gen1, 1, 56 * 56, 64) == 30            # one image: all cores
    assert tbe_conv_blocks(gen1, 1, 16, 16) == 1                  # one output fractal
    assert tbe_conv_blocks(a2, 16, 16 * 160 * 160, 32) == 0
    note = " ".join(asim.simulate(_conv(batch=32), GEN1, fusion=False).explain("mm")
                    .splitlines())
    assert "over block dim 16" in note
    note = " ".join(asim.simulate(_conv(12, batch=32), GEN1, fusion=False).explain("mm")
                    .splitlines())
    assert "over block dim 12" in note


def test_a_vector_ops_own_block_dim_is_the_core_count_however_small_the_op():
    """A vector op whose block dim is fixed (a profile's Block Num) runs on that many blocks
    even when the bytes would give fewer cores their 16 KB each (the model's own split); each
    block pays its start, so 12 blocks take longer than the 4 the byte split would pick."""
    def cast(block_dim):
        g = asim.Graph("cast")
        x = g.input("x", (4, 3072), "bfloat16")
        g.output(*g.add_node("Cast", [x], {"to": "float32", "block_dim": block_dim},
                             name="mm"))
        return g
    chip = get_chip("ascend910c")
    pinned, own = _task(cast(12), chip), _task(cast(0), chip)
    assert pinned.block_dim == 12
    assert own.block_dim < 12
    assert pinned.duration > own.duration


def _split_gemm(split, block_dim=0, m=8192, n=8192, k=1024):
    g = asim.Graph("gemm")
    a, b = g.input("a", (m, k), "float16"), g.input("b", (n, k), "float16")
    attrs = {"transB": 1, "block_dim": block_dim}
    if split is not None:
        attrs["single_core"] = split
    g.output(*g.add_node("Gemm", [a, b], attrs, name="mm"))
    return g


def test_own_core_split_gives_the_tail_blocks_fewer_base_blocks():
    """Huawei's Matmul sample splits 8192 x 8192 into 4 x 6 blocks of 2048 x 1536: 8192 = 5 x
    1536 + 512, so 20 blocks own 16 x 6 = 96 base blocks of 128 x 256 and the 4 of the last
    column 16 x 2 = 32."""
    chip = get_chip("ascend910b1")
    spec = GemmSpec(1, 8192, 8192, 8192, "float16", 2, 2, 4, blocks=24,
                    single_core=(2048, 1536))
    runs = block_tiles(chip, spec, 128, 256, 2048, 24)
    assert sorted(runs) == [32] * 4 + [96] * 20
    assert core_tiles(runs, 24) == [(96, 20), (32, 4)]


def test_own_core_split_sets_the_busiest_core():
    """The same GEMM with the sample's split takes longer than with the base blocks spread
    evenly (86 per core at most against 96): within 96/86 +- 4 % (the other pipes' fill and
    the L2 share per core differ slightly between the two)."""
    chip = get_chip("ascend910b1")
    even = _task(_split_gemm(None), chip).duration       # MatMulV3's even spread, 24 blocks
    own = _task(_split_gemm([2048, 1536]), chip)
    assert own.block_dim == 24
    assert 0.96 * 96 / 86 <= own.duration / even <= 1.04 * 96 / 86, own.duration / even
    note = " ".join(asim.simulate(_split_gemm([2048, 1536]), "ascend910b1",
                                  fusion=False).explain("mm").splitlines())
    assert "own core split: blocks of 2048 x 1536" in note


@pytest.mark.parametrize("split, match", [
    ([2048], "must be \\[singleCoreM, singleCoreN\\]"),
    ([0, 1536], "two positive integers"),
    ([2048, 1.5], "must be a list of integers"),
])
def test_bad_single_core_is_refused_by_name(split, match):
    with pytest.raises(GraphError, match=match):
        _split_gemm(split)


def test_single_core_and_a_different_block_dim_is_an_error():
    with pytest.raises(GraphError, match="block_dim 30 differs from the 24 blocks"):
        asim.simulate(_split_gemm([2048, 1536], block_dim=30), "ascend910b1", fusion=False)
