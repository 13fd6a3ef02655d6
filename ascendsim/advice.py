"""The fusion advisor: what to switch off, what to switch on, and which fusion is still missing.

`advise(graph, chip)` starts from the default stack (`simulate(graph, chip)`, "the fused run")
and ranks candidates by simulated gain (the fused run's time minus the candidate's):

- **switch_off**: a pass whose leave-one-out gain (`attribution.attribute`) is negative: the
  model runs faster without it;
- **switch_on**: a pass that is off by default (SoftmaxSmallOpFusionPass, ...) and pays when
  switched on; **option**: an `optimize()` option off by default that pays (graph kernels);
- **composite**: a fusion no enabled rule makes: a maximal connected group of element-wise,
  broadcast and reduce ops left as separate kernels in the fused graph (plus the cube op in
  front of it when the group is element-wise and reads only that op's output: a cube epilogue),
  run as one composite kernel in one pass over UB. Each is simulated (the fused graph with that
  group fused, `Candidate.graph`, simulated with `fusion=False`), its values are checked against
  the unfused ops with the numba kernels (`asim.execute` on seeded inputs of the group's
  shapes, when they hold at most `VALUE_LIMIT` elements; a larger cube epilogue is checked
  without its cube op on a random cube output, see `_check_values`), and its UB working set at
  the smallest legal tile is computed; a group that does not fit UB is refused with the reason.
  Identical candidates (same op types at the same shapes) are simulated and checked once.

The switch part (`Advice.switch`: passes off and on) is one fusion-switch file
(`Advice.write_switch(path)`); `Advice.switch_time_us` is the simulated time of
`simulate(graph, chip, fusion=path)`, so the file reproduces the predicted gain exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np

from .api import DEFAULT_CHIP, simulate
from .attribution import Measure, attribute, call_text
from .errors import AscendSimError, GraphError
from .hw import Chip, get_chip
from .ir import Graph
from .ir.graph import Node
from .ir.registry import Category, Unit
from .passes.base import SWITCH_GROUPS
from .passes.manager import known_passes
from .passes.partition import (
    FusionGraph,
    connected_groups,
    data_inputs,
    is_absorbable,
    is_basic,
    opdef,
    ub_working_set,
    unit_of,
)
from .passes.ub_fusion import display_type, fuse_nodes

#: value checks run when a candidate's inputs and weights hold at most this many elements
VALUE_LIMIT = 1 << 22
#: the limit for the epilogue of a cube op checked alone (element-wise work only)
EPILOGUE_VALUE_LIMIT = 1 << 25
#: ops in one composite candidate at most (graph_kernel.DEFAULT_MAX_OPS)
MAX_OPS = 64


@dataclass
class Candidate:
    """One piece of advice and its evidence."""

    kind: str                        # "switch_off", "switch_on", "option", "composite"
    name: str                        # the pass, option or composite's display type
    gain_us: float                   # fused run - with the candidate (positive = faster)
    detail: str = ""
    fusion: dict[str, Any] | None = None     # the one simulate() call's fusion= (switch/option)
    nodes: tuple[str, ...] = ()      # composite: the ops it joins (names in the fused graph)
    graph: Graph | None = None       # composite: the fused graph with this group fused
    hbm_saved: int = 0               # bytes
    l2_saved: int = 0                # bytes
    tasks_saved: int = 0
    ub_bytes: int = 0                # composite: UB working set at the smallest legal tile
    values_ok: bool | None = None    # composite: fused values equal unfused (None: not checked)
    max_abs_diff: float = 0.0
    refused: str = ""                # why a composite is not advised ("" = advised)
    same_as: str = ""                # identical to the candidate holding this node: its figures

    @property
    def advised(self) -> bool:
        return not self.refused and self.gain_us > 0


@dataclass
class Advice:
    """Candidates ranked by simulated gain, and the switch file that applies the switch part."""

    graph: Graph
    chip: Chip
    fused_time_us: float
    candidates: list[Candidate]
    switch: dict[str, dict[str, str]]            # the Switch groups of the switch part
    switch_time_us: float                        # simulate(graph, chip, fusion=<that file>)
    refused: list[Candidate] = field(default_factory=list)

    @property
    def top(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def switch_gain_us(self) -> float:
        return self.fused_time_us - self.switch_time_us

    def switch_document(self) -> dict[str, Any]:
        return {"Switch": {g: dict(e) for g, e in self.switch.items()}}

    def write_switch(self, path: str | PathLike) -> None:
        """The switch part as a CANN fusion-switch JSON file."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.switch_document(), f, indent=2)
            f.write("\n")

    @property
    def composites(self) -> list[Candidate]:
        return [c for c in self.candidates if c.kind == "composite"]

    def table(self) -> str:
        lines = [f"Fusion advice: {self.graph.name} on {self.chip.name} (fused run "
                 f"{self.fused_time_us:.2f} us)",
                 f"{'kind':<11}{'gain us':>9}{'tasks':>6}{'HBM MB':>8}{'L2 MB':>7}{'UB KB':>7}  "
                 f"{'values':<7} candidate"]
        for c in self.candidates + self.refused:
            vals = {None: "-", True: "equal", False: "DIFFER"}[c.values_ok]
            ub = f"{c.ub_bytes / 1024:7.1f}" if c.ub_bytes else f"{'':>7}"
            what = c.name + (f" [{', '.join(c.nodes)}]" if c.nodes else "")
            extra = f"  REFUSED: {c.refused}" if c.refused else (f"  {c.detail}" if c.detail
                                                                 else "")
            if c.same_as:
                extra += f" (identical to the one with {c.same_as}: simulated once)"
            lines.append(f"{c.kind:<11}{c.gain_us:9.2f}{c.tasks_saved:>6}"
                         f"{c.hbm_saved / 1e6:8.2f}{c.l2_saved / 1e6:7.2f}{ub}  {vals:<7} "
                         f"{what}{extra}")
        if self.switch:
            lines.append(f"switch file (write_switch): {json.dumps(self.switch_document())} -> "
                         f"{self.switch_time_us:.2f} us (gain {self.switch_gain_us:.2f} us)")
        else:
            lines.append("no switch change pays on this model")
        return "\n".join(lines)

    def __repr__(self) -> str:
        top = f"top: {self.top.kind} {self.top.name} {self.top.gain_us:+.2f} us" if self.top \
            else "nothing pays"
        return f"Advice({self.graph.name} on {self.chip.name}: {len(self.candidates)} " \
               f"candidates, {top})"


