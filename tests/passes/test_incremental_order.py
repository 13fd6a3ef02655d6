"""The windowed re-sort of the fusion passes (`passes/order.py`) against the whole-graph forms.

`FusionGraph.resort` re-orders only the position ranges that change, from a release tree;
these tests hold it to `Graph.toposort` (the reference: Kahn's algorithm over the whole graph)
after random commits on random graphs, hold the tree's queries to brute force, and check that
the analysis stays equal to a fresh one. `tests/passes/test_resort_order.py` does the same on
every re-sort the passes make on real models.
"""

from __future__ import annotations

import random

import pytest

from ascendsim.ir.graph import Graph
from ascendsim.passes.order import ReleaseTree
from ascendsim.passes.partition import FusionGraph
from ascendsim.passes.ub_fusion import fuse_nodes
from ascendsim.passes.verify import verify_graph


def _random_dag(rng: random.Random, n: int, inputs: int = 3) -> Graph:
    """n element-wise ops, each reading one or two earlier values (inputs included), some
    values read many times; built in a shuffled order of independent ops."""
    g = Graph("random")
    vals = [g.input(f"x{k}", (4,)) for k in range(inputs)]
    for _ in range(n):
        pool = vals[-12:] if rng.random() < 0.7 else vals
        a = rng.choice(pool)
        if rng.random() < 0.5:
            vals.append(g.relu(a) if rng.random() < 0.5 else g.exp(a))
        else:
            vals.append(g.add(a, rng.choice(pool)))
    for v in vals[-3:]:
        g.output(v)
    return g


def _same_analysis(fg: FusionGraph) -> None:
    # the graph's node list, edited in place by commits and re-sorts, is the live nodes (the
    # same objects, in order), and the holes index is that of the analysis
    assert fg.graph.nodes == fg.live_nodes()
    if fg.graph.nodes is fg._list:
        assert fg._holes == [i for i, n in enumerate(fg.nodes) if n is None]
    fresh = FusionGraph(fg.graph)
    assert [n.name for n in fg.live_nodes()] == [n.name for n in fresh.nodes]
    m = {i: fresh.index[n.name] for i, n in enumerate(fg.nodes) if n is not None}
    assert {n.name: m[i] for n, i in ((n, fg.index[n.name]) for n in fg.live_nodes())} == \
        fresh.index
    assert {v: m[i] for v, i in fg.producer.items()} == fresh.producer
    assert {v: [m[i] for i in rs] for v, rs in fg.readers.items()} == fresh.readers
    assert [[m[s] for s in fg.succ[i]] for i in sorted(m)] == fresh.succ


def _checked_resorts(monkeypatch) -> list[int]:
    original = FusionGraph.resort
    checked: list[int] = []

    def checked_resort(self: FusionGraph) -> None:
        expected = self.graph.copy()
        expected.nodes = list(self.live_nodes())
        expected.toposort()
        original(self)
        assert [n.name for n in self.graph.nodes] == [n.name for n in expected.nodes]
        checked.append(len(expected.nodes))

    monkeypatch.setattr(FusionGraph, "resort", checked_resort)
    return checked


@pytest.mark.parametrize("seed", range(12))
def test_resort_after_random_commits_equals_graph_toposort(seed, monkeypatch):
    rng = random.Random(seed)
    g = _random_dag(rng, 160)
    checked = _checked_resorts(monkeypatch)
    fg = FusionGraph(g)
    for step in range(45):
        live = fg.live_nodes()
        # a node and one to four others: a reader (a chain), or any later node (groups whose
        # members lie far apart break the order in many places)
        head = rng.choice(live)
        group = [head]
        for _ in range(rng.randint(1, 4)):
            outs = [r for o in group[-1].outputs for r in fg.users(o)]
            pick = rng.choice(outs) if outs and rng.random() < 0.6 else rng.choice(live)
            if pick not in group:
                group.append(pick)
        members = fg.members(group)
        if len(members) < 2 or fg.creates_cycle(members):
            continue
        fuse_nodes(g, group, {"fusion": "UB", "pattern": "test"}, fg=fg)
        if step % 9 == 0:
            _same_analysis(fg)
    _same_analysis(fg)
    verify_graph(g)
    assert len(checked) >= 5, f"only {len(checked)} re-sorts: the test checks too little"


def test_resort_of_an_unsorted_order_equals_graph_toposort(monkeypatch):
    """A first re-sort where the whole order is off (FusionGraph built on an order that is
    topological but not Kahn's), then commits."""
    rng = random.Random(7)
    g = _random_dag(rng, 120)
    g.nodes.reverse()
    g.toposort()                      # topological, but not toposort's own fixed point
    rng.shuffle(g.nodes)
    g.toposort()
    checked = _checked_resorts(monkeypatch)
    fg = FusionGraph(g)
    fg.resort()
    _same_analysis(fg)
    assert checked


def _first_violation(rel: list[int | None]) -> int | None:
    """The first position not topological or with a smaller release after it, by brute force."""
    for j, r in enumerate(rel):
        if r is None:
            continue
        later = [x for x in rel[j + 1:] if x is not None]
        if r >= j or (later and min(later) < r):
            return j
    return None


