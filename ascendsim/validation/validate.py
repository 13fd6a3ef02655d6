"""`validate()`: simulate every corpus row the way it was measured and report the error.

Definitions (issue 10, used everywhere): a row's **ratio** is simulated / measured for times
and measured / simulated for throughputs, so > 1 always means "the model is slow"; its
**error** is ratio - 1; a report's **median |error|** is the median of |ratio - 1| over its
validation rows (a fraction); its **bias** is the geometric mean of their ratios. Once the
validation set is frozen (`ascendsim.validation.frozen`), those figures cover the frozen rows
as defined today; validation rows added later are summarised apart ("added since the
freeze"), the frozen rows as they were defined when frozen beside them (`as_frozen`), all
validation rows together (`all_validation`), the rows' ratios at first sight
(`first_sight_median`, from their `first_ratio`), and every independent source apart
(`by_source`). `leave_one_source_out()` adds, on demand, each calibrated figure re-fitted
without each of its sources.

How each timing is simulated (`simulate_row`):

- ``msprof_kernel``: the graph as given (fusion=False), sink mode; the kernel time of the
  op's own task(s) (start of its first instruction to its end: no launch). msprof times a
  kernel inside a benchmark loop, so a warm row runs the op three times back to back and
  measures the last call (it meets the previous call's dirty output in L2: the loop's steady
  state; `workloads.loop_calls`). Format
  conversions the lowering inserts (TransData) are their own tasks, as msprof lists them, and
  are not counted, except in a row whose ``cann_op`` is an aclnn chain (Addmv,
  `workloads.CANN_CHAINS`): there every kernel the call launches counts (the device events
  around one call bracket them all). A workload with ``measure = "pipe:P"`` counts the busy
  cycles of pipe P on the first core instead (instruction-level microbenchmarks, msKPP).
- ``eager_call``: the graph as given, launched op by op from the host, every task the model
  launches for the call (TransData included). A time (one synchronised call) runs in
  mode="eager" (each task launched after the previous one finished and the host
  synchronised) and is the span from the host launch of the call's first task to the end of
  the host's synchronisation after its last task. A throughput (a loop of calls, e.g. TFLOPS
  of torch.matmul in a loop) runs in mode="host" (launches run ahead of the device) and takes
  the loop's steady state, max(the call's host launches, its device-side dispatches and
  kernels back to back), the call being the last of three back to back on warm data (it
  meets the previous call's dirty output in L2, as every call of the loop does). The floor of
  one synchronised one-task call is its host launch + `sink_launch_us` (2.0 us, a
  placeholder) + the kernel + `host_sync_us`, the completion path from the task's end to
  the return of aclrtSynchronizeStream, which CANN's runtime takes two ways: on HWTS chips
  (910, 310, 310P) an event task recorded behind the last task and an interrupt-woken wait,
  14.4 us (POCKETLLM's memset + synchronize round trip on the first-generation 910); on STARS
  chips (910B) SQ-head polling, 2.6 us; each inserted TransData adds its own task. A chip
  whose file gives `eager_op_launch_us` (a framework's eager op call: torch_npu's Python,
  ATen dispatch and aclnn calls; the 910B's: torch.add's measured 12.142 us host enqueue)
  launches the op rows' tasks at that cost instead of `host_launch_us` (the AscendCL
  enqueue, 10.5 us), except rows whose own host code launches the kernel through AscendCL
  (``host = "acl"``) and ``measure = "launch"`` rows, which time the AscendCL enqueue alone;
  a call whose host side differs from a plain op's
  takes its own figure where the chip gives one (`EAGER_LAUNCH_FIGURES`: torch_npu's
  npu_fused_infer_attention_score and npu_fusion_attention, `eager_fused_attention_launch_us`).
  Model rows timed as eager calls run op by op in mode="host" (one step, not synchronised per op).
  ``measure = "launch"`` counts the host launch lane only (an enqueue-cost measurement).
- ``graph_step`` / ``throughput``: the whole step with the default fusions (fusion=True), the
  graph sunk on the device (mode="sink", `sink_launch_us` per task); throughputs are
  batch (samples, images) or batch x seq_len (tokens) per step time, or FLOP / step time.
- Op rows with ``loop = true`` (a time averaged over a loop of back-to-back calls, event
  timing around N calls) run as an eager throughput does (mode="host", the loop's steady
  state per call, the last of three calls on warm data) and report that time.
- Decoder rows (``kind = "decoder"``): the measured step (prefill or one decode token) of
  `ascendsim.models.decoder`, fused with the default passes; ``launch = "graph"`` sinks it
  (mode="sink"), ``launch = "eager"`` launches the fused graph op by op from the host
  (mode="host", launches running ahead of the device), as llama.cpp's CANN backend or
  PyTorch eager do. tokens/s counts the step's tokens (batch x prompt in prefill, batch in
  decode); a time is the step's time (a decode row's TPOT).
- Warm vs cold L2 (the row's `data`): warm (and unknown) op rows produce each input with a
  warm-up task first, so the simulated L2 cache holds what of it fits when the op reads it;
  looped warm rows (msprof_kernel, looped eager_call) measure the last of three calls (the
  steady state: it meets the previous call's dirty output); cold rows read graph inputs from
  HBM (first read of each byte misses) and run the op once. Model rows run as a whole step:
  the model's own L2 state decides.
  DMA probe rows give the L2 miss fraction explicitly (msKPP curves assume hits).

Rows that fail to build or simulate get status "error" with the reason (the run goes on);
pending rows are reported apart (status "pending") and never counted. A row's verdict says
more than whether it simulated: "ok" within `OFF_BOUND` (|error| <= 25 %), "off" beyond it,
"failed", "pending". `validate(chip=)` keeps the rows measured on that chip's generation
(`rows_of_chip`), each still simulated on its own chip; `as_chip=` is the what-if that runs
them on another chip. Every simulation uses
detail="block" unless an op row asks for "tile", and identical graphs are built and simulated
once per run.
"""

from __future__ import annotations

