"""`calibrate()`: fit named chip figures to measurements, judged on a held-out split.

The measurements are corpus rows (a list of `CorpusRow`, or a `ValidationReport`), an msprof
profile (`ProfileComparison`, or the path of an op_summary CSV). They are split with a seeded
shuffle into a training part and a held-out part (`holdout`, a fraction). Each named figure
gets a scale factor, searched in log space by a derivative-free method
(`scipy.optimize.minimize`, Nelder-Mead with an initial simplex of x1.5 steps, factors
clipped to [1/20, 20]): the simulated times are piecewise constant in a figure (tile counts,
whole cycles), so gradients are zero almost everywhere and a simplex that takes finite steps
crosses the steps. The objective is the mean squared log ratio over the training rows
(symmetric: x2 too slow costs as much as x2 too fast). The held-out rows are reported before
and after, as median |error| (|ratio - 1|) and as mean squared log ratio.

The fitted figures' sources read "C: calibrated on rows <ids>" (the training rows), so a
chip file written by `CalibrationResult.write_toml` says where each fitted figure came from.
scipy is optional: install the extra, ``pip install ascendsim[calibrate]``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AscendSimError, ConfigError
from ..hw import Chip, chips, get_chip
from .corpus import CorpusRow
from .validate import LeaveOneSourceOut, loso_table

#: factors are kept within [1/FACTOR_LIMIT, FACTOR_LIMIT] of the starting figure
FACTOR_LIMIT = 20.0
#: the initial simplex steps each factor by this much
INITIAL_STEP = 1.5
#: the source prefix of calibrated figures (the C tag of reference/ascend-hardware.md)
C_PREFIX = "C: calibrated on rows "
#: a fitted figure beyond this factor of the starting figure is implausible and warned
#: about, by the starting figure's confidence tag: a stated, derived, ini or measured figure
#: (S/D/F/M) is a published or measured value of that very chip, so a fit that moves it by
#: more than x2 says the rows do not measure it (a 910 HBM fitted to 455 GB/s against the
#: sourced 1.2 TB/s); a guessed, calibrated or user figure (G/C/U) is allowed x5
PLAUSIBLE_FACTOR = {"S": 2.0, "D": 2.0, "F": 2.0, "M": 2.0, "G": 5.0, "C": 5.0, "U": 5.0}


@dataclass(frozen=True)
class RowFit:
    """One measurement before and after the fit."""

    id: str
    part: str                      # "train" or "held out"
    measured: float
    ratio_before: float            # > 1: the model is slow
    ratio_after: float


@dataclass(frozen=True)
class Measurement:
    """One measured figure and how to simulate it on any chip."""

    id: str
    measured: float
    metric: str                                   # "time" or "throughput"
    simulate: Callable[[Chip], float] = field(compare=False, repr=False)

    def ratio(self, simulated: float) -> float:
        """> 1: the model is slow."""
        return simulated / self.measured if self.metric == "time" else \
            self.measured / simulated


def fittable_params(chip: Chip) -> tuple[str, ...]:
    """Figure keys `calibrate` can fit on this chip: real-valued figures (top-level floats,
    data-path and vector-rate entries present on the chip)."""
    out = []
    for f in fields(chip):
        meta = f.metadata
        if meta.get("kind") == "float":
            if getattr(chip, f.name) is not None:    # an optional figure the chip lacks
                out.append(f.name)
        elif meta.get("group") is not None:
            group = getattr(chip, f.name)
            for sub in fields(meta["group"]):
                if sub.metadata.get("kind") == "float" and getattr(group, sub.name) is not None:
                    out.append(f"{f.name}.{sub.name}")
    return tuple(out)


def scaled_chip(chip: Chip, params: Sequence[str], factors: Sequence[float]) -> Chip:
    """`chip` with each named figure multiplied by its factor (sources unchanged here)."""
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, float]] = {}
    for key, k in zip(params, factors):
        value = chip.figure(key) * float(k)
        head, _, tail = key.partition(".")
        if tail:
            groups.setdefault(head, {})[tail] = value
        else:
            top[head] = value
    return chip.replace(**top, **groups)


@dataclass
class CalibrationResult:
    """The fitted chip and the held-out error before and after."""

    chip: Chip
    base: Chip
    params: dict[str, float]                  # figure key -> fitted value
    factors: dict[str, float]                 # figure key -> fitted / starting value
    train_rows: list[str]
    test_rows: list[str]
    error_before: float                       # median |ratio - 1| on the held-out rows
    error_after: float
    loss_before: float                        # mean squared log ratio on the held-out rows
    loss_after: float
    train_error_before: float
    train_error_after: float
    evaluations: int = 0
    message: str = ""
    #: every measurement's ratio before and after (`row_table`)
    rows: list[RowFit] = field(default_factory=list)
    #: fitted figures implausibly far from a sourced starting figure (`PLAUSIBLE_FACTOR`)
    warnings: list[str] = field(default_factory=list)

    @property
    def worse(self) -> bool:
        """Whether the fit made the held-out median |error| worse (the training one when
        nothing was held out): `write_toml` then refuses unless forced."""
        before, after = self.error_before, self.error_after
        if math.isnan(before) or math.isnan(after):
            before, after = self.train_error_before, self.train_error_after
        return after > before

    def row_table(self) -> str:
        """Each measurement's ratio before and after the fit, held-out rows first."""
        head = ("row", "part", "measured", "ratio before", "ratio after", "|error| change")
        order = sorted(self.rows, key=lambda r: (r.part != "held out", r.id))
        body = [(r.id, r.part, f"{r.measured:.4g}", f"{r.ratio_before:.3f}",
                 f"{r.ratio_after:.3f}",
                 f"{100 * (abs(r.ratio_after - 1) - abs(r.ratio_before - 1)):+.1f} pt")
                for r in order]
        widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
                 for cells in [head, *body]]
        lines.insert(1, "-" * len(lines[0]))
        return "\n".join(lines)

    def summary(self) -> str:
        lines = [f"calibrated {self.base.name}: {len(self.train_rows)} training rows, "
                 f"{len(self.test_rows)} held out ({self.evaluations} evaluations)"]
        for key, value in self.params.items():
            lines.append(f"  {key}: {self.base.figure(key):.6g} -> {value:.6g} "
                         f"(x{self.factors[key]:.3f})")
        lines.append(f"  held-out median |error|: {_pct(self.error_before)} -> "
                     f"{_pct(self.error_after)} (mean squared log ratio "
                     f"{self.loss_before:.4f} -> {self.loss_after:.4f})")
        lines.append(f"  training median |error|: {_pct(self.train_error_before)} -> "
                     f"{_pct(self.train_error_after)}")
        if self.worse:
            lines.append("  the fit made the held-out error worse: write_toml refuses it "
                         "(force=True, CLI --force, writes it anyway)")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def write_toml(self, path: str | Path, description: str | None = None,
                   force: bool = False) -> Path:
        """A chip file loadable by `load_chip`: ``base = "<chip>"`` plus the fitted figures
        (every figure, with its source, when the starting chip is not a built-in one).
        Refused (ConfigError) when the fit made the held-out error worse (`worse`), unless
        force=True."""
        path = Path(path)
        if self.worse and not force:
            held = "held-out" if not math.isnan(self.error_before) else "training"
            before, after = (self.error_before, self.error_after) if held == "held-out" \
                else (self.train_error_before, self.train_error_after)
            raise ConfigError(f"{path}: not written: the fit made the {held} median |error| "
                              f"worse ({_pct(before)} -> {_pct(after)}); pass force=True "
                              f"(CLI --force) to write it anyway")
        builtin = self.base.name in chips() and get_chip(self.base.name) == self.base
        keys = list(self.params) if builtin else list(self.chip.figure_keys())
        desc = description or (f"{self.base.name} calibrated on {len(self.train_rows)} rows "
                               f"(held-out median |error| {_pct(self.error_before)} -> "
                               f"{_pct(self.error_after)})")
        lines = ["# Written by ascendsim.validation.calibrate; fitted figures carry source "
                 "'C: calibrated on rows ...'."]
        if builtin:
            lines.append(f"base = {_toml(self.base.name)}")
        else:
            lines.append(f"arch = {_entry(self.chip, 'arch')}")
        lines.append(f"description = {_toml(desc)}")
        grouped: dict[str, list[str]] = {}
        for key in keys:
            head, _, tail = key.partition(".")
            if tail:
                grouped.setdefault(head, []).append(f"{tail} = {_entry(self.chip, key)}")
            elif key != "arch":
                lines.append(f"{key} = {_entry(self.chip, key)}")
        for head, entries in grouped.items():
            lines += ["", f"[{head}]", *entries]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path


