"""SwiGlu's UB tile on the A2 chips follows CANN's swi_glu_tiling.cpp (its OpSequence's
ub_bytes, lower/glu_tiling.py): maxTileLen = UB / (2 buffers x 3 queues x dtype bytes + fp32
working buffers), base tiles of rows x half-row columns, handed to cores round robin."""

import pytest

import ascendsim as asim
from ascendsim.lower.glu_tiling import glu_shares, glu_tiling


def _swiglu(dtype: str, chip: str = "ascend910b"):
    g = asim.Graph("swiglu")
    x = g.input("x", shape=(4096, 8192), dtype=dtype)
    g.output(g.swi_glu(x, dim=-1))
    res = asim.simulate(g, chip=chip)
    return res, res.explain(res.trace.tasks[0].op_name)


@pytest.mark.parametrize("dtype, out_tile", [("bfloat16", 19 * 512), ("float16", 19 * 512),
                                             ("float32", 27 * 256)])
def test_swiglu_tile_is_the_kernel_base_tile(dtype, out_tile):
    # maxTileLen: 196608 B / 20 B (2-byte dtypes) = 9830 -> 9824 (16-element blocks),
    # 196608 B / 28 B (fp32) = 7021 -> 7016; a half row of 4096 needs several tiles, so the
    # base columns are a multiple of 512 bytes (512 2-byte or 256 fp32 elements) and the base
    # rows as many as fit (19, 27); the task counts input elements (2 per output)
    _, text = _swiglu(dtype)
    assert f"up to {2 * out_tile} elements per tile" in text
    assert "as the kernel's tiling sizes it" in text


def test_glu_tiling_cores_slots_and_shares():
    # [2, 64, 512] fp32 on 40 AIV: 128 rows x 256 columns a half; 54 x 128 tiles, 6 cores
    t = glu_tiling(128, 256, 4, 40, 196608)
    assert (t.base_rows, t.base_cols, t.buffers, t.tiles, t.cores) == (54, 128, 2, 6, 6)
    # rows 54, 54, 20 by two column tiles: tile k on core k
    assert glu_shares(t, 128, 256, t.cores) == ((2 * 54 * 128, 4, 1), (2 * 20 * 128, 2, 1))
    # [2, 64, 1024] fp32 on 6 cores: two double-buffered tiles a core become one
    # single-buffered tile (24 rows x 512) a core
    t = glu_tiling(128, 512, 4, 6, 196608)
    assert (t.base_rows, t.base_cols, t.buffers, t.tiles, t.cores) == (24, 512, 1, 6, 6)
    # more tiles than cores: handed out round robin, 12 cores with 3 tiles, 36 with 2; the
    # last row tile (1024 = 53 x 19 + 17) is shorter
    t = glu_tiling(1024, 1024, 2, 48, 196608)
    assert (t.base_rows, t.base_cols, t.tiles, t.cores) == (19, 512, 108, 48)
    shares = glu_shares(t, 1024, 1024, 48)
    assert sum(n for _, n, k in shares if k == 3) == 12
    assert sum(n for _, n, k in shares if k == 2) == 36
    assert sum(e * n for e, n, _ in shares) == 2 * 1024 * 1024


def test_swiglu_fits_the_ub_and_stays_above_the_hbm_time():
    # the larger tile still fits the UB (the simulator checks every buffer) and the op
    # cannot read x, 64 MiB from HBM (a graph input: not in L2), faster than the chip's HBM;
    # its 32 MiB output may stay in the 96 MiB L2
    res, _ = _swiglu("bfloat16", "ascend910b4")
    read = 4096 * 8192 * 2
    hbm = asim.hw.get_chip("ascend910b4").hbm_bandwidth_bytes_per_s
    assert res.time_us >= read / hbm * 1e6


def test_tbe_chip_keeps_the_generic_split():
    g = asim.Graph("swiglu")
    x = g.input("x", shape=(64, 8192), dtype="float16")
    g.output(g.swi_glu(x, dim=-1))
    res = asim.simulate(g, chip="ascend910")
    assert "as the kernel's tiling sizes it" not in res.explain(res.trace.tasks[0].op_name)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_swiglu_runs_the_kernel_sequence_in_fp32(dtype):
    # swi_glu_bf16.hpp (also fp16's kernel): Cast, Muls, Exp, Adds, Div, Cast, Mul, Cast,
    # each over the N outputs: half the task's input elements
    _, text = _swiglu(dtype)
    seq = next(line for line in text.splitlines() if "vector sequence" in line)
    assert "0.5 x vmuls, 0.5 x vexp, 0.5 x vadds, 0.5 x vdiv, 0.5 x vmul" in seq
    cycles = next(line for line in text.splitlines() if "V cycles" in line)
    narrow = "bf16" if dtype == "bfloat16" else "f16"
    assert f"vconv {narrow}->f32" in cycles and f"vconv f32->{narrow}" in cycles


def test_swiglu_grad_takes_the_backward_glu_tiling():
    # GLU_FLAG SWIGLU_GRAD_SINGLE on bf16: 2 slots x 5 queues x 2 B + 5 fp32 buffers = 40 B a
    # pair, maxTileLen 196608 / 40 = 4915 -> 4912; the half row of 3072 fits whole but one
    # row a tile gives 4096 tiles, and narrowing by 512 bytes finds 19 rows x 256 (216 x 12
    # = 2592 tiles) the fewest on 40 cores
    t = glu_tiling(4096, 3072, 2, 40, 196608, grad=True)
    assert (t.base_rows, t.base_cols, t.buffers, t.tiles, t.cores) == (19, 256, 2, 2592, 40)
    # the forward kernel's 20 B a pair keeps its own tile
    f = glu_tiling(4096, 3072, 2, 40, 196608)
    assert (f.base_rows, f.base_cols) == (19, 512)


def test_swiglu_grad_moves_each_half_row_piece_as_a_burst():
    # swi_glu_grad_single.hpp CopyIn / CopyOut: a, b and dy read as one burst per tile row
    # each, dx's two halves written as one each (3 x 19 read, 2 x 19 written per tile), and
    # swi_glu_grad_bf16.hpp's twenty calls a tile: 15 fp32 instructions plus 5 Casts
    g = asim.Graph("swiglu_grad")
    dy = g.input("dy", shape=(4096, 3072), dtype="bfloat16")
    x = g.input("x", shape=(4096, 6144), dtype="bfloat16")
    g.output(g.swi_glu_grad(dy, x, dim=-1))
    res = asim.simulate(g, chip="ascend910b4")
    text = res.explain(res.trace.tasks[0].op_name)
    assert "57 read and 38 written per tile of 9728 elements" in text
    cycles = next(line for line in text.splitlines() if "V cycles" in line)
    assert cycles.count("vconv") == 3 and cycles.count("vdiv") == 1
    # bounded below by the bursts: 2592 tiles x 95 bursts over the chip-wide burst rate
    chip = asim.hw.get_chip("ascend910b4")
    bursts = 2592 * 95 / chip.gm_read_bursts_per_cycle
    assert res.time_us >= 0.9 * bursts / chip.clock_hz * 1e6
