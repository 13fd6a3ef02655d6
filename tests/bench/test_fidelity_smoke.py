"""Smoke test of bench/fidelity.py, now a wrapper over `ascendsim validate`: it prints the
validation table of the chosen rows and keeps the old figures as corpus rows."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fidelity as fb  # noqa: E402

from ascendsim.validation.corpus import load_corpus  # noqa: E402


def test_wrapper_prints_the_validation_table_of_a_family(capsys):
    assert fb.main(["--family", "launch", "--summary-only"]) == 0
    out = capsys.readouterr().out
    assert "by family" in out and "median |error| on validation rows" in out


def test_unknown_family_is_a_bad_input_exit(capsys):
    assert fb.main(["--family", "gemv"]) == 2
    assert "unknown family gemv" in capsys.readouterr().err


def test_old_benchmark_figures_are_corpus_rows():
    """Every figure group of the old script is in published_figures.toml, with the fitted
    ones as calibration rows naming their chip figure."""
    rows = [r for r in load_corpus() if r.file.endswith("published_figures.toml")]
    ids = {r.id for r in rows}
    for n in (1024, 2048, 4096, 8192):
        assert f"pub-torchperf-910b2-gemm-fp16-{n}" in ids
    by = {r.id: r for r in rows}
    assert by["pub-pocketllm-910-hbm-read-probe"].calibrates == ("hbm_bandwidth_bytes_per_s",)
    assert by["pub-pocketllm-910-aclnn-add-enqueue"].calibrates == ("host_launch_us",)
    assert by["pub-mskpp-910b1-mmad-32x16x16"].calibrates == ("cube_mmad_overhead_cycles",)
    assert by["pub-mskpp-910b3-mmad-16x16x16"].role == "validation"
    assert sum("-dma-" in i for i in ids) == 36