def _entry(chip: Chip, key: str) -> str:
    return f"{{value = {_toml(chip.figure(key))}, source = {_toml(chip.source(key))}}}"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


# ----------------------------------------------------------------------------- inputs
def measurements(source: Any, chip: Chip) -> list[Measurement]:
    """Measurements from corpus rows, a ValidationReport, a ProfileComparison or a CSV path."""
    from .msprof import ProfileComparison, load_msprof, simulate_call
    from .validate import RowRunner, ValidationReport

    if isinstance(source, (str, Path)):
        source = load_msprof(source, chip)
    if isinstance(source, ProfileComparison):
        name = Path(source.path).name
        return [Measurement(f"{name}#{r.index}", r.measured_us, "time",
                            lambda c, call=r.call, d=source.data: simulate_call(
                                call, c, data=d)[0])
                for r in source.rows if r.status == "ok" and r.call is not None]
    if isinstance(source, ValidationReport):
        source = [r.row for r in source.rows if r.status == "ok"]
    rows = list(source)
    bad = [r for r in rows if not isinstance(r, CorpusRow)]
    if bad:
        raise ConfigError(f"calibrate() takes corpus rows, a ValidationReport, a "
                          f"ProfileComparison or an msprof CSV path; got a "
                          f"{type(bad[0]).__name__}")
    return [Measurement(r.id, r.value, r.metric, lambda c, r=r: RowRunner().value(r, c))
            for r in rows if r.role != "pending"]


