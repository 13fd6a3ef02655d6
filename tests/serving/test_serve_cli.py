"""`ascendsim serve`: a run prints its report and writes its files; bad input is one line."""

from __future__ import annotations

import csv

from ascendsim.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_serve_prints_the_report_and_writes_csv_and_plot(capsys, tmp_path):
    out_csv, png = tmp_path / "req.csv", tmp_path / "serve.png"
    code, out, err = run(capsys, "serve", "qwen2-0.5b", "--rate", "10", "--num-requests",
                         "40", "--slo", "ttft_ms=500,tpot_ms=50", "--csv", str(out_csv),
                         "--plot", str(png))
    assert code == 0 and err == ""
    assert "qwen2-0.5b on ascend910b x 1" in out and "ttft_ms P50/P90/P99" in out
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 40 and set(rows[0]) >= {"ttft_ms", "tpot_ms", "e2e_ms", "slo_met"}
    assert png.stat().st_size > 10_000


def test_serve_bad_input_is_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,,10\n")
    code, _, err = run(capsys, "serve", "qwen2-0.5b", "--requests", str(bad))
    assert code == 2 and err.strip() == f"ascendsim: error: {bad}: line 3: missing prompt_tokens"
    code, _, err = run(capsys, "serve", "qwen2-0.5b", "--slo", "p99_ms=3")
    assert code == 2 and "unknown metric 'p99_ms'" in err
    code, _, err = run(capsys, "serve", "qwen2-0.5b", "--slo", "ttft_ms")
    assert code == 2 and "write METRIC=MS" in err
    code, _, err = run(capsys, "serve", "qwen2-0.5b", "--disaggregated", "2")
    assert code == 2 and "write PREFILL:DECODE" in err
    code, _, err = run(capsys, "serve", "llama2-70b", "--num-requests", "3")
    assert code == 2 and "llama2-70b does not fit ascend910b x 1" in err