# ----------------------------------------------------------------------------- composites
def _vector_ops(graph: Graph, nodes: list[Node]) -> int:
    return sum(1 for n in nodes if unit_of(graph, n) != Unit.NONE)


def _flat_ub(node: Node) -> bool:
    return node.subgraph is not None and node.attrs.get("fusion") == "UB"


def _sub_graph(graph: Graph, nodes: list[Node], outputs: list[str]) -> Graph:
    """The group alone (`Graph.extract`: what it reads from outside as inputs, constants
    kept), on copies of its nodes, with `outputs` as its outputs."""
    sub = graph.extract(nodes, f"{graph.name}/candidate")
    sub.nodes = [Node(n.name, n.op_type, tuple(n.inputs), tuple(n.outputs), dict(n.attrs),
                      n.subgraph) for n in nodes]
    sub.outputs = list(outputs)
    return sub


def _elements(sub: Graph) -> int | None:
    """Elements of a graph's inputs and constants together (None: a symbolic shape)."""
    total = 0
    for v in (*sub.inputs, *sub.constants):
        shape = sub.values[v].shape
        if not all(isinstance(d, int) for d in shape):
            return None
        total += int(np.prod(shape, dtype=np.int64))
    return total


def _check_values(graph: Graph, nodes: list[Node], outputs: list[str], attrs: dict,
                  cube: bool = False) -> tuple[bool | None, float, str]:
    """Fused vs unfused values of a candidate on seeded inputs of its shapes. A cube epilogue
    too large to check whole is checked without its cube op, on a random cube output: the cube
    op runs the same kernel fused or not, the composite loop of the epilogue is what differs."""
    from .execute import execute
    from .ir.tensor import as_storage, storage_dtype
    from .report.compare import outputs_close

    sub = _sub_graph(graph, nodes, outputs)
    size, limit, how = _elements(sub), VALUE_LIMIT, ""
    if cube and (size is None or size > limit) and len(nodes) > 1:
        sub = _sub_graph(graph, nodes[1:], outputs)
        size, limit = _elements(sub), EPILOGUE_VALUE_LIMIT
        how = "epilogue checked on a random cube output; "
    if size is None:
        return None, 0.0, "values not checked: symbolic shape"
    if size > limit:
        return None, 0.0, f"values not checked: inputs and weights over {limit} elements"
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for v in sub.inputs:
        val = sub.values[v]
        dt = storage_dtype(val.dtype)
        feeds[v] = as_storage(rng.uniform(-1.0, 1.0, val.shape), val.dtype) if dt.kind == "f" \
            else rng.integers(0, 2, val.shape).astype(dt)
    fused = sub.copy()
    fuse_nodes(fused, list(fused.nodes), dict(attrs), flatten=_flat_ub)
    a = execute(sub, feeds)
    b = execute(fused, feeds)
    ok, worst = outputs_close(b, a, {o: sub.values[o].dtype for o in outputs})
    return ok, worst, how


