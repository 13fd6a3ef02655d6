"""Fuzzing of what users hand in: msprof op_summary CSVs, chip files, fusion-switch files and
command lines, each drawn malformed in many ways (seeded, derandomized).

What users rely on (issue 23, "What random testing found", item 18):
- a malformed msprof CSV is either a `ConfigError` naming the file (a file-level fault) or a
  comparison whose faulty rows carry an error naming their CSV line; the table and the CSV
  writer still work;
- a malformed chip file or fusion-switch file is a `ConfigError` naming the file; one that
  loads simulates a small graph or fails with an `AscendSimError` (never another exception);
- a command line exits 0, or exits 2 with one line on stderr that names the culprit (an
  argument or value of the command line) and is no internal error.

Each surface has a default run (derandomized: the same examples on every machine) and a heavy
run under `pytest -m fuzz`; BENCHMARKS.md ("Fuzzing") has the counts.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import ascendsim as asim
from ascendsim.cli import main
from ascendsim.errors import AscendSimError, ConfigError
from ascendsim.passes import load_fusion_switch
from ascendsim.passes.manager import known_passes

_COMMON = dict(derandomize=True, deadline=None, database=None,
               phases=(Phase.explicit, Phase.generate),
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
MSPROF_EXAMPLES, MSPROF_FUZZ_EXAMPLES = 12, 1000
CHIP_EXAMPLES, CHIP_FUZZ_EXAMPLES = 30, 2000
SWITCH_EXAMPLES, SWITCH_FUZZ_EXAMPLES = 30, 2000
CLI_EXAMPLES, CLI_FUZZ_EXAMPLES = 25, 1000

MSPROF = Path(__file__).resolve().parents[1] / "data" / "msprof" / "op_summary_cann8_910b.csv"
CHIP_FIELDS = ("ub_bytes", "l1_bytes", "ai_cores", "clock_hz", "hbm_bandwidth_bytes_per_s",
               "l2_bytes", "host_launch_us", "kernel_start_us", "vector_bytes_per_cycle",
               "arch", "pipes", "cube_mkn", "precision_mode", "path_bytes_per_cycle",
               "ub_byts", "name", "base", "description")
GRAPH_PASSES = tuple(known_passes())


def _tiny() -> asim.Graph:
    g = asim.Graph("tiny")
    x = g.input("x", shape=(16, 32), dtype="float16")
    w = g.input("w", shape=(32, 16), dtype="float16")
    g.output(g.relu(g.matmul(x, w)))
    return g


# ----------------------------------------------------------------------------- strategies
_numbers = st.one_of(st.integers(-10, 10), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=True, allow_infinity=True))
_cells = st.one_of(
    st.text(max_size=12),
    _numbers.map(str),
    st.lists(st.integers(-3, 2**24), max_size=5).map(lambda d: ",".join(map(str, d))),
    st.lists(st.lists(st.integers(0, 70000), max_size=4).map(lambda d: ",".join(map(str, d))),
             max_size=4).map(";".join),
    st.sampled_from(["N/A", "", ";", "DT_FLOAT16;", "FRACTAL_NZ", "NC1HWC0", "DT_BOOL",
                     "1e400", "-0", "MatMulV2", "FusionOp_Conv2D_Relu", "\"", "\n"]),
)


@st.composite
def msprof_files(draw) -> bytes:
    """The CANN 8 sample with cells replaced, columns dropped, lines cut or bytes spliced."""
    rows = list(csv.reader(MSPROF.read_text(encoding="utf-8").splitlines()))
    header, body = rows[0], rows[1:draw(st.integers(2, len(rows)))]
    for _ in range(draw(st.integers(0, 6))):
        r = draw(st.integers(0, len(body) - 1))
        c = draw(st.integers(0, len(header) - 1))
        body[r][c] = draw(_cells)
    if draw(st.booleans()) and draw(st.integers(0, 9)) == 0:
        gone = draw(st.integers(0, len(header) - 1))
        header = header[:gone] + header[gone + 1:]
    out = io.StringIO()
    csv.writer(out).writerows([header, *body])
    data = out.getvalue().encode("utf-8")
    how = draw(st.sampled_from(["as is", "as is", "cut", "splice"]))
    if how == "cut":
        data = data[:draw(st.integers(0, len(data)))]
    elif how == "splice":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=16)) + data[at:]
    return data


_toml_values = st.recursive(
    st.one_of(_numbers.filter(lambda v: v == v and abs(v) != float("inf")).map(repr),
              st.text(max_size=8).map(json.dumps), st.sampled_from(["true", "false"]),
              st.sampled_from(['"coupled"', '"split"', '"force_fp16"', '"fp8"', "[16, 16, 16]",
                               '["S", "V"]', "1e999", "nan", "inf"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3).map(lambda v: "[" + ", ".join(v) + "]"),
                            st.tuples(inner, st.sampled_from(['"G: x"', '"x"', "3"])).map(
                                lambda t: f"{{value = {t[0]}, source = {t[1]}}}")),
    max_leaves=6)


@st.composite
def chip_files(draw) -> str:
    """`base = "ascend910"` (or none) plus drawn figures; sometimes raw text."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=80))
    lines = []
    if draw(st.integers(0, 4)):
        lines.append(f'base = "{draw(st.sampled_from(["ascend910", "ascend910b", "nochip"]))}"')
    for key in draw(st.lists(st.sampled_from(CHIP_FIELDS), max_size=4, unique=True)):
        lines.append(f"{key} = {draw(_toml_values)}")
    return "\n".join(lines) + "\n"


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
              st.floats(allow_nan=False, allow_infinity=False),
              st.sampled_from(["on", "off", "ON", "maybe", ""]), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from([*GRAPH_PASSES[:8], "ALL", "Nope",
                                                             "GraphFusion", "UBFusion"]),
                                            inner, max_size=3)),
    max_leaves=8)


