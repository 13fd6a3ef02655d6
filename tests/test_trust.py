"""Issue 23's first-use findings: each surface a new user tripped over, pinned by a test."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest

import ascendsim as asim
from ascendsim.cli import main
from ascendsim.errors import ConfigError
from ascendsim.passes import load_fusion_switch


def _tiny() -> asim.Graph:
    g = asim.Graph("tiny")
    x = g.input("x", shape=(4, 4), dtype="float32")
    g.output(g.relu(g.add(x, 1.0)))
    return g


# -- item 13: a typo in the fusion options is an error naming the key -----------------------
@pytest.mark.parametrize("call", [
    lambda g: asim.simulate(g, fusion={"graph_kernal": True}),
    lambda g: asim.optimize(g, "ascend910", graph_kernal=True),
    lambda g: asim.compare(g, fusion={"graph_kernal": True}, inputs=None),
])
def test_fusion_option_typo_names_the_key(call):
    with pytest.raises(ConfigError, match="graph_kernal.*did you mean 'graph_kernel'"):
        call(_tiny())


def test_known_fusion_options_still_run():
    assert asim.simulate(_tiny(), fusion={"graph_kernel": True, "ub_rules": "seed",
                                          "l2_fusion": False}).cycles > 0


# -- simulate(progress=False) is "no progress", a non-callable is a ConfigError --------------
def test_progress_false_means_none():
    assert asim.simulate(_tiny(), progress=False).cycles == asim.simulate(_tiny()).cycles


@pytest.mark.parametrize("bad", [True, 3, "yes"])
def test_progress_not_callable_is_config_error(bad):
    with pytest.raises(ConfigError, match="progress="):
        asim.simulate(_tiny(), progress=bad)


# -- item 12: a huge batch fails fast, from the shapes, naming the largest tensor ------------
@pytest.mark.parametrize("batch", [100_000, 100_000_000])
def test_huge_batch_fails_fast_from_shapes(batch):
    t0 = time.perf_counter()
    with pytest.raises(asim.CapacityError,
                       match=r"from its shapes.*largest tensors: \S+ \(fused stem\.conv"):
        asim.simulate(asim.models.resnet50(batch=batch), "ascend910")
    assert time.perf_counter() - t0 < 5.0     # was 104 s (batch 100000), 10 min (1e8)


def test_huge_batch_cli_exit_2_one_line(capsys):
    t0 = time.perf_counter()
    assert main(["run", "resnet50", "--batch", "100000", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "exceeds the 32.00 GiB HBM of ascend910" in err
    assert time.perf_counter() - t0 < 5.0


def test_shape_bound_is_below_the_plan_peak():
    """The shape check never refuses what the memory plan accepts (built-in models)."""
    from ascendsim.api import shape_capacity

    for g in (asim.models.resnet50(batch=2), asim.models.bert_base(batch=1, seq_len=32),
              asim.models.decoder("tiny-gqa-1m", batch=2, phase="decode", context_len=40)):
        res = asim.simulate(g, "ascend910b")
        fused = asim.optimize(g, "ascend910b", l2_fusion=False).graph
        assert shape_capacity(fused)[0] <= res.memory.peak_bytes


# -- item 18: malformed files are documented errors naming the file and the line/key ---------
MSPROF = Path(__file__).parent / "data" / "msprof" / "op_summary_cann8_910b.csv"


def _msprof_with(tmp_path, **fields) -> Path:
    """The CANN 8 sample with its first data row's fields replaced."""
    rows = list(csv.reader(MSPROF.read_text(encoding="utf-8").splitlines()))
    header, first = rows[0], rows[1]
    for key, value in fields.items():
        first[header.index(key.replace("_", " ").replace("Duration", "Duration(us)"))] = value
    out = tmp_path / "op_summary.csv"
    with out.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, first, *rows[2:4]])
    return out


@pytest.mark.parametrize("fields, reason", [
    ({"Task_Duration": "inf"}, "positive finite time"),                 # was math domain error
    ({"OP_Type": "Conv2D", "Input_Shapes": "16;16", "Input_Formats": "ND;ND"}, "line 2"),
    ({"OP_Type": "TransData", "Input_Shapes": "1,1000000000000", "Input_Formats": "ND",
      "Input_Data_Types": "DT_FLOAT16", "Output_Shapes": "1,1",
      "Output_Formats": "FRACTAL_NZ"}, "of device memory from its shapes alone"),  # 29 TiB
])
def test_malformed_msprof_row_is_that_rows_error(tmp_path, fields, reason):
    prof = asim.load_msprof(_msprof_with(tmp_path, **fields))
    first = prof.rows[0]
    assert first.status == "error" and reason in first.reason, first.reason
    assert "line 2" in first.reason
    prof.table()
    assert prof.median_abs_error >= 0 and prof.bias > 0          # no math domain error