def _is_cube(node: Node) -> bool:
    """A cube op, or a fused node whose first op is one (a cube op with its epilogue so far)."""
    if node.subgraph is not None:
        return bool(node.subgraph.nodes) and _is_cube(node.subgraph.nodes[0]) and \
            node.attrs.get("fusion") == "UB"
    return opdef(node).category == Category.CUBE


def _groups(graph: Graph) -> list[tuple[list[Node], bool]]:
    """Maximal groups of basic ops left unfused (connected groups and single ops), each with
    the cube op in front when the group is its epilogue (it alone reads the cube's output)."""
    fg = FusionGraph(graph)

    def basic(n: Node) -> bool:
        return n.subgraph is None and (is_basic(graph, n) or is_absorbable(graph, n))

    part = connected_groups(fg, basic, MAX_OPS)
    grouped = {n.name for g in part.groups for n in g}
    groups = part.groups + [[n] for n in fg.live_nodes() if basic(n) and n.name not in grouped]
    out: list[tuple[list[Node], bool]] = []
    for group in groups:
        names = {n.name for n in group}
        prods = {}
        for n in group:
            for v in data_inputs(graph, n):
                p = fg.producer_of(v)
                if p is not None and p.name not in names:
                    prods[p.name] = p
        head = None
        for p in prods.values():
            outs = [o for o in p.outputs if o]
            if _is_cube(p) and len(outs) == 1 and outs[0] not in fg.graph_outputs and \
                    all(r.name in names for r in fg.users(outs[0])):
                head = p
                break
        if head is not None and _vector_ops(graph, group) >= 1:
            out.append(([head, *group], True))
        elif _vector_ops(graph, group) >= 2:
            out.append((group, False))
    return out


def _signature(graph: Graph, group: list[Node]) -> tuple:
    """Identical candidates (same op types at the same shapes) share this."""
    return tuple((n.op_type, tuple(tuple(graph.values[i].shape) for i in n.inputs if i),
                  tuple(tuple(graph.values[o].shape) for o in n.outputs if o)) for n in group)


def _composites(fused: Graph, chip: Chip, base: Measure, kwargs: dict) -> list[Candidate]:
    out: list[Candidate] = []
    first: dict[tuple, Candidate] = {}
    for group, cube in _groups(fused):
        sig = _signature(fused, group)
        if sig in first:        # identical to one simulated and checked already: its figures
            rep = first[sig]
            dup = Candidate("composite", rep.name, rep.gain_us, rep.detail,
                            nodes=tuple(n.name for n in group), hbm_saved=rep.hbm_saved,
                            l2_saved=rep.l2_saved, tasks_saved=rep.tasks_saved,
                            ub_bytes=rep.ub_bytes, values_ok=rep.values_ok,
                            max_abs_diff=rep.max_abs_diff, refused=rep.refused,
                            same_as=rep.nodes[0])
            out.append(dup)
            continue
        fg = FusionGraph(fused)
        members = fg.members(group)
        outputs = fg.outputs_of(members)
        label = display_type(group, "_")
        attrs = {"fusion": "UB" if cube else "GraphKernel", "pattern": "Advisor",
                 "display_type": (display_type(group) if cube else "Fused_" + label)}
        cand = Candidate("composite", attrs["display_type"], 0.0,
                         nodes=tuple(n.name for n in group))
        first[sig] = cand
        ws = ub_working_set(fused, group, chip, fg)
        cand.ub_bytes = ws.bytes
        if ws.bytes > chip.ub_bytes:
            cand.refused = (f"does not fit UB: working set {ws.describe()} > {chip.ub_bytes} B "
                            f"of {chip.name}")
            out.append(cand)
            continue
        g2 = fused.copy()
        fuse_nodes(g2, [n for n in g2.nodes if n.name in cand.nodes], dict(attrs),
                   flatten=_flat_ub)
        try:
            m = Measure.of(simulate(g2, chip, fusion=False, **kwargs))
        except AscendSimError as exc:
            cand.refused = f"cannot be lowered as one kernel: {exc}"
            out.append(cand)
            continue
        cand.graph = g2
        cand.gain_us = base.time_us - m.time_us
        cand.hbm_saved = base.hbm_bytes - m.hbm_bytes
        cand.l2_saved = base.l2_bytes - m.l2_bytes
        cand.tasks_saved = base.tasks - m.tasks
        ok, worst, why = _check_values(fused, group, outputs, attrs, cube)
        cand.values_ok, cand.max_abs_diff = ok, worst
        cand.detail = why + (f"max |diff| {worst:.3g}" if ok is not None else "")
        if ok is False:
            cand.refused = f"values differ from the unfused ops (max |diff| {worst:.3g})"
        elif cand.gain_us <= 0:
            cand.refused = f"not faster when simulated ({cand.gain_us:+.2f} us)"
        out.append(cand)
    return out