import csv
import math
import random
import statistics
import textwrap
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..api import simulate
from ..errors import AscendSimError, ConfigError
from ..hw import Chip, get_chip
from ..hw.box import Box
from ..models.decoder import decoder, decoder_config
from ..models.parallel import Parallel
from ..plan import simulate_parallel
from ..report.confidence import GENERATIONS, generation, size_band, size_bands
from .corpus import FAMILIES, UNITS, CorpusRow, load_corpus
from .frozen import load_frozen
from .workloads import (
    OP_NODE,
    PRECISION_DTYPES,
    build_op_graph,
    decoder_plan,
    decoder_tokens,
    icache_start,
    is_cann_fusion,
    is_earlier_call,
    measured_nodes,
    measures_whole_call,
    model_plan,
    workload_key,
)

#: the quick subset: a fixed list of row ids over several families, < 30 s together
QUICK_IDS = (
    # validation rows: GEMM (fp16 and fp32 eager loops, a GEMV kernel), DMA, a whole model
    "pub-torchperf-910b2-gemm-fp16-2048",
    "pub-torchperf-910b2-gemm-fp16-4096",
    "gemm-910b2-0002",
    "gemm-910b-0006",
    "gemm-910b-0011",
    "pub-mskpp-910b3-mmad-16x16x2000",
    "pub-mskpp-910b3-dma-gm-ub-16kb",
    "pub-mskpp-910b3-dma-gm-l0a-64kb",
    "pub-mskpp-910b3-dma-gm-l0b-4kb",
    "infer-310-0001",
    # calibration rows (reported apart)
    "pub-mskpp-910b1-mmad-32x16x256",
    "pub-mskpp-910b1-dma-gm-l1-16kb",
    "pub-mskpp-910b1-vec-vadd-fp16",
    "pub-pocketllm-910-aclnn-add-enqueue",
)

#: the generation of a row whose chip no `GENERATIONS` entry names
UNKNOWN_GENERATION = "unknown"
STATUSES = ("ok", "error", "pending")
#: a row whose |ratio - 1| exceeds this is "off" (the outer band of the plot, twice the
#: corpus's median |error| of about 15 %): it simulated, and the model misses it
OFF_BOUND = 0.25
#: what a row's verdict says: within OFF_BOUND, beyond it, did not simulate, not run
VERDICTS = ("ok", "off", "failed", "pending")


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class ValidationRecord:
    """One row's outcome: the corpus row's fields (`id`, `family`, `value`, `unit`, ...,
    reachable as attributes) plus what the simulator gave."""

    row: CorpusRow
    sim_chip: str
    simulated: float | None        # in the row's unit
    status: str                    # "ok", "error" or "pending"
    reason: str = ""
    wall_s: float = 0.0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "row":
            raise AttributeError(name)
        return getattr(self.row, name)

    @property
    def measured(self) -> float:
        return self.row.value

    @property
    def ratio(self) -> float | None:
        """> 1: the model is slow (simulated/measured for times, inverse for throughputs)."""
        if self.status != "ok" or not self.simulated:
            return None
        if self.row.metric == "time":
            return self.simulated / self.row.value
        return self.row.value / self.simulated

    @property
    def error(self) -> float | None:
        r = self.ratio
        return None if r is None else r - 1.0

    @property
    def verdict(self) -> str:
        """"ok" (|error| <= `OFF_BOUND`), "off" (beyond it), "failed" (did not simulate) or
        "pending" (not run): more than whether the row simulated."""
        if self.status == "pending":
            return "pending"
        err = self.error
        if err is None:
            return "failed"
        return "off" if abs(err) > OFF_BOUND else "ok"

    @property
    def chip_name(self) -> str:
        """The row's chip in one naming: the built-in chip it names (aliases resolved:
        ascend910b2 is ascend910b), as written for a chip the model lacks."""
        try:
            return get_chip(self.row.chip).name
        except AscendSimError:
            return self.row.chip


@dataclass(frozen=True)
class FamilyStats:
    n: int
    median_abs_error: float
    median_ratio: float
    bias: float


@dataclass(frozen=True)
class SourceStats:
    """One independent source's rows: its validation rows' stats, its calibration rows'
    stats, and how many source tables it gives."""

    source: str
    validation: FamilyStats
    calibration: FamilyStats
    tables: int


def summarize(ratios: Sequence[float]) -> FamilyStats:
    """n, median |ratio - 1|, median ratio and geometric-mean ratio of some ratios."""
    if not ratios:
        return FamilyStats(0, math.nan, math.nan, math.nan)
    return FamilyStats(len(ratios), statistics.median(abs(r - 1) for r in ratios),
                       statistics.median(ratios),
                       math.exp(statistics.fmean(math.log(r) for r in ratios)))


@dataclass(frozen=True)
class LeaveOneSourceOut:
    """One calibrated figure with one of its sources left out of the fit.

    value: the figure as the chip gives it (fitted on every source). value_without: the
    figure re-fitted on the other sources' rows; None when no row of another source fits
    it (then the figure stands as `without`: absent for an optional figure, else as given).
    error_with / error_without: median |ratio - 1| on the left-out source's rows of the
    figure with the figure as given and as it stands without that source."""

    chip: str
    figure: str
    value: float
    source: str
    rows: tuple[str, ...]
    value_without: float | None
    without: str
    error_with: float
    error_without: float


def loso_table(records: Sequence[LeaveOneSourceOut]) -> list[str]:
    """Printable lines of leave-one-source-out records."""
    head = ("chip", "figure", "value", "left-out source", "rows", "value without",
            "error with", "error without")
    body = [(r.chip, r.figure, f"{r.value:.4g}", r.source, len(r.rows),
             f"{r.value_without:.4g}" if r.value_without is not None else r.without,
             _pct(r.error_with), _pct(r.error_without)) for r in records]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return ["leave one source out (calibrated figures; error = median |error| on the "
            "left-out source's calibration rows)", fmt(head),
            "-" * (sum(widths) + 2 * (len(widths) - 1)), *map(fmt, body)]


