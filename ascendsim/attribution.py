"""Pass attribution: what each fusion pass, and each fusion it made, buys on one model and chip.

`attribute(graph, chip, fusion=...)` re-simulates the graph with fusion-switch files and the
`exclude` option of `optimize()` (single fusion instances left out), so every figure it prints
is the difference of two runs, each of which is one `simulate` call the table names.

- **Baseline**: the graph after the passes that cannot be switched off (the GE optimisations,
  non-disableable passes such as AABiasaddConvFusion): every switch group `ALL: off`, graph
  kernels and L2 fusion off.
- **Units**: every switchable pass that changed the graph in the full run (the run with the
  user's `fusion=`), in stack (run) order; graph-kernel fusion (two passes, one `optimize()`
  option) is one unit named `graph_kernel`, L2 fusion is the unit `L2BatchSplitFusionPass`
  (switched with the `l2_fusion` option).
- **Leave-one-out** gain of a unit: the full run with that unit alone switched off, minus the
  full run. **Cumulative** gain: the run with the passes up to and including the unit on
  (stack order), minus the run up to the unit before it; the cumulative gains add up to
  baseline - full. **Interaction** = leave-one-out - cumulative (what a pass owes to, or loses
  to, the passes around it), reported, never folded in.
- **Instances**: every fusion a unit's passes committed, left out alone with
  `fusion={..., "exclude": ["Pass:node"]}`; identical instances (same pass, pattern, op types
  and shapes) are simulated once and the others point to that run (`same_as`).

Every gain is "saved": the run without the pass minus the run with it (positive = the pass
helps). Figures per run: time (us), tasks, HBM and L2 bytes (read + write), and busy time per
pipe (us, summed over tasks on each task's busiest core).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .api import DEFAULT_CHIP, FusionOption, Result, fusion_options, simulate
from .errors import ConfigError, GraphError
from .hw import Chip, get_chip
from .ir import Graph
from .passes.base import GE, GRAPH_KERNEL, SWITCH_GROUPS
from .passes.exclude import Instance
from .passes.manager import known_passes, load_fusion_switch

#: the unit names of the two optional stages
GRAPH_KERNEL_UNIT = "graph_kernel"
L2_UNIT = "L2BatchSplitFusionPass"
#: distinct fusion instances simulated by default (the rest are listed, not simulated)
DEFAULT_MAX_INSTANCES = 40


# ----------------------------------------------------------------------------- measures
@dataclass(frozen=True)
class Measure:
    """The figures of one simulated run that attribution compares."""

    time_us: float
    tasks: int
    hbm_bytes: int
    l2_bytes: int
    pipe_us: dict[str, float]

    @classmethod
    def of(cls, result: Result) -> Measure:
        tr = result.trace
        hbm = l2 = 0
        pipes: dict[str, int] = {}
        for t in tr.tasks:
            for (lvl, _), b in t.traffic.items():
                if lvl == "DDR":
                    hbm += b
                elif lvl == "L2":
                    l2 += b
            for p, c in t.pipe_cycles.items():
                pipes[p] = pipes.get(p, 0) + c
        return cls(result.time_us, len(tr.tasks), int(hbm), int(l2),
                   {p: tr.us(c) for p, c in sorted(pipes.items())})

    def minus(self, other: Measure) -> Gain:
        """self - other, as a Gain (self is the run without the pass)."""
        pipes = set(self.pipe_us) | set(other.pipe_us)
        return Gain(self.time_us - other.time_us, self.tasks - other.tasks,
                    self.hbm_bytes - other.hbm_bytes, self.l2_bytes - other.l2_bytes,
                    {p: self.pipe_us.get(p, 0.0) - other.pipe_us.get(p, 0.0)
                     for p in sorted(pipes)})


@dataclass(frozen=True)
class Gain:
    """What a pass (or one fusion) saves: time, tasks, HBM/L2 bytes, busy time per pipe."""

    time_us: float
    tasks: int
    hbm_bytes: int
    l2_bytes: int
    pipe_us: dict[str, float] = field(default_factory=dict)


@dataclass
class UnitRow:
    """One pass (or option) that changed the graph."""

    name: str
    group: str
    instances: int
    loo: Gain | None                 # None when the unit cannot be switched off alone
    cumulative: Gain
    loo_fusion: dict[str, Any] | None
    cumulative_fusion: dict[str, Any]
    before_fusion: dict[str, Any]    # the cumulative step before this one

    @property
    def interaction_us(self) -> float | None:
        return None if self.loo is None else self.loo.time_us - self.cumulative.time_us


@dataclass
class InstanceRow:
    """One fusion a pass committed, and what leaving it out alone costs."""

    instance: Instance
    unit: str
    gain: Gain | None                # None: not simulated (over the instance limit)
    fusion: dict[str, Any] | None    # the `fusion=` of the run without it
    same_as: str = ""                # identical to this instance's key: simulated once there
    count: int = 1                   # identical instances (on the first of them)


def call_text(graph: Graph, chip: Chip, fusion: Any) -> str:
    """The one `simulate` call of a run, as Python the user can paste."""
    if isinstance(fusion, dict) and not fusion:
        fusion = True
    text = json.dumps(fusion) if isinstance(fusion, dict) else repr(fusion)
    text = text.replace("true", "True").replace("false", "False")
    return f"asim.simulate(graph, {chip.name!r}, fusion={text})"


# ----------------------------------------------------------------------------- the result
@dataclass
class Attribution:
    """What each pass and each fusion instance bought (see the module docstring)."""

    graph: Graph
    chip: Chip
    fusion: dict[str, Any]           # the full run's `fusion=` (optimize() options)
    given: Measure                   # the graph as given (fusion=False)
    baseline: Measure                # after the always-on passes
    full: Measure                    # the full run
    units: list[UnitRow]
    instances: list[InstanceRow]
    baseline_fusion: dict[str, Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    runs: int = 0                    # simulations made

    def call(self, fusion: Any) -> str:
        return call_text(self.graph, self.chip, fusion)

    def unit(self, name: str) -> UnitRow:
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(f"no pass '{name}' in the attribution; passes: "
                       f"{', '.join(u.name for u in self.units)}")

    def table(self) -> str:
        """The pass table: leave-one-out and cumulative gains, interaction, tasks, bytes."""
        head = (f"Pass attribution: {self.graph.name} on {self.chip.name}\n"
                f"  graph as given {self.given.time_us:10.2f} us  {self.given.tasks} tasks\n"
                f"  baseline       {self.baseline.time_us:10.2f} us  {self.baseline.tasks} tasks"
                f"  (always-on passes: {self.call(self.baseline_fusion)})\n"
                f"  fused          {self.full.time_us:10.2f} us  {self.full.tasks} tasks"
                f"  ({self.call(self.fusion)})\n")
        cols = (f"{'pass':<34}{'n':>4}{'LOO us':>10}{'cum us':>10}{'inter us':>10}"
                f"{'tasks':>7}{'HBM MB':>9}{'L2 MB':>8}  pipes saved (LOO, us)")
        lines = [head, cols, "-" * len(cols)]
        for u in self.units:
            g = u.loo or u.cumulative
            loo = f"{u.loo.time_us:10.2f}" if u.loo else f"{'-':>10}"
            inter = f"{u.interaction_us:10.2f}" if u.interaction_us is not None else f"{'-':>10}"
            pipes = ", ".join(f"{p} {v:+.1f}" for p, v in g.pipe_us.items() if abs(v) >= 0.05)
            lines.append(f"{u.name:<34}{u.instances:>4}{loo}{u.cumulative.time_us:10.2f}{inter}"
                         f"{g.tasks:>7}{g.hbm_bytes / 1e6:9.2f}{g.l2_bytes / 1e6:8.2f}  {pipes}")
        total = sum(u.cumulative.time_us for u in self.units)
        lines.append(f"{'sum of cumulative':<38}{'':>10}{total:10.2f}"
                     f"   (= baseline - fused: {self.baseline.time_us - self.full.time_us:.2f})")
        lines.append("LOO: the fused run with the pass alone off, minus the fused run. cum: "
                     "passes added in stack order. inter = LOO - cum. Positive = time saved.")
        lines.append("Each LOO figure is one call: " + "; ".join(
            f"{u.name}: fusion={json.dumps(u.loo_fusion)}" for u in self.units if u.loo_fusion))
        return "\n".join(lines)

    def instance_table(self, limit: int | None = None) -> str:
        """One row per fusion instance: its gain when left out alone, and its nodes."""
        lines = [f"{'instance (exclude key)':<52}{'x':>3}{'LOO us':>9}{'tasks':>6}"
                 f"{'HBM MB':>8}  fused node <- original nodes"]
        rows = sorted(self.instances, key=lambda r: -(r.gain.time_us if r.gain else -1e18))
        for r in rows[:limit]:
            gain = f"{r.gain.time_us:9.2f}{r.gain.tasks:>6}{r.gain.hbm_bytes / 1e6:8.2f}" \
                if r.gain else f"{'not run':>9}{'':>6}{'':>8}"
            same = f" (as {r.same_as})" if r.same_as else ""
            lines.append(f"{r.instance.key[:51]:<52}{r.count:>3}{gain}  {r.instance.node} <- "
                         f"{', '.join(r.instance.members)}{same}")
        return "\n".join(lines)

    def waterfall(self) -> list[tuple[str, float]]:
        """(step, time us) from the graph as given to the fused graph."""
        steps = [("as given", self.given.time_us), ("always-on passes", self.baseline.time_us)]
        t = self.baseline.time_us
        for u in self.units:
            t -= u.cumulative.time_us
            steps.append((f"+ {u.name}", t))
        return steps

    def plot_waterfall(self, path: str | None = None, ax: Any = None):
        """A waterfall of the simulated time: as given, baseline, then each pass (cumulative)."""
        import matplotlib

        if path is not None and ax is None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        steps = self.waterfall()
        if ax is None:
            fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(steps) + 2), 4))
        else:
            fig = ax.figure
        prev = steps[0][1]
        for i, (_, t) in enumerate(steps):
            if i == 0:
                ax.bar(i, t, color="#888888")
            else:
                lo, hi = sorted((prev, t))
                ax.bar(i, hi - lo, bottom=lo, color="#2a9d8f" if t <= prev else "#e76f51")
            ax.text(i, max(prev, t), f"{t:.0f}", ha="center", va="bottom", fontsize=7)
            prev = t
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels([s for s, _ in steps], rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("simulated time (us)")
        ax.set_title(f"{self.graph.name} on {self.chip.name}: time after each pass "
                     f"(green saves, red costs)", fontsize=9)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig

    def __repr__(self) -> str:
        return (f"Attribution({self.graph.name} on {self.chip.name}: {len(self.units)} passes, "
                f"{len(self.instances)} instances, {self.given.time_us:.1f} -> "
                f"{self.baseline.time_us:.1f} -> {self.full.time_us:.1f} us)")


# ----------------------------------------------------------------------------- switches
def switch_dict(source: Any) -> dict[str, dict[str, str]]:
    """A parsed fusion switch (path, dict or None) as the JSON format's `Switch` groups."""
    sw = load_fusion_switch(source)
    known = known_passes()
    out: dict[str, dict[str, str]] = {}
    for group in SWITCH_GROUPS:
        entries: dict[str, str] = {}
        if sw.all.get(group) is not None:
            entries["ALL"] = "on" if sw.all[group] else "off"
        for name, on in sw.overrides.items():
            if known[name].group == group:
                entries[name] = "on" if on else "off"
        if entries:
            out[group] = entries
    return out