@st.composite
def switch_files(draw) -> str:
    """CANN fusion-switch JSON, well-formed or not, or the line form, or raw text."""
    kind = draw(st.sampled_from(["switch", "switch", "any json", "lines", "text"]))
    if kind == "switch":
        groups = draw(st.dictionaries(st.sampled_from(["GraphFusion", "UBFusion", "Other"]),
                                      st.dictionaries(st.sampled_from([*GRAPH_PASSES, "ALL",
                                                                       "NoSuchPass"]),
                                                      st.one_of(st.sampled_from(["on", "off"]),
                                                                _json), max_size=4),
                                      max_size=3))
        return json.dumps({"Switch": groups})
    if kind == "any json":
        return json.dumps(draw(_json))
    if kind == "lines":
        names = st.sampled_from([*GRAPH_PASSES, "ALL", "NoSuchPass", ""])
        return "\n".join(f"{draw(names)}:{draw(st.sampled_from(['on', 'off', 'x', '']))}"
                         for _ in range(draw(st.integers(0, 4))))
    return draw(st.text(max_size=60))


#: command-line flags with drawn values (None: a bare flag); values include bad ones
_FLAGS = {
    "--chip": st.sampled_from(["ascend910", "ascend910b", "ascend310", "nochip", ""]),
    "--batch": st.sampled_from(["1", "2", "0", "-4", "x", "99999999999999999999"]),
    "--detail": st.sampled_from(["block", "tile", "fine"]),
    "--mode": st.sampled_from(["sink", "host", "eager", "turbo"]),
    "--precision-mode": st.sampled_from(["force_fp16", "must_keep_origin_dtype", "fp8"]),
    "--top": st.sampled_from(["1", "0", "-1", "many"]),
    "--window": st.sampled_from(["0:5", "5:3", "x", ":", "1e9:2e9"]),
    "--cores": st.sampled_from(["0", "0-1", "99", "a-b", ""]),
    "--fusion-switch": st.sampled_from(["/nonexistent/switch.json", ""]),
    "--seq-len": st.sampled_from(["8", "0", "-1"]),
    "--graph-kernel": st.none(), "--no-fusion": st.none(), "--no-progress": st.none(),
    "--bogus": st.none(),
}