@dataclass
class ValidationReport:
    """Every row's outcome; summaries over the validation rows (roles apart)."""

    rows: list[ValidationRecord]
    chip: str | None = None            # the chip every row ran on, or None (each its own)
    wall_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    #: ids of the frozen validation set (`ascendsim.validation.frozen`); None: nothing
    #: frozen yet, every validation row counts
    frozen: frozenset[str] | None = None
    #: the frozen rows of this run as they were defined when frozen (frozen.toml's
    #: [[frozen_row]] tables), simulated under today's model; rows whose definition did not
    #: change share today's record
    as_frozen: list[ValidationRecord] = field(default_factory=list)
    #: leave-one-source-out records of the calibrated (C) chip figures, when computed
    #: (`leave_one_source_out()`; not part of a plain validate() run)
    loso: list[Any] | None = None

    def is_new(self, rec: ValidationRecord) -> bool:
        """A validation row added after the validation set was frozen."""
        return self.frozen is not None and rec.role == "validation" and rec.id not in self.frozen

    def ratios(self, role: str = "validation", family: str | None = None,
               new: bool = False) -> list[float]:
        """Ratios of the rows that simulated, of one role (and family); validation rows are
        the frozen ones, or with new=True those added after freezing."""
        return [r.ratio for r in self.rows if r.status == "ok" and r.role == role
                and (family is None or r.family == family) and r.ratio is not None
                and self.is_new(r) == new]

    @property
    def median_abs_error(self) -> float:
        """Median |ratio - 1| over the validation rows that simulated (NaN if none)."""
        return summarize(self.ratios()).median_abs_error

    @property
    def bias(self) -> float:
        """Geometric mean of the validation rows' ratios (> 1: the model is slow overall)."""
        return summarize(self.ratios()).bias

    @property
    def calibration(self) -> FamilyStats:
        """The calibration rows' summary (how well the model's form fits what it was fitted
        to; not an independent error)."""
        return summarize(self.ratios("calibration"))

    @property
    def frozen_as_frozen(self) -> FamilyStats:
        """The frozen rows as they were defined when frozen, under today's model (beside
        `median_abs_error`, the same rows as defined today)."""
        return summarize([r.ratio for r in self.as_frozen if r.ratio is not None])

    @property
    def new(self) -> FamilyStats:
        """The validation rows added after the set was frozen."""
        return summarize(self.ratios(new=True))

    @property
    def all_validation(self) -> FamilyStats:
        """Every validation row of the run as defined today, frozen and new together."""
        return summarize(self.ratios() + self.ratios(new=True))

    @property
    def first_sight(self) -> FamilyStats:
        """The rows' ratios at first sight (`first_ratio`: under the model of the commit that
        added the row, before any model change it motivated), over the rows of the run that
        record one, of any role but pending (a row is unseen by every fit at first sight).
        Rows older than the rule have none and are not counted."""
        return summarize([r.row.first_ratio for r in self.rows
                          if r.role != "pending" and r.row.first_ratio is not None])

    @property
    def first_sight_by_family(self) -> dict[str, tuple[FamilyStats, FamilyStats]]:
        """family -> (its rows' ratios at first sight, the same rows' ratios today), over the
        rows counted by `first_sight` that simulate today (families in corpus order). The
        pair shows how far the model has moved on rows since it first saw them: the gap is
        what the rows taught it, which the next workload does not get."""
        out: dict[str, tuple[list[float], list[float]]] = {}
        for r in self.rows:
            if r.role == "pending" or r.row.first_ratio is None or r.ratio is None:
                continue
            first, today = out.setdefault(r.family, ([], []))
            first.append(r.row.first_ratio)
            today.append(r.ratio)
        return {f: (summarize(a), summarize(b)) for f, (a, b) in out.items()}

    @property
    def by_size_band(self) -> dict[tuple[str, str], FamilyStats]:
        """(generation, kernel-duration band) -> stats over the msprof kernel-time validation
        rows that simulated (frozen and added, as defined today), banded by their simulated
        kernel time (`ascendsim.report.confidence.size_band`), whatever their family: a
        kernel's error depends on its size more than its family's median says. Generations in
        name order, bands smallest first."""
        groups: dict[tuple[str, str], list[float]] = {}
        for r in self.rows:
            if (r.role != "validation" or r.ratio is None or r.row.timing != "msprof_kernel"
                    or r.row.metric != "time"):
                continue
            us = r.simulated * UNITS[r.row.unit][1] * 1e6
            gen = generation(r.row.chip) or UNKNOWN_GENERATION
            groups.setdefault((gen, size_band(us)), []).append(r.ratio)
        order = size_bands()
        keys = sorted(groups, key=lambda k: (k[0], order.index(k[1])))
        return {k: summarize(groups[k]) for k in keys}

    @property
    def first_sight_median(self) -> float:
        """Median |first_ratio - 1| over the rows that record a first sight (NaN if none):
        how far the model was from rows it had not yet seen, the project's own measure of
        generalisation (see `first_sight`)."""
        return self.first_sight.median_abs_error

    @property
    def by_source(self) -> dict[str, SourceStats]:
        """Independent source (the repository or site of a row's `source_table`) -> its
        validation rows (frozen and new, as defined today) and calibration rows, sources in
        corpus order."""
        out: dict[str, SourceStats] = {}
        for src in dict.fromkeys(r.row.source_repo for r in self.rows if r.role != "pending"):
            mine = [r for r in self.rows if r.row.source_repo == src and r.status == "ok"
                    and r.ratio is not None]
            val = summarize([r.ratio for r in mine if r.role == "validation"])
            cal = summarize([r.ratio for r in mine if r.role == "calibration"])
            tables = {r.row.source_table for r in self.rows if r.row.source_repo == src}
            out[src] = SourceStats(src, val, cal, len(tables))
        return out

    @property
    def by_family(self) -> dict[str, FamilyStats]:
        """family -> stats over its validation rows (families with any, in corpus order)."""
        fams = dict.fromkeys(r.family for r in self.rows
                             if r.role == "validation" and not self.is_new(r))
        return {f: summarize(self.ratios("validation", f)) for f in fams}

    @property
    def by_family_new(self) -> dict[str, FamilyStats]:
        """family -> stats over its validation rows added since the set was frozen (families
        with any such row, in corpus order); empty when nothing is frozen."""
        fams = dict.fromkeys(r.family for r in self.rows if self.is_new(r))
        return {f: summarize(self.ratios("validation", f, new=True)) for f in fams}

    @property
    def by_family_all(self) -> dict[str, FamilyStats]:
        """family -> stats over all its validation rows, frozen and added, as defined today
        (families in corpus order): the per-family view of `all_validation`."""
        fams = dict.fromkeys(r.family for r in self.rows if r.role == "validation")
        return {f: summarize(self.ratios("validation", f) + self.ratios("validation", f,
                                                                          new=True))
                for f in fams}

    def count(self, status: str, role: str | None = None) -> int:
        return sum(r.status == status and (role is None or r.role == role) for r in self.rows)

    def verdicts(self, role: str | None = None) -> dict[str, int]:
        """How many rows (of a role) have each verdict (`VERDICTS`)."""
        return {v: sum(r.verdict == v and (role is None or r.role == role) for r in self.rows)
                for v in VERDICTS}

    def table(self, rows: bool = True) -> str:
        """A printable report: per row (roles apart), per family, overall."""
        out: list[str] = []
        where = f"run on {self.chip} (what-if)" if self.chip else "each row on its own chip"
        if self.meta.get("chip_filter"):
            where = f"rows measured on {self.meta['chip_filter']}'s generation, {where}"
        if rows:
            head = ("id", "family", "chip", "simulated on", "timing", "measured", "simulated",
                    "ratio", "status")
            for role in ("validation", "calibration"):
                body = [(r.id, r.family, r.chip_name, r.sim_chip, r.timing,
                         f"{_fmt(r.value)} {r.unit}",
                         "-" if r.simulated is None else f"{_fmt(r.simulated)} {r.unit}",
                         "-" if r.ratio is None else f"{r.ratio:.2f}",
                         f"failed: {r.reason}" if r.verdict == "failed" else r.verdict)
                        for r in self.rows if r.role == role]
                if body:
                    out += [f"{role} rows ({len(body)})", *_grid(head, body), ""]
            pend = [r for r in self.rows if r.status == "pending"]
            if pend:
                out.append(f"pending rows ({len(pend)}, not counted)")
                out += [f"  {r.id} [{r.family}, {r.chip_name}]: {r.pending_reason}"
                        for r in pend]
                out.append("")
        head = ("family", "n", "median |error|", "median ratio", "bias")

        def line(label: str, st: FamilyStats) -> tuple:
            return (label, st.n, _pct(st.median_abs_error), _num(st.median_ratio),
                    _num(st.bias))

        body = [line(f, st) for f, st in self.by_family.items()]
        frozen = self.frozen is not None
        allv = summarize(self.ratios())
        if frozen:
            body.append(line("frozen validation rows, as defined today", allv))
            body.append(line("frozen validation rows, as frozen", self.frozen_as_frozen))
            body.append(line("validation rows added since the freeze", self.new))
            body.append(line("all validation rows (frozen + added)", self.all_validation))
        else:
            body.append(line("all validation rows", allv))
        body.append(line("calibration rows (fitted; not an error)", self.calibration))
        body.append(line("first sight (rows with a first_ratio, not pending)", self.first_sight))
        what = "frozen validation rows as defined today" if frozen else "validation rows"
        out += [f"by family ({what}, {where}; ratio > 1: the model is slow)",
                *_grid(head, body), ""]
        new_fams = self.by_family_new
        if new_fams:
            body = [line(f, st) for f, st in new_fams.items()]
            out += ["added since the freeze, by family (validation rows added after the set "
                    "was frozen; not in the family lines above)", *_grid(head, body), ""]
            body = [line(f, st) for f, st in self.by_family_all.items()]
            out += ["all validation rows by family (frozen and added, as defined today)",
                    *_grid(head, body), ""]
        seen = self.first_sight_by_family
        if seen:
            fhead = ("family", "n", "first sight |error|", "first sight ratio",
                     "today |error|", "today ratio")
            fbody = [(f, a.n, _pct(a.median_abs_error), _num(a.median_ratio),
                      _pct(b.median_abs_error), _num(b.median_ratio))
                     for f, (a, b) in seen.items()]
            out += ["first sight by family (rows with a first_ratio, any role but pending, "
                    "that simulate today: their median at first sight and the same rows "
                    "today)", *_grid(fhead, fbody), ""]
        bands = self.by_size_band
        if bands:
            bhead = ("generation", "simulated kernel time", "n", "median |error|",
                     "median ratio")
            bbody = [(gen, band, st.n, _pct(st.median_abs_error), _num(st.median_ratio))
                     for (gen, band), st in bands.items()]
            out += ["by simulated kernel time (msprof kernel-time validation rows, frozen and "
                    "added, whatever their family)", *_grid(bhead, bbody), ""]
        sources = self.by_source
        if sources:
            shead = ("source (repository or site)", "tables", "validation n", "median |error|",
                     "bias", "calibration n")
            sbody = [(src, st.tables, st.validation.n, _pct(st.validation.median_abs_error),
                      _num(st.validation.bias), st.calibration.n)
                     for src, st in sources.items()]
            out += ["by source (every validation row of the run, frozen and added, as defined "
                    "today; calibration rows counted apart)", *_grid(shead, sbody), ""]
        if self.loso:
            out += [*loso_table(self.loso), ""]
        errors = self.count("error")
        fs = self.first_sight
        fa = self.frozen_as_frozen
        parts = [f"median |error| on validation rows: {_pct(self.median_abs_error)} "
                 f"(n = {allv.n}{', frozen set as defined today' if frozen else ''}), "
                 f"bias {_num(self.bias)}"]
        if frozen:
            av = self.all_validation
            failed = sum(r.ratio is None for r in self.as_frozen)
            parts.append(f"frozen set as frozen {_pct(fa.median_abs_error)} (n = {fa.n}"
                         f"{f'; {failed} do not simulate as frozen' if failed else ''}); "
                         f"all validation rows {_pct(av.median_abs_error)} (n = {av.n})")
        parts.append(f"first sight {_pct(fs.median_abs_error)} (n = {fs.n} rows with a "
                     f"first_ratio)")
        v = self.verdicts()
        out.append("; ".join(parts) + f"; rows {v['ok']} ok, {v['off']} off (|error| > "
                   f"{OFF_BOUND:.0%}), {errors} failed to simulate, "
                   f"{self.count('pending')} pending; {self.wall_s:.1f} s")
        return "\n".join(out)

    def to_csv(self, path: str | Path) -> None:
        """One line per row: the row's fields, then its chip in one naming (`chip_name`), the
        chip that simulated it, simulated, ratio, error, status, verdict, reason."""
        names = [f.name for f in fields(CorpusRow) if f.name not in ("workload", "file")]
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow([*names, "workload", "chip_name", "sim_chip", "simulated", "ratio",
                        "error", "status", "verdict", "reason"])
            for r in self.rows:
                vals = [getattr(r.row, n) for n in names]
                vals = [";".join(v) if isinstance(v, tuple) else v for v in vals]
                w.writerow([*vals, r.row.describe(), r.chip_name, r.sim_chip,
                            "" if r.simulated is None else f"{r.simulated:.6g}",
                            "" if r.ratio is None else f"{r.ratio:.4f}",
                            "" if r.error is None else f"{r.error:.4f}", r.status, r.verdict,
                            r.reason])

    def plot(self, path: str | Path | None = None, roles: Iterable[str] = ("validation",
                                                                             "calibration")):
        """Each row's ratio (simulated/measured for times, measured/simulated for
        throughputs: > 1 = the model is slow; a unitless figure, so ms, TFLOPS, GB/s and
        tokens/s rows share the axis), one column per family, on a log axis with the +-10 %
        and +-`OFF_BOUND` bands; calibration rows hollow, "off" rows named. Returns the
        matplotlib Figure; saves it when `path` is given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        roles = tuple(roles)
        pts = [r for r in self.rows if r.role in roles and r.ratio is not None]
        fams = [f for f in FAMILIES if any(r.family == f for r in pts)]
        fig, ax = plt.subplots(figsize=(max(6.5, 0.55 * len(fams) + 2.5), 5.5))
        ax.axhline(1.0, color="black", lw=1)
        for band, alpha in ((OFF_BOUND, 0.10), (0.10, 0.22)):
            ax.axhspan(1 - band, 1 + band, color="tab:green", alpha=alpha, lw=0,
                       label=f"±{band:.0%}")
        palette = [*plt.get_cmap("tab10").colors, *plt.get_cmap("tab20").colors[1:8:2]]
        rng = random.Random(0)           # a fixed jitter: the same figure every run
        for i, fam in enumerate(fams):
            color = palette[FAMILIES.index(fam) % len(palette)]
            for role, face in (("validation", True), ("calibration", False)):
                sel = [r for r in pts if r.family == fam and r.role == role]
                xs = [i + rng.uniform(-0.25, 0.25) for _ in sel]
                ax.scatter(xs, [r.ratio for r in sel], s=24, edgecolors=color,
                           facecolors=color if face else "none")
                for x, r in zip(xs, sel):
                    if r.verdict == "off":
                        ax.annotate(r.id, (x, r.ratio), fontsize=5, alpha=0.7,
                                    xytext=(3, 0), textcoords="offset points")
        ax.set_yscale("log")
        ax.set_xticks(range(len(fams)))
        ax.set_xticklabels(fams, rotation=45, ha="right", fontsize=8)
        ax.set_xlim(-0.7, max(len(fams), 1) - 0.3)
        ax.set_ylabel("ratio (> 1: the model is slow)")
        chips = self.chip or ", ".join(sorted({r.sim_chip for r in pts})) or "-"
        title = textwrap.fill(f"ascendsim vs measured, simulated on {chips}", 80)
        ax.set_title(f"{title}\nmedian |error| (validation rows) {_pct(self.median_abs_error)}"
                     f", bias {_num(self.bias)}; hollow = calibration rows", fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(True, axis="y", which="both", alpha=0.2)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def _grid(head: tuple, body: list[tuple]) -> list[str]:
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return [line(head), "-" * (sum(widths) + 2 * (len(widths) - 1)), *map(line, body)]


# ----------------------------------------------------------------------------- simulation
class RowRunner:
    """Builds and simulates rows, caching graphs and simulated values for one run."""

    def __init__(self) -> None:
        self.values: dict[tuple, float] = {}
        self.results: dict[tuple, Any] = {}
        self.serving_runs: dict[tuple, Any] = {}

    def run(self, graph, chip: Chip, fusion: bool, mode: str, detail: str,
            kernel_build: str | None = None, icache: str = "cold"):
        key = (id(graph), chip, fusion, mode, detail, kernel_build, icache)
        if key not in self.results:
            self.results[key] = simulate(graph, chip, fusion=fusion, mode=mode, detail=detail,
                                         kernel_build=kernel_build, icache=icache)
        return self.results[key]

    def value(self, row: CorpusRow, chip: Chip) -> float:
        """The simulated figure of `row` on `chip`, in the row's unit."""
        key = (workload_key(row), chip, row.timing, row.metric, row.unit)
        if key not in self.values:
            self.values[key] = self._value(row, chip)
        return self.values[key]

    def _value(self, row: CorpusRow, chip: Chip) -> float:
        kind = row.workload.get("kind", "op")
        cores = row.workload.get("cores")
        if cores:
            chip = chip.replace(ai_cores=min(cores, chip.ai_cores),
                                aiv_cores=0 if chip.coupled else min(cores, chip.aiv_cores))
        if (kind == "op" and row.timing == "eager_call"
                and row.workload.get("measure", "task") != "launch"
                and row.workload.get("host", "framework") == "framework"):
            launch = eager_launch_us(chip, row.workload.get("cann_op", ""))
            if launch is not None:
                chip = chip.replace(host_launch_us=launch)
        seconds, work = _KINDS[kind](self, row, chip)
        return _to_unit(row, seconds, work)

    # -- kinds: each returns (seconds, work) where work maps a unit family to its amount
    def _op(self, row: CorpusRow, chip: Chip) -> tuple[float, dict[str, float]]:
        graph = build_op_graph(row)
        w = row.workload
        measure = w.get("measure", "task")
        detail = w.get("detail", "block")
        fused = row.timing in ("graph_step", "throughput") or is_cann_fusion(row)
        res = self.run(graph, chip, fused, _op_mode(row, measure), detail, w.get("kernels"),
                       icache_start(row))
        trace = res.trace
        nodes = measured_nodes(row)
        mine = [t for t in trace.tasks if t.op_name in nodes or nodes.intersection(t.fused_ops)]
        if not mine:
            raise AscendSimError(f"no task ran the op (tasks: "
                                 f"{', '.join(t.op_name for t in trace.tasks)})")
        call = [t for t in trace.tasks if not t.op_name.startswith("warm_")
                and not any(f.startswith("warm_") for f in t.fused_ops)
                and not is_earlier_call(t.op_name)
                and not any(is_earlier_call(f) for f in t.fused_ops)]
        call_ids = {t.task_id for t in call}
        host = [iv for iv in trace.intervals if iv.pipe == "HOST" and iv.task_id in call_ids]
        if measure == "launch":
            ids = {t.task_id for t in mine}
            cycles = sum(iv.duration for iv in host if iv.kind == "launch" and iv.task_id in ids)
        elif measure.startswith("pipe:"):
            pipe = measure[5:]
            ids = {t.task_id for t in mine}
            ivs = [iv for iv in trace.intervals if iv.task_id in ids and iv.pipe == pipe]
            if not ivs:
                raise AscendSimError(f"the op's task has no {pipe} pipe activity")
            first = min(iv.core for iv in ivs)
            cycles = sum(iv.duration for iv in ivs if iv.core == first)
        elif row.timing == "msprof_kernel":
            # an aclnn chain (Addmv): every kernel of the call, TransData included
            cycles = sum(t.duration for t in (call if measures_whole_call(row) else mine))
        elif row.timing == "eager_call" and (row.metric == "throughput" or w.get("loop")):
            # a loop of calls measured as a rate: launches run ahead of the device, so each
            # call costs the slower of its host launches and its dispatches + kernels
            launches = sum(iv.duration for iv in host if iv.kind == "launch")
            dispatch = chip.cycles(chip.sink_launch_us * 1e-6)
            cycles = max(launches, sum(t.duration + dispatch for t in call))
        else:   # one synchronised eager call, or a graph step: the call's whole span
            end = max([t.end for t in call] + [iv.end for iv in host])
            cycles = end - min(t.launch_start for t in call)
        graph_op = graph.node(OP_NODE)
        counted = (graph_op.inputs[:1] if w.get("count_bytes") == "first_input"
                   else (*graph_op.inputs, *graph_op.outputs))
        nbytes = sum(_bytes(graph.values[v]) for v in counted if v)
        flops = sum(t.flops for t in mine)
        return chip.seconds(cycles), {"flop": flops, "byte": nbytes}

    def _model(self, row: CorpusRow, chip: Chip) -> tuple[float, dict[str, float]]:
        plan = model_plan(row)
        fused = row.timing != "eager_call"
        mode = "host" if row.timing == "eager_call" else "sink"   # a model step, op by op
        cycles, flops = self._extrapolate(plan, chip, fused, mode)
        w = row.workload
        batch = w["batch"]
        work = {"sample": batch, "flop": flops,
                "token": batch * w.get("seq_len", 1)}
        return chip.seconds(cycles), work

    def _decoder(self, row: CorpusRow, chip: Chip) -> tuple[float, dict[str, float]]:
        mode = "host" if row.workload.get("launch", "graph") == "eager" else "sink"
        if "parallel" in row.workload:
            return self._decoder_plan(row, chip, mode)
        plan = decoder_plan(row)
        cycles, flops = self._extrapolate(plan, chip, True, mode)
        return chip.seconds(cycles), {"sample": row.workload["batch"], "flop": flops,
                                      "token": decoder_tokens(row)}

    def _decoder_plan(self, row: CorpusRow, chip: Chip, mode: str
                      ) -> tuple[float, dict[str, float]]:
        """A decoder row run across chips: `workload.parallel` (asim.Parallel fields) on a
        Box of the row's chip and `workload.box` (default atlas800-a2), as `ascendsim.plan`
        times it (its layers extrapolated from the simulated ones)."""
        w = row.workload
        cfg = decoder_config(w["preset"], **dict(w.get("overrides", {})))
        precision = str(w.get("precision", "fp16")).lower()
        phase = w.get("phase", "prefill")
        model = decoder(cfg, batch=int(w["batch"]), phase=phase,
                        seq_len=int(w["seq_len"]) if phase == "prefill" else None,
                        context_len=int(w.get("context_len", 0)),
                        dtype=PRECISION_DTYPES[precision],
                        parallel=Parallel(**dict(w["parallel"])))
        box = Box(chip, model.world, w.get("box", "atlas800-a2"))
        res = simulate_parallel(model, box=box, fusion=True, detail="block", mode=mode)
        flops = sum(t.flops for s in res.stages for t in s.result.trace.tasks)
        return res.time_us * 1e-6, {"sample": w["batch"], "flop": flops,
                                     "token": decoder_tokens(row)}

    def _serving(self, row: CorpusRow, chip: Chip) -> tuple[float, dict[str, float]]:
        """A serving run as the row's benchmark ran it (`serving.serve`): a throughput row is
        the run's output tokens or requests over its duration, a percentile row that
        latency."""
        import math

        from ..serving import serve

        w = row.workload
        tp = int(w.get("tp", 1))
        parallel = Parallel(tp=tp) if tp > 1 else None      # on the chip's Atlas 800 box
        requests = {k: (math.inf if v == "inf" else v) for k, v in w["requests"].items()}
        dtypes = {"fp16": "float16", "bf16": "bfloat16", "float16": "float16",
                  "bfloat16": "bfloat16"}
        # the rows of one benchmark run (its throughput, TTFT and TPOT) read one serving run
        run = replace(row, workload={k: v for k, v in w.items() if k != "measure"})
        key = (workload_key(run), chip)
        rep = self.serving_runs.get(key)
        if rep is None:
            rep = self.serving_runs[key] = serve(
                w["preset"], chip, requests=requests, scheduler=dict(w.get("scheduler", {})),
                max_concurrency=w.get("max_concurrency"),
                dtype=dtypes.get(w.get("precision", "fp16"), "float16"),
                quant=w.get("quant"), parallel=parallel)
        summary = rep.summary()
        if row.metric == "time":
            return summary[w["measure"]] / 1e3, {}
        return rep.duration_s, {"token": sum(r.output_tokens for r in rep.requests),
                                "request": len(rep.requests)}

    def _extrapolate(self, plan, chip: Chip, fused: bool, mode: str) -> tuple[float, float]:
        """Cycles and FLOPs of a plan's graphs, extrapolated linearly in the layer count when
        the plan holds the 1- and 2-layer graphs."""
        points = []
        for layers, graph in plan.graphs:
            res = self.run(graph, chip, fused, mode, "block")
            points.append((layers, res.cycles, sum(t.flops for t in res.trace.tasks)))
        if len(points) == 1:
            return points[0][1], points[0][2]
        (l1, c1, f1), (l2, c2, f2) = points
        return (c1 + (plan.layers - l1) * (c2 - c1) / (l2 - l1),
                f1 + (plan.layers - l1) * (f2 - f1) / (l2 - l1))

    def _transfer(self, row: CorpusRow, chip: Chip) -> tuple[float, dict[str, float]]:
        w = row.workload
        if "moves" not in w:
            cycles = transfer_cycles(chip, w["src"], w["dst"], w["bytes"],
                                     w.get("l2_miss", 0.0))
            return chip.seconds(cycles), {"byte": w["bytes"]}
        cores, moves = int(w.get("cores", 1)), int(w["moves"])
        cycles = copy_kernel_cycles(chip, w["src"], w["dst"], w["bytes"], w.get("l2_miss", 0.0),
                                    cores=cores, moves=moves, nd2nz=bool(w.get("nd2nz")))
        return chip.seconds(cycles), {"byte": w["bytes"] * cores * moves}


