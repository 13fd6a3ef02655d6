"""The pass log: what ran, in order, with CANN-format lines and a `fusion_result.json`.

`str(log)` is one line per pattern in run order, exactly as FE prints them
(`GraphFusionPassBase::RunOnePattern`)::

    GraphId[0], GraphFusionPass[MatMulBiasAddFusionPass]: pattern=MatMulBiasAddFusion, \
matched_times=2, effected_times=2.

(one line; wrapped here)

A pattern that matched nothing prints without the `GraphId[..], ` prefix, as in CANN. GE passes
(constant folding, CSE, ...) use the same line so one parser reads the whole log. UB-fusion
passes print CANN's buffer-fusion line (`Run buffer fusion pass successfully, pass name:X.`).
`explain()` is the verbose view: switch decisions, notes (bytes saved, refused folds) and, for
each refused candidate, why not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from .base import GE, GRAPH_FUSION, GRAPH_KERNEL, UB_FUSION, PassResult


@dataclass
class PassRecord:
    """One pass in the run order: its stage, result and whether it ran."""

    stage: str
    result: PassResult
    ran: bool = True
    note: str = ""

    @property
    def name(self) -> str:
        return self.result.pass_name

    @property
    def group(self) -> str:
        return self.result.group


def pattern_line(graph_id: int, pass_name: str, pattern: str, matched: int, effected: int) -> str:
    """The CANN graph-fusion statistics line."""
    body = (f"GraphFusionPass[{pass_name}]: pattern={pattern}, matched_times={matched}, "
            f"effected_times={effected}.")
    return f"GraphId[{graph_id}], {body}" if matched else body


def ub_line(pass_name: str) -> str:
    """The CANN buffer-fusion line printed for each UB pass that ran."""
    return f"Run buffer fusion pass successfully, pass name:{pass_name}."


@dataclass
class PassLog:
    """Everything the pass manager did, in order."""

    graph_id: int = 0
    records: list[PassRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dumps: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ building
    def add(self, record: PassRecord) -> None:
        self.records.append(record)

    def note(self, text: str) -> None:
        self.notes.append(text)

    # ------------------------------------------------------------------ views
    def lines(self) -> list[str]:
        """The CANN-format lines of every pass that ran, in run order."""
        out: list[str] = []
        for rec in self.records:
            if not rec.ran:
                continue
            if rec.group == UB_FUSION:
                out.append(ub_line(rec.name))
                continue
            for s in rec.result.patterns.values():
                out.append(pattern_line(self.graph_id, rec.name, s.pattern, s.matched,
                                        s.effected))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def pass_names(self) -> list[str]:
        """Names of the passes that ran, in order."""
        return [r.name for r in self.records if r.ran]

    def counts(self) -> dict[str, tuple[int, int]]:
        """pass name -> (matched, effected) summed over its patterns, passes that ran only."""
        out: dict[str, tuple[int, int]] = {}
        for r in self.records:
            if r.ran:
                m, e = out.get(r.name, (0, 0))
                out[r.name] = (m + sum(s.matched for s in r.result.patterns.values()),
                               e + sum(s.effected for s in r.result.patterns.values()))
        return out

    def record(self, pass_name: str) -> PassRecord:
        for r in self.records:
            if r.name == pass_name:
                return r
        raise KeyError(f"pass '{pass_name}' is not in the log; passes: "
                       f"{', '.join(r.name for r in self.records)}")

    @property
    def refusals(self) -> list:
        return [f for r in self.records for f in r.result.refusals]

    @property
    def bytes_saved(self) -> int:
        return sum(r.result.bytes_saved for r in self.records)

    def explain(self) -> str:
        """The verbose view: each pass, its switch note, counts, notes and refusals."""
        out = [f"pass log of graph {self.graph_id}"]
        out += [f"  note: {n}" for n in self.notes]
        stage = None
        for r in self.records:
            if r.stage != stage:
                stage = r.stage
                out.append(f"stage {stage}:")
            state = "ran" if r.ran else "skipped"
            out.append(f"  {r.name} [{r.group}] {state}" + (f" ({r.note})" if r.note else ""))
            if not r.ran:
                continue
            for s in r.result.patterns.values():
                out.append(f"    pattern {s.pattern}: matched {s.matched}, effected {s.effected}")
            out += [f"    note: {n}" for n in r.result.notes]
            out += [f"    why not '{f.node}' ({f.pattern}): {f.why}" for f in r.result.refusals]
        return "\n".join(out)

    def fusion_result(self, session_id: int = 0) -> list[dict]:
        """CANN's fusion_result.json document: counts (as strings) of every pass that ran."""
        sections = {GRAPH_FUSION: "graph_fusion", UB_FUSION: "ub_fusion",
                    GRAPH_KERNEL: "graph_kernel_fusion", GE: "graph_fusion"}
        doc: dict = {"graph_fusion": {}, "session_and_graph_id": f"{session_id}_{self.graph_id}",
                     "ub_fusion": {}}
        for name, (m, e) in self.counts().items():
            rec = self.record(name)
            if rec.group == GE:
                continue   # GE standard passes are not fusion passes; CANN does not list them
            sec = doc.setdefault(sections.get(rec.group, rec.group), {})
            sec[name] = {"effect_times": str(e), "match_times": str(m)}
        return [doc]

    def write_fusion_result_json(self, path: str | PathLike, session_id: int = 0) -> Path:
        """Write fusion_result.json (ATC's layout: match_times/effect_times per pass)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.fusion_result(session_id), indent=4) + "\n",
                        encoding="utf-8")
        return path


__all__ = ["PassLog", "PassRecord", "pattern_line", "ub_line"]
