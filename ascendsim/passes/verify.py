"""The graph verifier the pass manager runs after every pass (when `verify=True`).

It checks what a rewrite can break: unique names, every read value defined before use (nodes
in topological order, hence acyclic), graph outputs produced, each node's output shapes and
dtypes equal to a fresh shape inference, and fused nodes intact: their subgraph's inputs and
outputs are the node's, with the same shapes, and the subgraph itself verifies (so, by
induction from its inputs, the subgraph infers exactly the shapes the node's outputs declare);
a non-element-wise inner op (a cube head) reads no data operand from the subgraph's own
constants (the lowering loads those from GM, so they must be inputs of the node); and the
composite kernel can plan the subgraph, every loop writing shapes that broadcast to one loop
shape. A failure is a GraphError that names the pass that broke the graph and the node at
fault.

Run after every pass of a 10k-node graph, full shape inference each time would dominate
`optimize`; a `Verifier` therefore remembers the nodes it has checked: a node that is the
same object, reading and writing the same Value objects and the same constant data as when it
last passed, infers the same (inference is a pure function of those), so only nodes a pass
created or re-wired are re-inferred. The structural checks are incremental too: the nodes a
pass kept stay in their old relative order (one C-level list comparison), so only the edges of
added nodes and of values whose writer changed are re-checked (`_recheck`); anything it cannot
prove falls back to the whole-graph walk, which names the first fault.
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter, is_, is_not

import numpy as np

from ..errors import AscendSimError, GraphError
from ..execute.composite import plan
from ..ir.graph import Graph, Node
from ..ir.registry import Category, get_op
from ..ir.tensor import dtype_name
from .shapes import accepts, infer_node, is_loop

#: node -> the objects its last successful inference check depended on (Nodes hash by identity)
_Memo = dict[Node, tuple]


def _fail(where: str, msg: str) -> GraphError:
    return GraphError(f"{where}{msg}")


def _check_fused(graph: Graph, node: Node, where: str, memo: _Memo | None = None) -> None:
    sub = node.subgraph
    if sub is None:
        raise _fail(where, f"fused node '{node.name}' has no subgraph")
    ins = [i for i in node.inputs if i]
    if sorted(sub.inputs) != sorted(dict.fromkeys(ins)):
        raise _fail(where, f"fused node '{node.name}' reads {ins} but its subgraph's inputs "
                           f"are {sub.inputs}")
    if list(sub.outputs) != list(node.outputs):
        raise _fail(where, f"fused node '{node.name}' writes {list(node.outputs)} but its "
                           f"subgraph's outputs are {sub.outputs}")
    for name in [*sub.inputs, *sub.outputs]:
        inner, outer = sub.values.get(name), graph.values.get(name)
        if inner is None or outer is None or (inner.shape, inner.dtype) != (outer.shape,
                                                                            outer.dtype):
            raise _fail(where, f"fused node '{node.name}': boundary value '{name}' is "
                               f"{inner} inside and {outer} outside")
    for inner in sub.nodes:
        d = get_op(inner.op_type, inner.name)
        if d.category <= Category.BROADCAST:
            continue
        for k, v in enumerate(inner.inputs):
            if v in sub.constants and k not in d.needs_const_inputs:
                raise _fail(where, f"fused node '{node.name}': its {inner.op_type} "
                                   f"'{inner.name}' reads constant '{v}' as a data operand from "
                                   f"inside the subgraph (only element-wise ops take "
                                   f"immediates); it must be an input of the fused node")
    _verify(sub, f"{where}subgraph of '{node.name}': ", memo)
    _check_plan(node, where)


def _check_plan(node: Node, where: str) -> None:
    """The composite kernel can compute the subgraph: every loop it plans writes shapes that
    broadcast to one loop shape (a fused node whose ops share no loop failed in execute)."""
    try:
        p = plan(node.subgraph)
    except ValueError as exc:
        raise _fail(where, f"fused node '{node.name}': no composite loop plan: {exc}") from None
    for run in p.runs:
        for n in run.nodes:
            shape = tuple(node.subgraph.values[n.outputs[0]].shape)
            try:
                ok = np.broadcast_shapes(shape, run.loop.shape) == tuple(run.loop.shape)
            except ValueError:
                ok = False
            if not ok:
                raise _fail(where, f"fused node '{node.name}': op '{n.name}' writes {list(shape)}"
                                   f", which does not broadcast to its loop's shape "
                                   f"{list(run.loop.shape)}")


def _signature(graph: Graph, node: Node) -> tuple:
    """What the inference of `node` depends on, as objects compared by identity."""
    return (node, node.attrs, node.subgraph,
            *(graph.values.get(i) if i else None for i in node.inputs),
            *(graph.constants.get(i) if i else None for i in node.inputs),
            *(graph.values[o] for o in node.outputs if o))


def _unchanged(memo: _Memo | None, graph: Graph, node: Node) -> bool:
    """Whether `node` passed the inference check before with the same inputs and outputs."""
    if memo is None or is_loop(node):
        return False
    old = memo.get(node)
    if old is None:
        return False
    sig = _signature(graph, node)
    return len(old) == len(sig) and all(a is b for a, b in zip(old, sig))


def verify_graph(graph: Graph, pass_name: str | None = None, where: str = "") -> None:
    """Raise GraphError when `graph` is malformed; `pass_name` is named as the culprit."""
    _verify(graph, where, None, pass_name)


def _same_objects(old: dict, new: dict) -> bool:
    """Whether two name -> object maps hold the very same objects under the same names."""
    return len(old) == len(new) and all(map(is_, map(old.get, new), new.values()))


class _Clean:
    """What the last successful check of a Verifier saw: the (non-loop) nodes it passed (Node
    objects hash by identity) and the names whose Value or constant object changed since. A
    node in `nodes` that reads and writes no changed name has exactly the `_signature` it
    passed with."""

    def __init__(self, nodes: set[Node], changed: set[str]) -> None:
        self.nodes = nodes
        self.changed = changed

    def unchanged(self, node: Node) -> bool:
        return (node in self.nodes and self.changed.isdisjoint(node.inputs)
                and self.changed.isdisjoint(node.outputs))


def _changed_names(old: dict, new: dict) -> set[str]:
    """Keys whose object differs between two name -> object maps (added and removed too)."""
    changed = set(compress(new, map(is_not, map(old.get, new), new.values())))
    if len(old) + len(changed) != len(new):         # some were removed
        changed.update(k for k in old if k not in new)
    return changed


_node_name = attrgetter("name")


class _Structure:
    """The structure the last successful check passed: the nodes in order and as a set (Node
    objects hash and compare by identity), the node writing each value, the nodes reading
    each value, the graph inputs. Enough to re-check only what a pass changed (`_recheck`)."""

    def __init__(self, graph: Graph) -> None:
        self.nodes = list(graph.nodes)
        self.nodeset: set[Node] = set(self.nodes)
        self.names: set[str] = set(map(_node_name, self.nodes))
        self.producer: dict[str, Node] = {o: n for n in self.nodes for o in n.outputs if o}
        readers: dict[str, set[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v:
                    readers.setdefault(v, set()).add(n)
        self.readers = readers
        self.inputs = tuple(graph.inputs)




def _recheck(graph: Graph, st: _Structure, changed: set[str], memo: _Memo,
             old_passed: set[Node], where: str) -> set[Node] | None:
    """The verdict of `_verify` on `graph` from what changed since `st` passed: the nodes a
    pass added, the nodes reading or writing a value whose writer, Value or constant changed,
    and the whole-graph facts that C-level set and list operations check (unique names, the
    kept nodes in their old relative order). Returns the passed nodes on success, None when
    it cannot prove the graph sound (the caller then runs the full check, which names the
    first fault exactly). `st` is updated only on success."""
    nodes = graph.nodes
    if tuple(graph.inputs) != st.inputs:
        return None
    nodeset = set(nodes)
    if len(nodeset) != len(nodes):
        return None
    old = st.nodeset
    # nodes kept from the last check keep their relative order (then every edge between two
    # kept nodes that both still read and write the same names stays forward)
    if list(filter(old.__contains__, nodes)) != list(filter(nodeset.__contains__, st.nodes)):
        return None
    pos = dict(zip(nodes, range(len(nodes))))
    added_set = nodeset - old
    removed = old - nodeset
    added = sorted(added_set, key=pos.__getitem__)
    names = st.names - set(map(_node_name, removed))
    added_names = set(map(_node_name, added))
    if len(added_names) != len(added) or not names.isdisjoint(added_names):
        return None
    names |= added_names
    consts, values, inputs = graph.constants, graph.values, set(graph.inputs)
    producer = dict(st.producer)
    watch = set(changed)
    for n in removed:
        for o in n.outputs:
            if o:
                if producer.get(o) is n:
                    del producer[o]
                watch.add(o)
    for n in added:
        for o in n.outputs:
            if o:
                if o in producer or o in inputs or o in consts or o not in values:
                    return None
                producer[o] = n
                watch.add(o)
    for c in changed:
        if c in consts and (c not in values or c in producer):
            return None
    for o in graph.outputs:
        if o not in inputs and o not in consts and o not in producer:
            return None
    # the nodes to re-check: added, reading or writing a watched name, or not passed last time
    dirty = nodeset - old_passed
    for v in watch:
        r = st.readers.get(v)
        if r:
            dirty.update(r & nodeset)
        p = st.producer.get(v)
        if p is not None and p in nodeset:
            dirty.add(p)
    order = sorted(dirty, key=pos.__getitem__)
    for n in order:
        at = pos[n]
        for v in n.inputs:
            if v and v not in inputs and v not in consts:
                p = producer.get(v)
                if p is None or pos[p] >= at:
                    return None
        for o in n.outputs:
            if o and (o not in values or o in consts or o in inputs):
                return None
    passed = old_passed - removed
    try:
        for n in order:
            _check_node(graph, n, where, memo, passed)
    except GraphError:
        return None
    for n in removed:
        for v in n.inputs:
            if v and v in st.readers:
                st.readers[v].discard(n)
    for n in added:
        for v in n.inputs:
            if v:
                st.readers.setdefault(v, set()).add(n)
    st.nodes, st.nodeset, st.producer, st.names = list(nodes), nodeset, producer, names
    return passed


class Verifier:
    """`verify_graph` with a memory of the graph it last passed (see the module note); one per
    optimisation run, called after every pass. A graph the pass left as the last successful
    check saw it (the same node objects in order, equal Values, the same constant objects,
    inputs and outputs: a pass that found nothing to do) is not walked again. Otherwise only
    what changed is re-checked (`_recheck`: added nodes, the readers and writers of values
    whose writer, Value or constant changed, after whole-graph set and list checks); when that
    cannot prove the graph sound, the full check runs and names the first fault. A node the
    last check passed, whose inputs and outputs name the same Value and constant objects as
    then, is not looked up or re-inferred."""

    def __init__(self) -> None:
        self._memo: _Memo = {}
        self._nodes: list[Node] | None = None      # the graph the last success saw
        self._io: tuple = ()
        self._passed: set[Node] = set()
        self._values: dict = {}
        self._consts: dict = {}
        self._structure: _Structure | None = None

    def __call__(self, graph: Graph, pass_name: str | None = None, where: str = "") -> None:
        io = (tuple(graph.inputs), tuple(graph.outputs))
        if (graph.nodes == self._nodes and io == self._io and graph.values == self._values
                and _same_objects(self._consts, graph.constants)):
            return          # Nodes compare by identity; an equal Value infers the same
        changed = _changed_names(self._values, graph.values)
        changed |= _changed_names(self._consts, graph.constants)
        if pass_name:
            where = f"pass '{pass_name}' broke graph '{graph.name}': "
        st = self._structure          # as the last success left it (a failure changes nothing)
        passed = None
        if st is not None:
            passed = _recheck(graph, st, changed, self._memo, self._passed, where)
        if passed is None:
            passed = set()
            _verify(graph, where, self._memo, None, _Clean(self._passed, changed), passed)
            st = _Structure(graph)
        self._structure = st
        self._nodes = list(graph.nodes)
        self._io = io
        self._passed = passed
        self._values = dict(graph.values)
        self._consts = dict(graph.constants)


def _verify(graph: Graph, where: str, memo: _Memo | None, pass_name: str | None = None,
            clean: _Clean | None = None, passed: set[Node] | None = None) -> None:
    """Check `graph`; `clean`: what the last check passed (skipped here), `passed`: filled
    with the non-loop nodes this check passes (for the next one)."""
    if pass_name:
        where = f"pass '{pass_name}' broke graph '{graph.name}': "
    defined = set(graph.inputs) | set(graph.constants)
    for c in graph.constants:
        if c not in graph.values:
            raise _fail(where, f"constant '{c}' has no Value")
    seen: set[str] = set()
    for node in graph.nodes:
        if node.name in seen:
            raise _fail(where, f"duplicate node name '{node.name}'")
        seen.add(node.name)
        for i in node.inputs:
            if i and i not in defined:
                raise _fail(where, f"node '{node.name}' ({node.op_type}) reads '{i}', which is "
                                   f"not defined before it (dangling edge or cycle)")
        for o in node.outputs:
            if not o:
                continue
            if o in defined:
                raise _fail(where, f"value '{o}' is written twice (node '{node.name}')")
            if o not in graph.values:
                raise _fail(where, f"node '{node.name}' output '{o}' has no Value")
            defined.add(o)
        if clean is not None and clean.unchanged(node):
            passed.add(node)             # type: ignore[union-attr]
            continue
        _check_node(graph, node, where, memo, passed)
    for o in graph.outputs:
        if o not in defined:
            raise _fail(where, f"graph output '{o}' is not produced")


def _check_node(graph: Graph, node: Node, where: str, memo: _Memo | None,
                passed: set[Node] | None) -> None:
    """The per-node checks after the structural ones: a known op, a fused node intact, the
    recorded output shapes and dtypes equal to a fresh inference (skipped when `memo` shows the
    node passed with the same objects)."""
    get_op(node.op_type, node.name)
    if passed is not None and not is_loop(node):
        passed.add(node)             # recorded now: a failure raises, ending the check
    if node.subgraph is not None:
        if not _unchanged(memo, graph, node):
            _check_fused(graph, node, where, memo)
            if memo is not None:
                memo[node] = _signature(graph, node)
        return
    if _unchanged(memo, graph, node):
        return
    try:
        specs = infer_node(graph, node)
        recorded = [(tuple(graph.values[o].shape), graph.values[o].dtype)
                    for o in node.outputs if o]
        if accepts(graph, node, recorded, specs):
            if memo is not None and not is_loop(node):
                memo[node] = _signature(graph, node)
            return
    except AscendSimError as exc:
        raise _fail(where, str(exc)) from None
    for o, (shape, dtype) in zip(node.outputs, specs):
        v = graph.values[o]
        if tuple(shape) != tuple(v.shape) or dtype_name(dtype) != v.dtype:
            raise _fail(where, f"node '{node.name}' ({node.op_type}) output '{o}' is "
                               f"recorded as {v.dtype}{list(v.shape)} but infers to "
                               f"{dtype}{list(shape)}")


__all__ = ["verify_graph", "Verifier"]