#: cann_op -> the chip figure that is its framework eager call's host cost, where that call's
#: host side differs from a plain op's (`eager_op_launch_us`); absent figures fall back to it.
#: torch_npu's two fused attention calls (npu_fused_infer_attention_score, npu_fusion_attention)
#: share one figure: both run their op's tiling on the host in every call
EAGER_LAUNCH_FIGURES = {"FusedInferAttentionScore": "eager_fused_attention_launch_us",
                        "FlashAttentionScore": "eager_fused_attention_launch_us"}


def eager_launch_us(chip: Chip, cann_op: str) -> float | None:
    """The host cost of one framework eager call of `cann_op` on `chip` (None: the chip gives
    no eager figure, so its `host_launch_us` stands)."""
    figure = EAGER_LAUNCH_FIGURES.get(cann_op)
    specific = getattr(chip, figure) if figure else None
    return specific if specific is not None else chip.eager_op_launch_us


def _op_mode(row: CorpusRow, measure: str) -> str:
    """The launch mode an op row is simulated in (see the module docstring)."""
    loop = row.metric == "throughput" or row.workload.get("loop", False)
    if measure == "launch" or (row.timing == "eager_call" and loop):
        return "host"
    return "eager" if row.timing == "eager_call" else "sink"


_KINDS = {"op": RowRunner._op, "model": RowRunner._model, "transfer": RowRunner._transfer,
          "decoder": RowRunner._decoder, "serving": RowRunner._serving}
