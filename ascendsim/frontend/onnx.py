"""ONNX import: `load_onnx(path_or_model) -> Graph`.

Note on the conversion. The IR follows the latest ONNX opset's signatures, so an older model is
rewritten while it is read, from data rather than per-op code:

- an attribute whose name is an *input* of the registered op (Reshape `shape`, Slice
  `starts/ends/axes`, Pad `pads`, Split `split`, Squeeze/Unsqueeze/ReduceX `axes`, Clip
  `min/max`, Dropout `ratio`) becomes a constant input in that slot (`_ATTR_RENAMES` maps the
  few renamed ones, e.g. Pad's `value` -> `constant_value`);
- attributes that old opsets carried but that no longer change the result are dropped
  (`_LEGACY_ATTRS`); legacy broadcasting (`broadcast=1, axis=k` on binary ops before opset 7)
  becomes an explicit reshape of the second operand; Softmax-like ops before opset 13 (which
  flattened the input at `axis`) become Flatten -> op(axis=1) -> Reshape when the axis is not last;
- initializers and Constant nodes become graph constants; nodes whose inputs are all constants
  are folded (Shape of a static shape included), ConstantOfShape weights stay lazy;
- retired ops become their successors (`RETIRED_OPS`: Upsample -> Resize) and changed forms
  are rewritten (`_OLD_FORMS`: Resize-10's inputs and sampling); old legacy per-channel inputs
  (PRelu-6's slope) get trailing 1s;
- ops with a variable output count name the attribute that holds it (OpDef.num_outputs); it is
  set from the node's outputs, and trailing optional outputs nobody reads are dropped;
- If/Loop/Scan bodies are converted recursively into closed graphs: values they read from an
  outer scope become explicit inputs (or copied constants), appended to the node's inputs.

An unknown op or attribute raises UnsupportedOpError naming the node, its op type and the
opset; an unreadable file, a cycle, a dangling value or an unsupported dtype raises GraphError
naming it, never a protobuf traceback.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import AscendSimError, GraphError, UnsupportedOpError, require_extra
from ..execute import run_graph
from ..ir.graph import Graph, check_attr
from ..ir.ops.elementwise import FLOATS as FLOAT_DTYPES
from ..ir.registry import Category, OpDef, Unit, get_op, has_op
from ..ir.tensor import (
    ONNX_DTYPES,  # the IR's one code -> dtype table (Cast's `to`)
    LazyTensor,
    Value,
    materialize,
    numel,
)
from ..kernels import bf16

#: ONNX dtype codes by name, for the codes ascendsim does not support (error messages).
_ONNX_DTYPE_NAMES = {8: "string", 14: "complex64", 15: "complex128",
                     17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
                     20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1"}

#: Newest default-domain opset the importer accepts.
MAX_OPSET = 28
#: Attributes of old opsets that no longer change the result: attribute -> values it may have
#: (None: any value).
_LEGACY_ATTRS: dict[str, tuple | None] = {"consumed_inputs": None, "is_test": None,
                                          "spatial": (1,)}
#: Attributes renamed when they became inputs: (op-independent) old name -> input name.
_ATTR_RENAMES: dict[str, str] = {"value": "constant_value", "paddings": "pads"}
#: Softmax-like ops that flattened their input at `axis` before opset 13 (ONNX's own list).
_FLATTENING_BEFORE_13 = ("Softmax", "LogSoftmax", "Hardmax")
#: Ops whose input (index) aligned with axis 1 of input 0 before opset 7 (PRelu's per-channel
#: slope of shape (C,)); opset 7 moved to numpy broadcasting, so the input gets trailing 1s.
_CHANNEL_ALIGNED_BEFORE_7: dict[str, int] = {"PRelu": 1}
#: Ops that later opsets retired: old type -> (new type, old input index per new input slot
#: (-1: absent), attributes that give the old behaviour). Upsample is Resize with asymmetric
#: coordinates and floor rounding.
RETIRED_OPS: dict[str, tuple[str, tuple[int, ...], dict]] = {
    "Upsample": ("Resize", (0, -1, 1),
                 {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
}
_UPSAMPLE_MODES = {"bilinear": "linear", "trilinear": "linear"}
#: Ops whose inputs or defaults changed: op -> (first opset of today's form, old input index per
#: new input slot, attributes that give the old behaviour). Resize-10 took (X, scales) and
#: sampled like Upsample.
_OLD_FORMS: dict[str, tuple[int, tuple[int, ...], dict]] = {
    "Resize": (11, (0, -1, 1),
               {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
}
#: Old forms the importer does not convert: op -> (first supported opset, what is missing).
_UNSUPPORTED_BEFORE: dict[str, tuple[int, str]] = {
    "Scan": (9, "the opset-8 form (batch axis, sequence_lens) is not supported"),
}
#: Largest folded output (elements); bigger constant expressions stay as nodes.
FOLD_LIMIT = 1 << 16


def _require_onnx() -> Any:
    return require_extra("onnx", "onnx", "ONNX import")


def onnx_dtype(code: int, what: str) -> str:
    """The numpy dtype name of an ONNX dtype code, or GraphError naming `what` (a value)."""
    try:
        return ONNX_DTYPES[int(code)]
    except KeyError:
        raise GraphError(f"{what} has dtype {_dtype_label(code)}, which ascendsim does not "
                         f"support (supported: {', '.join(ONNX_DTYPES.values())})") from None


def _dtype_label(code: int) -> str:
    return _ONNX_DTYPE_NAMES.get(int(code), f"code {code}")


def _parse(src: Any) -> tuple[Any, str]:
    onnx = _require_onnx()
    if isinstance(src, onnx.ModelProto):
        return src, "<ModelProto>"
    if isinstance(src, (bytes, bytearray)):
        data, where = bytes(src), "<bytes>"
    else:
        where = os.fspath(src)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise GraphError(f"cannot read ONNX model '{where}': {exc.strerror or exc}") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf DecodeError and friends
        raise GraphError(f"cannot parse ONNX model from '{where}': {type(exc).__name__}: "
                         f"{exc} (not an ONNX file, or truncated)") from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise GraphError(f"cannot parse ONNX model from '{where}': no graph or IR version "
                         f"(not an ONNX model)")
    if where != "<bytes>" and any(t.data_location == 1 for t in model.graph.initializer):
        from onnx.external_data_helper import load_external_data_for_model
        try:
            load_external_data_for_model(model, os.path.dirname(os.path.abspath(where)))
        except Exception as exc:
            raise GraphError(f"cannot load external data of '{where}': {exc}") from None
    return model, where


def _opset(model: Any) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    opset = max(versions) if versions else 1
    if opset < 1:
        raise GraphError(f"model imports opset {opset} of the default domain; opsets start at "
                         f"1 (ascendsim reads 1 to {MAX_OPSET})")
    if opset > MAX_OPSET:
        raise GraphError(f"model uses opset {opset}; ascendsim reads opsets up to {MAX_OPSET}")
    return opset


def _initializer_array(init: Any, numpy_helper: Any, what: str = "") -> np.ndarray:
    """A tensor's data (an initializer, or a tensor attribute: `what` names it); GraphError
    naming it when its dtype is unsupported or its data does not hold the elements its dims
    declare (raw_data too short or too long)."""
    what = what or f"initializer '{init.name}'"
    dtype = onnx_dtype(init.data_type, what)
    dims = [int(d) for d in init.dims]
    if any(d < 0 for d in dims):
        raise GraphError(f"{what} has negative dimension in {dims}")
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if init.HasField("raw_data"):
        want = count * (2 if dtype == "bfloat16" else np.dtype(dtype).itemsize)
        if dtype == "bool":
            want = count
        if len(init.raw_data) != want:
            raise GraphError(f"{what} declares dims {dims} ({dtype}: {want} bytes) but its "
                             f"raw_data holds {len(init.raw_data)} bytes")
    try:
        arr = numpy_helper.to_array(init)
    except Exception as exc:   # onnx's ValueError / TypeError on inconsistent fields
        raise GraphError(f"{what} cannot be read: {type(exc).__name__}: {exc}") from None
    if arr.size != count:
        raise GraphError(f"{what} declares dims {dims} ({count} elements) but holds "
                         f"{arr.size}")
    if dtype == "bfloat16" and arr.dtype == np.uint16:    # onnx < 1.19: the 16-bit patterns
        arr = bf16.from_bits(arr.view(np.uint16))
    return arr


class _Scope:
    """Builds one Graph from one GraphProto; resolves names through enclosing scopes."""

    def __init__(self, gproto: Any, opset: int, parent: _Scope | None, fold: bool,
                 shapes: Mapping[str, Any], name: str) -> None:
        self.proto, self.opset, self.parent, self.fold = gproto, opset, parent, fold
        self.shapes = shapes
        self.g = Graph(name)
        self.g.opset = opset
        self.captured: list[str] = []
        self.node_names: set[str] = set()
        self.proto_names: set[str] = set()     # the model's own node names (must be unique)
        self.used: set[str] = set()

    # ------------------------------------------------------------ values
    def lookup(self, name: str) -> bool:
        """Make `name` visible here (capturing it from outer scopes); False if unknown."""
        if name in self.g.values:
            return True
        if self.parent is None or not self.parent.lookup(name):
            return False
        outer = self.parent.g
        if outer.is_const(name):
            data = outer.constants[name]
            self.g.const(data, name, dtype=outer.values[name].dtype)
        else:
            v = outer.values[name]
            self.g.input(name, v.shape, v.dtype)
            self.captured.append(name)
        return True

    def const(self, data: Any, name: str, dtype: str | None = None) -> str:
        name = self._unique_value(name)
        self.g.const(data, name, dtype=dtype)   # bfloat16: float32 storage (kernels/bf16.py)
        return name

    def _unique_value(self, base: str) -> str:
        name, i = base, 0
        while name in self.g.values:
            i += 1
            name = f"{base}_{i}"
        return name

    def tensor_type(self, vi: Any, what: str, hint: Value | None = None) -> tuple[tuple, str]:
        t = vi.type
        if not t.HasField("tensor_type"):
            if hint is not None and not t.WhichOneof("value"):
                return hint.shape, hint.dtype
            kind = t.WhichOneof("value") or "unknown"
            raise GraphError(f"{what} '{vi.name}' has type {kind}; only tensors are supported")
        tt = t.tensor_type
        if tt.elem_type == 0 and hint is not None:
            dtype = hint.dtype
        else:
            dtype = onnx_dtype(tt.elem_type, f"{what} '{vi.name}'")
        if not tt.HasField("shape"):
            if hint is not None:
                return tuple(f"{vi.name}_d{i}" if isinstance(d, str) else d
                             for i, d in enumerate(hint.shape)), dtype
            raise GraphError(f"{what} '{vi.name}' has no shape (not even a rank)")
        dims: list = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.dim_param:
                dims.append(self.shapes.get(d.dim_param, d.dim_param))
            else:
                dims.append(f"{vi.name}_d{i}")
        return tuple(dims), dtype

    # ------------------------------------------------------------ graph
    def build(self, hints: list[Value | None] | None = None) -> Graph:
        onnx = _require_onnx()
        from onnx import numpy_helper

        gp = self.proto
        if self.parent is None and not gp.output:
            raise GraphError(f"ONNX graph '{gp.name}' declares no outputs: nothing to compute")
        for init in gp.initializer:
            arr = _initializer_array(init, numpy_helper)
            bf = ONNX_DTYPES.get(init.data_type) == "bfloat16"   # float32 storage of bfloat16
            self.g.const(arr, init.name, dtype="bfloat16" if bf else arr.dtype)
        for i, vi in enumerate(gp.input):
            if vi.name in self.g.constants:
                continue    # an input with an initializer is a constant
            hint = hints[i] if hints and i < len(hints) else None
            override = self.shapes.get(vi.name) if self.parent is None else None
            shape, dtype = self.tensor_type(vi, "graph input", hint)
            if override is not None:
                if len(override) != len(shape):
                    raise GraphError(f"input_shapes['{vi.name}'] = {tuple(override)} has rank "
                                     f"{len(override)}; the model's input has shape {shape}")
                shape = tuple(override)
            self.g.input(vi.name, shape, dtype)
        if self.parent is None:
            self._check_shape_keys(gp)
        self.used = {o.name for o in gp.output}
        for n in gp.node:
            self.used |= _reads(n)
        for node in self._ordered(gp.node):
            self._node(node, onnx)
        for vo in gp.output:
            if not self.lookup(vo.name):
                raise GraphError(f"graph '{self.g.name}' output '{vo.name}' is not produced "
                                 f"by any node")
            self.g.output(vo.name)
        self.g.validate()
        return self.g

    def _check_shape_keys(self, gp: Any) -> None:
        """`input_shapes` keys must name a graph input or a dim_param (a typo binds nothing)."""
        names = {vi.name for vi in gp.input}
        params = {d.dim_param for vi in gp.input if vi.type.HasField("tensor_type")
                  for d in vi.type.tensor_type.shape.dim if d.dim_param}
        unknown = sorted(set(self.shapes) - names - params)
        if unknown:
            raise GraphError(f"input_shapes names {', '.join(unknown)}, which is neither an "
                             f"input nor a symbolic dim; inputs: {', '.join(sorted(names))}; "
                             f"symbolic dims: {', '.join(sorted(params)) or 'none'}")

    def _ordered(self, nodes: Any) -> list:
        """The nodes in dependency order; GraphError on a cycle or a value nobody produces."""
        nodes = list(nodes)
        producer: dict[str, int] = {}
        for i, n in enumerate(nodes):
            for o in n.output:
                if o:
                    producer[o] = i
        deps = [{producer[v] for v in _reads(n) if v in producer} for n in nodes]
        users: dict[int, list[int]] = {}
        for i, ds in enumerate(deps):
            for d in ds:
                users.setdefault(d, []).append(i)
        pending = [len(d) for d in deps]
        ready = deque(i for i, p in enumerate(pending) if p == 0)
        order: list[int] = []
        while ready:
            i = ready.popleft()
            order.append(i)
            for u in users.get(i, []):
                pending[u] -= 1
                if pending[u] == 0:
                    ready.append(u)
        if len(order) != len(nodes):
            stuck = [nodes[i].name or f"{nodes[i].op_type}_{i}" for i in range(len(nodes))
                     if pending[i] > 0]
            raise GraphError(f"ONNX graph '{self.proto.name}' has a cycle through node(s) "
                             f"{', '.join(stuck[:8])}")
        return [nodes[i] for i in order]

    def _node_name(self, node: Any, index: int) -> str:
        if node.name:
            if node.name in self.proto_names:
                raise GraphError(f"ONNX graph '{self.proto.name}' has two nodes named "
                                 f"'{node.name}' (node names must be unique)")
            self.proto_names.add(node.name)
        name = node.name or f"{node.op_type}_{index}"
        base, i = name, 0
        while name in self.node_names:
            i += 1
            name = f"{base}_{i}"
        self.node_names.add(name)
        return name

    def _node(self, node: Any, onnx: Any) -> None:
        name = self._node_name(node, len(self.node_names))
        op = node.op_type
        if not node.output or not node.output[0]:
            raise GraphError(f"node '{name}' ({op}) has an empty output name (its first "
                             f"output is required)")
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(f"{node.domain}.{op}", name, self.opset,
                                     detail=f"domain '{node.domain}' is not supported")
        for v in node.input:
            if v and not self.lookup(v):
                raise GraphError(f"node '{name}' ({op}) reads '{v}', which no node produces "
                                 f"and is neither an input nor an initializer")
        inputs = list(node.input)
        attrs = {a.name: self._attr(a, name, op, onnx, node) for a in node.attribute}
        if op in RETIRED_OPS:      # an op later opsets replaced: rewrite it as its successor
            op, slots, fixed = RETIRED_OPS[op]
            inputs = [inputs[k] if 0 <= k < len(inputs) else "" for k in slots]
            attrs = {**fixed, **attrs}
            mode = attrs.get("mode", "nearest")
            attrs["mode"] = _UPSAMPLE_MODES.get(mode, mode)
        elif op in _OLD_FORMS and self.opset < _OLD_FORMS[op][0]:
            _, slots, fixed = _OLD_FORMS[op]
            inputs = [inputs[k] if 0 <= k < len(inputs) else "" for k in slots]
            attrs = {**fixed, **attrs}
        if not has_op(op):
            raise UnsupportedOpError(op, name, self.opset)
        if op in _UNSUPPORTED_BEFORE and self.opset < _UNSUPPORTED_BEFORE[op][0]:
            raise UnsupportedOpError(op, name, self.opset, detail=_UNSUPPORTED_BEFORE[op][1])
        opdef = get_op(op, name)
        attrs, inputs, captured = self._convert(opdef, name, attrs, inputs, node)
        attrs = {k: check_attr(opdef, k, v, name) for k, v in attrs.items()}
        # Constant nodes are constants
        if _is_constant_like(opdef):
            data = opdef.kernel([], {**opdef.attrs, **attrs})[0]
            self.const(data, node.output[0])
            return
        if self._fold(opdef, name, attrs, inputs, node, captured):
            return
        self._emit(opdef, name, attrs, inputs, node)

    # ------------------------------------------------------------ attributes
    def _attr(self, a: Any, node: str, op: str, onnx: Any, nproto: Any) -> Any:
        from onnx import AttributeProto as A
        from onnx import numpy_helper

        if a.type == A.GRAPH:
            return a.g
        if a.type == A.TENSOR:
            if a.t.data_type not in ONNX_DTYPES:
                raise UnsupportedOpError(op, node, self.opset, detail=f"attribute '{a.name}' has "
                                         f"dtype {_dtype_label(a.t.data_type)}")
            return _initializer_array(a.t, numpy_helper, f"attribute '{a.name}' of node '{node}'")
        if a.type == A.INTS:
            return [int(v) for v in a.ints]
        if a.type == A.FLOATS:
            return [float(v) for v in a.floats]
        if a.type == A.INT:
            return int(a.i)
        if a.type == A.FLOAT:
            return float(a.f)
        if a.type == A.STRING:
            return a.s.decode("utf-8", "replace")
        if a.type == A.STRINGS:
            return [s.decode("utf-8", "replace") for s in a.strings]
        kind = A.AttributeType.Name(a.type)
        raise UnsupportedOpError(op, node, self.opset,
                                 detail=f"attribute '{a.name}' of type {kind} is not supported")

    def _convert(self, opdef: OpDef, name: str, attrs: dict, inputs: list, node: Any
                 ) -> tuple[dict, list, list]:
        """Map ONNX attributes onto the opset-21 signature of `opdef` (see the module note)."""
        slots = [s.strip("*?") for s in opdef.inputs]
        out: dict = {}
        captured: list[str] = []
        broadcast_axis = None
        for key, val in attrs.items():
            slot = key if key in slots else _ATTR_RENAMES.get(key)
            if key in opdef.attrs and not _is_graph(val):
                out[key] = val
            elif _is_graph(val):
                if key not in opdef.attrs:
                    raise UnsupportedOpError(opdef.op_type, name, self.opset,
                                             detail=f"unknown graph attribute '{key}'")
                out[key] = val
            elif slot is not None and slot in slots and not opdef.inputs[slots.index(slot)
                                                                           ].startswith("*"):
                pos = slots.index(slot)
                while len(inputs) <= pos:
                    inputs.append("")
                if not inputs[pos]:
                    inputs[pos] = self._attr_const(val, f"{name}__{slot}", inputs)
            elif key == "broadcast" and self.opset < 7:
                continue
            elif key == "axis" and "broadcast" in attrs and self.opset < 7:
                broadcast_axis = int(val)
            elif key in _LEGACY_ATTRS and (_LEGACY_ATTRS[key] is None
                                           or val in _LEGACY_ATTRS[key]):
                continue
            else:
                raise UnsupportedOpError(opdef.op_type, name, self.opset,
                                         detail=f"attribute '{key}' = {val!r} is not supported")
        if broadcast_axis is not None and len(inputs) >= 2:
            inputs[1] = self._legacy_broadcast(name, inputs[0], inputs[1], broadcast_axis)
        aligned = _CHANNEL_ALIGNED_BEFORE_7.get(opdef.op_type)
        if self.opset < 7 and aligned is not None and len(inputs) > aligned and \
                len(self.g.values[inputs[aligned]].shape) == 1:
            inputs[aligned] = self._legacy_broadcast(name, inputs[0], inputs[aligned], 1)
        count_attr = opdef.num_outputs
        if isinstance(count_attr, str) and out.get(count_attr) is None:
            # ops with a variable output count (Split, LayerNorm's optional outputs) name the
            # attribute that holds it: the node's output list gives the count
            outs = list(node.output)
            while outs and not outs[-1]:
                outs.pop()
            out[count_attr] = len(outs)
        graphs = {k: v for k, v in out.items() if _is_graph(v)}
        if graphs:
            out, captured = self._subgraphs(opdef, name, out, graphs, inputs)
            inputs = inputs + captured
        return out, inputs, captured

    def _attr_const(self, val: Any, base: str, inputs: list) -> str:
        arr = np.asarray(val)
        if arr.dtype.kind == "f":
            first = self.g.values.get(inputs[0]) if inputs and inputs[0] else None
            dtype = first.dtype if first is not None and first.dtype in FLOAT_DTYPES \
                else "float32"
            return self.const(arr, base, dtype)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        return self.const(arr, base)

    def _legacy_broadcast(self, name: str, a: str, b: str, axis: int) -> str:
        """Opset < 7 `broadcast=1, axis=k`: B aligns with A's dims from k; pad B with 1s."""
        ra, rb = len(self.g.values[a].shape), len(self.g.values[b].shape)
        axis = axis + ra if axis < 0 else axis
        trailing = ra - axis - rb
        if trailing <= 0:
            return b
        axes = np.arange(rb, rb + trailing, dtype=np.int64)
        if self.g.is_const(b):
            data = materialize(self.g.constants[b])
            return self.const(data.reshape(data.shape + (1,) * trailing), f"{name}__b")
        out = self._unique_value(f"{name}__b")
        self.g.add_node("Unsqueeze", [self.g.values[b], self.const(axes, f"{name}__axes")],
                        name=self._node_name_for(f"{name}__unsqueeze"), outputs=[out])
        return out

    def _node_name_for(self, base: str) -> str:
        name, i = base, 0
        while name in self.node_names:
            i += 1
            name = f"{base}_{i}"
        self.node_names.add(name)
        return name

    def _subgraphs(self, opdef: OpDef, name: str, attrs: dict, graphs: dict, inputs: list
                   ) -> tuple[dict, list]:
        """Convert graph attributes into closed Graphs sharing one list of captured values."""
        built: dict[str, tuple[Graph, _Scope]] = {}
        for key, gp in graphs.items():
            hint_fn = opdef.control.body_input_hints if opdef.control else None
            ins = [self.g.values[i] if i else None for i in inputs]
            hints = hint_fn(ins, attrs) if hint_fn and len(gp.input) else None
            scope = _Scope(gp, self.opset, self, self.fold, {}, f"{name}/{key}")
            built[key] = (scope.build(hints), scope)
        union: list[str] = []
        for _, scope in built.values():
            union += [c for c in scope.captured if c not in union]
        out = dict(attrs)
        for key, (g, scope) in built.items():
            own = [i for i in g.inputs if i not in scope.captured]
            for c in union:
                if c not in g.values:
                    v = self.g.values[c]
                    g.input(c, v.shape, v.dtype)
            g.inputs = own + union
            out[key] = g
        if "num_captured" in opdef.attrs:
            out["num_captured"] = len(union)
        return out, union

    # ------------------------------------------------------------ emission
    def _outputs(self, name: str, node: Any, count: int) -> list[str]:
        outs = list(node.output) + [""] * max(count - len(node.output), 0)
        extra = [o for o in outs[count:] if o]
        used = [o for o in extra if o in self.used]
        if used:
            raise UnsupportedOpError(node.op_type, name, self.opset,
                                     detail=f"output(s) {', '.join(used)} are used but "
                                            f"ascendsim computes only {count} output(s)")
        outs = outs[:count]     # optional outputs nobody reads are dropped
        return [o if o else self._unique_value(f"{name}__out{i}") for i, o in enumerate(outs)]

    def _emit(self, opdef: OpDef, name: str, attrs: dict, inputs: list, node: Any) -> None:
        while inputs and not inputs[-1]:
            inputs.pop()
        ins = [self.g.values[i] if i else None for i in inputs]
        if self.opset < 13 and opdef.op_type in _FLATTENING_BEFORE_13:
            x = ins[0]
            axis = int(attrs.get("axis", 1))
            axis = axis + len(x.shape) if axis < 0 else axis
            if axis != len(x.shape) - 1:
                self._flattening(opdef, name, attrs, x, axis, node)
                return
            attrs = {**attrs, "axis": axis}
        probe = self.g._infer(opdef, name, ins, inputs, {**opdef.attrs, **attrs})
        self.g.add_node(opdef.op_type, ins, attrs, name=name,
                        outputs=self._outputs(name, node, len(probe)))

    def _flattening(self, opdef: OpDef, name: str, attrs: dict, x: Value, axis: int,
                    node: Any) -> None:
        """Pre-13 Softmax semantics: normalise over all dims from `axis` on."""
        flat = self.g.add_node("Flatten", [x], {"axis": axis},
                               name=self._node_name_for(f"{name}__flatten"))[0]
        inner = self.g.add_node(opdef.op_type, [flat], {**attrs, "axis": 1}, name=name,
                                outputs=[self._unique_value(f"{name}__2d")])[0]
        if all(isinstance(d, int) for d in x.shape):
            shape: Any = self.const(np.array(x.shape, np.int64), f"{name}__shape")
        else:
            shape = self.g.add_node("Shape", [x], name=self._node_name_for(f"{name}__shape"))[0]
        self.g.add_node("Reshape", [inner, shape], name=self._node_name_for(f"{name}__reshape"),
                        outputs=self._outputs(name, node, 1))

    def _fold(self, opdef: OpDef, name: str, attrs: dict, inputs: list, node: Any,
              captured: list) -> bool:
        """Replace a node whose inputs are all constants (or a Shape of a static shape)."""
        if not self.fold or captured or any(_is_graph(v) for v in attrs.values()):
            return False
        ins = [self.g.values[i] if i else None for i in inputs]
        full = {**opdef.attrs, **attrs}
        consts_only = all(not i or self.g.is_const(i) for i in inputs) and any(inputs)
        static_query = (opdef.unit is Unit.NONE and opdef.category == Category.OPAQUE
                        and ins and ins[0] is not None
                        and all(isinstance(d, int) for d in ins[0].shape))
        if not consts_only and not static_query:
            return False
        specs = self.g._infer(opdef, name, ins, inputs, full)
        if any(not all(isinstance(d, int) for d in s) for s, _ in specs):
            return False
        lazy_fill = (len(specs) == 1 and consts_only and opdef.needs_const_inputs == (0,)
                     and len(opdef.inputs) == 1 and "value" in opdef.attrs)
        if lazy_fill:     # ConstantOfShape: a lazy fill, free until its values are needed
            shape, dtype = specs[0]
            fill = np.asarray(full["value"] if full["value"] is not None else 0.0).reshape(-1)
            out = self._outputs(name, node, 1)[0]
            self.g.const(LazyTensor.full(tuple(shape), dtype, fill[0].item()), out)
            return True
        if any(numel(s) > FOLD_LIMIT for s, _ in specs):
            return False
        if static_query and not consts_only:
            args = [np.broadcast_to(np.zeros((), ins[0].dtype), ins[0].shape) if k == 0 else
                    (self.g.const_value(i) if i else None) for k, i in enumerate(inputs)]
        else:
            args = [self.g.const_value(i) if i else None for i in inputs]
        try:
            results = opdef.run_kernel(args, full, run_graph)
        except AscendSimError:
            raise
        except Exception as exc:
            raise GraphError(f"node '{name}' ({opdef.op_type}): cannot evaluate on constant "
                             f"inputs: {exc}") from None
        for out, arr, (shape, dtype) in zip(self._outputs(name, node, len(specs)), results,
                                            specs):
            self.g.const(np.asarray(arr).reshape(shape), out, dtype=dtype)
        return True


