"""bfloat16 timing: the cube's bf16 mode on the 910B family, bf16 vector math as fp32 between
vconvs (the chip file's vector_bfloat16), and a clear error on chips without bf16."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import UnsupportedOpError
from ascendsim.hw import get_chip
from ascendsim.ir.graph import Graph
from ascendsim.report.compare import traffic_bytes


def _matmul(dtype: str, m: int, k: int, n: int) -> Graph:
    g = Graph("mm")
    a, b = g.input("a", (m, k), dtype), g.input("b", (k, n), dtype)
    g.output(g.matmul(a, b))
    return g


def _exp(dtype: str) -> Graph:
    g = Graph("exp")
    g.output(g.exp(g.input("x", (2048, 2048), dtype)))
    return g


def _cycles(graph: Graph, chip) -> int:
    return asim.simulate(graph, chip=chip, fusion=False).cycles


@pytest.mark.parametrize("name", ["ascend910b", "ascend910b1", "ascend910b4"])
def test_bf16_gemm_runs_like_fp16_on_the_910b_family(name: str) -> None:
    """The 910B's bf16 cube mode has the fp16 fractal (cube_mkn.bfloat16 = [16, 16, 16]) and
    bf16 has fp16's 2 bytes, so a bf16 GEMM takes the fp16 GEMM's cycles exactly."""
    chip = get_chip(name)
    assert chip.cube_mkn.bfloat16 == chip.cube_mkn.float16
    assert _cycles(_matmul("bfloat16", 512, 1024, 384), chip) == \
        _cycles(_matmul("float16", 512, 1024, 384), chip)


def test_bf16_gemm_runs_at_the_bf16_cube_rate() -> None:
    """Halving only the bf16 cube mode's rate (K fractal 16 -> 8) slows a large bf16 GEMM, a
    compute-heavy kernel (>= 1.3x: the cube phase dominates its time), and leaves fp16 alone:
    bf16 runs in its own mode, not in fp16's."""
    chip = get_chip("ascend910b")
    half = chip.replace(cube_mkn={"bfloat16": (16, 8, 16)})
    shape = (4096, 4096, 4096)
    base = _cycles(_matmul("bfloat16", *shape), chip)
    assert _cycles(_matmul("bfloat16", *shape), half) >= 1.3 * base
    assert _cycles(_matmul("float16", *shape), half) == _cycles(_matmul("float16", *shape), chip)


@pytest.mark.parametrize("name", ["ascend910", "ascend310", "ascend910b_gen1"])
def test_bf16_cube_op_on_a_chip_without_bf16_names_chip_and_op(name: str) -> None:
    with pytest.raises(UnsupportedOpError,
                       match=rf"'MatMul'.*bfloat16.*{name}'s cube has none.*float16"):
        asim.simulate(_matmul("bfloat16", 64, 64, 64), chip=name, fusion=False)


def test_bf16_vector_op_on_a_chip_without_bf16_names_chip_and_op() -> None:
    with pytest.raises(UnsupportedOpError, match=r"'Exp'.*bfloat16.*ascend910 has none"):
        asim.simulate(_exp("bfloat16"), chip="ascend910", fusion=False)


def test_bf16_vector_math_is_fp32_between_vconvs() -> None:
    """On the 910B a bf16 Exp is timed as an fp32 Exp plus vconvs: it follows the fp32 exp
    rate and the one-operand (vconv) rate, never the fp16 exp rate; fp16 is the reverse."""
    chip = get_chip("ascend910b")
    assert chip.vector_bfloat16 == "float32" and chip.source("vector_bfloat16").startswith("S:")
    base = {dt: _cycles(_exp(dt), chip) for dt in ("float16", "bfloat16")}
    slow_fp32 = chip.replace(vector_op_bytes_per_cycle={"exp_fp32": 8.0})
    slow_fp16 = chip.replace(vector_op_bytes_per_cycle={"exp_fp16": 4.0})
    slow_vconv = chip.replace(vector_bytes_per_cycle=8.0)
    assert _cycles(_exp("bfloat16"), slow_fp32) > 1.5 * base["bfloat16"]
    assert _cycles(_exp("float16"), slow_fp32) == base["float16"]
    assert _cycles(_exp("bfloat16"), slow_fp16) == base["bfloat16"]
    assert _cycles(_exp("bfloat16"), slow_vconv) > 1.5 * base["bfloat16"]
    assert _cycles(_exp("float16"), slow_vconv) == base["float16"]


def test_bf16_moves_half_the_bytes_of_fp32() -> None:
    """GM traffic is that of the 2-byte storage (the fp32 work stays in UB)."""
    chip = get_chip("ascend910b")
    traces = {dt: asim.simulate(_exp(dt), chip=chip, fusion=False).trace
              for dt in ("bfloat16", "float32")}
    b16, b32 = (traffic_bytes(traces[dt], "L2") + traffic_bytes(traces[dt], "DDR")
                for dt in ("bfloat16", "float32"))
    assert b16 > 0 and 2 * b16 == b32


def test_explain_names_the_bf16_paths() -> None:
    g = Graph("mm_exp")
    a, b = g.input("a", (128, 256), "bfloat16"), g.input("b", (256, 128), "bfloat16")
    y = g.matmul(a, b, name="mm")
    g.output(g.exp(y, name="ex"))
    res = asim.simulate(g, chip="ascend910b", fusion=False)
    assert "bf16 mode (cube_mkn.bfloat16 16x16x16" in res.explain("mm")
    assert "vconv bf16->fp32" in res.explain("ex")