#: throughput unit -> the amount of work (key of the kind's work dict) it counts
_UNIT_WORK = {"samples/s": "sample", "images/s": "sample", "tokens/s": "token",
              "TFLOPS": "flop", "GB/s": "byte", "requests/s": "request"}


def _to_unit(row: CorpusRow, seconds: float, work: Mapping[str, float]) -> float:
    factor = UNITS[row.unit][1]
    if seconds <= 0:
        raise AscendSimError("the simulated time is zero")
    if row.metric == "time":
        return seconds / factor
    need = _UNIT_WORK[row.unit]
    if need not in work:
        raise ConfigError(f"unit {row.unit!r} needs a {need} count, which a "
                          f"{row.workload.get('kind', 'op')} workload does not give")
    if not work[need]:
        raise AscendSimError(f"the simulated {need} count is zero, so {row.unit} is undefined")
    return work[need] / seconds / factor


def _bytes(value) -> int:
    import numpy as np

    n = 1
    for d in value.shape:
        n *= int(d)
    item = 2 if value.dtype == "bfloat16" else np.dtype(value.dtype).itemsize
    return n * item


def transfer_cycles(chip: Chip, src: str, dst: str, nbytes: int, l2_miss: float = 0.0) -> int:
    """Cycles of one move run alone through the engine (pipes, flags, the L2/HBM fabric): a
    one-instruction task on core 0 (an AIV for UB moves on split chips), as the lowering
    builds the move."""
    instr, vec = _move(chip, src, dst, nbytes, l2_miss)
    trace = _run_moves(chip, instr, vec, cores=1, moves=1)
    return sum(iv.duration for iv in trace.intervals if iv.pipe == instr.pipe)