@st.composite
def command_lines(draw) -> list[str]:
    cmd = draw(st.sampled_from(["run", "run", "compare", "attribute", "chips", "frobnicate"]))
    argv = [cmd]
    if cmd in ("run", "compare", "attribute"):
        argv.append(draw(st.sampled_from(["matmul_bias_relu", "elementwise_chain",
                                          "nomodel", "/nonexistent/model.onnx"])))
    for flag in draw(st.lists(st.sampled_from(sorted(_FLAGS)), max_size=4, unique=True)):
        argv.append(flag)
        value = draw(_FLAGS[flag])
        if value is not None:
            argv.append(value)
    if cmd in ("run", "compare", "attribute") and "--no-progress" not in argv:
        argv.append("--no-progress")
    return argv


# ----------------------------------------------------------------------------- checks
def check_msprof(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "op_summary.csv"
        path.write_bytes(data)
        try:
            prof = asim.load_msprof(path, "ascend910b")
        except ConfigError as exc:
            assert str(path) in str(exc), f"a file error that does not name the file: {exc}"
            return
        for r in prof.rows:
            if r.status == "error":
                assert r.reason.startswith("line "), f"a row error without its line: {r.reason}"
        prof.table()
        prof.to_csv(Path(tmp) / "out.csv")


def _simulates_or_says_why(**kw) -> None:
    try:
        asim.simulate(_tiny(), **kw)
    except AscendSimError:
        pass


def check_chip_file(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "my.toml"
        path.write_text(text, encoding="utf-8")
        try:
            chip = asim.load_chip(path)
        except ConfigError as exc:
            assert str(path) in str(exc), f"a chip-file error that does not name it: {exc}"
            return
        _simulates_or_says_why(chip=chip)


def check_switch_file(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "switch.json"
        path.write_text(text, encoding="utf-8")
        try:
            load_fusion_switch(path)
        except ConfigError as exc:
            assert str(path) in str(exc), f"a switch-file error that does not name it: {exc}"
            return
        _simulates_or_says_why(fusion=str(path))


def check_command_line(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:        # argparse's usage errors
            code = exc.code
    text = err.getvalue().strip()
    assert code in (0, 2), f"exit {code}: {text[:200]}"
    if code == 2:
        lines = text.splitlines()
        assert len(lines) == 1, f"{len(lines)} lines on stderr: {text[:300]}"
        assert "internal error" not in text and "Traceback" not in text, text
        named = [a for a in argv[1:] if a] + [a.lstrip("-") for a in argv if a.startswith("-")]
        assert any(a in text for a in [*named, argv[0]]), f"names no culprit: {text}"


SURFACES = {"msprof": (msprof_files, check_msprof),
            "chip": (chip_files, check_chip_file),
            "switch": (switch_files, check_switch_file),
            "cli": (command_lines, check_command_line)}


def _run(surface: str, examples: int) -> tuple[int, list[tuple[str, str]]]:
    strategy, check = SURFACES[surface]
    seen: list[int] = []
    failures: list[tuple[str, str]] = []

    @settings(max_examples=examples, **_COMMON)
    @given(strategy())
    def run(drawn):
        seen.append(1)
        try:
            check(drawn)
        except Exception as exc:     # every failure is collected, with its example
            failures.append((f"{type(exc).__name__}: {exc}", repr(drawn)[:300]))

    run()
    return len(seen), failures


def _report(failures) -> str:
    return "\n".join(f"{err[:300]}\n    e.g. {ex}" for err, ex in failures[:30])


DEFAULTS = {"msprof": MSPROF_EXAMPLES, "chip": CHIP_EXAMPLES, "switch": SWITCH_EXAMPLES,
            "cli": CLI_EXAMPLES}
HEAVY = {"msprof": MSPROF_FUZZ_EXAMPLES, "chip": CHIP_FUZZ_EXAMPLES,
         "switch": SWITCH_FUZZ_EXAMPLES, "cli": CLI_FUZZ_EXAMPLES}


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_malformed_inputs_fuzz_default(surface):
    n, failures = _run(surface, DEFAULTS[surface])
    assert n == DEFAULTS[surface]
    assert not failures, f"{len(failures)} of {n} failed:\n{_report(failures)}"


@pytest.mark.fuzz
@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_malformed_inputs_fuzz_heavy(surface):
    n, failures = _run(surface, HEAVY[surface])
    print(f"fuzz {surface}: {n} examples, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {n} failed:\n{_report(failures)}"
