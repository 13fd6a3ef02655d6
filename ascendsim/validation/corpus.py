"""The corpus of measured Ascend figures: TOML rows loaded into frozen `CorpusRow` records.

Rows live in `ascendsim/validation/corpus/*.toml` (package data), each file a list of
``[[row]]`` tables. A row is one measurement: what ran (`workload`), on which chip, how it was
timed (`timing`, `data`), what was measured (`metric`, `value`, `unit`) and where it was
published (`source`, `source_table`, `source_detail`, `framework`, `cann`). `source_table`
names the table the figure comes from: "<repository or site>:<path without revision>#<table or
section>" (no "#..." when the file is one table, e.g. a profile CSV); calibration and
validation rows never share a table (tests/validation/test_discipline.py). Optional
`first_ratio`, `first_commit`, `first_date`: the row's ratio under the model of the commit that
added it, before any model change it motivated (`ascendsim.validation.first_sight`). Its `role`
says what it may be used for (issue 10's definitions):

- ``calibration``: a chip figure was fitted to it; `calibrates` names the chip figure keys;
- ``validation``: never used to set any figure; the error the report quotes;
- ``pending``: cannot yet be simulated as measured; `pending_reason` says why; reported
  apart and never counted.

Workload kinds (the `workload` table):

- ``op``: one registry op. Keys: ``op`` (registry op type, e.g. "MatMul"), ``cann_op`` (the
  CANN type measured, e.g. "BatchMatMulV2"), ``inputs`` (a list of ``{shape, dtype, format}``),
  ``attrs``; optional ``cores`` (cut the chip to that many AI Cores: msKPP's one-core runs),
  ``measure`` ("task", the default: the op's kernel time; "launch": the host launch lane
  only; "pipe:<P>": busy cycles of pipe P on the first core, for instruction-level
  microbenchmarks), ``detail`` ("block" default, "tile" for microbenchmarks),
  ``count_bytes`` (what a GB/s figure counts: "io", the default, every input and output
  byte; "first_input", the bytes of the first input: msKPP's per-instruction rates),
  ``host`` (who launches an eager call: "framework", the default, a framework's eager op
  call such as torch_npu's; "acl", a kernel launched straight through AscendCL by the
  benchmark's own host code, at the chip's `host_launch_us`), ``kernels`` (how the measured
  kernels were built, `api.kernel_build_for`: "binary", the prebuilt dynamic-shape kernels
  a framework's eager ops take by default on the A2, or "jit"; absent: as the row's launch
  mode implies).
- ``model``: a built-in model. Keys: ``model`` (e.g. "resnet50", "bert_base", "bert_large"),
  ``batch``, ``seq_len`` (transformers) or ``image`` (CNNs), ``precision`` ("fp16", "bf16",
  "fp32", "mixed"), ``phase`` ("inference" or "training").
- ``transfer``: one DMA move on one core (msKPP's curves). Keys: ``src``, ``dst`` (memory
  locations, as `Chip.transfer_cycles`), ``bytes``, optional ``l2_miss`` (fraction, default 0).
  With ``moves`` it is a copy-only kernel instead (`validate.copy_kernel_cycles`): ``cores``
  blocks (default 1) each issue ``moves`` moves of ``bytes`` back to back, timed from the
  blocks' start to the last move's end (msprof's Task Duration); ``nd2nz`` (GM -> L1 only)
  converts ND to NZ on the way.
- ``decoder``: a decoder LLM step (`ascendsim.models.decoder`). Keys: ``preset`` (a name of
  `decoder_presets()`), ``batch``, ``phase`` ("prefill", the default, or "decode"), ``seq_len``
  (prompt tokens; prefill only), ``context_len`` (tokens already cached, default 0),
  ``precision``, ``overrides`` (a table of DecoderConfig fields, for a model built from its
  public config on top of a preset), ``layers`` (the model's layer count when it is not the
  preset's), ``launch`` ("graph", the default: the fused step sunk to the device; "eager":
  the fused graph launched op by op from the host, as llama.cpp or PyTorch eager run it).
  Tokens per step: batch x seq_len in prefill, batch in decode.

Op inputs may give ``const`` (a scalar filling the input) or ``values`` (the exact contents, a
flat list, e.g. GroupedMatmul's cumulative group_list). An op row may set ``loop = true``: the
time is the mean of a loop of back-to-back calls (event timing around N calls), so it is
simulated as the loop's steady state per call, like an eager throughput. An op row may set
``icache = "cold"``: the kernel was profiled inside a graph, after other kernels, and its
profile shows its instruction cache missing; it runs once after its producers, its cores'
instruction caches cold (`workloads.icache_start`). Every other op row runs with cached code
(a loop of the call), except a cold row, whose harness runs a kernel of its own before the
call (a flush or an L2 clear).

Timings (``timing``): ``msprof_kernel`` (a kernel's device time as msprof reports it from a
benchmark loop), ``eager_call`` (torch_npu-style calls from the host: one synchronised call,
or with ``loop``/a throughput metric a loop of back-to-back calls), ``graph_step`` (a sunk
graph step), ``throughput`` (a rate over whole steps). Steady-state assumption: an
``msprof_kernel`` row and a looped ``eager_call`` row on warm (or unknown) data measure a call
that meets the previous call's output still dirty in L2 and pays its write-back when its own
fills evict it; they are simulated as the last of three back-to-back calls
(`workloads.loop_calls`). A ``cold`` row assumes L2 is flushed between calls.

Structural faults (a missing or mistyped key, an unknown family/role/timing/unit, a
duplicate id) raise `ConfigError` naming the file, the row id and the key. Whether the
workload builds and simulates is decided later, per row, by `validate()`.
"""