def copy_kernel_cycles(chip: Chip, src: str, dst: str, nbytes: int, l2_miss: float = 0.0, *,
                       cores: int = 1, moves: int = 1, nd2nz: bool = False) -> int:
    """Cycles of a copy-only kernel through the engine: `cores` blocks (AIVs for UB moves on
    split chips), each issuing `moves` moves of `nbytes` back to back on one pipe, from the
    blocks' start to the last move's end (msprof's Task Duration of a kernel that only moves
    data). `nd2nz`: a GM -> L1 move converting ND to the cube's NZ layout on the way, as the
    cube lowering reads an ND operand (`cube_tiling.l1_read`)."""
    if moves < 1 or nbytes < 1:
        raise ConfigError(f"a copy kernel needs at least one move of at least one byte, got "
                          f"moves={moves}, bytes={nbytes}")
    if nd2nz and (src.upper(), dst.upper()) != ("GM", "L1"):
        raise ConfigError(f"nd2nz applies to GM -> L1 moves, not {src.upper()} -> {dst.upper()}")
    if nd2nz and not chip.path_bytes_per_cycle.gm_l1_nd2nz:
        raise ConfigError(f"{chip.name} has no ND -> NZ GM -> L1 path (gm_l1_nd2nz)")
    instr, vec = _move(chip, src, dst, nbytes, l2_miss, nd2nz)
    have = chip.aiv_cores if vec else chip.ai_cores
    if not 1 <= cores <= have:
        raise ConfigError(f"a copy kernel on {cores} cores does not fit {chip.name}, which has "
                          f"{have} {'vector' if vec else 'AI'} cores")
    return _run_moves(chip, instr, vec, cores, moves).tasks[0].duration


