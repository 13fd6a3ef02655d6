"""The grouping analysis of the fusion passes: which ops may share one fused kernel.

Note on the algorithm
---------------------
This module only *decides* groups; the fusion passes (`ub_fusion`, `graph_kernel`, `l2_fusion`)
*commit* them with `ub_fusion.fuse_nodes`. The split follows TVM's GraphPartitioner /
FuseMutator: analysis first, on an indexed forward graph (`FusionGraph`: nodes in topological
order, producers, readers, graph outputs), then one rewrite per accepted group. Each rewrite
updates that analysis in place (`FusionGraph.commit`: the members become holes, the fused node
takes the last member's index), so a pass that commits k groups over n nodes costs about
n + k * (group size), not k * n; only a commit that breaks the topological order (a value of
the group read between its members) re-sorts the graph, exactly as `Graph.toposort` would.

Two shapes of group are found here:

* **chains** (`chain_forward`, `chain_backward`), for CANN's UB-fusion patterns, which are
  linear: a head op (a cube op, a reduce, a segment op, or any element-wise op) is extended
  along the value it writes, op by op, while the next op qualifies (element-wise, one data
  input: the chain's value) and the rule set's count limit is not reached. An op that would
  exceed the limit starts the next group, so a 6-op element-wise chain under a limit of 5
  splits 5 + 1. A chain follows the first qualifying reader even when the value has other
  readers: that *is* the pattern (CANN matches by op types), and the pass then refuses it
  because the intermediate escapes; it then retries the chain cut at the escaping value (a
  match of its own, whose output that value becomes). Matched and effected therefore differ,
  as in CANN's log.
* **connected groups** (`connected_groups`), for AutomaticUbFusion and MindSpore's graph
  kernels: union-find over candidate ops; every producer -> consumer edge between candidates,
  visited in topological order, merges the two groups unless the merge exceeds the size limit
  or contracting the union would create a cycle (a path that leaves the group and comes back,
  P -> X -> C with X outside; reference section 5 rule 1). Refused merges are reported with
  their reason.

Checks every group must pass before it is committed, each a `Decision` with a reason:

* `escapes`: an intermediate read outside the group (or a graph output) is kept by a UB
  group only as its last value; graph kernels instead make it an extra output.
* `creates_cycle`: the reachability check above, pruned by topological index (a node after
  the group's last member cannot reach back into it). `connected_groups`, which tests
  thousands of unions of one unchanging graph, first asks bit sets of descendants and
  ancestors (`Reachability`) and searches only for a union they show cyclic.
* `ub_working_set`: the group's working set at its *smallest legal tile* must fit the chip's
  UB with double buffering. A tile is one vector repeat (`chip.vector_bytes_per_cycle` bytes
  of the widest dtype), at least one cube output fractal (M0 x N0 from `chip.cube_mkn`) after a
  cube head, and at least one whole reduced row (the reduced extent; for a normalisation that
  keeps the shape, the trailing block from its `axis` attribute) for every value before a
  reduce or segment op, since a one-pass reduction holds its row in UB. Each buffer is aligned
  to `chip.ub_align_bytes`; the live buffers are counted op by op in order (an input is freed
  after its last reader in the group, the group's outputs stay until written out) and the peak
  is doubled (ping-pong buffers so MTE2/MTE3 overlap the vector unit).

Op properties come from the registry only: `Category` (ordered), the unit (`unit_for`), the
scalar function (what a composite kernel can compute) and `needs_const_inputs` (inputs that are
compile-time parameters, e.g. a reduce's axes, not data).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.registry import FUSED_OP, Category, OpDef, Unit, get_op
from ..ir.tensor import is_static, itemsize, numel
from .base import YES, Decision, no
from .order import IncrementalOrder


# ----------------------------------------------------------------------------- op properties
class _LazyConsts(Mapping):
    """Constant inputs of a graph, materialised only when a unit function asks for one."""

    def __init__(self, graph: Graph) -> None:
        self._g = graph

    def __getitem__(self, key: str):
        data = self._g.const_value(key)
        if data is None:
            raise KeyError(key)
        return data

    def __iter__(self) -> Iterator[str]:
        return iter(self._g.constants)

    def __len__(self) -> int:
        return len(self._g.constants)


def opdef(node: Node) -> OpDef:
    return get_op(node.op_type, node.name)


def unit_of(graph: Graph, node: Node) -> Unit:
    """The unit that runs `node` (some ops choose it from constant inputs)."""
    return opdef(node).unit_for(node, _LazyConsts(graph))


def is_scalar_const(graph: Graph, value: str) -> bool:
    """A constant of one element: an immediate operand of a vector instruction (vadds, vmuls)."""
    if value not in graph.constants:
        return False
    shape = graph.values[value].shape
    return is_static(shape) and numel(shape) == 1


def data_inputs(graph: Graph, node: Node) -> list[str]:
    """Inputs that are tensors the op streams through: not absent, not compile-time parameters
    (`needs_const_inputs`, e.g. axes), not scalar constants. A broadcast operand counts."""
    params = set(opdef(node).needs_const_inputs)
    return [v for i, v in enumerate(node.inputs)
            if v and i not in params and not is_scalar_const(graph, v)]


def is_elementwise(graph: Graph, node: Node) -> bool:
    """UB element-wise: category ELEMWISE or BROADCAST, one output, on the AI Core's vector
    unit (an AI CPU op such as Pow cannot keep its data in the UB)."""
    d = opdef(node)
    return (node.subgraph is None and d.category <= Category.BROADCAST
            and len(node.outputs) == 1 and unit_of(graph, node) == Unit.VECTOR)


def is_basic(graph: Graph, node: Node) -> bool:
    """A graph-kernel *basic* op: element-wise, broadcast, injective (reshape-like) or reduce,
    on the AI Core vector unit or a view. AI CPU and cube ops are not basic."""
    d = opdef(node)
    return (node.subgraph is None and d.category <= Category.REDUCE
            and unit_of(graph, node) in (Unit.VECTOR, Unit.NONE))


def is_absorbable(graph: Graph, node: Node) -> bool:
    """An op a composite kernel can take in: a basic op, or an element-wise op whose arithmetic
    the registry gives as a numba scalar function (the composite then computes it on the
    vector unit, e.g. Pow, which alone runs on the AI CPU)."""
    if node.subgraph is not None:
        return False
    d = opdef(node)
    if is_basic(graph, node):
        return True
    return d.category <= Category.BROADCAST and d.scalar is not None and len(node.outputs) == 1


def is_composite(node: Node, fusion: str = "GraphKernel") -> bool:
    return node.op_type == FUSED_OP and node.subgraph is not None and \
        node.attrs.get("fusion") == fusion


def op_count(node: Node) -> int:
    """Original ops a node stands for (a fused node counts its subgraph)."""
    if node.subgraph is not None and node.op_type == FUSED_OP:
        return sum(op_count(n) for n in node.subgraph.nodes)
    return 1


# ----------------------------------------------------------------------------- the indexed graph
def in_topological_order(graph: Graph) -> bool:
    """Whether every node reads only values defined before it (cheaper than a toposort)."""
    produced = {o for n in graph.nodes for o in n.outputs if o}
    seen: set[str] = set()
    for n in graph.nodes:
        if any(v in produced and v not in seen for v in n.inputs if v):
            return False
        seen.update(o for o in n.outputs if o)
    return True


class FusionGraph:
    """Indexed forward graph: nodes in topological order, producers and readers of values.

    A fusion pass commits groups into the same analysis (`commit`): the group's members become
    holes (None) and the fused node takes the last member's index, so indices stay topological
    positions and a commit costs the size of the group and its neighbourhood, not the graph.
    """

    def __init__(self, graph: Graph) -> None:
        if not in_topological_order(graph):
            graph.toposort()
        self.graph = graph
        #: how many times `resort` re-ordered the graph (a scan over `nodes` restarts then)
        self.resorts = 0
        self._build()

    def _build(self) -> None:
        graph = self.graph
        self.nodes: list[Node | None] = list(graph.nodes)
        self.index: dict[str, int] = {n.name: i for i, n in enumerate(self.nodes)}
        self.producer: dict[str, int] = {o: i for i, n in enumerate(self.nodes)
                                         for o in n.outputs if o}
        readers: dict[str, list[int]] = {}
        for i, n in enumerate(self.nodes):
            for v in dict.fromkeys(n.inputs):
                if v:
                    readers.setdefault(v, []).append(i)
        self.readers = readers
        self.graph_outputs = set(graph.outputs)
        self.succ: list[list[int]] = [self._succ_of(n) for n in self.nodes]
        #: whether a node may have an empty output name (then `resort` asks Graph.toposort)
        self._empty_outputs = any(not o for n in self.nodes for o in n.outputs)
        #: constants nothing reads (removed by the next commit, as a full sweep would)
        self.dead_consts: list[str] = []
        self._find_dead_consts()
        #: the release tree of `resort` (built at the first re-sort, then kept by commits)
        self._order: IncrementalOrder | None = None
        #: the graph's node list as this analysis keeps it in step (`sync_nodes`): the list
        #: object, the indices of the holes (sorted: an index's list position is the index
        #: less the holes before it) and the number of live nodes
        self._list: list[Node] | None = graph.nodes
        self._holes: list[int] = []
        self._live = len(self.nodes)

    def _find_dead_consts(self) -> None:
        """Constants nothing reads (the next commit removes them, as a full sweep would)."""
        self.dead_consts = [c for c in self.graph.constants
                            if c not in self.readers and c not in self.graph_outputs]

    def _succ_of(self, n: Node) -> list[int]:
        readers = self.readers
        if len(n.outputs) == 1:      # a readers list is already sorted and duplicate-free
            return list(readers.get(n.outputs[0], ())) if n.outputs[0] else []
        return sorted({r for o in n.outputs if o for r in readers.get(o, ())})

    def resort(self) -> None:
        """Re-order the graph exactly as `Graph.toposort` does (Kahn's algorithm, ready nodes
        first-in first-out, a node's readers in current order). The order is kept in a
        release tree (`order.IncrementalOrder`, built at the first re-sort): only the ranges
        of positions whose nodes change are re-ordered and re-indexed; indices stay
        topological positions (with holes)."""
        nodes = self.nodes
        if self._empty_outputs and any(not o for n in nodes if n is not None for o in n.outputs):
            # an empty output name is a value to Graph.toposort: let it decide
            self.graph.nodes = self.live_nodes()
            self.graph.toposort()
            self.resorts += 1
            self._build()
            return
        if self._order is None:
            self._order = IncrementalOrder(self)
        if not self._order.resort():
            self.graph.nodes = self.live_nodes()
            self.graph.toposort()       # raises the GraphError naming the cycle
        if not self._synced(0):         # else `place` kept the graph's list in step
            self._relist()
        self.resorts += 1
        self._find_dead_consts()

    def _synced(self, extra: int) -> bool:
        """Whether the graph's node list is the one this analysis keeps in step (the live
        nodes in order, plus `extra` nodes appended since)."""
        lst = self.graph.nodes
        return lst is self._list and len(lst) == self._live + extra

    def _relist(self) -> None:
        """Give the graph a fresh list of the live nodes (and the holes index to keep it)."""
        self.graph.nodes = self._list = self.live_nodes()
        self._holes = [i for i, n in enumerate(self.nodes) if n is None]
        self._live = len(self._list)

    def place(self, index: int, node: Node) -> None:
        """`resort` moved `node` to live position `index`: the same in the graph's list."""
        lst = self._list
        if lst is not None and lst is self.graph.nodes:
            lst[index - bisect_left(self._holes, index)] = node
            self.graph.nodes_changed()

    def sync_nodes(self, group: set[int], fused: Node) -> None:
        """After `commit(group, fused)` of a fused node the graph appended: make the graph's
        node list the live nodes in order, editing it in place (the members out, the fused
        node at the last member's place) instead of rebuilding it from the indices."""
        lst = self.graph.nodes
        if not (self._synced(1) and lst[-1] is fused):
            self._relist()
            return
        lst.pop()
        members = sorted(group)
        holes = self._holes
        at = [m - bisect_left(holes, m) for m in members]
        for r in reversed(at[:-1]):
            del lst[r]
        lst[at[-1] - (len(members) - 1)] = fused
        for m in members[:-1]:
            insort(holes, m)
        self._live -= len(members) - 1
        self.graph.nodes_changed()

    def live_nodes(self) -> list[Node]:
        """The nodes in order, without the holes left by commits."""
        return list(filter(None, self.nodes))     # a Node is always true

    def describes(self, graph: Graph) -> bool:
        """Whether this analysis is still exactly that of `graph`: the same graph object, the
        same node objects in the same order, the same outputs (what the index is built
        from: nodes are immutable, a rewired node is a new object)."""
        return (graph is self.graph and set(graph.outputs) == self.graph_outputs
                and graph.nodes == self.live_nodes())

    def commit(self, group: set[int], fused: Node) -> bool:
        """Record that `group` was replaced by `fused` at the index of its last member.
        Returns whether the order is still topological (a reader of a fused output between
        the group's members would now come before it); when not, the caller re-sorts."""
        pos = max(group)
        old = [self.nodes[i] for i in sorted(group)]
        touched: set[str] = set()
        for i, n in zip(sorted(group), old):
            del self.index[n.name]
            self.nodes[i] = None
            self.succ[i] = []
            for o in n.outputs:
                if o and self.producer.get(o) == i:
                    del self.producer[o]
            for v in dict.fromkeys(n.inputs):
                if v:
                    rs = self.readers[v]
                    rs.remove(i)
                    touched.add(v)
        self.nodes[pos] = fused
        self.index[fused.name] = pos
        self._empty_outputs = self._empty_outputs or any(not o for o in fused.outputs)
        for o in fused.outputs:
            if o:
                self.producer[o] = pos
        for v in dict.fromkeys(fused.inputs):
            if v:
                insort(self.readers.setdefault(v, []), pos)
                touched.add(v)
        for v in touched:
            if not self.readers.get(v):
                self.readers.pop(v, None)
        # successor lists of the producers whose readers changed, and of the fused node
        for p in {self.producer[v] for v in touched if v in self.producer}:
            self.succ[p] = self._succ_of(self.nodes[p])
        self.succ[pos] = self._succ_of(fused)
        if self._order is not None:
            self._order.touch(group)
            self._order.touch(self.succ[pos])
        return all(r > pos for o in fused.outputs if o for r in self.readers.get(o, ()))

    def users(self, value: str) -> list[Node]:
        return [self.nodes[i] for i in self.readers.get(value, [])]

    def producer_of(self, value: str) -> Node | None:
        i = self.producer.get(value)
        return None if i is None else self.nodes[i]

    def members(self, nodes: Iterable[Node]) -> set[int]:
        return {self.index[n.name] for n in nodes}

    # -------------------------------------------------------------- checks on a group
    def escapes(self, group: set[int], allowed: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(value, reader) pairs: values made inside `group` and read outside it (reader is a
        node name, or "graph output"), except the `allowed` ones."""
        allowed = set(allowed)
        out: list[tuple[str, str]] = []
        for i in sorted(group):
            for o in self.nodes[i].outputs:
                if not o or o in allowed:
                    continue
                outside = [r for r in self.readers.get(o, []) if r not in group]
                if outside:
                    out.append((o, self.nodes[outside[0]].name))
                elif o in self.graph_outputs:
                    out.append((o, "graph output"))
        return out

    def outputs_of(self, group: set[int]) -> list[str]:
        """Values a group must produce: read outside it or graph outputs, in node order."""
        return [o for i in sorted(group) for o in self.nodes[i].outputs if o and (
            o in self.graph_outputs or any(r not in group for r in self.readers.get(o, [])))]

    def creates_cycle(self, group: set[int], within: set[int] | int | None = None) -> str | None:
        """Why contracting `group` into one node would create a cycle (a path that leaves the
        group and re-enters it), or None. Nodes after the group's last member cannot reach
        back, so the search is pruned there. It is a depth-first search from the members'
        successors, the last member's last successor first (a stack filled in node order), so
        the path it names depends on the order only, not on the index numbers; it starts from
        the next successor only when the previous one's search found nothing, so a cycle near
        the group's end is named without visiting the rest. `within`: the non-members that
        are descendants and ancestors of the group, as a set or a bit set (bit i = index i; no
        other node the search reaches leads back, so leaving them out changes neither the
        answer nor the path named: see `Reachability`)."""
        last = max(group)
        succ = self.succ
        if isinstance(within, int):
            within = bit_indices(within)
        seen: set[int] = set()
        for origin in sorted(group, reverse=True):
            for first in reversed(succ[origin]):
                if first in group if within is None else first not in within:
                    continue
                stack = [first]
                while stack:
                    cur = stack.pop()
                    if cur in seen or cur > last:
                        continue
                    seen.add(cur)
                    for s in succ[cur]:
                        if s in group:
                            return (f"fusing would create a cycle: '{self.nodes[origin].name}' -> "
                                    f"'{self.nodes[cur].name}' (outside the group) -> "
                                    f"'{self.nodes[s].name}'")
                        if within is None or s in within:
                            stack.append(s)
        return None


def fusion_graph(graph: Graph, ctx=None) -> FusionGraph:
    """The analysis of `graph` for a fusion pass: the one the previous fusion pass of the same
    run (`ctx`, a PassContext) left, when it still describes the graph exactly (consecutive
    fusion passes), else a new one. A kept analysis has holes where commits removed nodes;
    every decision of the passes depends on the order of the indices only, not their values."""
    cache = getattr(ctx, "analyses", None)
    fg = cache.get("fusion_graph") if cache is not None else None
    if fg is not None and fg.describes(graph):
        fg._find_dead_consts()
        return fg
    fg = FusionGraph(graph)
    if cache is not None:
        cache["fusion_graph"] = fg
    return fg


# ----------------------------------------------------------------------------- chains
def next_in_chain(fg: FusionGraph, tail: Node,
                  qualifies: Callable[[Node, str], bool]) -> Node | None:
    """The first reader (topological order) of `tail`'s single output that qualifies as the
    chain's next op."""
    outs = [o for o in tail.outputs if o]
    if len(outs) != 1:
        return None
    for reader in fg.users(outs[0]):
        if qualifies(reader, outs[0]):
            return reader
    return None


def chain_forward(fg: FusionGraph, head: Node, qualifies: Callable[[Node, str], bool],
                  limit: int) -> list[Node]:
    """Up to `limit` ops following `head`, each reading the previous one's output."""
    chain: list[Node] = []
    tail = head
    while len(chain) < limit:
        nxt = next_in_chain(fg, tail, qualifies)
        if nxt is None:
            break
        chain.append(nxt)
        tail = nxt
    return chain


def chain_backward(fg: FusionGraph, anchor: Node, value: str,
                   qualifies: Callable[[Node, bool], bool], limit: int) -> list[Node]:
    """Up to `limit` producers feeding `value` into `anchor`, nearest last in the result.
    `qualifies(node, is_first)`: is_first is False while the walk may go on beyond the node."""
    chain: list[Node] = []
    while len(chain) < limit and value:
        prod = fg.producer_of(value)
        if prod is None or not qualifies(prod, False):
            # a producer with several data inputs may still open the chain (be its first op)
            if prod is not None and qualifies(prod, True):
                chain.append(prod)
            break
        chain.append(prod)
        ins = data_inputs(fg.graph, prod)
        value = ins[0] if len(ins) == 1 else ""
    chain.reverse()
    return chain


# ----------------------------------------------------------------------------- UB working set
def _align(nbytes: int, align: int) -> int:
    return -(-nbytes // align) * align


def _row_extent(src, dst, attrs: dict) -> int:
    """Elements of one reduced row: input / output size for a reduction; for a normalisation
    that keeps the shape (Softmax, LayerNorm: output size = input size), the trailing block
    from its ONNX `axis` attribute (default the last dimension)."""
    if dst.numel < src.numel:
        return max(1, src.numel // max(1, dst.numel))
    axis = attrs.get("axis", -1)
    axis = axis if isinstance(axis, int) else -1
    shape = src.shape
    start = axis + len(shape) if axis < 0 else axis
    return max(1, numel(shape[min(max(start, 0), len(shape)):]) or 1)


@dataclass
class WorkingSet:
    """Peak UB bytes of a group at its smallest legal tile, with double buffering."""

    bytes: int
    peak_buffers: int
    tile_elems: int

    def describe(self) -> str:
        return (f"{self.bytes} B ({self.peak_buffers} live tile buffers of >= {self.tile_elems} "
                f"elements at peak, double-buffered)")


def ub_working_set(graph: Graph, nodes: list[Node], chip,
                   fg: FusionGraph | None = None) -> WorkingSet:
    """The tiled working set of a UB group (see the module note)."""
    fg = fg if fg is not None and fg.graph is graph else FusionGraph(graph)
    members = fg.members(nodes)
    produced = {o for n in nodes for o in n.outputs if o}
    values = {v for n in nodes for v in data_inputs(graph, n)} | produced
    widest = max((itemsize(graph.values[v].dtype) for v in values), default=4)
    tile = max(1, int(chip.vector_bytes_per_cycle) // widest)
    if any(opdef(n).category == Category.CUBE for n in nodes):
        m0, _k0, n0 = chip.cube_mkn.float16
        tile = max(tile, m0 * n0)
    # values upstream of a reduce/segment op need whole reduced rows in UB
    row: dict[str, int] = {}
    for n in nodes:
        if opdef(n).category in (Category.REDUCE, Category.SEGMENT):
            ins = data_inputs(graph, n)
            if ins and n.outputs[0] and is_static(graph.values[ins[0]].shape) \
                    and is_static(graph.values[n.outputs[0]].shape):
                extent = _row_extent(graph.values[ins[0]], graph.values[n.outputs[0]],
                                     n.attrs)
                stack = [ins[0]]
                while stack:
                    v = stack.pop()
                    row[v] = max(row.get(v, 1), extent)
                    prod = next((p for p in nodes if v in p.outputs), None)
                    if prod is not None:
                        stack.extend(data_inputs(graph, prod))

    def buf(v: str) -> int:
        val = graph.values[v]
        n = max(tile, row.get(v, 1)) if not is_static(val.shape) else \
            min(val.numel, max(tile, row.get(v, 1)))
        return _align(max(1, n) * itemsize(val.dtype), chip.ub_align_bytes)

    last_use: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for v in data_inputs(graph, n):
            last_use[v] = i
    outputs = {o for o in produced if o not in last_use or o in fg.graph_outputs
               or any(r not in members for r in fg.readers.get(o, []))}
    live: dict[str, int] = {}
    for v in dict.fromkeys(v for n in nodes for v in data_inputs(graph, n)):
        if v not in produced:
            live[v] = buf(v)
    peak, peak_n = sum(live.values()), len(live)
    for i, n in enumerate(nodes):
        for o in n.outputs:
            if o:
                live[o] = buf(o)
        if sum(live.values()) > peak:
            peak, peak_n = sum(live.values()), len(live)
        for v in data_inputs(graph, n):
            if last_use.get(v) == i and v not in outputs:
                live.pop(v, None)
    return WorkingSet(2 * peak, peak_n, tile)


def check_ub(graph: Graph, nodes: list[Node], chip, fg: FusionGraph | None = None) -> Decision:
    """Refuse a UB group whose tiled working set does not fit `chip.ub_bytes`."""
    ws = ub_working_set(graph, nodes, chip, fg)
    if ws.bytes > chip.ub_bytes:
        return no(f"UB over capacity: working set {ws.describe()} > ub_bytes "
                  f"{chip.ub_bytes} B of {chip.name}")
    return YES


# ----------------------------------------------------------------------------- connected groups
class Reachability:
    """Descendants and ancestors of every node of an unchanging `FusionGraph` as bit sets
    (Python ints, bit i = index i), for the cycle test of many candidate groups.

    Contracting a group U creates a cycle exactly when some node outside U is both a
    descendant and an ancestor of U: a path m -> .. -> x -> .. -> m' (m, m' in U) holds a
    stretch from a member through non-members to a member around x, and such a stretch is
    what `FusionGraph.creates_cycle` searches for. So with desc(U) and anc(U) the unions of
    the members' sets, U is refused iff desc(U) & anc(U) has a bit outside U."""

    def __init__(self, fg: FusionGraph) -> None:
        succ = fg.succ
        n = len(fg.nodes)
        desc = [0] * n
        for v in range(n - 1, -1, -1):         # indices are topological: successors first
            d = 0
            for s in succ[v]:
                d |= desc[s] | (1 << s)
            desc[v] = d
        anc = [0] * n
        for v in range(n):                     # predecessors first
            if succ[v]:
                a = anc[v] | (1 << v)
                for s in succ[v]:
                    anc[s] |= a
        self.desc, self.anc = desc, anc

    def cyclic(self, group: Iterable[int]) -> bool:
        """Whether contracting `group` would create a cycle."""
        d = a = u = 0
        for i in group:
            d |= self.desc[i]
            a |= self.anc[i]
            u |= 1 << i
        return bool(d & a & ~u)


def bit_indices(bits: int) -> set[int]:
    """The indices of the set bits of a non-negative int."""
    raw = np.frombuffer(bits.to_bytes((bits.bit_length() + 7) // 8, "little"), np.uint8)
    return set(np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist())


@dataclass
class Partition:
    """Result of `connected_groups`: groups (node lists in topological order) and refused
    merges as (node name, reason)."""

    groups: list[list[Node]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def connected_groups(fg: FusionGraph, candidate: Callable[[Node], bool], max_ops: int,
                     may_merge: Callable[[list[Node], list[Node]], bool] | None = None,
                     size: Callable[[Node], int] = op_count) -> Partition:
    """Union-find over candidate nodes, merging along producer -> consumer edges in
    topological order; a merge is refused when the union has more than `max_ops` ops, when
    `may_merge` says no, or when contracting the union would create a cycle."""
    parent: dict[int, int] = {}
    members: dict[int, set[int]] = {}
    ops: dict[int, int] = {}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, n in enumerate(fg.nodes):
        if n is not None and candidate(n):
            parent[i], members[i], ops[i] = i, {i}, size(n)
    part = Partition()
    # per group: its descendants, ancestors and members as bit sets (`Reachability`); the
    # search that names the cycle runs only for a union they show cyclic
    reach: Reachability | None = None
    bits: dict[int, tuple[int, int, int]] = {}
    for c in sorted(parent):
        node = fg.nodes[c]
        for v in dict.fromkeys(node.inputs):
            p = fg.producer.get(v) if v else None
            if p is None or p not in parent:
                continue
            rp, rc = find(p), find(c)
            if rp == rc:
                continue
            if ops[rp] + ops[rc] > max_ops:
                part.refused.append((node.name, f"size limit: {ops[rp]} + {ops[rc]} ops > "
                                                f"{max_ops}"))
                continue
            if may_merge is not None and not may_merge(
                    [fg.nodes[i] for i in sorted(members[rp])],
                    [fg.nodes[i] for i in sorted(members[rc])]):
                continue
            union = members[rp] | members[rc]
            if reach is None:
                reach = Reachability(fg)
            dp, ap, up = bits.get(rp) or (reach.desc[rp], reach.anc[rp], 1 << rp)
            dc, ac, uc = bits.get(rc) or (reach.desc[rc], reach.anc[rc], 1 << rc)
            d, a, u = dp | dc, ap | ac, up | uc
            cyclic = d & a & ~u              # outside nodes on a path back into the union
            why = fg.creates_cycle(union, within=cyclic) if cyclic else None
            if why:
                part.refused.append((node.name, why))
                continue
            parent[rc] = rp
            members[rp] = union
            bits[rp] = (d, a, u)
            bits.pop(rc, None)
            ops[rp] += ops.pop(rc)
            del members[rc]
    for root in sorted(members):
        if len(members[root]) > 1:
            part.groups.append([fg.nodes[i] for i in sorted(members[root])])
    return part


__all__ = ["FusionGraph", "fusion_graph", "Partition", "Reachability", "WorkingSet",
           "chain_forward", "chain_backward", "next_in_chain", "connected_groups",
           "ub_working_set", "check_ub", "data_inputs", "is_elementwise", "is_basic",
           "is_absorbable", "is_composite", "is_scalar_const", "op_count", "unit_of", "opdef"]
