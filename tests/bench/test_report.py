"""bench/report.py: BENCHMARKS.md is made of the scripts' sections, one per benchmark script,
and a run that regenerates some sections keeps the others' text."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import report  # noqa: E402
import sections  # noqa: E402

BENCH = Path(sections.BENCH)
#: helpers and tools in bench/ that measure nothing themselves
NOT_BENCHMARKS = {"timing.py", "scalesim_layers.py", "pipeline_worker.py", "sections.py",
                  "report.py", "ci_times.py", "stamp_first_sight.py",
                  "confidence_table.py", "coverage_counts.py"}


def test_every_benchmark_script_has_a_section_and_a_markdown_mode():
    scripts = {p.name for p in BENCH.glob("*.py")} - NOT_BENCHMARKS
    assert scripts == {s.script for s in sections.SECTIONS if s.script}
    for name in scripts:
        text = (BENCH / name).read_text()
        sid = next(s.id for s in sections.SECTIONS if s.script == name)
        assert f'main_or_markdown("{sid}", main)' in text, name


def test_the_default_report_is_bounded():
    assert sum(s.minutes for s in sections.SECTIONS) <= 25


def test_a_partial_run_keeps_the_other_sections(tmp_path, monkeypatch):
    ci = tmp_path / "ci_times.json"
    ci.write_text(json.dumps({"runs": [
        {"name": "suite", "command": "pytest -q", "seconds": None},
        {"name": "fresh clone", "command": "bash .ci/run", "seconds": 300.0, "commit": "abc1234",
         "date": "2026-01-01 00:00 UTC", "machine": "2 cores", "load": "1.0 at start"}]}))
    monkeypatch.setattr(report, "render_ci_times", lambda: sections.render_ci_times(ci))
    out = tmp_path / "BENCHMARKS.md"
    kept = ("<!-- section: kernels -->\n## Kernels\n\n- Commit: `1234567`, measured then\n"
            "old table\n<!-- /section: kernels -->")
    out.write_text("# old\n\n" + kept + "\n")
    assert report.main(["--only", "ci_times", "--out", str(out)]) == 0
    text = out.read_text()
    assert kept in text
    found = report.read_sections(text)
    assert list(found) == [s.id for s in sections.SECTIONS]
    assert "not measured yet" in found["ci_times"] and "5.0 min" in found["ci_times"]
    assert "- Not regenerated" in found["fidelity"]
    assert "`python bench/fidelity.py" in found["fidelity"]
    assert "`1234567`" in text.split("<!-- section:")[0]      # the contents table


def test_unknown_section_is_refused(tmp_path):
    try:
        report.main(["--only", "nope", "--out", str(tmp_path / "B.md")])
    except SystemExit as e:
        assert "unknown section" in str(e)
    else:
        raise AssertionError("no error for an unknown section")


def test_ci_times_records_a_run_under_its_command(tmp_path, monkeypatch):
    import ci_times

    path = tmp_path / "ci_times.json"
    path.write_text(json.dumps({"runs": [
        {"name": "a", "command": "bash .ci/run", "seconds": None},
        {"name": "b", "command": "pytest -q", "seconds": None}]}))
    monkeypatch.setattr(ci_times, "CI_TIMES", path)
    assert ci_times.main(["record", "bash .ci/run", "361", "--start-load", "1.0 0.5 0.2"]) == 0
    runs = json.loads(path.read_text())["runs"]
    assert [r["command"] for r in runs] == ["bash .ci/run", "pytest -q"]
    assert runs[0]["seconds"] == 361 and runs[0]["load"].startswith("1.0 0.5 0.2 at start")
    assert runs[1]["seconds"] is None
    assert "6.0 min" in sections.render_ci_times(path)