def _move(chip: Chip, src: str, dst: str, nbytes: int, l2_miss: float, nd2nz: bool = False):
    """The move instruction as the lowering builds it, and whether it runs on an AIV."""
    from ..lower.cube_tiling import l1_read
    from ..lower.tiling import gm_read, gm_write, local_move

    src, dst = src.upper(), dst.upper()
    pipe = chip.pipe_for(src, dst)
    if nd2nz:
        instr = l1_read(chip, nbytes, l2_miss, False, True)
    elif src == "GM":
        instr = gm_read(chip, pipe, dst, nbytes, l2_miss)
    elif dst == "GM":
        instr = gm_write(chip, pipe, src, nbytes, 0.0)
    else:
        instr = local_move(chip, pipe, src, dst, nbytes)
    return instr, not chip.coupled and "UB" in (src, dst)


def _run_moves(chip: Chip, instr, vec: bool, cores: int, moves: int):
    """The trace of one task whose `cores` blocks each issue `instr` `moves` times."""
    from ..hw.names import ENGINE_AICORE
    from ..lower.program import CoreGroup, Phase, Program, Segment, Stage, Task
    from ..sim.engine import Engine

    group = CoreGroup(tuple(range(cores)), (Segment((Stage(instr.pipe, (instr,)),), moves),))
    task = Task(0, 0, "transfer", "DMA", "AI_VECTOR_CORE" if vec else "AI_CORE",
                (Phase(ENGINE_AICORE, (group,), vector_cores=vec),))
    return Engine(Program("transfer", chip, [task], 1, "tile")).run()


