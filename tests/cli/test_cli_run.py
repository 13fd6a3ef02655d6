"""`ascendsim run` / `compare` end to end (needs ascendsim.sim)."""

from __future__ import annotations

import csv
import json

import ascendsim as asim
from ascendsim.cli import main
from ascendsim.report import COLUMNS
from ascendsim.report.summary import CAUSE_COLUMNS, CONFIDENCE_COLUMN


def test_run_writes_everything(capsys, tmp_path) -> None:
    png, js, sv = (str(tmp_path / n) for n in ("t.png", "t.json", "s.csv"))
    code = main(["run", "conv_bn_relu", "--timeline", png, "--trace", js, "--summary", sv,
                 "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("ConvBnRelu, batch 1 on ascend910 (optimised and fused, sink mode, "
                            "detail=block):")
    assert "op summary:" in out and "op statistic" in out and "total time (us)" in out
    assert f"wrote timeline: {png}" in out
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert json.load(open(js))["traceEvents"]
    conf = next(line for line in out.splitlines()[:4] if line.startswith("confidence: "))
    assert "% of time in validated families" in conf
    with open(sv, newline="") as f:
        assert next(csv.reader(f)) == [*COLUMNS, *CAUSE_COLUMNS, CONFIDENCE_COLUMN]


def test_run_no_fusion_has_more_tasks(capsys) -> None:
    assert main(["run", "net_basic_fuse", "--no-fusion", "--no-progress"]) == 0
    unfused = capsys.readouterr().out
    assert "as given" in unfused.splitlines()[0]
    n_unfused = int(unfused.splitlines()[0].split(" tasks")[0].rsplit(" ", 1)[1])
    assert n_unfused >= 2


def test_host_mode_waits_for_launches(capsys) -> None:
    assert main(["run", "net_basic_fuse", "--no-fusion", "--mode", "host", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "host mode" in out.splitlines()[0]
    assert "launch-bound tasks (us)" in out          # tiny ops wait longer than they run


def test_compare(capsys, tmp_path) -> None:
    plot = str(tmp_path / "cmp.png")
    code = main(["compare", "net_basic_fuse", "--plot", plot, "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "fused is" in out.splitlines()[0] and "launches" in out
    assert open(plot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def _tiny_onnx(path) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])
    node = helper.make_node("Relu", ["x"], ["y"], name="relu0")
    model = helper.make_model(helper.make_graph([node], "tiny", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def test_run_onnx_file(capsys, tmp_path) -> None:
    path = tmp_path / "tiny.onnx"
    _tiny_onnx(path)
    code = main(["run", str(path), "--no-progress", "--top", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "relu0" in out and "Relu" in out
    code = main(["run", str(path), "--batch", "2"])
    assert code == 2 and "has a static batch" in capsys.readouterr().err


def _dynamic_onnx(path, dims=("N", 64)) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))
    node = helper.make_node("Relu", ["x"], ["y"], name="relu0")
    model = helper.make_model(helper.make_graph([node], "dyn", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def test_batch_binds_an_onnx_dynamic_batch(capsys, tmp_path) -> None:
    """Issue 23 item 11: --batch binds the symbolic leading dim of a dynamic-batch ONNX."""
    path = tmp_path / "dyn.onnx"
    _dynamic_onnx(path)
    code = main(["run", str(path), "--batch", "16", "--no-progress", "--top", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("dyn, batch 16 on ascend910")
    two = tmp_path / "two.onnx"
    _dynamic_onnx(two, dims=("N", "S"))
    assert main(["run", str(two), "--seq-len", "4"]) == 2
    assert "--seq-len apply to built-in models" in capsys.readouterr().err


def test_run_decoder_presets_from_the_cli(capsys) -> None:
    """Issue 23 item 11: `ascendsim models` lists decoder; `run decoder` runs (tiny preset,
    prefill of 128 tokens) and takes --preset/--phase/--batch/--context."""
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "--preset {" in out
    assert all(name in out for name in asim.models.decoder_presets())
    assert main(["run", "decoder", "--no-progress", "--top", "2"]) == 0
    assert capsys.readouterr().out.startswith("decoder_prefill_b1_s128_c0, batch 1")
    assert main(["run", "decoder", "--preset", "tiny-moe-1m", "--phase", "decode",
                 "--batch", "8", "--context", "256", "--no-progress", "--top", "2"]) == 0
    assert capsys.readouterr().out.startswith("tiny-moe-1m_decode_b8_s1_c256, batch 8")
    assert main(["run", "decoder", "--preset", "llama9-1b"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unknown --preset 'llama9-1b'" in err
    assert main(["run", "resnet50", "--context", "4"]) == 2
    assert "has no context length" in capsys.readouterr().err


def test_run_on_other_chip(capsys) -> None:
    assert main(["run", "net_basic_fuse", "--chip", "ascend910b", "--no-progress"]) == 0
    assert "on ascend910b" in capsys.readouterr().out.splitlines()[0]


def test_progress_bar_on_a_terminal_and_without_tqdm(monkeypatch, capsys) -> None:
    import sys

    from ascendsim.cli import Progress

    bar = Progress(["a", "b"], enabled=True)
    with bar.stage("loading"):
        pass
    assert bar.sim_callback() is not None
    bar.close()
    assert "loading" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "tqdm", None)     # tqdm not installed: no bar, no error
    quiet = Progress(["a"], enabled=True)
    with quiet.stage("x"):
        pass
    assert quiet.sim_callback() is None
    quiet.close()
    assert Progress(["a"]).sim_callback() is None      # stderr is not a terminal under pytest


def test_run_timeline_coloured_by_cause(capsys, tmp_path) -> None:
    png = str(tmp_path / "c.png")
    code = main(["run", "conv_bn_relu", "--timeline", png, "--timeline-color", "cause",
                 "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    code = main(["run", "conv_bn_relu", "--timeline-color", "cause", "--no-progress"])
    assert code == 2 and "--timeline-color colours the --timeline" in capsys.readouterr().err


def test_run_takes_the_instruction_cache_start(capsys) -> None:
    """--icache warm on the 910B: every kernel's code cached, so the fused ResNet block runs
    faster than from cold cores (each kernel after another pays icache_cold_block_us per
    block); the 910 models no instruction cache, so both give the same time."""
    def total(chip: str, icache: str) -> float:
        assert main(["run", "conv_bn_relu", "--chip", chip, "--icache", icache,
                     "--no-progress"]) == 0
        out = capsys.readouterr().out
        line = next(ln for ln in out.splitlines() if ln.startswith("total time (us)"))
        return float(line.split()[-1].replace(",", ""))

    assert total("ascend910b", "warm") < total("ascend910b", "cold")
    assert total("ascend910", "warm") == total("ascend910", "cold")
