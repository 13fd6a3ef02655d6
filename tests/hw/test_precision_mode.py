"""CANN precision modes (issue 23, item 4): the cube's float32 operand dtype follows the mode,
for the time and for the values; the default is the chip's, sourced in its chip file."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.cli import main
from ascendsim.errors import ConfigError, UnsupportedOpError
from ascendsim.hw.precision import PRECISION_MODES, cube_fp32_dtype, precision_mode


def _matmul(n: int) -> asim.Graph:
    g = asim.Graph("mm")
    a = g.input("a", (n, n), "float32")
    b = g.input("b", (n, n), "float32")
    g.output(g.matmul(a, b))
    return g


def _feeds(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal((n, n)).astype(np.float32) for k in ("a", "b")}


@pytest.mark.parametrize("chip, mode", [("ascend910", "allow_fp32_to_fp16"),
                                        ("ascend910b", "must_keep_origin_dtype"),
                                        ("ascend910b4", "must_keep_origin_dtype"),
                                        ("ascend910b_gen1", "allow_fp32_to_fp16"),
                                        ("ascend310", "force_fp16"),
                                        ("ascend310p", "force_fp16")])
def test_default_mode_per_chip_is_sourced(chip, mode):
    c = asim.get_chip(chip)
    assert precision_mode(c) == mode and c.source("precision_mode").startswith("D: ")


def test_a_chip_file_without_the_figure_gets_the_mode_its_cube_implies():
    for name, want in (("ascend910", "allow_fp32_to_fp16"),
                       ("ascend910b", "must_keep_origin_dtype")):
        c = asim.get_chip(name).replace(precision_mode=None)
        assert precision_mode(c) == want


def test_values_follow_the_mode():
    """fp32 operands are rounded to fp16 (bf16) before the cube under the fp16 (bf16) modes;
    the product then differs from the exact one by the operands' rounding, not fp32's."""
    g, feeds = _matmul(64), _feeds(64)
    exact = feeds["a"].astype(np.float64) @ feeds["b"].astype(np.float64)
    rounded = feeds["a"].astype(np.float16).astype(np.float64) @ \
        feeds["b"].astype(np.float16).astype(np.float64)

    def err(chip, mode=None, ref=exact):
        out = asim.simulate(g, chip, inputs=feeds, precision_mode=mode).outputs
        return float(np.abs(next(iter(out.values())) - ref).max())

    assert err("ascend910b") < 1e-4                       # must_keep_origin_dtype: fp32
    assert err("ascend910") > 5e-3                        # was exact fp32 before the fix
    assert err("ascend910", ref=rounded) < 1e-4           # = the fp16-rounded operands' product
    assert err("ascend910b", "allow_fp32_to_fp16", ref=rounded) < 1e-4
    assert err("ascend910b", "allow_fp32_to_bf16") > err("ascend910b", "force_fp16")
    cmp = asim.compare(g, "ascend910b", inputs=feeds, precision_mode="force_fp16")
    assert float(np.abs(next(iter(cmp.fused.outputs.values())) - rounded).max()) < 1e-4


def test_time_follows_the_mode():
    """On the 910B the fp32 cube mode runs at a quarter of the fp16 rate (chip file): kept in
    fp32 a 2048^3 GEMM is bound by that peak; rounded to fp16 it is faster (its float32 GM
    bytes, unchanged by the mode, then bound it)."""
    g = _matmul(2048)
    keep = asim.simulate(g, "ascend910b")
    fp16 = asim.simulate(g, "ascend910b", precision_mode="allow_fp32_to_fp16")
    assert keep.precision_mode == "must_keep_origin_dtype"
    chip = asim.get_chip("ascend910b")
    assert keep.time_us * 1e-6 >= 2 * 2048 ** 3 / chip.peak_flops("float32")
    assert 1.3 < keep.cycles / fp16.cycles <= 4.0
    assert "precision mode must_keep_origin_dtype" in keep.headline()
    assert fp16.mfu == pytest.approx(fp16.achieved_tflops * 1e12 /
                                     asim.get_chip("ascend910b").peak_flops("float16"))
    on910 = asim.simulate(g, "ascend910")
    assert on910.cycles == asim.simulate(g, "ascend910", precision_mode="force_fp16").cycles


def test_a_mode_the_chip_cannot_run_names_op_chip_and_mode():
    with pytest.raises(UnsupportedOpError, match=r"MatMul.*must_keep_origin_dtype.*ascend910's "
                                                 r"cube has none"):
        asim.simulate(_matmul(16), "ascend910", precision_mode="must_keep_origin_dtype")
    with pytest.raises(ConfigError, match="precision_mode='fp8'.*force_fp16"):
        asim.simulate(_matmul(16), precision_mode="fp8")


def test_every_mode_maps_to_a_cube_dtype():
    for mode, dtype in PRECISION_MODES.items():
        chip = asim.get_chip("ascend910b").replace(precision_mode=mode)
        assert cube_fp32_dtype(chip) == dtype


def _onnx_matmul(path, n: int):
    """A float32 MatMul as an ONNX file (the CLI's built-in models are float16)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm", [a, b], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_cli_precision_mode(capsys, tmp_path):
    path = _onnx_matmul(tmp_path / "mm.onnx", 1024)
    assert main(["run", str(path), "--chip", "ascend910b", "--no-progress", "--top", "1"]) == 0
    keep = capsys.readouterr().out
    assert main(["run", str(path), "--chip", "ascend910b", "--precision-mode",
                 "allow_fp32_to_fp16", "--no-progress", "--top", "1"]) == 0
    fp16 = capsys.readouterr().out
    assert "precision mode must_keep_origin_dtype" in keep
    assert "precision mode allow_fp32_to_fp16" in fp16
    us = [float(out.split(": ", 1)[1].split(" us")[0].replace(",", "")) for out in (keep, fp16)]
    assert us[0] > 1.1 * us[1]          # 1024^3: the fp32 peak binds less than at 2048
    with pytest.raises(SystemExit) as ex:
        main(["run", str(path), "--precision-mode", "fp8", "--no-progress"])
    assert ex.value.code == 2 and "--precision-mode" in capsys.readouterr().err


def test_execute_takes_the_cube_dtype():
    g, feeds = _matmul(32), _feeds(32)
    exact = next(iter(asim.execute(g, feeds).values()))
    half = next(iter(asim.execute(g, feeds, cube_fp32="float16").values()))
    want = feeds["a"].astype(np.float16).astype(np.float64) @ \
        feeds["b"].astype(np.float16).astype(np.float64)
    assert np.abs(half - want).max() < 1e-4 < np.abs(exact - want).max()
    with pytest.raises(ConfigError, match="cube_fp32='fp8'"):
        asim.execute(g, feeds, cube_fp32="fp8")


def test_compare_tolerance_follows_the_cube_rounding():
    """A folded BatchNorm rounds other weights to fp16 than the unfused Conv: on the 910
    (fp32 cube operands in fp16) the verdict takes fp16's tolerance and says why."""
    g = asim.models.conv_bn_relu(dtype="float32")
    on910 = asim.compare(g, "ascend910")
    assert on910.cube_rounding == "float16" and on910.outputs_equal is True
    assert on910.max_abs_diff > 1e-4                 # beyond float32's tolerance
    assert "rounded to float16 by the precision mode" in on910.verdict
    on910b = asim.compare(g, "ascend910b")
    assert on910b.cube_rounding is None and on910b.outputs_equal is True
    assert on910b.max_abs_diff < 1e-4