# ----------------------------------------------------------------------------- entry point
def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def validate_rows(rows: Iterable[CorpusRow], as_chip: str | Chip | None = None,
                  progress=None) -> ValidationReport:
    """Simulate the given rows, each on its own chip or all on `as_chip` (see `validate`)."""
    t0 = time.perf_counter()
    forced = get_chip(as_chip) if as_chip is not None else None
    runner = RowRunner()
    rows = list(rows)
    out: list[ValidationRecord] = []
    for i, row in enumerate(rows):
        out.append(_record(runner, row, forced))
        if progress is not None:
            progress(i + 1, len(rows))
    frozen = load_frozen()
    as_frozen: list[ValidationRecord] = []
    if frozen is not None:
        # the frozen rows of this run as defined when frozen; unchanged ones share the record
        today = {r.id: r for r in out}
        for old in frozen.as_frozen():
            rec = today.get(old.id)
            if rec is None or rec.role != "validation":
                continue
            same = rec.row.definition() == old.definition()
            as_frozen.append(rec if same else _record(runner, old, forced))
    return ValidationReport(out, forced.name if forced is not None else None,
                            time.perf_counter() - t0,
                            frozen=frozenset(frozen.ids) if frozen is not None else None,
                            as_frozen=as_frozen)


def _record(runner: RowRunner, row: CorpusRow, forced: Chip | None) -> ValidationRecord:
    """Simulate one row (pending rows are recorded, not simulated)."""
    if row.role == "pending":
        return ValidationRecord(row, forced.name if forced is not None else row.chip, None,
                                "pending", row.pending_reason)
    t1 = time.perf_counter()
    name = forced.name if forced is not None else row.chip
    try:
        the_chip = forced if forced is not None else get_chip(row.chip)
        name = the_chip.name           # the chip that ran it, aliases resolved
        sim = runner.value(row, the_chip)
        return ValidationRecord(row, name, sim, "ok", wall_s=time.perf_counter() - t1)
    except (AscendSimError, ValueError, KeyError, TypeError, ZeroDivisionError,
            ArithmeticError) as exc:
        # one row's fault never aborts the run; the reason is kept on the row
        return ValidationRecord(row, name, None, "error", _short(exc),
                                wall_s=time.perf_counter() - t1)


def quick_rows(rows: Sequence[CorpusRow]) -> list[CorpusRow]:
    """The fixed quick subset (`QUICK_IDS`) of some rows, in QUICK_IDS order."""
    by_id = {r.id: r for r in rows}
    return [by_id[i] for i in QUICK_IDS if i in by_id]


def rows_of_chip(rows: Iterable[CorpusRow], chip: str | Chip) -> list[CorpusRow]:
    """The rows measured on `chip`'s generation (`report.confidence.GENERATIONS`):
    "ascend910b" keeps every Atlas A2 row (910B1, B2, B3, B4), "ascend910" the first-generation
    rows (910A and the 30-core ascend910b_gen1), "ascend310p" the 310P rows. A chip of no
    known generation (a user's chip file) is a ConfigError: run rows on it with as_chip=."""
    gen = generation(chip)
    if gen is None:
        name = getattr(chip, "name", chip)
        raise ConfigError(f"chip {name!r} is of no known generation ("
                          f"{', '.join(sorted(set(GENERATIONS.values())))}), so no row was "
                          f"measured on it: pass it as as_chip= (CLI --as-chip) to run rows "
                          f"on it as a what-if")
    return [r for r in rows if generation(r.chip) == gen]


def rows_by_id(rows: Sequence[CorpusRow], ids: Iterable[str]) -> list[CorpusRow]:
    """The rows with these ids, in corpus order; an id not among `rows` is a ConfigError
    naming it (and the ids that share its prefix)."""
    wanted = list(dict.fromkeys(ids))
    have = {r.id for r in rows}
    for rid in wanted:
        if rid not in have:
            stem = rid.rsplit("-", 1)[0]
            near = sorted(i for i in have if i.startswith(stem))[:8]
            raise ConfigError(f"no corpus row {rid!r} among the selected rows"
                              + (f"; rows starting {stem!r}: {', '.join(near)}" if near else ""))
    keep = set(wanted)
    return [r for r in rows if r.id in keep]


def validate(chip: str | Chip | None = None, families: Iterable[str] | None = None,
             quick: bool = False, progress=None,
             as_chip: str | Chip | None = None,
             ids: Iterable[str] | None = None) -> ValidationReport:
    """Simulate every corpus row as it was measured and compare (see the module docstring).

    chip: only the rows measured on that chip's generation (`rows_of_chip`), each still run
    on its own chip; None: every row. as_chip: a what-if, every selected row run on this
    chip (a name or a `Chip`) instead of its own. families: only rows of these families.
    quick: the fixed subset `QUICK_IDS` (< 30 s). ids: only these rows (`rows_by_id`).
    progress: progress(rows_done, rows_total)."""
    rows = load_corpus(families)
    if quick:
        rows = quick_rows(rows)
    if ids is not None:
        rows = rows_by_id(rows, ids)
    if chip is not None:
        rows = rows_of_chip(rows, chip)
    report = validate_rows(rows, as_chip, progress)
    report.meta["chip_filter"] = None if chip is None else getattr(chip, "name", chip)
    return report


__all__ = ["validate", "validate_rows", "rows_of_chip", "rows_by_id", "quick_rows", "OFF_BOUND",
           "VERDICTS", "ValidationReport", "ValidationRecord",
           "FamilyStats", "SourceStats", "summarize", "transfer_cycles", "copy_kernel_cycles",
           "QUICK_IDS"]
