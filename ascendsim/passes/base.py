"""The pass framework: `Pass`, its per-pattern counters (`PassResult`) and refusals (`Decision`).

A pass has a name (CANN's where one exists), a switch group (`GraphFusion`, `UBFusion`, or
`GE` for the always-on graph-engine optimisations), one or more named patterns, and reports
per pattern how often it was *matched* (the pattern was found) and *effected* (the rewrite was
applied). They differ when a check refuses; every refusal carries its reason, so
`PassLog.explain()` can say why a candidate did not fuse (XLA's FusionDecision idea).

Most rewrites follow one skeleton, `RewritePass`: find a candidate anchored at a node (as CANN's
`MatchFromOutput` anchors at the pattern's output op), `check` it into a `Decision`, and
`rewrite` it when the decision is yes. A subclass writes `match`, `check` and `rewrite` only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..hw import Chip
from ..ir.graph import Graph, Node

#: switch groups; GE passes are always on (not switchable from a fusion switch file)
GE = "GE"
GRAPH_FUSION = "GraphFusion"
UB_FUSION = "UBFusion"
GRAPH_KERNEL = "GraphKernel"
L2_FUSION = "L2Fusion"
SWITCH_GROUPS = (GRAPH_FUSION, UB_FUSION)


@dataclass(frozen=True)
class Decision:
    """Either "yes" or "no, because <why>"; combine with `and_`/`or_` keeping the reasons."""

    ok: bool
    why: str = ""

    def __bool__(self) -> bool:
        return self.ok

    def and_(self, other: Decision | Callable[[], Decision]) -> Decision:
        """Both must hold; `other` may be a thunk so later checks run only when needed."""
        if not self.ok:
            return self
        return other() if callable(other) else other

    def or_(self, other: Decision | Callable[[], Decision]) -> Decision:
        """Either may hold; a double refusal keeps both reasons."""
        if self.ok:
            return self
        res = other() if callable(other) else other
        return res if res.ok else Decision(False, f"{self.why}; and {res.why}")


YES = Decision(True)


def no(why: str) -> Decision:
    return Decision(False, why)


def require(cond: bool, why: str) -> Decision:
    """YES when `cond`, else a refusal saying `why` (phrase it as what went wrong)."""
    return YES if cond else Decision(False, why)


@dataclass
class PatternStats:
    """Counters of one pattern of one pass run."""

    pattern: str
    matched: int = 0
    effected: int = 0


@dataclass(frozen=True)
class Refusal:
    """A candidate that matched but was not rewritten, and why."""

    pass_name: str
    pattern: str
    node: str
    why: str


@dataclass
class PassResult:
    """What one run of a pass did: counters per pattern, refusals, notes (bytes saved...)."""

    pass_name: str
    group: str
    patterns: dict[str, PatternStats] = field(default_factory=dict)
    refusals: list[Refusal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bytes_saved: int = 0
    #: the fusions (rewrites) committed, in order (`exclude.Instance`)
    instances: list[Any] = field(default_factory=list)

    def stats(self, pattern: str) -> PatternStats:
        if pattern not in self.patterns:
            self.patterns[pattern] = PatternStats(pattern)
        return self.patterns[pattern]

    def matched(self, pattern: str) -> None:
        self.stats(pattern).matched += 1

    def effected(self, pattern: str) -> None:
        self.stats(pattern).effected += 1

    def refuse(self, pattern: str, node: str, why: str) -> None:
        self.refusals.append(Refusal(self.pass_name, pattern, node, why))

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def changed(self) -> bool:
        return any(s.effected for s in self.patterns.values())

    def merge(self, other: PassResult) -> None:
        """Add another run's counts. A pass re-run inside a fixpoint loop logs once: a
        candidate it refused in an earlier round and refuses again is not counted again."""
        seen = {(f.pattern, f.node, f.why) for f in self.refusals}
        repeats: dict[str, int] = {}
        for f in other.refusals:
            if (f.pattern, f.node, f.why) in seen:
                repeats[f.pattern] = repeats.get(f.pattern, 0) + 1
            else:
                self.refusals.append(f)
        for name, s in other.patterns.items():
            mine = self.stats(name)
            mine.matched += s.matched - repeats.get(name, 0)
            mine.effected += s.effected
        self.notes.extend(n for n in other.notes if n not in self.notes)
        self.bytes_saved += other.bytes_saved
        self.instances.extend(other.instances)

    def committed(self, pattern: str, node: str, members: tuple[str, ...]) -> None:
        """Count an effected rewrite and record it as an instance (see `exclude`)."""
        from .exclude import Instance

        self.effected(pattern)
        self.instances.append(Instance(self.pass_name, pattern, node, members))


#: A pass's cost model: the simulated time (us) of a graph as given (built by the API layer with
#: the user's chip, detail, launch mode and streams; passes never import the simulator).
CostModel = Callable[[Graph], float]


@dataclass(frozen=True)
class PassContext:
    """What every pass may read (set once by `optimize`): the chip the graph is fused for (UB
    and L2 sizes), the cost model for decisions that need a simulated time, and options."""

    chip: Chip
    cost_model: CostModel | None = None
    fold_limit_bytes: int = 64 * 2**20
    outputs: tuple[str, ...] | None = None
    graph_id: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    #: analyses a pass leaves for the next one of the same run (`partition.fusion_graph`)
    analyses: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class Pass(ABC):
    """One optimisation. Subclasses set the class attributes and implement `run`."""

    name: ClassVar[str] = ""
    group: ClassVar[str] = GE
    patterns: ClassVar[tuple[str, ...]] = ()
    default_on: ClassVar[bool] = True      # CANN has default-off passes (SoftmaxSmallOp...)
    disableable: ClassVar[bool] = True     # AABiasaddConvFusion cannot be switched off

    @abstractmethod
    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        """Rewrite `graph` in place and report what matched and what took effect."""

    def new_result(self) -> PassResult:
        res = PassResult(self.name, self.group)
        for p in self.patterns:
            res.stats(p)
        return res

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, group={self.group})"


@dataclass
class Match:
    """A found candidate: the anchor node, the other nodes it covers, and named parts."""

    anchor: Node
    nodes: list[Node]
    parts: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.parts[key]


class RewritePass(Pass):
    """Skeleton of a pattern rewrite: match at each node, check, rewrite; counts everything.

    After every rewrite the graph is re-read (the rewrite changed it) and the search restarts
    from the top, skipping anchors already decided, so a pass sees the graph as it is.
    """

    pattern: ClassVar[str] = ""
    #: apply every disjoint match of one scan before re-reading the graph (passes that match
    #: once per layer of a deep model: re-reading a 1,000-node graph after each of ~100
    #: rewrites would dominate). Valid for rewrites that keep the names of the values they
    #: replace and touch only the nodes of their match; a candidate that shares a node with an
    #: applied one waits for the next scan, and scans repeat until one applies nothing.
    batch: ClassVar[bool] = False

    @abstractmethod
    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        """The pattern rooted at `node`, or None."""

    def anchor_types(self) -> frozenset[str] | None:
        """The op types `match` can root a pattern at (it returns None at every other node),
        so a scan passes the rest over without a call; None: any op type."""
        return None

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        return YES

    @abstractmethod
    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        """Apply the rewrite of an accepted match."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        from .exclude import excluded, leaves
        from .rewrite import GraphView

        res = self.new_result()
        default = self.pattern or self.patterns[0]
        decided: set[str] = set()
        anchors = self.anchor_types()
        while True:
            view = GraphView(graph)
            touched: set[str] = set()
            applied = deferred = 0
            nodes = list(graph.nodes) if anchors is None else \
                [n for n in graph.nodes if n.op_type in anchors]
            for node in nodes:
                if node.name in decided or node.name in touched:
                    continue
                m = self.match(graph, node, view)
                if m is None:
                    continue
                names = {n.name for n in m.nodes}
                if names & touched:
                    deferred += 1
                    continue
                decided.add(node.name)
                pattern = m.parts.get("pattern") or default
                res.matched(pattern)
                dec = self.check(graph, m, view, ctx)
                if not dec.ok:
                    res.refuse(pattern, node.name, dec.why)
                    continue
                why = excluded(ctx.options, self.name, m.nodes)
                if why:
                    res.refuse(pattern, node.name, why)
                    continue
                members = leaves(m.nodes)
                self.rewrite(graph, m, view, ctx)
                res.committed(pattern, m.anchor.name, members)
                touched |= names
                applied += 1
                if not self.batch:
                    break                # re-read the graph after each rewrite
            # a batch scan ends the pass only when it applied nothing: a match its stale view
            # could not see (a value whose producer an earlier rewrite of the scan replaced)
            # is found on the next scan, as the one-rewrite-per-scan mode finds it
            if not applied:
                return res


from .rewrite import GraphView  # noqa: E402  (type used in signatures above)

__all__ = ["Decision", "YES", "no", "require", "Pass", "PassResult", "PatternStats", "Refusal",
           "PassContext", "Match", "RewritePass", "GraphView", "GE", "GRAPH_FUSION", "UB_FUSION",
           "GRAPH_KERNEL", "L2_FUSION", "SWITCH_GROUPS"]
