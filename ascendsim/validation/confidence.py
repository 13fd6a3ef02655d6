"""The confidence table: validation error by family and chip generation, from `validate`.

`confidence_table(report)` summarises a validation report's validation rows (frozen and added
since the freeze, as defined today, rows that simulated) by (family, generation of the row's
chip, `ascendsim.report.confidence.GENERATIONS`): n, median |ratio - 1|, and the bias as the
median ratio (> 1: the model is slow); beside them the same group's error at first sight
(`first_n`, `first_median_abs_error`: the rows' `first_ratio`, any role but pending, as
`ValidationReport.first_sight` counts them); and by kernel size (`size_bands`): the msprof
kernel-time validation rows per (generation, band of their simulated duration,
`ascendsim.report.confidence.SIZE_BANDS_US`; `ValidationReport.by_size_band`), n, median
|error| and bias, because a kernel's error depends on its size far more than on its family's
median (small kernels are the worst modelled). Rows timed as eager calls (`HOST_TIMINGS`: the
host clock around one synchronised call, so the framework's host path is in the figure) are
kept out of the family figures, which say how the device side is modelled, and summarised
apart per generation (`eager_calls`): an eager call's error is mostly its op's host cost,
which no family figure of a graph or kernel run should carry. `write_confidence_table()` runs
`validate()` and writes the result as the package data that `Result.confidence()` reads
(`ascendsim/report/confidence_table.json`); `bench/confidence_table.py` is its script.

The table records `corpus_digest`, a hash of the definitions of the corpus's validation rows,
so a test can tell a stale table from a current one without simulating; a slow test compares
the whole table with a fresh `validate()` (a model change shows there).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..report.confidence import TABLE_FILE, generation
from .corpus import CorpusRow, load_corpus
from .validate import UNKNOWN_GENERATION, ValidationReport, validate

#: digits kept in the table (a re-run gives the same file byte for byte)
DIGITS = 6
#: row timings whose figure holds the host's side of the call (module note): summarised apart
HOST_TIMINGS = frozenset({"eager_call"})


def corpus_digest(rows: Sequence[CorpusRow] | None = None) -> str:
    """sha256 of the definitions of the validation rows and the first sights of the rows
    that are not pending (sorted by id): changes whenever a validation row is added, removed
    or redefined, or a first sight is stamped."""
    rows = load_corpus() if rows is None else rows
    defs = sorted((r.definition() for r in rows if r.role == "validation"),
                  key=lambda d: d["id"])
    seen = sorted((r.id, r.family, r.chip, r.first_ratio) for r in rows
                  if r.role != "pending" and r.first_ratio is not None)
    blob = json.dumps([defs, seen], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def confidence_table(report: ValidationReport) -> dict[str, Any]:
    """The table as a JSON-ready dict: meta fields and one row per (family, generation)."""
    groups: dict[tuple[str, str], list[float]] = {}
    first: dict[tuple[str, str], list[float]] = {}
    eager: dict[str, list[float]] = {}
    for r in report.rows:
        gen = generation(r.row.chip) or UNKNOWN_GENERATION
        host = r.row.timing in HOST_TIMINGS
        if r.role != "pending" and r.row.first_ratio is not None and not host:
            first.setdefault((r.family, gen), []).append(r.row.first_ratio)
        if r.role != "validation" or r.status != "ok" or r.ratio is None:
            continue
        if host:
            eager.setdefault(gen, []).append(r.ratio)
        else:
            groups.setdefault((r.family, gen), []).append(r.ratio)
    rows = []
    for (fam, gen), ratios in sorted(groups.items()):
        seen = first.get((fam, gen), [])
        rows.append({"family": fam, "generation": gen, "n": len(ratios),
                     "median_abs_error": _median_abs_error(ratios),
                     "bias": round(statistics.median(ratios), DIGITS),
                     "first_n": len(seen),
                     "first_median_abs_error": _median_abs_error(seen) if seen else None})
    return {
        "about": "validation error by family and chip generation: n validation rows that "
                 "simulated, median |ratio - 1|, bias = median ratio (> 1: the model is "
                 "slow); first_n rows of the family and generation (any role but pending) "
                 "that record a ratio at first sight (first_ratio: under the model of the "
                 "commit that added them, before any change they motivated) and the median "
                 "|first_ratio - 1|; size_bands: the msprof kernel-time validation rows by "
                 "generation and band of simulated kernel duration; eager_calls: the "
                 "validation rows timed as eager calls (host time included), by generation, "
                 "kept out of the family rows; generated by bench/confidence_table.py from "
                 "ascendsim validate",
        "corpus_digest": corpus_digest([r.row for r in report.rows]),
        "validation_rows": sum(x["n"] for x in rows),
        "eager_call_rows": sum(len(v) for v in eager.values()),
        "eager_calls": [{"generation": gen, "n": len(ratios),
                         "median_abs_error": _median_abs_error(ratios),
                         "bias": round(statistics.median(ratios), DIGITS)}
                        for gen, ratios in sorted(eager.items())],
        "size_bands": [{"generation": gen, "band": band, "n": st.n,
                        "median_abs_error": round(st.median_abs_error, DIGITS),
                        "bias": round(st.median_ratio, DIGITS)}
                       for (gen, band), st in report.by_size_band.items()],
        "rows": rows,
    }


def _median_abs_error(ratios: Sequence[float]) -> float:
    return round(statistics.median(abs(x - 1) for x in ratios), DIGITS)


def table_text(table: dict[str, Any]) -> str:
    """The table as the JSON text shipped (sorted keys, one list entry per line)."""
    lists = ("eager_calls", "size_bands", "rows")
    head = {k: v for k, v in table.items() if k not in lists}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"  {json.dumps(k)}: {json.dumps(head[k], ensure_ascii=False)},")
    for i, key in enumerate(lists):
        lines.append(f"  {json.dumps(key)}: [")
        lines.append(",\n".join(f"    {json.dumps(r, sort_keys=True)}"
                                for r in table.get(key, [])))
        lines.append("  ]" + ("," if i < len(lists) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def shipped_table_path() -> Path:
    """Where the package data file lives in this source tree or installation."""
    from .. import report

    return Path(report.__file__).parent / TABLE_FILE


def write_confidence_table(path: str | Path | None = None,
                           report: ValidationReport | None = None) -> dict[str, Any]:
    """Run `validate()` (or use `report`) and write the table (default: the shipped file)."""
    table = confidence_table(report if report is not None else validate())
    Path(path or shipped_table_path()).write_text(table_text(table), encoding="utf-8")
    return table


__all__ = ["HOST_TIMINGS", "confidence_table", "corpus_digest", "table_text",
           "write_confidence_table", "shipped_table_path"]
