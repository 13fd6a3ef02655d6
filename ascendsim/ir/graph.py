"""The graph IR: `Graph` (a DAG of `Node`s joined by `Value`s) and its builder methods.

A graph is C = {N, E, I, O} (seed 004): nodes, value edges, graph inputs and outputs, plus
constants (initializers). Two nodes may be joined by several edges (``g.mul(x, x)``).

`Node` and `Value` are immutable; the `Graph` is the mutable container a builder or a pass
edits. Builder methods are generated from the op registry: ``g.relu(x)`` adds a Relu node,
infers its output shape and returns its output `Value` (a tuple for multi-output ops).

Control-flow subgraphs are *closed*: an If or Loop body sees only its own inputs; values it
uses from the enclosing graph are passed in explicitly (the ONNX importer does that), so every
graph can be executed, printed and simulated on its own.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict, deque
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GraphError
from ..hw.chip import MAX_BYTES as MAX_TENSOR_BYTES
from .registry import FUSED_OP, OpDef, builder_names, get_op, op_by_builder
from .tensor import (
    ConstData,
    LazyTensor,
    Shape,
    Value,
    as_storage,
    dtype_name,
    itemsize,
    materialize,
)


@dataclass(frozen=True, eq=False)
class Node:
    """One operator. `inputs`/`outputs` are value names ("" marks an absent optional input)."""

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    subgraph: Graph | None = None   # a fused node keeps the original ops it replaced

    @property
    def opdef(self) -> OpDef:
        return get_op(self.op_type, self.name)

    def __repr__(self) -> str:
        ins, outs = ", ".join(self.inputs), ", ".join(self.outputs)
        return f"Node({self.name}: {self.op_type}({ins}) -> {outs})"


class Graph:
    """A directed acyclic graph of operators with named inputs, outputs and constants."""

    def __init__(self, name: str = "graph") -> None:
        self.name = name
        self.values: dict[str, Value] = {}
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.constants: dict[str, ConstData] = {}
        #: constants that are fixed tables, not weights (rotary tables, a causal mask): a
        #: training step never trains them (PyTorch's buffers)
        self.buffers: set[str] = set()
        #: node name -> the names of the model's ops a graph-fusion pass replaced with it
        #: (an IncreFlashAttention node named after one of them carries all of them)
        self.fused_names: dict[str, tuple[str, ...]] = {}
        self.opset: int | None = None
        self._counter = itertools.count()
        self._names: set[str] = set()
        self._names_key: tuple[int, int] = (0, -1)

    # ----------------------------------------------------------------- construction
    def _node_names(self) -> set[str]:
        """The set of node names, rebuilt only when `nodes` was replaced or resized (passes
        assign `g.nodes = [...]`); keeps building a 10k-node graph linear, not quadratic."""
        key = (id(self.nodes), len(self.nodes))
        if self._names_key != key:
            self._names = {n.name for n in self.nodes}
            self._names_key = key
        return self._names

    def nodes_changed(self) -> None:
        """Say that `nodes` was edited in place (same list object): the name index is rebuilt
        at its next use."""
        self._names_key = (0, -1)

    def discard_nodes(self, nodes: Iterable[Node]) -> list[int]:
        """Remove these nodes (found by identity, else by name) from `nodes` in place, keeping the
        name index; return the indices they had, ascending. A rewrite of a few nodes of a
        10k-node graph then costs no rebuild of the list or of the name set."""
        names = self._node_names()
        try:
            where = sorted(self.nodes.index(n) for n in {id(n): n for n in nodes}.values())
        except ValueError:              # not these objects: the nodes of the same names
            gone = {n.name for n in nodes}
            where = [i for i, n in enumerate(self.nodes) if n.name in gone]
        for i in reversed(where):
            names.discard(self.nodes[i].name)
            del self.nodes[i]
        self._names_key = (id(self.nodes), len(self.nodes))
        return where

    def _fresh(self, base: str, taken: Container[str]) -> str:
        while True:
            name = f"{base}_{next(self._counter)}"
            if name not in taken:
                return name

    def fresh_node_name(self, base: str, taken: Container[str] | None = None) -> str:
        """`base_<n>` not yet used; `taken` replaces the node-name set when the caller keeps
        its own index of names (a pass rewriting a large graph)."""
        return self._fresh(base, self._node_names() if taken is None else taken)

    def fresh_value_name(self, base: str) -> str:
        return self._fresh(base, self.values)

    def _add_value(self, value: Value, checked: bool = False) -> Value:
        """Add `value`; `checked`: the caller ran `check_value` on it already."""
        if not isinstance(value.name, str) or not value.name:
            raise GraphError(f"graph '{self.name}': a value needs a non-empty name, got "
                             f"{value.name!r}")
        if value.name in self.values:
            raise GraphError(f"duplicate value name '{value.name}' in graph '{self.name}'")
        if not checked:
            check_value(value, f"graph '{self.name}'")
        self.values[value.name] = value
        return value

    def input(self, name: str, shape: Sequence[int | str], dtype: Any = "float32",
              layout: str = "ND") -> Value:
        """Declare a graph input; symbolic dims are strings ("batch")."""
        value = self._add_value(Value(name, input_shape(shape, f"input '{name}'"),
                                      dtype_name(dtype), layout))
        self.inputs.append(name)
        return value

    def const(self, data: Any, name: str | None = None, dtype: Any = None,
              buffer: bool = False) -> Value:
        """Add a constant (initializer); `data` is an array, scalar or LazyTensor. `buffer`: a
        fixed table the model reads but never trains (see `buffers`)."""
        if isinstance(data, LazyTensor):
            shape, dt = data.shape, data.dtype
        else:
            dt = dtype_name(dtype if dtype is not None else np.asarray(data).dtype)
            data = as_storage(data, dt)   # bfloat16: float32 rounded to bf16 (kernels/bf16.py)
            shape = data.shape
        name = name or self.fresh_value_name("const")
        value = self._add_value(Value(name, tuple(shape), dt))
        self.constants[name] = data
        if buffer:
            self.buffers.add(name)
        return value

    def weight(self, name: str, shape: Sequence[int], dtype: Any = "float32", seed: int = 0,
               scale: float | None = None) -> Value:
        """A lazily built random weight (He-style scale by default): free until its values
        are needed."""
        shape = tuple(int(d) for d in shape)
        if scale is None:
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else max(shape[0], 1)
            scale = float(np.sqrt(2.0 / max(fan_in, 1)))
        return self.const(LazyTensor.random(shape, dtype_name(dtype), seed, scale), name)

    def output(self, *values: Value | str) -> None:
        """Mark values as graph outputs (in order)."""
        for v in values:
            name = v if isinstance(v, str) else v.name
            if name not in self.values:
                raise GraphError(f"output '{name}' is not a value of graph '{self.name}'")
            if name not in self.outputs:
                self.outputs.append(name)

    def _as_input(self, arg: Any, like_dtype: str | None, op_type: str) -> str:
        if arg is None:
            return ""
        if isinstance(arg, Value):
            if self.values.get(arg.name) is not arg and self.values.get(arg.name) != arg:
                raise GraphError(f"{op_type}: value '{arg.name}' does not belong to graph "
                                 f"'{self.name}'")
            return arg.name
        if isinstance(arg, str):
            if arg not in self.values:
                raise GraphError(f"{op_type}: no value named '{arg}' in graph '{self.name}'")
            return arg
        if isinstance(arg, (bool, int, float, np.ndarray, np.generic, list, tuple)):
            arr = np.asarray(arg)
            if (np.ndim(arg) == 0 and like_dtype is not None and arr.dtype.kind in "iuf"
                    and not isinstance(arg, (bool, np.bool_))):
                arr = arr.astype(like_dtype)       # g.mul(x, 2.0): the scalar takes x's dtype
            elif not isinstance(arg, np.ndarray) and arr.dtype == np.float64:
                arr = arr.astype(like_dtype if like_dtype and like_dtype.startswith("float")
                                 else np.float32)  # Python float lists: float32 by default
            return self.const(arr).name
        raise GraphError(f"{op_type}: cannot use {type(arg).__name__} as an input")

    def add_node(self, op_type: str, inputs: Sequence[Any], attrs: dict | None = None,
                 name: str | None = None, outputs: Sequence[str] | None = None,
                 subgraph: Graph | None = None, at: int | None = None) -> list[Value]:
        """Append a node (or insert it at index `at`), infer its outputs, and return the
        output Values."""
        opdef = get_op(op_type, name)
        name = name or self.fresh_node_name(op_type)
        if name in self._node_names():
            raise GraphError(f"duplicate node name '{name}' in graph '{self.name}'")
        # a Python scalar input takes the dtype of the first non-bool Value (g.where(c, 1.0, x))
        values = [a for a in inputs if isinstance(a, Value)]
        like = next((v.dtype for v in values if v.dtype != "bool"),
                    values[0].dtype if values else None)
        where = f"{op_type} '{name}'"
        in_names = tuple([self._as_input(a, like, where) for a in inputs])
        full_attrs = self._check_attrs(opdef, attrs or {}, name)
        in_vals = [self.values[n] if n else None for n in in_names]
        out_specs = self._infer(opdef, name, in_vals, in_names, full_attrs)
        if outputs is None:
            outputs = ([name] if len(out_specs) == 1
                       else [f"{name}:{i}" for i in range(len(out_specs))])
        if len(outputs) != len(out_specs):
            raise GraphError(f"node '{name}' ({op_type}) makes {len(out_specs)} outputs, "
                             f"{len(outputs)} names were given")
        where = f"node '{name}' ({op_type})"
        outs = [self._add_value(check_value(Value(o, tuple(s), dtype_name(d)), where),
                                checked=True)
                for o, (s, d) in zip(outputs, out_specs)]
        names = self._node_names()
        node = Node(name, op_type, in_names, tuple(outputs), full_attrs, subgraph)
        if at is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(at, node)
        names.add(name)
        self._names_key = (id(self.nodes), len(self.nodes))
        return outs

    @staticmethod
    def _check_attrs(opdef: OpDef, attrs: dict, node: str) -> dict:
        unknown = sorted(set(attrs) - set(opdef.attrs) - KERNEL_ATTRS)
        if unknown:
            valid = ", ".join(sorted(set(opdef.attrs) | KERNEL_ATTRS))
            raise GraphError(f"node '{node}' ({opdef.op_type}): unknown attribute(s) "
                             f"{', '.join(unknown)}; valid: {valid}")
        checked = {k: check_attr(opdef, k, v, node) for k, v in attrs.items()}
        if (checked.get("block_dim") or 0) < 0:
            raise GraphError(f"node '{node}' ({opdef.op_type}): attribute 'block_dim' must be "
                             f">= 0 (0: the kernel's own core count), got {checked['block_dim']}")
        split = checked.get("single_core")
        if split is not None and (len(split) != 2 or min(split) < 1):
            raise GraphError(f"node '{node}' ({opdef.op_type}): attribute 'single_core' must be "
                             f"[singleCoreM, singleCoreN], two positive integers (the output "
                             f"block each core owns), got {list(split)!r}")
        return {**opdef.attrs, **checked}

    def _infer(self, opdef: OpDef, name: str, in_vals: list, in_names: Sequence[str],
               attrs: dict) -> list:
        consts = [self.const_value(n) if (i in opdef.const_inputs and n) else None
                  for i, n in enumerate(in_names)]
        try:
            return opdef.infer(in_vals, attrs, consts)
        except GraphError as exc:
            msg = str(exc)
            if f"'{name}'" in msg:
                raise
            raise GraphError(f"node '{name}' ({opdef.op_type}): {msg}") from None
        except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as exc:
            raise GraphError(f"node '{name}' ({opdef.op_type}): cannot infer output shape "
                             f"from inputs {[v for v in in_vals]}: {exc}") from None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        opdef = op_by_builder(attr)
        if opdef is None:
            raise AttributeError(f"Graph has no builder '{attr}' (no registered op of that name)")
        return lambda *args, **kwargs: self._build(opdef, args, kwargs)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(builder_names()))

    def _build(self, opdef: OpDef, args: tuple, kwargs: dict) -> Any:
        name = kwargs.pop("name", None)
        spec = opdef.inputs
        inputs: list[Any] = []
        args = list(args)
        for i, slot in enumerate(spec):
            key = slot.strip("*?")
            if slot.startswith("*"):
                inputs.extend(args[i:])
                args = args[:i]
                if key in kwargs:
                    inputs.extend(kwargs.pop(key))
                break
            if i < len(args):
                inputs.append(args[i])
            elif key in kwargs:
                inputs.append(kwargs.pop(key))
            elif slot.endswith("?"):
                inputs.append(None)
            else:
                raise GraphError(f"{opdef.builder_name}(): missing input '{key}'")
        else:
            if len(args) > len(spec):
                raise GraphError(f"{opdef.builder_name}() takes {len(spec)} inputs "
                                 f"({', '.join(spec)}), got {len(args)}")
        while inputs and inputs[-1] is None:
            inputs.pop()
        outs = self.add_node(opdef.op_type, inputs, kwargs, name=name)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # ----------------------------------------------------------------- queries
    def value(self, name: str) -> Value:
        try:
            return self.values[name]
        except KeyError:
            raise GraphError(f"no value named '{name}' in graph '{self.name}'") from None

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"no node named '{name}' in graph '{self.name}'")

    def is_const(self, name: str) -> bool:
        return name in self.constants

    def const_value(self, name: str) -> np.ndarray | None:
        """The data of a constant value (materialised if lazy), or None if not a constant."""
        data = self.constants.get(name)
        return None if data is None else materialize(data)

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def producer(self, value: str) -> Node | None:
        return self.producers().get(value)

    def consumers(self) -> dict[str, list[Node]]:
        uses: dict[str, list[Node]] = defaultdict(list)
        for n in self.nodes:
            for i in dict.fromkeys(n.inputs):
                if i:
                    uses[i].append(n)
        return uses

    # ----------------------------------------------------------------- structure
    def toposort(self) -> None:
        """Order nodes so that producers come before consumers; GraphError names a cycle."""
        if self._kahn_keeps_order():
            return
        produced = {o: n.name for n in self.nodes for o in n.outputs}
        by_name = {n.name: n for n in self.nodes}
        deps = {n.name: {produced[i] for i in n.inputs if i in produced} for n in self.nodes}
        users: dict[str, list[str]] = defaultdict(list)
        for n, ds in deps.items():
            for d in ds:
                users[d].append(n)
        pending = {n: len(ds) for n, ds in deps.items()}
        order_index = {n.name: i for i, n in enumerate(self.nodes)}
        ready = deque(n.name for n in self.nodes if pending[n.name] == 0)
        out: list[Node] = []
        while ready:
            cur = ready.popleft()
            out.append(by_name[cur])
            for u in sorted(users[cur], key=order_index.__getitem__):
                pending[u] -= 1
                if pending[u] == 0:
                    ready.append(u)
        if len(out) != len(self.nodes):
            stuck = [n.name for n in self.nodes if pending[n.name] > 0]
            raise GraphError(f"graph '{self.name}' has a cycle through node(s) "
                             f"{', '.join(stuck[:8])}")
        self.nodes = out

    def _kahn_keeps_order(self) -> bool:
        """Whether `toposort` (Kahn's algorithm, ready nodes first-in first-out, a node's
        readers in current order) would return the order as it is: exactly when every node
        reads only values made before it and its *release* (the position of its latest
        producer) never decreases along the order (see `passes/order.py`). One walk, no sort:
        a builder's graph is usually already in that order."""
        at: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            for o in n.outputs:
                at[o] = i                 # the last producer, as `toposort` maps them
        if len({n.name for n in self.nodes}) != len(self.nodes):
            return False                  # duplicate names: let the full sort decide
        last = -1
        get = at.get
        for i, n in enumerate(self.nodes):
            r = max([get(v, -1) for v in n.inputs], default=-1)
            if r >= i or r < last:
                return False
            last = r
        return True

    def validate(self) -> None:
        """Check names, edges, acyclicity and shapes; raise GraphError naming the culprit."""
        seen_nodes: set[str] = set()
        produced: dict[str, str] = {}
        inputs = set(self.inputs)         # a training step has ~10^3 state inputs
        for n in self.nodes:
            if n.name in seen_nodes:
                raise GraphError(f"duplicate node name '{n.name}' in graph '{self.name}'")
            seen_nodes.add(n.name)
            for o in n.outputs:
                if o in produced:
                    raise GraphError(f"value '{o}' is produced by both node '{produced[o]}' "
                                     f"and node '{n.name}'")
                if o in inputs or o in self.constants:
                    raise GraphError(f"node '{n.name}' writes '{o}', which is a graph input "
                                     f"or constant")
                produced[o] = n.name
        for n in self.nodes:
            get_op(n.op_type, n.name)
            for i in n.inputs:
                if i and i not in produced and i not in inputs and i not in self.constants:
                    raise GraphError(f"node '{n.name}' ({n.op_type}) reads '{i}', which no node "
                                     f"produces and is neither an input nor a constant")
            for o in n.outputs:
                if o not in self.values:
                    raise GraphError(f"node '{n.name}' output '{o}' has no Value")
        for o in self.outputs:
            if o not in produced and o not in inputs and o not in self.constants:
                raise GraphError(f"graph output '{o}' is not produced by any node")
        self.toposort()

    def add_fused(self, subgraph: Graph, attrs: dict, name: str | None = None) -> Node:
        """Add a FusedOp node standing for `subgraph` (inputs and outputs are value names of
        this graph); the caller removes the nodes it replaces."""
        name = name or self.fresh_node_name(attrs.get("display_type") or "Fused")
        for i in subgraph.inputs:
            if i not in self.values:
                raise GraphError(f"fused node '{name}' reads '{i}', not a value of "
                                 f"graph '{self.name}'")
        node = Node(name, FUSED_OP, tuple(subgraph.inputs), tuple(subgraph.outputs),
                    {**get_op(FUSED_OP).attrs, **attrs}, subgraph)
        self.nodes.append(node)
        for o in subgraph.outputs:
            self.values[o] = subgraph.values[o]
        return node

    def infer_shapes(self) -> None:
        """Re-run shape inference over every node (after inputs changed shape); a fused
        node's subgraph is re-inferred too, so its boundary stays consistent."""
        for k, n in enumerate(self.nodes):
            if n.subgraph is not None and n.op_type == FUSED_OP:
                sub = rebound_subgraph(n, self.values)
                self.nodes[k] = Node(n.name, n.op_type, n.inputs, n.outputs, n.attrs, sub)
                specs = [(sub.values[o].shape, sub.values[o].dtype) for o in sub.outputs]
            else:
                opdef = get_op(n.op_type, n.name)
                ins = [self.values[i] if i else None for i in n.inputs]
                specs = self._infer(opdef, n.name, ins, n.inputs, n.attrs)
            for o, (s, d) in zip(n.outputs, specs):
                old = self.values[o]
                self.values[o] = check_value(Value(o, tuple(s), dtype_name(d), old.layout),
                                             f"node '{n.name}' ({n.op_type})")

    def bind(self, **dims: int) -> Graph:
        """A copy with symbolic input dims bound (e.g. ``g.bind(batch=8)``), shapes re-inferred."""
        g = self.copy()
        for name in g.inputs:
            v = g.values[name]
            g.values[name] = Value(name, tuple(dims.get(d, d) if isinstance(d, str) else d
                                               for d in v.shape), v.dtype, v.layout)
        g.infer_shapes()
        return g

    def copy(self, name: str | None = None) -> Graph:
        """A shallow copy: nodes and values are immutable and shared, the containers are new."""
        g = Graph(name or self.name)
        g.values = dict(self.values)
        g.nodes = list(self.nodes)
        g.inputs = list(self.inputs)
        g.outputs = list(self.outputs)
        g.constants = dict(self.constants)
        g.buffers = set(self.buffers)
        g.fused_names = dict(self.fused_names)
        g.opset = self.opset
        g._counter = itertools.count(next(self._counter))
        return g

    def member_names(self, name: str) -> tuple[str, ...]:
        """The model's op names behind node `name`: what graph fusion replaced with it (each
        member expanded in turn), or (name,) for a node of the model."""
        def expand(n: str, seen: frozenset[str]) -> list[str]:
            inner = self.fused_names.get(n)
            if not inner or n in seen:
                return [n]
            out: list[str] = []
            for m in inner:
                out += [m] if m == n else expand(m, seen | {n})
            return out

        out = list(dict.fromkeys(expand(name, frozenset())))
        return tuple(out)

    def extract(self, nodes: Sequence[Node], name: str) -> Graph:
        """`nodes` (in order) as a graph of their own: the values they read from elsewhere
        become its inputs (constants stay constants, shared lazily); outputs are the caller's
        to set."""
        g = Graph(name)
        made = {o for n in nodes for o in n.outputs if o}
        for n in nodes:
            for v in n.inputs:
                if not v or v in made or v in g.values:
                    continue
                g.values[v] = self.values[v]
                if v in self.constants:
                    g.constants[v] = self.constants[v]
                    if v in self.buffers:
                        g.buffers.add(v)
                else:
                    g.inputs.append(v)
            for o in n.outputs:
                if o:
                    g.values[o] = self.values[o]
        g.nodes = list(nodes)
        return g

    def replace_uses(self, old: str, new: str) -> None:
        """Make every reader of value `old` (nodes and graph outputs) read `new` instead."""
        self.nodes = [n if old not in n.inputs else
                      Node(n.name, n.op_type, tuple(new if i == old else i for i in n.inputs),
                           n.outputs, n.attrs, n.subgraph) for n in self.nodes]
        self.outputs = [new if o == old else o for o in self.outputs]

    def ancestors(self, values: Iterable[str]) -> set[str]:
        """The values `values` depend on, themselves included (walking producers back)."""
        producers = self.producers()
        seen: set[str] = set()
        stack = list(values)
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            node = producers.get(v)
            if node is not None:
                stack.extend(i for i in node.inputs if i)
        return seen

    def remove_unused(self) -> int:
        """Drop nodes, values and constants that no graph output depends on; return the count
        of nodes removed."""
        live = self.ancestors(self.outputs)
        before = len(self.nodes)
        # (no empty name is live: ancestors walks non-empty inputs from named outputs)
        self.nodes = [n for n in self.nodes if not live.isdisjoint(n.outputs)]
        used = live | set(self.inputs) | {o for n in self.nodes for o in n.outputs}
        self.values = {k: v for k, v in self.values.items() if k in used}
        self.constants = {k: c for k, c in self.constants.items() if k in used}
        self.buffers &= self.constants.keys()
        return before - len(self.nodes)

    def __repr__(self) -> str:
        return (f"Graph({self.name!r}: {len(self.nodes)} nodes, inputs={self.inputs}, "
                f"outputs={self.outputs})")

    def summary(self) -> str:
        """A readable listing: one line per node with shapes."""
        lines = [f"graph {self.name}"]
        for i in self.inputs:
            lines.append(f"  input  {self.values[i]!r}")
        for n in self.nodes:
            ins = ", ".join(repr(self.values[i]) if i else "-" for i in n.inputs)
            outs = ", ".join(repr(self.values[o]) for o in n.outputs)
            lines.append(f"  {n.name}: {n.op_type}({ins}) -> {outs}")
        lines.append(f"  outputs {', '.join(self.outputs)}")
        return "\n".join(lines)