def _is_graph(v: Any) -> bool:
    return type(v).__name__ == "GraphProto" or isinstance(v, Graph)


def _is_constant_like(opdef: OpDef) -> bool:
    """An op with no inputs whose attributes give its output (ONNX Constant)."""
    return not opdef.inputs and "value" in opdef.attrs


def _reads(node: Any) -> set[str]:
    """Values a node reads, including those its subgraphs read from the enclosing scope."""
    names = {i for i in node.input if i}
    for a in node.attribute:
        for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            local = {i.name for i in g.input} | {i.name for i in g.initializer}
            for n in g.node:
                local |= set(n.output)
            for n in g.node:
                names |= {v for v in _reads(n) if v not in local}
            names |= {o.name for o in g.output if o.name not in local}
    return names


def load_onnx(model: Any, input_shapes: Mapping[str, Any] | None = None,
              fold_constants: bool = True) -> Graph:
    """Read an ONNX model (path, bytes or ModelProto) into a Graph.

    `input_shapes` binds dynamic dims: either a graph input name -> full shape, or a dim_param
    name -> int (``{"batch": 8}``). Constant sub-expressions are folded unless
    `fold_constants=False`.
    """
    proto, where = _parse(model)
    opset = _opset(proto)
    shapes = dict(input_shapes or {})
    name = proto.graph.name or os.path.splitext(os.path.basename(where))[0] or "onnx"
    try:
        return _Scope(proto.graph, opset, None, fold_constants, shapes, name).build()
    except RecursionError:
        raise GraphError(f"ONNX model '{where}' nests subgraphs too deeply") from None


__all__ = ["load_onnx", "ONNX_DTYPES", "MAX_OPSET", "RETIRED_OPS"]
