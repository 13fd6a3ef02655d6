"""A prebuilt TBE ELEWISE kernel's UB tiles as its run-time tiling cuts them (elewise_v3.cc
`SpecialModeTiling`, `DoUbTiling`): a block within the single-buffered limit is one tile; a
longer block turns double buffering on and takes ceil(block / limit) balanced tiles of the
double-buffered limit, every limit at most the widest dtype's SPLIT_FACTORS."""

import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower.tiling import ELEWISE_SPLIT_FACTORS, VecSpec, elewise_tiles


def _notes(op: str, shape: tuple, dtype: str, chip: str) -> list[str]:
    g = asim.Graph(op)
    x = g.input("x", shape=shape, dtype=dtype)
    ins = [x] if op != "Add" else [x, g.input("y", shape=shape, dtype=dtype)]
    g.output(g.add_node(op, ins, name="op")[0])
    res = asim.simulate(g, chip=chip, kernel_build="binary", fusion=False)
    return res.explain("op").splitlines()


def _spec(item: int) -> VecSpec:
    return VecSpec(1 << 20, ((item, 1.0), (item, 1.0)), item, 1.0, ())


@pytest.mark.parametrize("block, tiles", [(128, 1), (16384, 1), (32767, 1), (32768, 2),
                                          (49152, 3), (49153, 4)])
def test_fp16_add_tiles(block, tiles):
    # 6 B a live element: 32768 single-buffered, capped at 32767; 16384 double-buffered
    chip = get_chip("ascend910b")
    assert elewise_tiles(chip, _spec(2), block, 6.0) == tiles


def test_the_split_factor_caps_a_4_byte_kernel():
    chip = get_chip("ascend910b")
    # fp32 at 12 B a live element: 16384 single-buffered fits the UB, the cap is 16383
    assert ELEWISE_SPLIT_FACTORS[4] == 16383
    assert elewise_tiles(chip, _spec(4), 16383, 12.0) == 1
    assert elewise_tiles(chip, _spec(4), 16384, 12.0) == 2


def test_a_1m_sigmoid_runs_three_double_buffered_tiles_a_block():
    # [1009, 1021] fp16 on 48 blocks: 21462 elements a block, over the 16383 single limit of
    # its fp32 compute, so three tiles of the 8192 double-buffered limit (7168 each in TBE)
    notes = _notes("Sigmoid", (1009, 1021), "float16", "ascend910b")
    assert any("dynamic ELEWISE UB tiling: 3 tile(s) per block, double-buffered" in n
               for n in notes)
    # the model splits its 21463 elements evenly (TBE: 7168, 7168 and the rest)
    assert any("up to 7155 elements per tile" in n for n in notes)


def test_a_block_within_the_single_limit_is_one_tile():
    # [8, 256, 384] fp16 Add on the 910B4's 40 vector cores: 19661 elements a block
    notes = _notes("Add", (8, 256, 384), "float16", "ascend910b4")
    assert any("dynamic ELEWISE UB tiling: 1 tile(s) per block, single-buffered" in n
               for n in notes)