# ----------------------------------------------------------------------------- advise
def advise(graph: Graph, chip: str | Chip = DEFAULT_CHIP, *, composites: bool = True,
           **kwargs: Any) -> Advice:
    """Rank what would make `graph` faster on `chip` than the default stack (see module).

    composites: also search for missing fusions. Other keywords (detail, mode, streams) go to
    every `simulate`."""
    if not isinstance(graph, Graph):
        raise GraphError(f"advise() needs a Graph, got {type(graph).__name__}")
    if not graph.nodes:
        raise GraphError(f"graph '{graph.name}' has no ops: nothing to advise")
    chip = get_chip(chip)
    fused_result = simulate(graph, chip, **kwargs)
    base = Measure.of(fused_result)
    cands: list[Candidate] = []

    def measured(kind: str, name: str, fusion: dict[str, Any], detail: str) -> Candidate:
        m = Measure.of(simulate(graph, chip, fusion=fusion, **kwargs))
        return Candidate(kind, name, base.time_us - m.time_us, detail, fusion,
                         hbm_saved=base.hbm_bytes - m.hbm_bytes,
                         l2_saved=base.l2_bytes - m.l2_bytes, tasks_saved=base.tasks - m.tasks)

    att = attribute(graph, chip, instances=False, **kwargs)
    for u in att.units:
        if u.loo is not None and u.loo.time_us < 0:
            cands.append(Candidate("switch_off", u.name, -u.loo.time_us,
                                   f"leave-one-out {u.loo.time_us:+.2f} us: "
                                   f"{call_text(graph, chip, u.loo_fusion)}", u.loo_fusion,
                                   hbm_saved=-u.loo.hbm_bytes, l2_saved=-u.loo.l2_bytes,
                                   tasks_saved=-u.loo.tasks))
    known = known_passes()
    for name, info in known.items():
        if info.group in SWITCH_GROUPS and not info.default_on:
            fus = {"fusion_switch": {"Switch": {info.group: {name: "on"}}}}
            c = measured("switch_on", name, fus, "off by default")
            if c.gain_us > 0:
                cands.append(c)
    c = measured("option", "graph_kernel", {"graph_kernel": True},
                 "MindSpore graph-kernel fusion (off by default)")
    if c.gain_us > 0:
        cands.append(c)

    # the switch part: every pass to switch off or on, as one file, simulated once
    switch: dict[str, dict[str, str]] = {}
    for c in cands:
        if c.kind in ("switch_off", "switch_on"):
            switch.setdefault(known[c.name].group, {})[c.name] = \
                "off" if c.kind == "switch_off" else "on"
    switch_time = base.time_us
    if switch:
        switch_time = simulate(graph, chip, fusion={"Switch": switch}, **kwargs).time_us

    refused: list[Candidate] = []
    if composites:
        for c in _composites(fused_result.graph, chip, base, kwargs):
            (refused if c.refused else cands).append(c)
    cands.sort(key=lambda c: -c.gain_us)
    return Advice(graph, chip, base.time_us, cands, switch, switch_time, refused)


__all__ = ["advise", "Advice", "Candidate", "VALUE_LIMIT"]
