"""The measured-figure corpus (ascendsim/validation/corpus/*.toml, issue 10): every row is
well formed, has a source, and says what it may be used for.

The checks here read the TOML files directly (tomllib), so a malformed row fails this test even
before any loader or simulation code sees it. The schema is the one `ascendsim.validation`
loads: row-level id, chip, family, role, timing, data, metric, value, unit, source and a
`workload` table (kind op / model / transfer); optional variant, pending_reason, calibrates,
source_detail, framework, cann, note.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import ascendsim.validation
from ascendsim.hw import chips as builtin_chips
from ascendsim.ir.registry import registered_ops
from ascendsim.models import decoder_presets

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CORPUS = Path(ascendsim.validation.__file__).parent / "corpus"
CHIP_FILES = Path(ascendsim.hw.__file__).parent / "chips"

FAMILIES = {"gemm", "batch_matmul", "conv", "attention", "softmax", "norm", "elementwise",
            "reduce", "transpose", "embedding", "copy", "launch", "model_training",
            "model_inference", "serving"}
ROLES = {"validation", "calibration", "pending"}
TIMINGS = {"msprof_kernel", "eager_call", "graph_step", "throughput"}
DATA = {"warm", "cold", "unknown"}
UNIT_METRIC = {"us": "time", "ms": "time", "s": "time", "samples/s": "throughput",
               "images/s": "throughput", "tokens/s": "throughput", "TFLOPS": "throughput",
               "GB/s": "throughput", "requests/s": "throughput"}
REQUIRED = {"id": str, "chip": str, "family": str, "role": str, "workload": dict,
            "timing": str, "data": str, "metric": str, "value": (int, float), "unit": str,
            "source": str}
OPTIONAL_STR = ("variant", "pending_reason", "source_detail", "framework", "cann", "note",
                "source_table", "first_commit", "first_date")
#: kind -> the workload keys a row of that kind must give (the loader in
#: ascendsim.validation owns the full vocabulary of optional keys)
WORKLOAD_REQUIRED = {"op": {"op", "inputs"}, "model": {"model", "batch"},
                     "transfer": {"src", "dst", "bytes"}, "decoder": {"preset", "batch"},
                     "serving": {"preset", "requests", "measure"}}
PHASES = {"inference", "training"}
DECODER_PHASES = {"prefill", "decode"}
PRECISIONS = {"fp16", "float16", "mixed", "amp", "bf16", "bfloat16", "fp32", "float32", "int8"}
CHIP_ALIASES = {"ascend910a": "ascend910", "ascend910b2": "ascend910b", "ascend310p3": "ascend310p"}


def _positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def workload_problems(w: Any, role: str) -> list[str]:
    """What is wrong with one workload table (empty when it is well formed)."""
    if not isinstance(w, Mapping):
        return [f"workload must be a table, got {type(w).__name__}"]
    kind = w.get("kind", "op")
    if kind not in WORKLOAD_REQUIRED:
        return [f"workload.kind {kind!r} is not one of {sorted(WORKLOAD_REQUIRED)}"]
    out = [f"workload.{k} missing for kind {kind!r}"
           for k in sorted(WORKLOAD_REQUIRED[kind] - set(w))]
    for key in ("batch", "seq_len", "image", "layers", "bytes", "cores"):
        if key in w and not _positive_int(w[key]):
            out.append(f"workload.{key} must be a positive integer, got {w[key]!r}")
    if kind == "op" and "inputs" in w:
        inputs = w["inputs"]
        if not isinstance(inputs, list) or not inputs:
            out.append("workload.inputs must be a non-empty list")
        else:
            for j, spec in enumerate(inputs):
                shape = spec.get("shape") if isinstance(spec, Mapping) else None
                if not (isinstance(shape, list) and shape and all(map(_positive_int, shape))):
                    out.append(f"workload.inputs[{j}].shape must be a non-empty list of "
                               f"positive integers, got {shape!r}")
                if isinstance(spec, Mapping):
                    bad = sorted(set(spec) - {"shape", "dtype", "format", "const", "values"})
                    out += [f"workload.inputs[{j}].{k} is not an input key" for k in bad]
        if "attrs" in w and not isinstance(w["attrs"], Mapping):
            out.append("workload.attrs must be a table")
        if role != "pending" and w.get("op") not in registered_ops():
            out.append(f"workload.op {w.get('op')!r} is not a registry op (such rows are pending)")
    if kind == "decoder":
        if role != "pending" and w.get("preset") not in decoder_presets():
            out.append(f"workload.preset {w.get('preset')!r} is not a decoder preset "
                       f"(such rows are pending)")
        phase = w.get("phase", "prefill")
        if phase not in DECODER_PHASES:
            out.append(f"workload.phase {phase!r} is not one of {sorted(DECODER_PHASES)}")
        elif phase == "prefill" and not _positive_int(w.get("seq_len")):
            out.append("workload.seq_len: a prefill row gives its prompt tokens")
        elif phase == "decode" and not _positive_int(w.get("context_len")):
            out.append("workload.context_len: a decode row gives the cached tokens")
    if kind == "serving":
        if role != "pending" and w.get("preset") not in decoder_presets():
            out.append(f"workload.preset {w.get('preset')!r} is not a decoder preset "
                       f"(such rows are pending)")
        if w.get("precision", "bf16") not in PRECISIONS:
            out.append(f"workload.precision {w['precision']!r} is not one of "
                       f"{sorted(PRECISIONS)}")
    if kind == "model":
        if w.get("phase", "inference") not in PHASES:
            out.append(f"workload.phase {w.get('phase')!r} is not one of {sorted(PHASES)}")
        if "precision" in w and w["precision"] not in PRECISIONS:
            out.append(f"workload.precision {w['precision']!r} is not one of "
                       f"{sorted(PRECISIONS)}")
    return out


def row_problems(row: Any) -> list[str]:
    """What is wrong with one raw [[row]] table (empty when it is well formed)."""
    if not isinstance(row, Mapping):
        return [f"a row must be a table, got {type(row).__name__}"]
    out = []
    for key, typ in REQUIRED.items():
        if key not in row:
            out.append(f"{key} missing")
        elif not isinstance(row[key], typ) or isinstance(row[key], bool):
            out.append(f"{key} has type {type(row[key]).__name__}")
    unknown = set(row) - set(REQUIRED) - set(OPTIONAL_STR) - {"calibrates", "first_ratio"}
    out += [f"{k} is not a row key" for k in sorted(unknown)]
    out += [f"{k} must be a string" for k in OPTIONAL_STR
            if k in row and not isinstance(row[k], str)]
    if out:
        return out
    for key, valid in (("family", FAMILIES), ("role", ROLES), ("timing", TIMINGS),
                       ("data", DATA)):
        if row[key] not in valid:
            out.append(f"{key} {row[key]!r} is not one of {sorted(valid)}")
    if row["unit"] not in UNIT_METRIC:
        out.append(f"unit {row['unit']!r} is not one of {sorted(UNIT_METRIC)}")
    elif UNIT_METRIC[row["unit"]] != row["metric"]:
        out.append(f"unit {row['unit']!r} does not measure a {row['metric']!r}")
    if not (math.isfinite(row["value"]) and row["value"] > 0):
        out.append(f"value must be a positive number, got {row['value']!r}")
    if not row["id"].strip() or not row["source"].strip():
        out.append("id and source must not be empty")
    role = row["role"]
    calibrates = row.get("calibrates", [])
    if not (isinstance(calibrates, list) and all(isinstance(c, str) for c in calibrates)):
        out.append("calibrates must be a list of strings")
    elif (role == "calibration") != bool(calibrates):
        out.append("calibration rows, and only they, name the chip figures in `calibrates`")
    if role == "pending" and not row.get("pending_reason", "").strip():
        out.append("a pending row must give its pending_reason")
    chip = CHIP_ALIASES.get(row["chip"].lower(), row["chip"].lower())
    if role != "pending" and chip not in builtin_chips():
        out.append(f"chip {row['chip']!r} is not a built-in chip (rows on other chips are "
                   f"pending)")
    return out + workload_problems(row["workload"], role)


def _chip_figure_exists(chip: str, dotted: str) -> bool:
    """Whether `dotted` (e.g. "cube_mkn.bfloat16") names a figure of the chip's TOML file or
    of the file it starts from (`base`: the A2 variants take the 910B2's figures)."""
    name = CHIP_ALIASES.get(chip.lower(), chip.lower())
    doc: Any = tomllib.loads((CHIP_FILES / f"{name}.toml").read_text(encoding="utf-8"))
    node = doc
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return "base" in doc and _chip_figure_exists(doc["base"], dotted)
        node = node[part]
    return isinstance(node, Mapping) and "value" in node


def _files() -> list[Path]:
    return sorted(CORPUS.glob("*.toml"))


def _rows() -> list[tuple[str, dict]]:
    return [(path.name, row) for path in _files()
            for row in tomllib.loads(path.read_text(encoding="utf-8")).get("row", [])]


# ----------------------------------------------------------------------------- the corpus
def test_corpus_files_hold_rows_only():
    assert _files(), f"no corpus files in {CORPUS}"
    for path in _files():
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        assert set(doc) == {"row"}, f"{path.name}: top-level keys {sorted(doc)}"
        assert isinstance(doc["row"], list) and doc["row"], f"{path.name}: no [[row]] tables"


def test_every_row_is_well_formed():
    problems = [f"{name}: {row.get('id', '?')}: {p}" for name, row in _rows()
                for p in row_problems(row)]
    assert not problems, "\n".join(problems)


def test_ids_are_unique_across_files():
    counts = Counter(row.get("id") for _, row in _rows())
    assert not [i for i, n in counts.items() if n > 1], counts.most_common(3)


def test_calibration_rows_name_real_chip_figures():
    rows = [(name, row) for name, row in _rows() if row.get("role") == "calibration"]
    missing = [f"{name}: {row['id']}: {fig}" for name, row in rows
               for fig in row.get("calibrates", []) if not _chip_figure_exists(row["chip"], fig)]
    assert not missing, "\n".join(missing)


def test_the_package_loader_reads_the_corpus():
    """The corpus loader of ascendsim.validation accepts every row of every file."""
    from ascendsim.validation.corpus import load_corpus

    assert len(load_corpus()) == len(_rows())


def test_corpus_has_validation_rows_with_urls_and_details():
    """Rows gathered for issue 10 (the files other than published_figures.toml) cite a URL
    and say where in it the figure is."""
    rows = [row for name, row in _rows() if name != "published_figures.toml"]
    assert any(row["role"] == "validation" for row in rows)
    for row in rows:
        assert row["source"].startswith("https://"), row["id"]
        assert row.get("source_detail", "").strip(), row["id"]


# ----------------------------------------------------------------------------- the checker
GOOD = {
    "id": "t-1", "chip": "ascend910b", "variant": "910B2", "family": "gemm",
    "role": "validation", "timing": "eager_call", "data": "warm", "metric": "throughput",
    "value": 98.0, "unit": "TFLOPS", "source": "https://example.org/x", "source_detail": "row",
    "workload": {"kind": "op", "op": "MatMul", "inputs": [{"shape": [4, 4], "dtype": "float16"},
                                                          {"shape": [4, 4], "dtype": "float16"}]},
}


def test_checker_accepts_a_good_row():
    assert row_problems(GOOD) == []


@pytest.mark.parametrize("change, expect", [
    ({"family": "gemv"}, "family 'gemv'"),
    ({"role": "pending"}, "pending_reason"),
    ({"role": "calibration"}, "calibrates"),
    ({"value": 0.0}, "positive number"),
    ({"value": float("nan")}, "positive number"),
    ({"unit": "ms"}, "does not measure"),
    ({"unit": "furlongs"}, "unit 'furlongs'"),
    ({"source": " "}, "must not be empty"),
    ({"chip": "ascend950"}, "not a built-in chip"),
    ({"timing": "wallclock"}, "timing 'wallclock'"),
    ({"speed": 1}, "speed is not a row key"),
    ({"value": "98"}, "value has type str"),
    ({"workload": {"kind": "op", "op": "MatMul", "inputs": [{"shape": [4, 0]}]}},
     "positive integers"),
    ({"workload": {"kind": "op", "op": "MatMul", "inputs": []}}, "non-empty list"),
    ({"workload": {"kind": "op", "inputs": [{"shape": [4]}]}}, "workload.op missing"),
    ({"workload": {"kind": "graph", "op": "MatMul"}}, "workload.kind 'graph'"),
    ({"workload": {"kind": "op", "op": "FusedInferAttentionScore",
                   "inputs": [{"shape": [1, 8, 128, 64]}]}}, "not a registry op"),
    ({"workload": {"kind": "model", "model": "resnet50", "batch": 0}}, "positive integer"),
    ({"workload": {"kind": "model", "model": "bert_base", "batch": 8, "phase": "decode"}},
     "workload.phase 'decode'"),
    ({"workload": {"kind": "decoder", "preset": "gpt-5", "batch": 1, "seq_len": 8}},
     "not a decoder preset"),
    ({"workload": {"kind": "decoder", "preset": "qwen2-0.5b", "batch": 1}},
     "prefill row gives its prompt tokens"),
    ({"workload": {"kind": "decoder", "preset": "qwen2-0.5b", "batch": 1, "phase": "decode"}},
     "decode row gives the cached tokens"),
])
def test_checker_names_the_fault(change, expect):
    bad = {k: v for k, v in GOOD.items() if k not in change} | change
    problems = row_problems(bad)
    assert any(expect in p for p in problems), problems


def test_checker_keeps_unsimulable_rows_as_pending():
    pending = GOOD | {"role": "pending", "pending_reason": "chip variant 910B4 missing",
                      "chip": "ascend910b",
                      "workload": {"kind": "op", "op": "FlashAttentionScore",
                                   "inputs": [{"shape": [1, 8, 128, 64]}]}}
    assert row_problems(pending) == []


def test_pending_reasons_that_name_a_missing_op_or_model_are_true():
    """A pending row's reason stays true as the simulator grows: an op it says is not a
    registry op is not one, a model it says is not built in is not (else the row could run)."""
    import re

    from ascendsim.ir import has_op
    from ascendsim.models import BUILDERS, decoder_presets
    from ascendsim.validation.corpus import load_corpus

    models = {n.lower() for n in [*BUILDERS, *decoder_presets()]}
    stale = []
    for row in load_corpus():
        if row.role != "pending":
            continue
        for op in re.findall(r"(\w+) is not a registry op", row.pending_reason):
            if has_op(op):
                stale.append(f"{row.id}: {op} is a registry op now")
        for model in re.findall(r"(\w+) is not a built-in model", row.pending_reason):
            if model.lower() in models:
                stale.append(f"{row.id}: {model} is a built-in model now")
    assert not stale, "stale pending reasons:\n" + "\n".join(stale)
