"""SwiGlu's UB tile on the A2 chips follows CANN's swi_glu_tiling.cpp (its OpSequence's
ub_bytes, lower/vector_seq.py): maxTileLen = UB / (2 buffers x 3 queues x dtype bytes + fp32
working buffers)."""

import pytest

import ascendsim as asim


def _swiglu(dtype: str, chip: str = "ascend910b"):
    g = asim.Graph("swiglu")
    x = g.input("x", shape=(4096, 8192), dtype=dtype)
    g.output(g.swi_glu(x, dim=-1))
    res = asim.simulate(g, chip=chip)
    return res, res.explain(res.trace.tasks[0].op_name)


@pytest.mark.parametrize("dtype, out_tile", [("bfloat16", 9824), ("float16", 9824),
                                             ("float32", 7008)])
def test_swiglu_tile_is_the_kernel_max_tile_len(dtype, out_tile):
    # 196608 B / 20 B (2-byte dtypes) = 9830 -> 9824 (16-element blocks);
    # 196608 B / 28 B (fp32) = 7021 -> 7008; the task counts input elements (2 per output)
    _, text = _swiglu(dtype)
    assert f"up to {2 * out_tile} elements per tile" in text
    assert "as the kernel's tiling sizes it" in text


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