#: attributes that hold an integer (or None) / a list of integers (or None) whatever their
#: registered default: a float there (Softmax axis=1.5) is an error, not a value to keep
INT_ATTRS = frozenset({"axis", "num_outputs", "size", "end", "start", "dtype", "blocksize",
                       "group", "keepdims", "batch_dims", "k", "block_dim"})
#: attributes every op accepts without registering them, about its kernel rather than its
#: maths: `block_dim`, the cores its kernel launches on (msprof's Block Dim; 0 or absent: the
#: lowering's own choice), for a kernel whose measured core count is known (the lowering
#: refuses it where its kernel's split cannot follow it: `ascendsim.lower.lowering`)
KERNEL_ATTRS = frozenset({"block_dim"})
INT_LIST_ATTRS = frozenset({"perm", "axes", "kernel_shape", "pads", "strides", "dilations",
                            "output_padding", "output_shape", "scan_input_axes", "single_core"})


def _as_int(value: Any) -> int | None:
    """`value` as an int when it is an integer (an integral float too), else None."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value) == \
            int(value):
        return int(value)
    return None


def check_attr(opdef: OpDef, key: str, value: Any, node: str) -> Any:
    """An attribute value checked against the kind its default (or its name) says; returned
    normalised (numpy ints -> int, integral floats of integer attributes -> int)."""
    default = opdef.attrs.get(key)
    where = f"node '{node}' ({opdef.op_type}): attribute '{key}'"
    if value is None:
        return value
    if key in INT_LIST_ATTRS:
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            raise GraphError(f"{where} must be a list of integers, got "
                             f"{type(value).__name__} {value!r}")
        ints = [_as_int(v) for v in value]
        if any(i is None or isinstance(v, (bool, np.bool_)) for i, v in zip(ints, value)):
            raise GraphError(f"{where} must be a list of integers, got {list(value)!r}")
        return type(value)(ints)
    if key in INT_ATTRS or (isinstance(default, (int, np.integer))
                            and not isinstance(default, bool)):
        as_int = _as_int(value)
        if as_int is None:
            raise GraphError(f"{where} must be an integer, got {type(value).__name__} "
                             f"{value!r}")
        return as_int
    if isinstance(default, float):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float,
                                                                         np.number)):
            raise GraphError(f"{where} must be a number, got {type(value).__name__} "
                             f"{value!r}")
        if not np.isfinite(value):
            raise GraphError(f"{where} must be finite, got {value!r}")
        return float(value)
    if isinstance(default, str) and not isinstance(value, str):
        raise GraphError(f"{where} must be a string, got {type(value).__name__} {value!r}")
    return value


def input_shape(shape: Any, what: str) -> tuple:
    """A declared shape as a tuple of non-negative ints (numpy ints accepted) and non-empty
    strings (symbolic dims); GraphError naming `what` and the bad dimension."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence | np.ndarray):
        raise GraphError(f"{what}: shape must be a sequence of dims, got "
                         f"{type(shape).__name__} {shape!r}")
    dims = []
    for i, d in enumerate(shape):
        if isinstance(d, str) and d:
            dims.append(d)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
            dims.append(int(d))
        else:
            raise GraphError(f"{what}: dimension {i} is {d!r} ({type(d).__name__}); a dim is "
                             f"a non-negative integer or a symbolic name")
    return tuple(dims)