from __future__ import annotations

import importlib.resources
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from ..hw import chips as builtin_chips
from ..hw.chip import KERNEL_BUILDS
from ..hw.loader import ALIASES

try:  # Python >= 3.11
    import tomllib as _toml
except ImportError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

#: the fixed list of families (issue 10); extend only with a reason
FAMILIES = ("gemm", "batch_matmul", "conv", "attention", "softmax", "norm", "elementwise",
            "reduce", "transpose", "embedding", "copy", "launch", "model_training",
            "model_inference", "serving")
ROLES = ("validation", "calibration", "pending")
#: how a figure was timed: msprof kernel time; one host-launched call with synchronisation;
#: a steady-state graph-mode step; a throughput over many steps
TIMINGS = ("msprof_kernel", "eager_call", "graph_step", "throughput")
DATA = ("warm", "cold", "unknown")
METRICS = ("time", "throughput")
#: unit -> (metric, factor to the base unit: seconds for times, per-second for throughputs)
UNITS: dict[str, tuple[str, float]] = {
    "us": ("time", 1e-6), "ms": ("time", 1e-3), "s": ("time", 1.0),
    "samples/s": ("throughput", 1.0), "images/s": ("throughput", 1.0),
    "tokens/s": ("throughput", 1.0), "TFLOPS": ("throughput", 1e12),
    "GB/s": ("throughput", 1e9), "requests/s": ("throughput", 1.0),
}
WORKLOAD_KINDS = ("op", "model", "transfer", "decoder", "serving")
#: what a serving row measured: a ServingReport.summary() key (throughputs, percentiles)
SERVING_MEASURES = ("output_tokens_per_s", "requests_per_s") + tuple(
    f"{m}_p{q}" for m in ("ttft_ms", "tpot_ms", "e2e_ms") for q in (50, 90, 99))
PHASES = ("inference", "training")
#: decoder workloads: the step measured and how it was launched
DECODER_PHASES = ("prefill", "decode")
LAUNCHES = ("graph", "eager")

_REQUIRED = ("id", "chip", "family", "role", "workload", "timing", "data", "metric", "value",
             "unit", "source")
_OPTIONAL = ("variant", "pending_reason", "calibrates", "source_detail", "framework", "cann",
             "note", "source_table", "first_ratio", "first_commit", "first_date")