def split(ids: Sequence[str], holdout: float, seed: int) -> tuple[list[int], list[int]]:
    """Seeded train/test index split; at least one training row, and one held-out row
    when holdout > 0 and there are two or more rows."""
    if not 0 <= holdout < 1:
        raise ConfigError(f"holdout={holdout!r}: expected a fraction in [0, 1)")
    n = len(ids)
    order = np.random.default_rng(seed).permutation(n)
    n_test = min(n - 1, max(1, round(holdout * n))) if holdout > 0 and n > 1 else 0
    test = sorted(int(i) for i in order[:n_test])
    train = sorted(int(i) for i in order[n_test:])
    return train, test


# ----------------------------------------------------------------------------- fitting
def calibrate(rows_or_profile: Any, chip: str | Chip, params: Iterable[str],
              holdout: float = 0.3, seed: int = 0, maxiter: int | None = None,
              progress: Callable[[int, float], None] | None = None) -> CalibrationResult:
    """Fit the named chip figures to measurements (see the module docstring).

    rows_or_profile: corpus rows, a ValidationReport, a ProfileComparison, or an msprof
    op_summary CSV path. params: figure keys (`Chip` field names, group entries as
    "path_bytes_per_cycle.gm_ub"); an unknown one raises ConfigError listing the valid keys.
    holdout: the fraction held out (seeded by `seed`). maxiter: simplex iterations
    (default 60 per parameter). progress(evaluations, training loss) is called per step."""
    try:
        from scipy.optimize import minimize
    except ImportError:
        raise ConfigError("calibrate() needs scipy: pip install 'ascendsim[calibrate]'") \
            from None
    base = get_chip(chip)
    params = list(params)
    valid = fittable_params(base)
    if not params:
        raise ConfigError(f"calibrate(): name at least one figure to fit; valid: "
                          f"{', '.join(valid)}")
    for p in params:
        if p not in valid:
            raise ConfigError(f"calibrate(): unknown or non-fittable figure {p!r} on "
                              f"{base.name}; valid: {', '.join(valid)}")
    if len(set(params)) != len(params):
        raise ConfigError(f"calibrate(): a figure is named twice in {params}")
    items = measurements(rows_or_profile, base)
    if not items:
        raise ConfigError("calibrate(): no measurement that simulates (every row errored, "
                          "was pending, or the input was empty)")
    train_ix, test_ix = split([m.id for m in items], holdout, seed)
    train = [items[i] for i in train_ix]
    test = [items[i] for i in test_ix]

    def log_ratios(subset: list[Measurement], c: Chip) -> list[float]:
        out = []
        for m in subset:
            try:
                out.append(math.log(m.ratio(m.simulate(c))))
            except (AscendSimError, ValueError, ZeroDivisionError) as exc:
                raise AscendSimError(f"calibrate(): row {m.id} does not simulate on "
                                     f"{c.name}: {exc}") from None
        return out

    cache: dict[tuple, float] = {}
    lim = math.log(FACTOR_LIMIT)

    def loss(x: np.ndarray) -> float:
        x = np.clip(x, -lim, lim)
        key = tuple(np.round(x, 6))
        if key not in cache:
            try:
                c = scaled_chip(base, params, np.exp(x))
            except ConfigError:            # a factor that breaks the chip's own rules
                cache[key] = math.inf
            else:
                lr = log_ratios(train, c)
                cache[key] = float(np.mean(np.square(lr)))
            if progress is not None:
                progress(len(cache), cache[key])
        return cache[key]

    n = len(params)
    x0 = np.zeros(n)
    simplex = np.vstack([x0] + [np.eye(n)[i] * math.log(INITIAL_STEP) for i in range(n)])
    res = minimize(loss, x0, method="Nelder-Mead",
                   options={"initial_simplex": simplex, "xatol": 1e-3, "fatol": 1e-7,
                            "maxiter": maxiter or 60 * n})
    best = np.clip(res.x, -lim, lim)
    if loss(best) > loss(x0):          # never return a chip worse on training than the start
        best = x0
    factors = np.exp(best)
    fitted = scaled_chip(base, params, factors)
    ids = ", ".join(m.id for m in train)
    sources = dict(fitted.sources)
    for p in params:
        sources[p] = f"{C_PREFIX}{ids}"
    fitted = dataclasses.replace(fitted, sources=sources)

    def med(lr: list[float]) -> float:
        return statistics.median(abs(math.exp(v) - 1) for v in lr) if lr else math.nan

    def msl(lr: list[float]) -> float:
        return float(np.mean(np.square(lr))) if lr else math.nan

    tb, ta = log_ratios(test, base), log_ratios(test, fitted)
    rb, ra = log_ratios(train, base), log_ratios(train, fitted)
    per_row = [RowFit(m.id, part, m.measured, math.exp(b), math.exp(a))
               for part, subset, before, after in (("train", train, rb, ra),
                                                   ("held out", test, tb, ta))
               for m, b, a in zip(subset, before, after)]
    return CalibrationResult(
        chip=fitted, base=base,
        params={p: fitted.figure(p) for p in params},
        factors={p: float(k) for p, k in zip(params, factors)},
        train_rows=[m.id for m in train], test_rows=[m.id for m in test],
        error_before=med(tb), error_after=med(ta), loss_before=msl(tb), loss_after=msl(ta),
        train_error_before=med(rb), train_error_after=med(ra), evaluations=len(cache),
        message=str(res.message), rows=per_row,
        warnings=implausible(base, {p: fitted.figure(p) for p in params}))