@pytest.mark.parametrize("seed", range(6))
def test_release_tree_queries_equal_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 70)
    rel: list[int | None] = [None if rng.random() < 0.2 else rng.randint(-1, n) for _ in
                             range(n)]
    tree = ReleaseTree(rel)
    for _ in range(40):
        assert tree.first_violation() == _first_violation(rel)
        start = rng.randint(0, n)
        assert tree.released_before(start) == [i for i in range(start, n)
                                               if rel[i] is not None and rel[i] < start]
        lo = rng.randint(0, n - 1)
        hi = rng.randint(lo, n - 1)
        assert tree.count(lo, hi) == sum(r is not None for r in rel[lo:hi + 1])
        changes = {rng.randrange(n): (None if rng.random() < 0.2 else rng.randint(-1, n))
                   for _ in range(rng.randint(1, 4))}
        for i, r in changes.items():
            rel[i] = r
        tree.set(changes)


def test_cycle_reason_does_not_depend_on_the_numbering():
    """creates_cycle names the same path whatever the index numbers: the same graph with
    unrelated nodes placed before it in varying numbers."""
    g = Graph("c")
    x = g.input("x", (4,))
    a1, a2 = g.relu(x), g.exp(x)
    d = g.add(g.neg(a1), g.sigmoid(a2))
    g.output(d)
    core = list(g.nodes)
    extras = []
    for _ in range(64):
        g.output(g.tanh(x))
        extras.append(g.nodes[-1])
    group = [core[0], core[1], core[4]]              # a1, a2 and the Add: both paths re-enter
    reasons = set()
    for k in range(0, 65, 3):
        h = g.copy()
        h.nodes = extras[:k] + core + extras[k:]
        fg = FusionGraph(h)
        reasons.add(fg.creates_cycle(fg.members(group)))
    assert len(reasons) == 1 and None not in reasons


@pytest.mark.parametrize("seed", range(4))
def test_reachability_bitsets_refuse_exactly_the_groups_the_search_refuses(seed):
    """connected_groups asks the bit sets first and searches (for the path to name) only
    when they show a cycle: both must say the same for every group, holes included."""
    from ascendsim.passes.partition import Reachability

    rng = random.Random(seed)
    g = _random_dag(rng, 150)
    fg = FusionGraph(g)
    for _ in range(10):                   # some commits: holes and a re-sorted order
        live = fg.live_nodes()
        head = rng.choice(live)
        outs = [r for o in head.outputs for r in fg.users(o)]
        if outs and not fg.creates_cycle(fg.members([head, outs[0]])):
            fuse_nodes(g, [head, outs[0]], {"fusion": "UB", "pattern": "test"}, fg=fg)
    reach = Reachability(fg)
    live = [i for i, n in enumerate(fg.nodes) if n is not None]
    cyclic = 0
    for _ in range(400):
        group = set(rng.sample(live, rng.randint(2, 6)))
        expected = fg.creates_cycle(group) is not None
        assert reach.cyclic(group) == expected
        cyclic += expected
    assert 40 < cyclic < 360              # both answers are exercised


@pytest.mark.parametrize("seed", range(4))
def test_cycle_search_within_the_bitset_region_names_the_same_path(seed):
    from ascendsim.passes.partition import Reachability, bit_indices

    rng = random.Random(100 + seed)
    g = _random_dag(rng, 150)
    fg = FusionGraph(g)
    reach = Reachability(fg)
    live = [i for i, n in enumerate(fg.nodes) if n is not None]
    named = 0
    for _ in range(300):
        group = set(rng.sample(live, rng.randint(2, 6)))
        d = a = u = 0
        for i in group:
            d, a, u = d | reach.desc[i], a | reach.anc[i], u | (1 << i)
        region = bit_indices(d & a & ~u)
        assert fg.creates_cycle(group, within=region) == fg.creates_cycle(group)
        assert fg.creates_cycle(group, within=d & a & ~u) == fg.creates_cycle(group)
        assert fg.creates_cycle(group) == _eager_cycle_search(fg, group)
        named += bool(region)
    assert named > 30


def _eager_cycle_search(fg: FusionGraph, group: set[int]) -> str | None:
    """The search `creates_cycle` made before it started lazily from one successor at a
    time (the reference its lazy order must reproduce: the same path named)."""
    last = max(group)
    stack = [(s, i) for i in sorted(group) for s in fg.succ[i] if s not in group]
    seen: set[int] = set()
    while stack:
        cur, origin = stack.pop()
        if cur in seen or cur > last:
            continue
        seen.add(cur)
        for s in fg.succ[cur]:
            if s in group:
                return (f"fusing would create a cycle: '{fg.nodes[origin].name}' -> "
                        f"'{fg.nodes[cur].name}' (outside the group) -> '{fg.nodes[s].name}'")
            stack.append((s, origin))
    return None


def test_bit_indices():
    from ascendsim.passes.partition import bit_indices

    rng = random.Random(3)
    for _ in range(100):
        x = rng.getrandbits(rng.randint(0, 3000))
        assert bit_indices(x) == {i for i in range(x.bit_length()) if x >> i & 1}