#: keys that hold a number rather than a string
_NUMERIC_OPTIONAL = ("first_ratio",)
#: who launches an op row's eager call (workload.host): a framework's eager op call, or the
#: benchmark's own AscendCL kernel launch
HOSTS = ("framework", "acl")
_WORKLOAD_KEYS = {
    "op": ({"op", "inputs"}, {"kind", "cann_op", "attrs", "cores", "measure", "detail",
                              "count_bytes", "loop", "host", "kernels", "icache"}),
    "model": ({"model", "batch"}, {"kind", "seq_len", "image", "precision", "phase", "layers"}),
    "transfer": ({"src", "dst", "bytes"}, {"kind", "l2_miss", "cores", "moves", "nd2nz"}),
    "decoder": ({"preset", "batch"}, {"kind", "phase", "seq_len", "context_len", "precision",
                                      "overrides", "layers", "launch", "parallel", "box"}),
    # requests: synthetic() arguments (n, rate, prompt_mean, output_mean, ...); scheduler:
    # SchedulerConfig fields; measure: a SERVING_MEASURES key
    "serving": ({"preset", "requests", "measure"}, {"kind", "scheduler", "precision", "tp",
                                                    "max_concurrency", "quant"}),
}


#: the fields that define a row (what ran, how it was timed, on what data, what was measured)
DEFINITION_KEYS = ("id", "chip", "variant", "family", "role", "workload", "timing", "data",
                   "metric", "value", "unit")


def _thaw(value: Any) -> Any:
    """A frozen row value back as plain dicts and lists (for hashing and TOML)."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _freeze(value: Any) -> Any:
    """Nested dicts/lists as read-only mappings and tuples (rows are hashable records)."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


@dataclass(frozen=True)
class CorpusRow:
    """One measured figure of the corpus (see the module docstring for the fields)."""

    id: str
    chip: str
    family: str
    role: str
    workload: Mapping[str, Any]
    timing: str
    data: str
    metric: str
    value: float
    unit: str
    source: str
    variant: str = ""
    pending_reason: str = ""
    calibrates: tuple[str, ...] = ()
    source_detail: str = ""
    framework: str = ""
    cann: str = ""
    note: str = ""
    #: where the figure was published, down to the table: "<repository or site>:<path without
    #: revision>#<table or section>" (no "#..." when the file is one table, e.g. a profile CSV)
    source_table: str = ""
    #: the row's ratio under the model of the commit that added it, before any model change
    #: motivated by it (`first_commit`, `first_date`); None: unknown (rows older than the rule)
    first_ratio: float | None = None
    first_commit: str = ""
    first_date: str = ""
    file: str = field(default="", compare=False)

    @property
    def source_repo(self) -> str:
        """The repository or site of `source_table` (one independent source), or `source`."""
        return self.source_table.split(":", 1)[0] if self.source_table else self.source

    def definition(self) -> dict[str, Any]:
        """What the row measures and how it is simulated (`DEFINITION_KEYS`): the fields a
        frozen row must keep; provenance (source, note, first sight...) is not part of it."""
        return {k: _thaw(getattr(self, k)) for k in DEFINITION_KEYS}

    @property
    def measured_base(self) -> float:
        """The measured value in base units: seconds for times, per second for throughputs
        (TFLOPS -> FLOP/s, GB/s -> bytes/s)."""
        return self.value * UNITS[self.unit][1]

    def describe(self) -> str:
        """A one-line label of the workload, for tables."""
        w = self.workload
        kind = w.get("kind", "op")
        if kind == "op":
            shapes = ";".join("x".join(str(d) for d in i["shape"]) for i in w["inputs"])
            return f"{w.get('cann_op') or w['op']} {shapes} {w['inputs'][0].get('dtype', '')}"
        if kind == "model":
            extra = f" seq {w['seq_len']}" if "seq_len" in w else ""
            return (f"{w['model']} {w.get('phase', 'inference')} b{w['batch']}{extra} "
                    f"{w.get('precision', '')}").strip()
        if kind == "serving":
            q = w["requests"]
            conc = f" concurrency {w['max_concurrency']}" if "max_concurrency" in w else ""
            return (f"serve {w['preset']} tp{w.get('tp', 1)} {q.get('n')} req "
                    f"{q.get('prompt_mean')}/{q.get('output_mean')} tokens rate "
                    f"{q.get('rate')}{conc}: {w['measure']}")
        if kind == "decoder":
            phase = w.get("phase", "prefill")
            size = f" s{w['seq_len']}" if phase == "prefill" else ""
            ctx = f" ctx{w['context_len']}" if w.get("context_len") else ""
            return (f"{w['preset']} {phase} b{w['batch']}{size}{ctx} "
                    f"{w.get('precision', '')}").strip()
        return f"DMA {w['src']}->{w['dst']} {w['bytes']} B"