def _deep_json(tmp_path) -> Path:
    p = tmp_path / "deep.json"
    p.write_text('{"Switch": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return p


def _bigint_json(tmp_path) -> Path:
    p = tmp_path / "bigint.json"
    p.write_text('{"Switch": {\n"GraphFusion": {"ALL": ' + "1" * 5000 + "}}}")
    return p


def _deep_toml(tmp_path) -> Path:
    p = tmp_path / "deep.toml"
    p.write_text('base = "ascend910"\nub_bytes = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    return p


def _bigint_toml(tmp_path) -> Path:
    p = tmp_path / "bigint.toml"
    p.write_text('base = "ascend910"\nub_bytes = ' + "1" * 5000 + "\n")
    return p


@pytest.mark.parametrize("make, load, names", [
    (_deep_json, load_fusion_switch, "nested"),
    (_bigint_json, load_fusion_switch, "line 2 (a number of 5,000 digits)"),
    (_deep_toml, asim.load_chip, "nested too deeply"),
    (_bigint_toml, asim.load_chip, "line 2: a number of 5,000 digits"),
])
def test_malformed_switch_and_chip_files_are_config_errors(tmp_path, make, load, names):
    path = make(tmp_path)
    with pytest.raises(ConfigError) as err:
        load(path)
    assert str(path) in str(err.value) and names in str(err.value), str(err.value)


@pytest.mark.parametrize("make, flag", [(_deep_json, "--fusion-switch"),
                                        (_bigint_json, "--fusion-switch"),
                                        (_deep_toml, "--chip"), (_bigint_toml, "--chip")])
def test_malformed_files_cli_exit_2_one_line(tmp_path, capsys, make, flag):
    path = make(tmp_path)
    assert main(["run", "matmul_bias_relu", flag, str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "internal" not in err


# -- item 19: generate() on a 4 KiB HBM raises CapacityError, in units that show it ---------
def _builder(**kw):
    return asim.models.decoder("tiny-gqa-1m", **kw)


@pytest.mark.parametrize("model", ["tiny-gqa-1m", _builder])
def test_generate_on_4kib_hbm_raises_capacity_error(model):
    chip = asim.get_chip("ascend910b").replace(hbm_bytes=4096)
    with pytest.raises(asim.CapacityError, match=r"> HBM 4\.00 KiB"):
        asim.llm.generate(model, chip, batch=1, prompt_len=8, new_tokens=4)


def test_generate_counts_a_builders_kv_cache():
    """A builder's prefill graph has a 0-position cache: its KV bytes come from the shape."""
    cfg = asim.models.decoder_presets()["tiny-gqa-1m"]
    chip = asim.get_chip("ascend910b")
    plan = asim.llm.memory_plan(_builder, chip, batch=2, prompt_len=8, new_tokens=4,
                                dtype="float16")
    assert plan.kv_cache == cfg.kv_cache_bytes(2, 12, "float16") > 0


def test_generate_capacity_check_false_simulates_anyway():
    chip = asim.get_chip("ascend910b").replace(hbm_bytes=4096)
    gen = asim.llm.generate("tiny-gqa-1m", chip, batch=1, prompt_len=8, new_tokens=2,
                            capacity_check=False)
    assert gen.hbm_peak_bytes > chip.hbm_bytes and gen.ttft_ms > 0


# -- item 14: README snippets say which extra they need (tests/readme_snippets.py runs them) ---
#: a call in a README snippet -> the extra it needs after `pip install -e .`
EXTRA_OF = {"calibrate(": "calibrate", "to_pandas(": "sweep", "load_onnx(": "onnx"}


def test_readme_snippets_name_the_extra_they_need():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "readme_snippets", Path(__file__).parent / "readme_snippets.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = mod.snippets(readme)
    assert len(blocks) >= 5 and any(skip for _, _, skip in blocks)    # the Dask one
    for line, code, _ in blocks:
        for call, extra in EXTRA_OF.items():
            if call in code:
                assert f'.[{extra}]' in code, f"README.md:{line} uses {call} without naming " \
                                              f"its extra .[{extra}]"


# -- item 5: compare decides values by the work, shows progress, says what it compared --------
def test_compare_bert_large_defaults_skip_values_by_work():
    t0 = time.perf_counter()
    cmp = asim.compare(asim.models.bert_large())
    assert time.perf_counter() - t0 < 60          # was 11.4 min computing values silently
    assert cmp.outputs_equal is None
    assert "10.76 TFLOP" in cmp.verdict and "--values" in cmp.verdict
    assert cmp.verdict in str(cmp.table())


def test_compare_values_progress_and_verdict(capsys):
    g = asim.models.conv_bn_relu()
    seen = []
    cmp = asim.compare(g, progress=lambda what, done, total: seen.append((what, done, total)))
    assert cmp.outputs_equal is True
    assert seen and seen[-1][1] == seen[-1][2] and {w for w, _, _ in seen} == {
        "'ConvBnRelu' as given", "'ConvBnRelu' optimised and fused"}
    v = cmp.verdict
    assert v.startswith("outputs agree") and "float16" in v and f"depth {cmp.depth}" in v
    asim.compare(g, progress=True)               # stderr is not a terminal here: lines
    err = capsys.readouterr().err.splitlines()
    assert err[-1].endswith("100%") and "computing the values of 'ConvBnRelu'" in err[-1]
    assert asim.compare(g, values=False).outputs_equal is None


def test_compare_tolerance_grows_with_depth():
    from ascendsim.report.compare import tolerance

    assert tolerance("float16", 1) == (2e-3, 2e-3)
    assert tolerance("float16", 400)[1] == pytest.approx(2e-3 * 20)


def test_cli_compare_values_switch(capsys):
    assert main(["compare", "conv_bn_relu", "--no-values", "--no-progress"]) == 0
    assert "values not computed (values=False)" in capsys.readouterr().out
    assert main(["compare", "conv_bn_relu", "--values", "--no-progress"]) == 0
    assert "outputs agree" in capsys.readouterr().out


# -- item 7: throughput, achieved TFLOPS, MFU and dtype; serving metrics named as such --------
def test_headline_has_throughput_tflops_mfu_dtype(capsys):
    res = asim.simulate(asim.models.resnet50(batch=2), "ascend910")
    per_s, unit = res.throughput
    assert unit == "images/s" and per_s == pytest.approx(2 / (res.time_us * 1e-6))
    assert res.achieved_tflops == pytest.approx(res.flops / (res.time_us * 1e-6) / 1e12)
    assert 0 < res.mfu < 1 and res.dtype == "float16"
    assert main(["run", "resnet50", "--batch", "2", "--no-progress", "--top", "1"]) == 0
    second = capsys.readouterr().out.splitlines()[1]
    assert "images/s" in second and "TFLOPS achieved" in second and "MFU" in second \
        and "float16" in second
    dec = asim.simulate(asim.models.decoder("tiny-gqa-1m", batch=4, phase="decode",
                                            context_len=16), "ascend910b")
    assert dec.throughput == (pytest.approx(4 / (dec.time_us * 1e-6)), "tokens/s")


def test_generate_reports_serving_metrics_by_their_names():
    gen = asim.llm.generate("tiny-gqa-1m", "ascend910b", batch=4, prompt_len=16,
                            new_tokens=8)
    assert gen.decode_tokens_per_s == pytest.approx(4 / (gen.tpot_ms / 1e3))
    assert gen.output_tokens_per_s == pytest.approx(4 * 8 / (gen.total_ms / 1e3))
    assert gen.tokens_per_s == gen.output_tokens_per_s < gen.decode_tokens_per_s
    assert gen.prefill_tokens_per_s == pytest.approx(4 * 16 / (gen.ttft_ms / 1e3))
    text = gen.table()
    for name in ("TTFT (ms)", "TPOT (ms)", "decode throughput (tokens/s)",
                 "output throughput, prefill incl. (tokens/s)", "E2E latency (ms)"):
        assert name in text


# -- item 6: fused tasks carry the model's op names (no renaming); any of them finds the task --
def test_fused_tasks_carry_and_accept_the_models_names(tmp_path):
    res = asim.simulate(asim.models.decoder("tiny-gqa-1m", batch=2, phase="decode",
                                            context_len=16), "ascend910b")
    ifa = next(t for t in res.trace.tasks if t.op_type == "IncreFlashAttention")
    assert ifa.op_name.startswith("Softmax_")                 # the task name is unchanged
    assert ifa.op_name in ifa.fused_ops and len(ifa.fused_ops) > 3   # was () before
    member = next(m for m in ifa.fused_ops if m.startswith("MatMul_"))
    assert res.task(member) is ifa and res.trace.task(member) is ifa   # Trace.task too
    assert f"'{member}' was fused into '{ifa.op_name}' (IncreFlashAttention)" in \
        res.explain(member)
    table = str(asim.report.summary.summary_table(res.trace, top=None))
    assert "fused ops" in table.splitlines()[1] and member in table
    fig = res.plot_timeline(str(tmp_path / "t.png"), op=member)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(lab.startswith(f"{ifa.op_name} = ") for lab in labels), labels
    conv = asim.simulate(asim.models.resnet50(batch=1)).trace.task("stem.bn")   # BN folded
    assert conv.op_type == "ConvRelu" and conv.fused_ops == ("stem.conv", "stem.bn", "Relu_0")


# -- item 10: timelines, traces, roofline and the CSV's block dims ----------------------------
def test_timeline_key_and_lanes_name_only_what_the_chip_has(tmp_path):
    res = asim.simulate(asim.models.conv_bn_relu(), "ascend910")
    key = res.plot_timeline()._supxlabel.get_text().replace("\n", " ")
    assert "MTE2 GM->L1/UB" in key and "FIX" not in key          # the 910 has no FIX pipe
    dec = asim.simulate(asim.models.decoder("llama2-7b", batch=1, phase="decode",
                                            context_len=128, layers=1), "ascend910b")
    from ascendsim.report.timeline import timeline_lanes

    labels = [lane.label for lane in timeline_lanes(dec.trace)]
    assert not any(lab.startswith("AIC V") for lab in labels), labels
    assert any(lab.startswith("AIV-via-AIC V") for lab in labels)
    assert "AIV-via-AIC: a mix kernel's vector half" in \
        dec.plot_timeline()._supxlabel.get_text().replace("\n", " ")


def test_cli_window_and_cores_limit_trace_and_timeline(tmp_path, capsys):
    import json

    full, part = tmp_path / "full.json", tmp_path / "part.json"
    assert main(["run", "resnet50", "--batch", "2", "--trace", str(full), "--no-progress"]) == 0
    assert main(["run", "resnet50", "--batch", "2", "--trace", str(part), "--timeline",
                 str(tmp_path / "t.png"), "--window", "100:200", "--cores", "0-1",
                 "--no-progress"]) == 0
    assert part.stat().st_size < full.stat().st_size / 5
    events = [e for e in json.loads(part.read_text())["traceEvents"] if e.get("ph") == "X"]
    assert events and all(e["ts"] < 200 and e["ts"] + e["dur"] > 100 for e in events)
    capsys.readouterr()
    for bad, says in ((["--window", "5:3"], "START < END"), (["--window", "x"], "START:END"),
                      (["--cores", "99"], "core 99 does not exist on ascend910"),
                      (["--cores", "a-b"], "core indices")):
        assert main(["run", "conv_bn_relu", "--trace", str(part), "--no-progress", *bad]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and says in err, err


def test_roofline_labels_do_not_overlap():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = asim.simulate(asim.models.resnet50(batch=8)).plot_roofline(label_top=10)
    FigureCanvasAgg(fig).draw()
    boxes = [t.get_window_extent() for t in fig.axes[0].texts]
    assert len(boxes) >= 5
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_mix_kernel_block_dims_as_msprof():
    res = asim.simulate(asim.models.bert_base(batch=2, seq_len=64), "ascend910b")
    mix = [r for r in res.summary() if r.task_type == "MIX_AIC"]
    assert mix and all(r["Block Dim"] <= 24 and 0 <= r["Mix Block Dim"] <= 48 for r in mix)
    assert any(r["Mix Block Dim"] == 48 and r["Block Dim"] == 24 for r in mix)
    plain = [r for r in res.summary() if r.task_type == "AI_CORE"]
    assert all(r["Mix Block Dim"] == 0 for r in plain)