def implausible(base: Chip, fitted: Mapping[str, float]) -> list[str]:
    """A warning per fitted figure beyond `PLAUSIBLE_FACTOR` of the starting chip's figure
    (the bound by the starting figure's confidence tag), naming both and the source."""
    out = []
    for key, value in fitted.items():
        start = float(base.figure(key))
        tag = base.confidence(key)
        bound = min(PLAUSIBLE_FACTOR.get(t, 5.0) for t in tag.split("/"))
        if start > 0 and not 1 / bound <= value / start <= bound:
            out.append(f"{key} = {value:.4g} is x{value / start:.2f} of {base.name}'s "
                       f"{start:.4g} ({base.source(key)[:80]}), beyond the x{bound:g} "
                       f"plausible for a {tag}-tagged figure: the rows may not measure it")
    return out


# ----------------------------------------------------------------------------- leave one out
def leave_one_source_out(rows: Iterable[CorpusRow] | None = None,
                         chip_names: Iterable[str] | None = None,
                         progress: Callable[[str], None] | None = None
                         ) -> list[LeaveOneSourceOut]:
    """For every chip figure tagged C (calibrated) on the built-in chips, and every
    independent source (`CorpusRow.source_repo`) of the calibration rows fitted to it: the
    figure re-fitted without that source and the error on that source's rows (see
    `LeaveOneSourceOut`). Re-fits need scipy; a figure fitted on one source only has no
    other rows, so it is reported as it stands without any fit."""
    from .corpus import load_corpus
    from .validate import summarize, validate_rows

    rows = [r for r in (load_corpus() if rows is None else rows) if r.role == "calibration"]
    out = []
    for name in (chips() if chip_names is None else chip_names):
        chip = get_chip(name)
        if chip.name != name:
            continue                                   # an alias of another chip
        for key in chip.figure_keys():
            if chip.confidence(key) != "C":
                continue
            mine = [r for r in rows if key in r.calibrates and get_chip(r.chip).name == name]
            for src in dict.fromkeys(r.source_repo for r in mine):
                left = [r for r in mine if r.source_repo == src]
                train = [r for r in mine if r.source_repo != src]
                if progress is not None:
                    progress(f"{name} {key} without {src}")
                value_without: float | None = None
                if train:
                    try:
                        fit = calibrate(train, chip, [key], holdout=0)
                    except ConfigError as exc:             # scipy missing
                        without, alt = f"not re-fitted ({exc})", chip
                    else:
                        value_without = fit.params[key]
                        without, alt = f"re-fitted on {len(train)} rows", fit.chip
                elif getattr(chip, key, 0) is not None and _optional(chip, key):
                    without, alt = "absent (no other source)", chip.replace(**{key: None})
                else:
                    without, alt = "as given (no other source; not optional)", chip
                err = [summarize([r.ratio for r in validate_rows(left, c).rows
                                  if r.ratio is not None]).median_abs_error
                       for c in (chip, alt)]
                out.append(LeaveOneSourceOut(name, key, float(chip.figure(key)), src,
                                             tuple(r.id for r in left), value_without,
                                             without, err[0], err[1]))
    return out


def _optional(chip: Chip, key: str) -> bool:
    """A top-level figure whose field may be None (an optional chip figure)."""
    f = {f.name: f for f in fields(chip)}.get(key)
    return f is not None and "None" in str(f.type)


def cited_rows(source: str) -> list[str]:
    """The row ids a "C: calibrated on rows a, b, c" source cites ([] for other tags)."""
    if not source.startswith(C_PREFIX):
        return []
    text = source[len(C_PREFIX):].split(";")[0]
    return [t.strip() for t in text.split(",") if t.strip()]


__all__ = ["calibrate", "CalibrationResult", "RowFit", "implausible", "PLAUSIBLE_FACTOR",
           "Measurement", "fittable_params", "scaled_chip",
           "measurements", "split", "cited_rows", "C_PREFIX", "leave_one_source_out",
           "LeaveOneSourceOut", "loso_table"]