def corpus_dir() -> Path:
    """The folder of the built-in corpus files."""
    return Path(str(importlib.resources.files(__package__) / "corpus"))


def corpus_files() -> list[Path]:
    """The built-in corpus files, sorted by name."""
    return sorted(corpus_dir().glob("*.toml"))


def load_corpus(families: Iterable[str] | None = None,
                paths: Sequence[str | Path] | None = None) -> list[CorpusRow]:
    """Every row of the corpus (the built-in files, or `paths`), optionally of some families
    only, in file order. Ids must be unique across files."""
    fams = _check_families(families)
    rows: list[CorpusRow] = []
    seen: dict[str, str] = {}
    for path in (corpus_files() if paths is None else [Path(p) for p in paths]):
        for row in load_corpus_file(path):
            if row.id in seen:
                raise ConfigError(f"{path}: row id {row.id!r} is already used in {seen[row.id]}")
            seen[row.id] = str(path)
            if fams is None or row.family in fams:
                rows.append(row)
    return rows


def _check_families(families: Iterable[str] | None) -> set[str] | None:
    if families is None:
        return None
    fams = {families} if isinstance(families, str) else set(families)
    bad = sorted(fams - set(FAMILIES))
    if bad:
        raise ConfigError(f"unknown family {', '.join(bad)}; families are {', '.join(FAMILIES)}")
    return fams