def check_value(value: Value, where: str) -> Value:
    """GraphError naming the value when a static dim is negative or the tensor is larger
    than any device memory (`MAX_TENSOR_BYTES`)."""
    for i, d in enumerate(value.shape):
        if isinstance(d, bool) or not isinstance(d, (int, str)):
            raise GraphError(f"{where}: value '{value.name}' dimension {i} is {d!r} "
                             f"({type(d).__name__}), not an integer or a symbolic name")
        if isinstance(d, int) and d < 0:
            raise GraphError(f"{where}: value '{value.name}' has negative dimension {d} "
                             f"(dim {i} of {tuple(value.shape)})")
    if all(isinstance(d, int) for d in value.shape):
        nbytes = math.prod(value.shape) * itemsize(value.dtype)
        if nbytes > MAX_TENSOR_BYTES:
            raise GraphError(f"{where}: value '{value.name}' {value.dtype}"
                             f"{list(value.shape)} needs {nbytes:.3g} bytes, beyond the "
                             f"physical ceiling of {MAX_TENSOR_BYTES:.3g} bytes (2^50)")
    return value


def rebound_subgraph(node: Node, values: Mapping[str, Value]) -> Graph:
    """A fused node's subgraph with its inputs at the shapes `values` gives the node's input
    names (shapes re-inferred inside); the stored subgraph itself when nothing changed."""
    sub = node.subgraph
    def same(outer: str, inner: str) -> bool:
        v, w = values.get(outer, sub.values[inner]), sub.values[inner]
        return (v.shape, v.dtype) == (w.shape, w.dtype)

    if all(same(o, i) for o, i in zip(node.inputs, sub.inputs)):
        return sub
    sub = sub.copy()
    for outer, inner in zip(node.inputs, sub.inputs):
        if outer in values:
            v = values[outer]
            sub.values[inner] = Value(inner, v.shape, v.dtype, sub.values[inner].layout)
    sub.infer_shapes()
    return sub


def static_shape(value: Value, what: str = "") -> tuple[int, ...]:
    """The shape as ints, or GraphError naming the value when a dim is symbolic."""
    if not all(isinstance(d, int) for d in value.shape):
        raise GraphError(f"{what or 'value'} '{value.name}' has symbolic shape {value.shape}; "
                         f"bind it (Graph.bind) first")
    return tuple(value.shape)  # type: ignore[return-value]


__all__ = ["Graph", "Node", "Value", "Shape", "rebound_subgraph", "static_shape"]