def _with_switch(options: Mapping[str, Any], groups: Mapping[str, Mapping[str, str]]
                 ) -> dict[str, Any]:
    opts = {k: v for k, v in options.items() if k != "fusion_switch"}
    if any(groups.values()):
        opts["fusion_switch"] = {"Switch": {g: dict(e) for g, e in groups.items() if e}}
    return opts


def _unit_of(name: str, group: str) -> str:
    if group == GRAPH_KERNEL:
        return GRAPH_KERNEL_UNIT
    return name


def _signature(graph: Graph, inst: Instance) -> tuple:
    """Identical instances (same pass, pattern, op types and shapes) share this."""
    by_name = {n.name: n for n in graph.nodes}
    parts = []
    for m in inst.members:
        n = by_name.get(m)
        if n is None:
            return (inst.key,)            # a node the passes made: no shape to compare
        parts.append((n.op_type, tuple(tuple(graph.values[i].shape) if i in graph.values
                                       else () for i in n.inputs),
                      tuple(tuple(graph.values[o].shape) for o in n.outputs if o)))
    return (inst.pass_name, inst.pattern, tuple(parts))


# ----------------------------------------------------------------------------- attribute
def attribute(graph: Graph, chip: str | Chip = DEFAULT_CHIP, fusion: FusionOption = True, *,
              passes: Iterable[str] | None = None, instances: bool = True,
              max_instances: int = DEFAULT_MAX_INSTANCES, **kwargs: Any) -> Attribution:
    """The gain of every pass that changed `graph` and of every fusion it made (see module).

    passes: attribute only these units (pass names, "graph_kernel"); an unknown name is a
    ConfigError naming it. instances: also leave out each fusion instance alone (distinct
    ones up to `max_instances`). Other keywords (detail, mode, streams) go to every `simulate`.
    """
    if not isinstance(graph, Graph):
        raise GraphError(f"attribute() needs a Graph, got {type(graph).__name__}")
    if not graph.nodes:
        raise GraphError(f"graph '{graph.name}' has no ops: nothing to attribute")
    chip = get_chip(chip)
    options = fusion_options(fusion)
    if options is None:
        raise ConfigError("attribute(fusion=False): there are no passes to attribute; pass True "
                          "or optimize() options")
    known = known_passes()
    valid = {n for n, i in known.items() if i.group != GE} | {GRAPH_KERNEL_UNIT}
    wanted = None if passes is None else list(passes)
    for name in wanted or ():
        if name not in valid:
            raise ConfigError(f"attribute(passes=...): unknown pass '{name}'; valid names: "
                              f"{', '.join(sorted(valid))}")
    if wanted is not None:    # the graph-kernel passes are measured together, as one option
        wanted = list(dict.fromkeys(_unit_of(n, known[n].group) if n in known else n
                                    for n in wanted))
    runs = 0
    cache: dict[str, Measure] = {}

    def measure(fus: Any) -> Measure:
        nonlocal runs
        key = json.dumps(fus, sort_keys=True, default=str)
        if key not in cache:
            cache[key] = Measure.of(simulate(graph, chip, fusion=fus, **kwargs))
            runs += 1
        return cache[key]

    full_result = simulate(graph, chip, fusion=options, **kwargs)
    runs += 1
    full = Measure.of(full_result)
    cache[json.dumps(options, sort_keys=True, default=str)] = full
    given = measure(False)
    user = switch_dict(options.get("fusion_switch"))
    base_opts = {**_with_switch(options, {g: {"ALL": "off"} for g in SWITCH_GROUPS}),
                 "graph_kernel": False, "l2_fusion": False}
    baseline = measure(base_opts)

    # the stack: passes that ran, in run order; units = those that changed the graph
    log = full_result.pass_log
    ran: list[tuple[str, str]] = []          # (pass, group) of switchable passes that ran
    changed: dict[str, list[Instance]] = {}
    for rec in log.records:
        info = known.get(rec.name)
        if not rec.ran or info is None or info.group == GE or not info.disableable:
            continue
        ran.append((rec.name, rec.group))
        if rec.result.changed:
            changed.setdefault(_unit_of(rec.name, rec.group), []).extend(rec.result.instances)
    stack: list[str] = []
    for name, group in ran:
        u = _unit_of(name, group)
        if u in changed and u not in stack:
            stack.append(u)
    if wanted is not None:
        missing = [w for w in wanted if w not in stack]
        if missing:
            raise ConfigError(f"attribute(passes=...): pass(es) {', '.join(missing)} did not "
                              f"change graph '{graph.name}' with this fusion (passes that did: "
                              f"{', '.join(stack) or 'none'})")

    def upto(k: int) -> dict[str, Any]:
        """fusion= with the stack's first k units (and every pass that ran before them) on."""
        names = set(stack[:k])
        last = max((i for i, (n, g) in enumerate(ran) if _unit_of(n, g) in names), default=-1)
        groups = {g: {"ALL": "off"} for g in SWITCH_GROUPS}
        for i, (n, g) in enumerate(ran):
            if i <= last and g in SWITCH_GROUPS:
                groups[g][n] = "on"
        return {**_with_switch(options, groups),
                "graph_kernel": GRAPH_KERNEL_UNIT in names,
                "l2_fusion": L2_UNIT in names}

    def without(unit: str) -> dict[str, Any]:
        if unit == GRAPH_KERNEL_UNIT:
            return {**options, "graph_kernel": False}
        if unit == L2_UNIT:
            return {**options, "l2_fusion": False}
        groups = {g: dict(e) for g, e in user.items()}
        groups.setdefault(known[unit].group, {})[unit] = "off"
        return _with_switch(options, groups)

    units: list[UnitRow] = []
    prev_fusion = base_opts
    prev = baseline
    for k, u in enumerate(stack, 1):
        cum_fusion = upto(k)
        if k == len(stack):
            # the whole stack on is the full run (same passes); say it with the user's fusion=
            cum_fusion, cum = options, full
        else:
            cum = measure(cum_fusion)
        row_loo = without(u)
        group = GRAPH_KERNEL if u == GRAPH_KERNEL_UNIT else known[u].group
        units.append(UnitRow(u, group, len(changed[u]), measure(row_loo).minus(full)
                             if wanted is None or u in wanted else None,
                             prev.minus(cum), row_loo, cum_fusion, prev_fusion))
        prev, prev_fusion = cum, cum_fusion
    if wanted is not None:
        units = [r for r in units if r.name in wanted]

    rows: list[InstanceRow] = []
    if instances:
        first: dict[tuple, InstanceRow] = {}
        simulated = 0
        for r in units:
            for inst in changed[r.name]:
                sig = _signature(graph, inst)
                if sig in first:
                    rep = first[sig]
                    rep.count += 1
                    rows.append(InstanceRow(inst, r.name, rep.gain, rep.fusion,
                                            same_as=rep.instance.key))
                    continue
                fus = None
                gain = None
                if simulated < max_instances:
                    fus = {**options, "exclude": [inst.key]}
                    gain = measure(fus).minus(full)
                    simulated += 1
                row = InstanceRow(inst, r.name, gain, fus)
                first[sig] = row
                rows.append(row)
    return Attribution(graph, chip, options, given, baseline, full, units, rows, base_opts,
                       dict(kwargs), runs)


__all__ = ["attribute", "Attribution", "Gain", "Measure", "UnitRow", "InstanceRow",
           "switch_dict", "call_text", "GRAPH_KERNEL_UNIT"]