def load_corpus_file(path: str | Path) -> list[CorpusRow]:
    """The rows of one corpus file; ConfigError naming the file, row and key on a bad row."""
    path = Path(path)
    try:
        doc = _toml.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read corpus file: {exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    extra = sorted(set(doc) - {"row"})
    if extra:
        raise ConfigError(f"{path}: unknown top-level key(s) {', '.join(extra)}; a corpus file "
                          f"holds [[row]] tables only")
    rows = doc.get("row", [])
    if not isinstance(rows, list):
        raise ConfigError(f"{path}: 'row' must be an array of tables ([[row]])")
    out = []
    for i, raw in enumerate(rows):
        out.append(check_row(raw, f"{path}: row {raw.get('id', f'#{i + 1}')!r}", str(path)))
    return out


def _known_chip(name: str) -> bool:
    key = name.lower()
    return ALIASES.get(key, key) in builtin_chips()


def check_row(raw: Mapping[str, Any], where: str, file: str = "") -> CorpusRow:
    """Check one raw row (a dict from TOML) and return its `CorpusRow`."""
    def fail(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{where}: {key}: {msg}")

    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: a row must be a table, got {type(raw).__name__}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise fail(missing[0], "missing (required keys: " + ", ".join(_REQUIRED) + ")")
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise fail(unknown[0], f"unknown key; valid keys: {', '.join(_REQUIRED + _OPTIONAL)}")
    for key in ("id", "chip", "source", *_OPTIONAL):
        if key in raw and key not in ("calibrates", *_NUMERIC_OPTIONAL) \
                and not isinstance(raw[key], str):
            raise fail(key, f"must be a string, got {raw[key]!r}")
    for key, choices in (("family", FAMILIES), ("role", ROLES), ("timing", TIMINGS),
                         ("data", DATA), ("metric", METRICS), ("unit", tuple(UNITS))):
        if raw[key] not in choices:
            raise fail(key, f"{raw[key]!r} is not one of {', '.join(choices)}")
    if not raw["id"].strip() or not raw["source"].strip():
        raise fail("id" if not raw["id"].strip() else "source", "must not be empty")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise fail("value", f"must be a positive number, got {value!r}")
    if UNITS[raw["unit"]][0] != raw["metric"]:
        raise fail("unit", f"{raw['unit']!r} is a {UNITS[raw['unit']][0]} unit but metric is "
                           f"{raw['metric']!r}")
    first = raw.get("first_ratio")
    if first is not None and (isinstance(first, bool) or not isinstance(first, (int, float))
                              or not math.isfinite(first) or first <= 0):
        raise fail("first_ratio", f"must be a positive number, got {first!r}")
    if first is not None and not raw.get("first_commit", "").strip():
        raise fail("first_commit", "a row with a first_ratio names the commit it was "
                                   "computed at")
    role = raw["role"]
    calibrates = raw.get("calibrates", [])
    if not isinstance(calibrates, list) or not all(isinstance(c, str) for c in calibrates):
        raise fail("calibrates", f"must be a list of chip figure keys, got {calibrates!r}")
    if role == "calibration" and not calibrates:
        raise fail("calibrates", "a calibration row must name the chip figure(s) fitted to it")
    if role != "calibration" and calibrates:
        raise fail("calibrates", f"only calibration rows name fitted figures (role {role!r})")
    if role == "pending" and not raw.get("pending_reason", "").strip():
        raise fail("pending_reason", "a pending row must say why it cannot be simulated yet")
    if role != "pending" and not _known_chip(raw["chip"]):
        raise fail("chip", f"unknown chip {raw['chip']!r}; built-in chips are "
                           f"{', '.join(builtin_chips())} (rows on other chips are pending)")
    workload = _check_workload(raw["workload"], fail)
    return CorpusRow(
        id=raw["id"], chip=raw["chip"], family=raw["family"], role=role,
        workload=_freeze(workload), timing=raw["timing"], data=raw["data"],
        metric=raw["metric"], value=float(value), unit=raw["unit"], source=raw["source"],
        variant=raw.get("variant", ""), pending_reason=raw.get("pending_reason", ""),
        calibrates=tuple(calibrates), source_detail=raw.get("source_detail", ""),
        framework=raw.get("framework", ""), cann=raw.get("cann", ""),
        note=raw.get("note", ""), source_table=raw.get("source_table", ""),
        first_ratio=None if first is None else float(first),
        first_commit=raw.get("first_commit", ""), first_date=raw.get("first_date", ""),
        file=file)


def _check_workload(w: Any, fail) -> dict[str, Any]:
    if not isinstance(w, Mapping):
        raise fail("workload", f"must be a table, got {w!r}")
    kind = w.get("kind", "op")
    if kind not in WORKLOAD_KINDS:
        raise fail("workload.kind", f"{kind!r} is not one of {', '.join(WORKLOAD_KINDS)}")
    required, optional = _WORKLOAD_KEYS[kind]
    missing = sorted(required - set(w))
    if missing:
        raise fail(f"workload.{missing[0]}", f"missing for kind {kind!r}")
    unknown = sorted(set(w) - required - optional)
    if unknown:
        raise fail(f"workload.{unknown[0]}", f"unknown key for kind {kind!r}; valid: "
                                             f"{', '.join(sorted(required | optional))}")
    for key in ("batch", "seq_len", "image", "layers", "bytes", "cores"):
        if key in w and (isinstance(w[key], bool) or not isinstance(w[key], int) or w[key] <= 0):
            raise fail(f"workload.{key}", f"must be a positive integer, got {w[key]!r}")
    if kind == "op":
        inputs = w["inputs"]
        if not isinstance(inputs, list) or not inputs:
            raise fail("workload.inputs", "must be a non-empty list of {shape, dtype, format}")
        for j, spec in enumerate(inputs):
            key = f"workload.inputs[{j}]"
            if not isinstance(spec, Mapping) or "shape" not in spec:
                raise fail(key, f"must be a table with a shape, got {spec!r}")
            shape = spec["shape"]
            if not isinstance(shape, list) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape):
                raise fail(f"{key}.shape", f"must be a list of positive integers, got {shape!r}")
            bad = sorted(set(spec) - {"shape", "dtype", "format", "const", "values"})
            if bad:
                raise fail(f"{key}.{bad[0]}", "unknown key; valid: shape, dtype, format, "
                                              "const, values")
            if "values" in spec:
                vals = spec["values"]
                if not isinstance(vals, list) or len(vals) != math.prod(shape) or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                    raise fail(f"{key}.values", f"must be a flat list of {math.prod(shape)} "
                                                f"numbers (the shape's size), got {vals!r}")
        if "attrs" in w and not isinstance(w["attrs"], Mapping):
            raise fail("workload.attrs", f"must be a table, got {w['attrs']!r}")
        if w.get("count_bytes", "io") not in ("io", "first_input"):
            raise fail("workload.count_bytes", f"{w['count_bytes']!r}: expected io or "
                                               f"first_input")
        measure = w.get("measure", "task")
        if measure not in ("task", "launch") and not str(measure).startswith("pipe:"):
            raise fail("workload.measure", f"{measure!r}: expected task, launch or pipe:<P>")
        if w.get("host", "framework") not in HOSTS:
            raise fail("workload.host", f"{w['host']!r}: expected {' or '.join(HOSTS)}")
        if not isinstance(w.get("loop", False), bool):
            raise fail("workload.loop", f"must be true or false, got {w['loop']!r}")
        if w.get("icache", "cold") != "cold":
            raise fail("workload.icache", f"{w['icache']!r}: expected cold (an op profiled "
                                          f"inside a graph, after other kernels)")
        if "kernels" in w and w["kernels"] not in KERNEL_BUILDS:
            raise fail("workload.kernels", f"{w['kernels']!r}: expected "
                                           f"{' or '.join(KERNEL_BUILDS)} (how the measured "
                                           f"kernels were built)")
    if kind == "model" and w.get("phase", "inference") not in PHASES:
        raise fail("workload.phase", f"{w['phase']!r} is not one of {', '.join(PHASES)}")
    if kind == "decoder":
        _check_decoder(w, fail)
    if kind == "serving":
        if w["measure"] not in SERVING_MEASURES:
            raise fail("workload.measure", f"{w['measure']!r} is not one of "
                                           f"{', '.join(SERVING_MEASURES)}")
        if not isinstance(w["requests"], Mapping):
            raise fail("workload.requests", "must be a table of synthetic() arguments")
        for key in ("tp", "max_concurrency"):
            if key in w and (isinstance(w[key], bool) or not isinstance(w[key], int)
                             or w[key] < 1):
                raise fail(f"workload.{key}", f"must be a positive integer, got {w[key]!r}")
    return dict(w)


def _check_decoder(w: Mapping[str, Any], fail) -> None:
    phase = w.get("phase", "prefill")
    if phase not in DECODER_PHASES:
        raise fail("workload.phase", f"{phase!r} is not one of {', '.join(DECODER_PHASES)} "
                                     f"(decoder workloads)")
    if phase == "prefill" and "seq_len" not in w:
        raise fail("workload.seq_len", "a prefill step needs the number of prompt tokens")
    if phase == "decode" and w.get("seq_len", 1) != 1:
        raise fail("workload.seq_len", f"a decode step adds one token per sequence, got "
                                       f"{w['seq_len']!r}")
    ctx = w.get("context_len", 0)
    if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx < 0:
        raise fail("workload.context_len", f"must be a non-negative integer, got {ctx!r}")
    if phase == "decode" and ctx < 1:
        raise fail("workload.context_len", "a decode step reads a cache of at least 1 token")
    if w.get("launch", "graph") not in LAUNCHES:
        raise fail("workload.launch", f"{w['launch']!r} is not one of {', '.join(LAUNCHES)}")
    if not isinstance(w.get("overrides", {}), Mapping):
        raise fail("workload.overrides", f"must be a table of DecoderConfig fields, got "
                                         f"{w['overrides']!r}")
    if not isinstance(w["preset"], str):
        raise fail("workload.preset", f"must be a preset name, got {w['preset']!r}")
    plan = w.get("parallel", {})
    known = ("tp", "pp", "ep", "dp", "sequence_parallel", "mc2", "micro_batches")
    if not isinstance(plan, Mapping) or set(plan) - set(known):
        raise fail("workload.parallel", f"must be a table of asim.Parallel fields "
                                        f"({', '.join(known)}), got {plan!r}")
    if "box" in w and not isinstance(w["box"], str):
        raise fail("workload.box", f"must be a topology name (atlas800-a2, ...), got "
                                   f"{w['box']!r}")


__all__ = ["CorpusRow", "DEFINITION_KEYS", "load_corpus", "load_corpus_file", "check_row",
           "corpus_dir", "corpus_files", "FAMILIES", "ROLES", "TIMINGS", "DATA", "METRICS", "UNITS"]
