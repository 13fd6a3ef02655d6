"""PyTorch import: `from_torch(module, example_inputs, dynamic_shapes=None, params="constants")`.

Note on the conversion. The module is captured with `torch.export.export` and lowered with
`ExportedProgram.run_decompositions()` and torch's default decomposition table, so that what is
left is the core ATen op set (189 functional overloads in torch 2.13; `torch.Tag.core`), plus
the few ops the table maps whole and so takes out of the decomposition table (`linear` and
`matmul`, which would otherwise flatten a 3-D operand between two views; SDPA, which would
build its causal mask batch-sized; `hardswish`, `hardsigmoid`, ...). `ATEN` is ONE table from
an overload name (``"aten::add.Tensor"``, written as onnxscript's torchlib keys its functions)
to a small converter that builds registry ops with their attributes; it is the only place
that maps an ATen name to ops. Before anything is built, every node is checked against the
table and a `GraphError` lists each unmapped overload with its count and the source line
(`stack_trace`) of its first use.

- Parameters and buffers become graph constants named by their module path
  (``layer1.0.conv1.weight``; buffers are marked `Graph.buffers`, never trained) or, with
  ``params="inputs"``, graph inputs of the same names (`parameter_values` gives their arrays).
- Node names come from the module path of the op (`nn_module_stack`): the main op of a
  module (its matmul or convolution, else its last op) is named by the path itself, so
  ``Result.explain("layer1.0.conv1")`` finds it; the module's other ops are
  ``<path>/<fx node name>``, and the helper ops of one ATen op ``<name>_<op type>``.
- Copies (`clone`, `alias`) make no node: IR values are immutable.
- Dynamic dimensions (``dynamic_shapes`` with `torch.export.Dim`) become the IR's symbolic
  dims, named after the `Dim`; `Graph.bind(batch=8)` fixes them. A shape argument holding a
  symbolic size is written with Reshape's copy (0) or inferred (-1) entries.
- `torch.cond` becomes an If whose branches are closed graphs taking the operands.
- Graph inputs keep the names of `forward`'s arguments; outputs are ``output`` (one) or
  ``output_0, output_1, ...`` in the order `forward` returns them.

Torch is imported only by these functions (the optional extra ``pip install -e ".[torch]"``).
"""

from __future__ import annotations

import operator
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import AscendSimError, GraphError, require_extra
from ..ir.graph import Graph
from ..ir.tensor import Value

#: converter(cx, *args, **kwargs) -> Value, a tuple/list of Values, or a Python scalar
Converter = Callable[..., Any]

#: core ATen overload name -> converter: the one mapping table
ATEN: dict[str, Converter] = {}
_NAME = re.compile(r"aten::[a-z0-9_]+\.[A-Za-z0-9_]+")
PARAM_MODES = ("constants", "inputs")


def aten(*names: str) -> Callable[[Converter], Converter]:
    """Register a converter for ATen overloads ``"aten::name.overload"`` (``.default`` is
    written out); a malformed or repeated name is a programming error."""
    def deco(fn: Converter) -> Converter:
        for name in names:
            if not _NAME.fullmatch(name):
                raise ValueError(f"ATen name {name!r} is not of the form aten::name.overload")
            if name in ATEN:
                raise ValueError(f"ATen overload {name!r} mapped twice")
            ATEN[name] = fn
        return fn
    return deco


def _require_torch() -> Any:
    return require_extra("torch", "torch", "PyTorch import")


def overload_name(target: Any) -> str:
    """``"aten::add.Tensor"`` for torch.ops.aten.add.Tensor (the table's key)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return getattr(target, "__name__", str(target))
    return f"{schema.name}.{getattr(target, '_overloadname', 'default') or 'default'}"


def core_aten_overloads() -> list[str]:
    """Every overload of torch's core ATen op set (`torch.Tag.core`), sorted."""
    torch = _require_torch()
    names = set()
    for packet_name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, packet_name, None)
        if not hasattr(packet, "overloads"):
            continue
        for ov in packet.overloads():
            op = getattr(packet, ov)
            if torch.Tag.core in op.tags:
                names.add(overload_name(op))
    return sorted(names)


# ----------------------------------------------------------------------------- dtypes
_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16",
           "float64": "float64", "int64": "int64", "int32": "int32", "int16": "int16",
           "int8": "int8", "uint8": "uint8", "bool": "bool"}


def _dtype(tdtype: Any, where: str = "") -> str:
    name = str(tdtype).replace("torch.", "")
    try:
        return _DTYPES[name]
    except KeyError:
        raise GraphError(f"dtype {name}{' of ' + where if where else ''} is not supported "
                         f"(supported: {', '.join(_DTYPES)})") from None


def _to_numpy(t: Any) -> np.ndarray:
    torch = _require_torch()
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy()
    return t.numpy().copy()


# ----------------------------------------------------------------------------- context
class _Ctx:
    """What a converter sees: the graph, the fx node being converted, and helpers."""

    def __init__(self, g: Graph, dims: dict[str, str]) -> None:
        self.g = g
        self.dims = dims              # sympy symbol name -> symbolic dim name
        self.base = ""                # name prefix of the nodes of the fx node in hand
        self.node: Any = None
        self.emitted: list[str] = []  # node names made for the fx node in hand
        self._n = 0
        self._small: dict[tuple, Value] = {}   # shared small constants

    # names
    def emit(self, op_type: str, inputs: Sequence[Any], attrs: dict | None = None) -> Any:
        """Add one registry op; returns its Value (a tuple for several outputs). Its name is
        provisional until `settle_names`."""
        self._n += 1
        name = f"{self.base}#{self._n}"
        outs = self.g.add_node(op_type, list(inputs), attrs or {}, name=name)
        self.emitted.append(name)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def settle_names(self) -> dict[str, str]:
        """Name the nodes of the fx node in hand: the last one (the result) gets the base name,
        the others `<base>_<op type>`; their output values are renamed alike."""
        if not self.emitted:
            return {}
        g, k = self.g, len(self.emitted)
        mine, taken = g.nodes[-k:], g._node_names()
        assert [n.name for n in mine] == self.emitted
        new: dict[str, str] = {}
        for i, n in enumerate(mine):
            base = self.base if i == k - 1 else f"{self.base}_{n.op_type.lower()}"
            name, j = base, 0
            while name in taken or name in new.values() or (name in g.values and
                                                            name not in n.outputs):
                j += 1
                name = f"{base}_{j}"
            new[n.name] = name
        vals: dict[str, str] = {}
        for n in mine:
            for o in n.outputs:
                if o.startswith(n.name):
                    vals[o] = new[n.name] + o[len(n.name):].replace(":", "_out")
        from ..ir.graph import Node

        g.nodes[-k:] = [Node(new[n.name], n.op_type, tuple(vals.get(i, i) for i in n.inputs),
                             tuple(vals.get(o, o) for o in n.outputs), n.attrs, n.subgraph)
                        for n in mine]
        g.nodes_changed()
        for old, name in vals.items():
            v = g.values.pop(old)
            g.values[name] = Value(name, v.shape, v.dtype, v.layout)
        self.emitted = []
        return vals

    def ints(self, vals: Sequence[int]) -> Value:
        """An int64 1-d constant (shapes, axes), one per distinct content, as the model
        builders share them (the lowering reads a shared one from L2 after its first use)."""
        key = ("int64", *(int(v) for v in vals))
        if key not in self._small:
            self._small[key] = self.g.const(np.asarray(key[1:], np.int64),
                                            self.g.fresh_value_name(f"{self.base}_ints"))
        return self._small[key]

    def scalar(self, v: Any, like: Value | None = None) -> Value:
        """A 0-d constant of `like`'s dtype (float32 when no Value is given)."""
        dtype = like.dtype if like is not None else (
            "bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else "float32")
        if like is not None and dtype == "bool" and not isinstance(v, bool):
            dtype = "float32"
        key = (dtype, repr(v))
        if key not in self._small:
            self._small[key] = self.g.const(
                np.asarray(v, dtype=np.float32 if dtype == "bfloat16" else dtype),
                self.g.fresh_value_name(f"{self.base}_c"), dtype=dtype)
        return self._small[key]

    def operand(self, v: Any, like: Value | None) -> Value:
        return v if isinstance(v, Value) else self.scalar(_plain(v), like)

    # facts about the fx node's result
    @property
    def out_shape(self) -> tuple:
        return self.shape_of(self.node.meta["val"])

    @property
    def out_dtype(self) -> str:
        val = self.node.meta["val"]
        val = val[0] if isinstance(val, (tuple, list)) else val
        return _dtype(val.dtype, self.node.name)

    def shape_of(self, val: Any) -> tuple:
        return tuple(self.dim(d) for d in val.shape)

    def dim(self, d: Any) -> int | str:
        """An int, or the symbolic dim name of a SymInt."""
        if not hasattr(d, "node"):         # a plain int (a SymInt's int() would specialise)
            return int(d)
        expr = str(d.node.expr)
        if expr.lstrip("-").isdigit():
            return int(expr)
        if expr in self.dims:
            return self.dims[expr]
        # an expression of symbols (3*s0): written with the dims' names (3*batch)
        return re.sub(r"\b[su]\d+\b", lambda m: self.dims.get(m.group(0), m.group(0)), expr)

    def shape_input(self, x: Value, shape: Sequence[Any]) -> Value:
        """A constant shape for Reshape/Expand: symbolic sizes become 0 (copy x's dim at the
        same position) or -1 (the one inferred dim)."""
        out: list[int] = []
        for i, d in enumerate(shape):
            d = self.dim(d) if not isinstance(d, str) else d
            if isinstance(d, int):
                out.append(d)
            elif i < len(x.shape) and x.shape[i] == d:
                out.append(0)
            else:
                out.append(-1)
        if out.count(-1) > 1:
            raise GraphError(f"node '{self.base}': shape {tuple(shape)} has more than one "
                             f"symbolic size that is not input {x.name}'s own dim")
        return self.ints(out)


def _plain(v: Any) -> Any:
    """A Python number from a number or a SymInt/SymFloat with a hint."""
    if isinstance(v, (bool, int, float)):
        return v
    for cast in (int, float):
        try:
            return cast(v)
        except (TypeError, ValueError):
            continue
    raise GraphError(f"cannot use {v!r} as a constant")


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


# ----------------------------------------------------------------------------- the table
def _binary(op_type: str, out_bool: bool = False) -> Converter:
    def conv(cx: _Ctx, a: Any, b: Any, **kw: Any) -> Value:
        like = a if isinstance(a, Value) else b if isinstance(b, Value) else None
        if like is not None and like.dtype == "bool" and not out_bool:
            like = None
        a, b = cx.operand(a, like), cx.operand(b, like)
        a, b = _promote(cx, a, b)
        return cx.emit(op_type, [a, b])
    return conv


def _promote(cx: _Ctx, a: Value, b: Value) -> tuple[Value, Value]:
    """Both operands in one dtype (torch promotes; the registry's binary ops do not)."""
    if a.dtype == b.dtype:
        return a, b
    want = cx.out_dtype if cx.out_dtype != "bool" else _wider(a.dtype, b.dtype)
    return (a if a.dtype == want else cx.emit("Cast", [a], {"to": want}),
            b if b.dtype == want else cx.emit("Cast", [b], {"to": want}))


_ORDER = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64")


def _wider(a: str, b: str) -> str:
    return a if _ORDER.index(a) >= _ORDER.index(b) else b


def _unary(op_type: str, **attrs: Any) -> Converter:
    def conv(cx: _Ctx, x: Value, **kw: Any) -> Value:   # clone's memory_format: no effect
        return cx.emit(op_type, [x], dict(attrs))
    return conv


for _names, _op, _bool in (
        (("aten::mul.Tensor", "aten::mul.Scalar"), "Mul", False),
        (("aten::div.Tensor", "aten::div.Scalar"), "Div", False),
        (("aten::maximum.default",), "Max", False),
        (("aten::minimum.default",), "Min", False),
        (("aten::pow.Tensor_Tensor", "aten::pow.Tensor_Scalar"), "Pow", False),
        (("aten::eq.Tensor", "aten::eq.Scalar"), "Equal", True),
        (("aten::lt.Tensor", "aten::lt.Scalar"), "Less", True),
        (("aten::le.Tensor", "aten::le.Scalar"), "LessOrEqual", True),
        (("aten::gt.Tensor", "aten::gt.Scalar"), "Greater", True),
        (("aten::ge.Tensor", "aten::ge.Scalar"), "GreaterOrEqual", True),
        (("aten::logical_and.default", "aten::bitwise_and.Tensor"), "And", True),
        (("aten::logical_or.default", "aten::bitwise_or.Tensor"), "Or", True),
        (("aten::logical_xor.default", "aten::bitwise_xor.Tensor"), "Xor", True),
):
    aten(*_names)(_binary(_op, _bool))

for _names, _op in (
        (("aten::relu.default",), "Relu"), (("aten::sigmoid.default",), "Sigmoid"),
        (("aten::tanh.default",), "Tanh"), (("aten::exp.default",), "Exp"),
        (("aten::log.default",), "Log"), (("aten::sqrt.default",), "Sqrt"),
        (("aten::rsqrt.default",), "Rsqrt"), (("aten::neg.default",), "Neg"),
        (("aten::abs.default",), "Abs"), (("aten::reciprocal.default",), "Reciprocal"),
        (("aten::erf.default",), "Erf"), (("aten::sin.default",), "Sin"),
        (("aten::cos.default",), "Cos"), (("aten::floor.default",), "Floor"),
        (("aten::ceil.default",), "Ceil"), (("aten::round.default",), "Round"),
        (("aten::sign.default",), "Sign"), (("aten::isnan.default",), "IsNaN"),
        (("aten::isinf.default",), "IsInf"), (("aten::hardswish.default",), "HardSwish"),
        (("aten::logical_not.default", "aten::bitwise_not.default"), "Not"),
):
    aten(*_names)(_unary(_op))


@aten("aten::clone.default", "aten::alias.default", "aten::lift_fresh_copy.default")
def _same(cx: _Ctx, x: Value, **kw: Any) -> Value:
    """A copy (clone's memory_format included) is the value itself: IR values are immutable
    and layouts are the lowering's business, so no node (an Identity would split patterns)."""
    return x


@aten("aten::ne.Tensor", "aten::ne.Scalar")
def _ne(cx: _Ctx, a: Any, b: Any) -> Value:
    return cx.emit("Not", [_binary("Equal", True)(cx, a, b)])


@aten("aten::div.Tensor_mode")
def _div_mode(cx: _Ctx, a: Any, b: Any, rounding_mode: str | None = None) -> Value:
    q = _binary("Div")(cx, a, b)
    if rounding_mode == "trunc":
        sign = cx.emit("Sign", [q])
        return cx.emit("Mul", [cx.emit("Floor", [cx.emit("Abs", [q])]), sign])
    if rounding_mode == "floor":
        return cx.emit("Floor", [q])
    return q


@aten("aten::rsub.Scalar")
def _rsub(cx: _Ctx, x: Value, other: Any, alpha: Any = 1) -> Value:
    return cx.emit("Sub", [cx.operand(other, x), _scaled(cx, x, alpha)])


def _scaled(cx: _Ctx, x: Value, alpha: Any) -> Value:
    return x if alpha in (1, 1.0) else cx.emit("Mul", [x, cx.scalar(_plain(alpha), x)])


# add/sub take alpha: wrap the plain binary converters
def _with_alpha(op_type: str) -> Converter:
    plain = _binary(op_type)

    def conv(cx: _Ctx, a: Any, b: Any, alpha: Any = 1) -> Value:
        if alpha not in (1, 1.0):
            b = cx.emit("Mul", [cx.operand(b, a if isinstance(a, Value) else None),
                                cx.scalar(_plain(alpha), a if isinstance(a, Value) else None)])
        return plain(cx, a, b)
    return conv


aten("aten::add.Tensor", "aten::add.Scalar")(_with_alpha("Add"))
aten("aten::sub.Tensor", "aten::sub.Scalar")(_with_alpha("Sub"))


@aten("aten::gelu.default")
def _gelu(cx: _Ctx, x: Value, approximate: str = "none") -> Value:
    return cx.emit("Gelu", [x], {"approximate": approximate})


@aten("aten::leaky_relu.default")
def _leaky_relu(cx: _Ctx, x: Value, negative_slope: float = 0.01) -> Value:
    return cx.emit("LeakyRelu", [x], {"alpha": float(negative_slope)})


@aten("aten::elu.default")
def _elu(cx: _Ctx, x: Value, alpha: float = 1.0, scale: float = 1.0,
         input_scale: float = 1.0) -> Value:
    if scale != 1.0 or input_scale != 1.0:
        if abs(scale - 1.0507009873554805) < 1e-9 and abs(alpha - 1.6732632423543772) < 1e-9:
            return cx.emit("Selu", [x])
        raise GraphError(f"node '{cx.base}': elu with scale {scale}, input_scale "
                         f"{input_scale} is not supported")
    return cx.emit("Elu", [x], {"alpha": float(alpha)})


@aten("aten::hardsigmoid.default")
def _hardsigmoid(cx: _Ctx, x: Value) -> Value:
    return cx.emit("HardSigmoid", [x], {"alpha": 1.0 / 6.0, "beta": 0.5})


@aten("aten::clamp.default", "aten::clamp.Tensor", "aten::hardtanh.default")
def _clamp(cx: _Ctx, x: Value, min: Any = None, max: Any = None) -> Value:  # noqa: A002
    lo = None if min is None else cx.operand(min, x)
    hi = None if max is None else cx.operand(max, x)
    return cx.emit("Clip", [x, lo, hi])


@aten("aten::where.self")
def _where(cx: _Ctx, cond: Value, a: Any, b: Any) -> Value:
    like = a if isinstance(a, Value) else b if isinstance(b, Value) else None
    a, b = cx.operand(a, like), cx.operand(b, like)
    a, b = _promote(cx, a, b)
    return cx.emit("Where", [cond, a, b])


@aten("aten::_to_copy.default")
def _to_copy(cx: _Ctx, x: Value, dtype: Any = None, **kw: Any) -> Value:
    want = cx.out_dtype
    return x if want == x.dtype and dtype is None else cx.emit("Cast", [x], {"to": want})


# --- matmul and convolution (the cube)
@aten("aten::mm.default", "aten::bmm.default", "aten::matmul.default")
def _mm(cx: _Ctx, a: Value, b: Value) -> Value:
    return cx.emit("MatMul", [a, b])


@aten("aten::addmm.default")
def _addmm(cx: _Ctx, bias: Value, a: Value, b: Value, beta: Any = 1, alpha: Any = 1) -> Value:
    if beta in (1, 1.0) and alpha in (1, 1.0) and len(bias.shape) == 1:
        return cx.emit("MatMul", [a, b, bias])
    return cx.emit("Gemm", [a, b, bias], {"alpha": float(alpha), "beta": float(beta)})


@aten("aten::linear.default")
def _linear(cx: _Ctx, x: Value, w: Value, b: Value | None = None) -> Value:
    """Kept whole (not core ATen; its decomposition flattens a 3-D input into a 2-D mm
    between two views): one MatMul of any rank against the transposed weight."""
    wt = cx.emit("Transpose", [w], {"perm": [1, 0]})
    return cx.emit("MatMul", [x, wt, b])


@aten("aten::scaled_dot_product_attention.default")
def _sdpa(cx: _Ctx, q: Value, k: Value, v: Value, attn_mask: Value | None = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
          enable_gqa: bool = False) -> Value:
    """Kept whole (its decomposition builds the causal mask with a batch-sized full_like): the
    pattern the Ascend stack fuses into FlashAttentionScore, MatMul(q, k^T) -> Mul(scale) ->
    Add(mask) -> Softmax -> MatMul(., v), the mask a constant (L, S) table."""
    if dropout_p:
        raise GraphError(f"node '{cx.base}': scaled_dot_product_attention with dropout_p="
                         f"{dropout_p} (training-mode dropout) is not supported")
    rank, d = len(q.shape), q.shape[-1]
    if enable_gqa and q.shape[-3] != k.shape[-3]:
        k, v = _repeat_heads(cx, k, q.shape[-3]), _repeat_heads(cx, v, q.shape[-3])
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    s = cx.emit("MatMul", [q, cx.emit("Transpose", [k], {"perm": perm})])
    s = cx.emit("Mul", [s, cx.scalar(float(scale) if scale is not None else
                                     1.0 / float(np.sqrt(d)), s)])
    if is_causal:
        ls, ss = q.shape[-2], k.shape[-2]
        if not (isinstance(ls, int) and isinstance(ss, int)):
            raise GraphError(f"node '{cx.base}': a causal mask over symbolic lengths is not "
                             f"supported")
        table = np.where(np.tril(np.ones((ls, ss), bool)), 0.0, -np.inf)
        mask = cx.g.const(table.astype(np.float32), cx.g.fresh_value_name(f"{cx.base}_causal"),
                          dtype=s.dtype, buffer=True)
        s = cx.emit("Add", [s, mask])
    if attn_mask is not None:
        if attn_mask.dtype == "bool":
            s = cx.emit("Where", [attn_mask, s, cx.scalar(float("-inf"), s)])
        else:
            s = cx.emit("Add", list(_promote(cx, s, attn_mask)))
    p = cx.emit("Softmax", [s], {"axis": -1})
    return cx.emit("MatMul", [p, v])


def _repeat_heads(cx: _Ctx, x: Value, heads: int) -> Value:
    """(..., Hkv, S, D) -> (..., H, S, D), each kv head repeated H / Hkv times (repeat_kv)."""
    *lead, hk, t, d = x.shape
    rep = heads // int(hk)
    x5 = cx.emit("Unsqueeze", [x, cx.ints([len(lead) + 1])])
    x5 = cx.emit("Expand", [x5, cx.ints([1] * len(lead) + [1, rep, 1, 1])])
    return cx.emit("Reshape", [x5, cx.shape_input(x5, [*lead, heads, t, d])])


@aten("aten::convolution.default")
def _convolution(cx: _Ctx, x: Value, w: Value, b: Value | None, stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                 output_padding: Sequence[int], groups: int) -> Value:
    k = len(w.shape) - 2
    attrs = {"strides": list(stride) * (k // len(stride)),
             "pads": list(padding) * (2 * k // len(padding)),
             "dilations": list(dilation) * (k // len(dilation)), "group": int(groups),
             "kernel_shape": [int(d) for d in w.shape[2:]]}
    if transposed:
        attrs["output_padding"] = list(output_padding) * (k // max(len(output_padding), 1))
        return cx.emit("ConvTranspose", [x, w, b], attrs)
    return cx.emit("Conv", [x, w, b], attrs)


# --- normalisation and softmax
@aten("aten::_native_batch_norm_legit_no_training.default")
def _batch_norm(cx: _Ctx, x: Value, w: Value | None, b: Value | None, mean: Value, var: Value,
                momentum: float, eps: float) -> tuple:
    c = x.shape[1]
    w = w if w is not None else cx.g.const(np.ones(c, np.float32), cx.g.fresh_value_name(
        f"{cx.base}_ones"), dtype=mean.dtype)
    b = b if b is not None else cx.g.const(np.zeros(c, np.float32), cx.g.fresh_value_name(
        f"{cx.base}_zeros"), dtype=mean.dtype)
    y = cx.emit("BatchNormalization", [x, w, b, mean, var], {"epsilon": float(eps)})
    return (y, None, None)


@aten("aten::native_layer_norm.default")
def _layer_norm(cx: _Ctx, x: Value, shape: Sequence[int], w: Value | None, b: Value | None,
                eps: float) -> tuple:
    if w is None:
        norm = tuple(int(d) for d in shape)
        w = cx.g.const(np.ones(norm, np.float32), cx.g.fresh_value_name(f"{cx.base}_ones"),
                       dtype=x.dtype)
    used = {u.meta.get("_getitem") for u in cx.node.users}
    n_out = 3 if (1 in used or 2 in used) else 1
    out = cx.emit("LayerNormalization", [x, w, b],
                  {"axis": -len(shape), "epsilon": float(eps), "num_outputs": n_out})
    return (out, None, None) if n_out == 1 else out


@aten("aten::_softmax.default")
def _softmax(cx: _Ctx, x: Value, dim: int, half_to_float: bool = False) -> Value:
    return cx.emit("Softmax", [x], {"axis": int(dim)})


@aten("aten::_log_softmax.default")
def _log_softmax(cx: _Ctx, x: Value, dim: int, half_to_float: bool = False) -> Value:
    return cx.emit("LogSoftmax", [x], {"axis": int(dim)})


# --- reductions
def _reduce(op_type: str) -> Converter:
    def conv(cx: _Ctx, x: Value, dim: Sequence[int] | int | None = None, keepdim: bool = False,
             **kw: Any) -> Value:
        if kw.get("dtype") is not None and _dtype(kw["dtype"]) != x.dtype:
            x = cx.emit("Cast", [x], {"to": _dtype(kw["dtype"])})
        if dim is None or (isinstance(dim, (list, tuple)) and not dim):
            dims = list(range(len(x.shape)))
        else:
            dims = [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]
        return cx.emit(op_type, [x, cx.ints(dims)], {"keepdims": int(bool(keepdim))})
    return conv


aten("aten::sum.dim_IntList", "aten::sum.default")(_reduce("ReduceSum"))
aten("aten::mean.dim", "aten::mean.default")(_reduce("ReduceMean"))
aten("aten::amax.default")(_reduce("ReduceMax"))
aten("aten::amin.default")(_reduce("ReduceMin"))
aten("aten::prod.dim_int", "aten::prod.default")(_reduce("ReduceProd"))


@aten("aten::any.dim", "aten::any.dims", "aten::any.default")
def _any(cx: _Ctx, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
    xf = cx.emit("Cast", [x], {"to": "float32"})
    s = _reduce("ReduceMax")(cx, xf, dim, keepdim)
    return cx.emit("Cast", [s], {"to": "bool"})


@aten("aten::max.dim", "aten::min.dim")
def _max_dim(cx: _Ctx, x: Value, dim: int, keepdim: bool = False) -> tuple:
    is_max = cx.node.target.__name__.startswith("max")
    v = _reduce("ReduceMax" if is_max else "ReduceMin")(cx, x, [dim], keepdim)
    i = cx.emit("ArgMax" if is_max else "ArgMin", [x],
                {"axis": int(dim), "keepdims": int(bool(keepdim))})
    return (v, i)


@aten("aten::argmax.default", "aten::argmin.default")
def _argmax(cx: _Ctx, x: Value, dim: int | None = None, keepdim: bool = False) -> Value:
    op = "ArgMax" if cx.node.target.__name__.startswith("argmax") else "ArgMin"
    if dim is None:
        x = cx.emit("Reshape", [x, cx.ints([-1])])
        dim = 0
    return cx.emit(op, [x], {"axis": int(dim), "keepdims": int(bool(keepdim))})


# --- pooling
@aten("aten::max_pool2d_with_indices.default")
def _max_pool(cx: _Ctx, x: Value, kernel_size: Sequence[int], stride: Sequence[int] = (),
              padding: Sequence[int] = (0,), dilation: Sequence[int] = (1,),
              ceil_mode: bool = False) -> tuple:
    k = list(kernel_size) * (2 // len(kernel_size))
    s = list(stride) * (2 // len(stride)) if stride else k
    p = list(padding) * (2 // len(padding))
    d = list(dilation) * (2 // len(dilation))
    y = cx.emit("MaxPool", [x], {"kernel_shape": k, "strides": s, "pads": p * 2,
                                 "dilations": d, "ceil_mode": int(ceil_mode)})
    return (y, None)


@aten("aten::avg_pool2d.default")
def _avg_pool(cx: _Ctx, x: Value, kernel_size: Sequence[int], stride: Sequence[int] = (),
              padding: Sequence[int] = (0,), ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: int | None = None) -> Value:
    if divisor_override is not None:
        raise GraphError(f"node '{cx.base}': avg_pool2d divisor_override is not supported")
    k = list(kernel_size) * (2 // len(kernel_size))
    s = list(stride) * (2 // len(stride)) if stride else k
    p = list(padding) * (2 // len(padding))
    return cx.emit("AveragePool", [x], {"kernel_shape": k, "strides": s, "pads": p * 2,
                                        "ceil_mode": int(ceil_mode),
                                        "count_include_pad": int(count_include_pad)})


@aten("aten::_adaptive_avg_pool2d.default")
def _adaptive_avg_pool(cx: _Ctx, x: Value, output_size: Sequence[int]) -> Value:
    h, w = x.shape[-2:]
    oh, ow = (int(d) for d in output_size)
    if (oh, ow) == (1, 1):
        return cx.emit("GlobalAveragePool", [x])
    if not all(isinstance(d, int) for d in (h, w)) or h % oh or w % ow:
        raise GraphError(f"node '{cx.base}': adaptive_avg_pool2d from {(h, w)} to {(oh, ow)} "
                         f"(not an even split) is not supported")
    k = [h // oh, w // ow]
    return cx.emit("AveragePool", [x], {"kernel_shape": k, "strides": k})


# --- views and data movement
@aten("aten::view.default", "aten::_unsafe_view.default", "aten::reshape.default")
def _view(cx: _Ctx, x: Value, shape: Sequence[Any]) -> Value:
    return cx.emit("Reshape", [x, cx.shape_input(x, cx.out_shape)])


@aten("aten::permute.default")
def _permute(cx: _Ctx, x: Value, dims: Sequence[int]) -> Value:
    perm = [_axis(int(d), len(x.shape)) for d in dims]
    return cx.emit("Transpose", [x], {"perm": perm})


@aten("aten::expand.default")
def _expand(cx: _Ctx, x: Value, size: Sequence[Any], implicit: bool = False) -> Value:
    shape = cx.out_shape
    if tuple(shape) == tuple(x.shape):
        return cx.emit("Identity", [x])
    lead = len(shape) - len(x.shape)
    target: list[int] = []
    for i, d in enumerate(shape):
        if isinstance(d, int):
            target.append(d)
        elif i >= lead and x.shape[i - lead] == d:
            target.append(1)        # broadcasting keeps x's own symbolic dim
        else:
            raise GraphError(f"node '{cx.base}': expanding {x.shape} to the symbolic size "
                             f"{d!r} is not supported (a constant shape cannot hold it); "
                             f"export that dim static")
    return cx.emit("Expand", [x, cx.ints(target)])


@aten("aten::unsqueeze.default")
def _unsqueeze(cx: _Ctx, x: Value, dim: int) -> Value:
    return cx.emit("Unsqueeze", [x, cx.ints([_axis(int(dim), len(x.shape) + 1)])])


@aten("aten::squeeze.dims", "aten::squeeze.dim", "aten::squeeze.default")
def _squeeze(cx: _Ctx, x: Value, dim: Any = None) -> Value:
    if dim is None:
        dims = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [_axis(int(d), len(x.shape)) for d in dims if x.shape[_axis(int(d),
                                                                              len(x.shape))] == 1]
    if not dims:
        return cx.emit("Identity", [x])
    return cx.emit("Squeeze", [x, cx.ints(dims)])


@aten("aten::cat.default")
def _cat(cx: _Ctx, xs: Sequence[Value], dim: int = 0) -> Value:
    xs = [x for x in xs if not (len(x.shape) == 1 and x.shape[0] == 0)]
    return cx.emit("Concat", xs, {"axis": int(dim)})


@aten("aten::slice.Tensor")
def _slice(cx: _Ctx, x: Value, dim: int = 0, start: Any = None, end: Any = None,
           step: int = 1) -> Value:
    big = np.iinfo(np.int64).max
    start = 0 if start is None else _plain(start)
    end = big if end is None else min(_plain(end), big)
    size = x.shape[int(dim)]
    if isinstance(size, int) and end > size:
        end = size          # x[..., h:] as the slice it is (no int64-max sentinel)
    if start == 0 and end in (big, size) and step == 1:
        return x
    ins = [x, cx.ints([start]), cx.ints([end]), cx.ints([int(dim)])]
    return cx.emit("Slice", ins + ([cx.ints([int(step)])] if step != 1 else []))


@aten("aten::select.int")
def _select(cx: _Ctx, x: Value, dim: int, index: Any) -> Value:
    idx = cx.g.const(np.asarray(_plain(index), np.int64),
                     cx.g.fresh_value_name(f"{cx.base}_index"))
    return cx.emit("Gather", [x, idx], {"axis": int(dim)})


@aten("aten::split_with_sizes.default")
def _split(cx: _Ctx, x: Value, sizes: Sequence[int], dim: int = 0) -> tuple:
    outs = cx.emit("Split", [x, cx.ints([int(s) for s in sizes])],
                   {"axis": int(dim), "num_outputs": len(sizes)})
    return outs if isinstance(outs, tuple) else (outs,)


@aten("aten::slice_scatter.default")
def _slice_scatter(cx: _Ctx, x: Value, src: Value, dim: int = 0, start: Any = None,
                   end: Any = None, step: int = 1) -> Value:
    """`src` written into a contiguous range of `x` along `dim`: a KV-cache append (the
    ScatterUpdate-style write of new tokens' keys or values into the cache)."""
    axis = _axis(int(dim), len(x.shape))
    pos = 0 if start is None else _plain(start)
    if step != 1 or pos < 0:
        raise GraphError(f"node '{cx.base}': slice_scatter with step {step} or a negative "
                         f"start is not supported")
    return cx.emit("KvCacheAppend", [x, src], {"position": int(pos), "axis": axis})


@aten("aten::select_scatter.default")
def _select_scatter(cx: _Ctx, x: Value, src: Value, dim: int, index: Any) -> Value:
    """`src` written at one index of `dim`: a one-position KV-cache write."""
    axis = _axis(int(dim), len(x.shape))
    pos = _plain(index)
    size = x.shape[axis]
    if pos < 0 and isinstance(size, int):
        pos += size
    upd = cx.emit("Unsqueeze", [src, cx.ints([axis])])
    return cx.emit("KvCacheAppend", [x, upd], {"position": int(pos), "axis": axis})


@aten("aten::embedding.default")
def _embedding(cx: _Ctx, weight: Value, indices: Value, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> Value:
    return cx.emit("Gather", [weight, indices], {"axis": 0})


@aten("aten::index.Tensor")
def _index(cx: _Ctx, x: Value, indices: Sequence[Value | None]) -> Value:
    used = [(i, v) for i, v in enumerate(indices) if v is not None]
    if len(used) != 1:
        raise GraphError(f"node '{cx.base}': aten::index.Tensor with {len(used)} index "
                         f"tensors is not supported (one is)")
    axis, idx = used[0]
    if idx.dtype == "bool":
        raise GraphError(f"node '{cx.base}': boolean mask indexing is not supported")
    return cx.emit("Gather", [x, idx], {"axis": axis})


@aten("aten::constant_pad_nd.default")
def _pad(cx: _Ctx, x: Value, pad: Sequence[int], value: float = 0.0) -> Value:
    rank = len(x.shape)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    return cx.emit("Pad", [x, cx.ints(begins + ends), cx.scalar(_plain(value), x)])


# --- math written with registry ops
@aten("aten::bitwise_and.Scalar", "aten::bitwise_or.Scalar", "aten::bitwise_xor.Scalar")
def _bitwise_scalar(cx: _Ctx, x: Value, other: Any) -> Value:
    op = {"and": "And", "or": "Or", "xor": "Xor"}[cx.node.target.__name__.split(".")[0][8:]]
    if x.dtype != "bool":
        raise GraphError(f"node '{cx.base}': bitwise ops on {x.dtype} are not supported "
                         f"(bool is)")
    return cx.emit(op, [x, cx.scalar(bool(other), x)])


@aten("aten::div.Scalar_mode")
def _div_scalar_mode(cx: _Ctx, a: Value, b: Any, rounding_mode: str | None = None) -> Value:
    return _div_mode(cx, a, b, rounding_mode)


@aten("aten::pow.Scalar")
def _pow_scalar(cx: _Ctx, base: Any, x: Value) -> Value:
    return cx.emit("Pow", [cx.scalar(_plain(base), x), x])


@aten("aten::log1p.default")
def _log1p(cx: _Ctx, x: Value) -> Value:
    return cx.emit("Log", [cx.emit("Add", [x, cx.scalar(1.0, x)])])


@aten("aten::expm1.default")
def _expm1(cx: _Ctx, x: Value) -> Value:
    return cx.emit("Sub", [cx.emit("Exp", [x]), cx.scalar(1.0, x)])


@aten("aten::log2.default", "aten::log10.default")
def _log_base(cx: _Ctx, x: Value) -> Value:
    base = 2.0 if cx.node.target.__name__.startswith("log2") else 10.0
    return cx.emit("Mul", [cx.emit("Log", [x]), cx.scalar(1.0 / float(np.log(base)), x)])


@aten("aten::tan.default")
def _tan(cx: _Ctx, x: Value) -> Value:
    return cx.emit("Div", [cx.emit("Sin", [x]), cx.emit("Cos", [x])])


@aten("aten::sinh.default", "aten::cosh.default")
def _sinh_cosh(cx: _Ctx, x: Value) -> Value:
    e, em = cx.emit("Exp", [x]), cx.emit("Exp", [cx.emit("Neg", [x])])
    op = "Sub" if cx.node.target.__name__.startswith("sinh") else "Add"
    return cx.emit("Mul", [cx.emit(op, [e, em]), cx.scalar(0.5, x)])


@aten("aten::trunc.default")
def _trunc(cx: _Ctx, x: Value) -> Value:
    return cx.emit("Mul", [cx.emit("Floor", [cx.emit("Abs", [x])]), cx.emit("Sign", [x])])


@aten("aten::remainder.Tensor", "aten::remainder.Scalar", "aten::fmod.Tensor",
      "aten::fmod.Scalar")
def _remainder(cx: _Ctx, a: Value, b: Any) -> Value:
    """a - round(a / b) * b, rounding down (remainder) or toward zero (fmod); floats only."""
    if a.dtype not in ("float16", "float32", "bfloat16", "float64"):
        raise GraphError(f"node '{cx.base}': remainder/fmod of {a.dtype} is not supported "
                         f"(floating point is)")
    b = cx.operand(b, a)
    q = cx.emit("Div", [a, b])
    fmod = cx.node.target.__name__.startswith("fmod")
    q = _div_mode(cx, a, b, "trunc") if fmod else cx.emit("Floor", [q])
    return cx.emit("Sub", [a, cx.emit("Mul", [q, b])])


@aten("aten::var.correction", "aten::var.dim")
def _var(cx: _Ctx, x: Value, dim: Any = None, *rest: Any, correction: Any = None,
         keepdim: bool = False, unbiased: bool | None = None) -> Value:
    if rest:      # var.dim(x, dim, unbiased, keepdim)
        unbiased = rest[0]
        keepdim = rest[1] if len(rest) > 1 else keepdim
    dims = list(range(len(x.shape))) if dim is None else [int(d) for d in (
        [dim] if isinstance(dim, int) else dim)]
    n = int(np.prod([x.shape[d] for d in dims]))
    corr = _plain(correction) if correction is not None else (
        0 if unbiased is False else 1)
    mean = cx.emit("ReduceMean", [x, cx.ints(dims)], {"keepdims": 1})
    dev = cx.emit("Sub", [x, mean])
    ss = cx.emit("ReduceSum", [cx.emit("Mul", [dev, dev]), cx.ints(dims)],
                 {"keepdims": int(bool(keepdim))})
    return cx.emit("Mul", [ss, cx.scalar(1.0 / max(n - corr, 0) if n > corr else
                                         float("inf"), ss)])


@aten("aten::native_group_norm.default")
def _group_norm(cx: _Ctx, x: Value, w: Value | None, b: Value | None, n: Any, c: Any, hw: Any,
                groups: int, eps: float) -> tuple:
    """Normalise (N, G, C/G * HW) rows, then the per-channel affine."""
    shape = x.shape
    g3 = cx.emit("Reshape", [x, cx.ints([0, int(groups), -1])])
    mean = cx.emit("ReduceMean", [g3, cx.ints([2])], {"keepdims": 1})
    dev = cx.emit("Sub", [g3, mean])
    var = cx.emit("ReduceMean", [cx.emit("Mul", [dev, dev]), cx.ints([2])], {"keepdims": 1})
    rstd = cx.emit("Rsqrt", [cx.emit("Add", [var, cx.scalar(float(eps), var)])])
    y = cx.emit("Reshape", [cx.emit("Mul", [dev, rstd]),
                            cx.ints([0, int(shape[1])] + [int(d) for d in shape[2:]])])
    per_ch = [1] * (len(shape) - 2)
    if w is not None:
        y = cx.emit("Mul", [y, cx.emit("Reshape", [w, cx.ints([-1] + per_ch)])])
    if b is not None:
        y = cx.emit("Add", [y, cx.emit("Reshape", [b, cx.ints([-1] + per_ch)])])
    return (y, None, None)


@aten("aten::gather.default")
def _gather_elements(cx: _Ctx, x: Value, dim: int, index: Value, sparse_grad: bool = False
                     ) -> Value:
    return cx.emit("GatherElements", [x, index], {"axis": int(dim)})


@aten("aten::index_select.default")
def _index_select(cx: _Ctx, x: Value, dim: int, index: Value) -> Value:
    return cx.emit("Gather", [x, index], {"axis": int(dim)})


@aten("aten::scatter.src", "aten::scatter.value", "aten::scatter_add.default")
def _scatter(cx: _Ctx, x: Value, dim: int, index: Value, src: Any) -> Value:
    if not isinstance(src, Value):
        src = cx.emit("Expand", [cx.scalar(_plain(src), x), cx.ints(
            [int(d) for d in index.shape])])
    add = cx.node.target.__name__.startswith("scatter_add")
    return cx.emit("ScatterElements", [x, index, src],
                   {"axis": int(dim), "reduction": "add" if add else "none"})


@aten("aten::scatter_reduce.two")
def _scatter_reduce(cx: _Ctx, x: Value, dim: int, index: Value, src: Value, reduce: str,
                    include_self: bool = True) -> Value:
    red = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(reduce)
    if red is None or not include_self:
        raise GraphError(f"node '{cx.base}': scatter_reduce with reduce={reduce!r}, "
                         f"include_self={include_self} is not supported (sum, prod, amax, "
                         f"amin including self are)")
    return cx.emit("ScatterElements", [x, index, src], {"axis": int(dim), "reduction": red})


@aten("aten::repeat.default")
def _repeat(cx: _Ctx, x: Value, repeats: Sequence[int]) -> Value:
    reps = [int(r) for r in repeats]
    extra = len(reps) - len(x.shape)
    if extra:
        x = cx.emit("Reshape", [x, cx.ints([1] * extra + [int(d) for d in x.shape])])
    return cx.emit("Tile", [x, cx.ints(reps)])


@aten("aten::flip.default")
def _flip(cx: _Ctx, x: Value, dims: Sequence[int]) -> Value:
    axes = [_axis(int(d), len(x.shape)) for d in dims]
    big = np.iinfo(np.int64).max
    return cx.emit("Slice", [x, cx.ints([-1] * len(axes)), cx.ints([-big] * len(axes)),
                             cx.ints(axes), cx.ints([-1] * len(axes))])


@aten("aten::native_dropout.default")
def _dropout(cx: _Ctx, x: Value, p: float, train: bool | None) -> tuple:
    if train:
        raise GraphError(f"node '{cx.base}': training-mode dropout is not supported; export "
                         f"the module in eval() mode")
    return (cx.emit("Identity", [x]), None)


@aten("aten::copy.default")
def _copy(cx: _Ctx, dst: Value, src: Value, non_blocking: bool = False) -> Value:
    if src.dtype != dst.dtype:
        src = cx.emit("Cast", [src], {"to": dst.dtype})
    if tuple(src.shape) == tuple(dst.shape):
        return cx.emit("Identity", [src])
    return cx.emit("Expand", [src, cx.ints([int(d) for d in dst.shape])])


def _pad_mode(mode: str) -> Converter:
    def conv(cx: _Ctx, x: Value, padding: Sequence[int]) -> Value:
        rank = len(x.shape)
        begins, ends = [0] * rank, [0] * rank
        for i in range(len(padding) // 2):
            begins[rank - 1 - i] = int(padding[2 * i])
            ends[rank - 1 - i] = int(padding[2 * i + 1])
        return cx.emit("Pad", [x, cx.ints(begins + ends)], {"mode": mode})
    return conv


aten("aten::reflection_pad1d.default", "aten::reflection_pad2d.default",
     "aten::reflection_pad3d.default")(_pad_mode("reflect"))
aten("aten::replication_pad2d.default", "aten::replication_pad3d.default")(_pad_mode("edge"))


@aten("aten::upsample_nearest2d.vec", "aten::upsample_bilinear2d.vec")
def _upsample(cx: _Ctx, x: Value, output_size: Any, *rest: Any) -> Value:
    """Resize to the result's size: nearest as torch (floor of the asymmetric coordinate),
    bilinear with or without align_corners."""
    sizes = cx.ints([int(d) for d in cx.out_shape])
    if cx.node.target.__name__.startswith("upsample_nearest"):
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                 "nearest_mode": "floor"}
    else:
        align = bool(rest[0]) if rest else False
        attrs = {"mode": "linear", "coordinate_transformation_mode":
                 "align_corners" if align else "pytorch_half_pixel"}
    return cx.emit("Resize", [x, None, None, sizes], attrs)


# --- tensors made from nothing (constants)
def _const_result(cx: _Ctx, data: np.ndarray) -> Value:
    dtype = cx.out_dtype
    return cx.g.const(data.astype(np.float32 if dtype == "bfloat16" else dtype),
                      cx.g.fresh_value_name(cx.base), dtype=dtype)


@aten("aten::full.default")
def _full(cx: _Ctx, size: Sequence[Any], fill_value: Any, **kw: Any) -> Value:
    shape = cx.out_shape
    if not all(isinstance(d, int) for d in shape):
        raise GraphError(f"node '{cx.base}': full() of symbolic shape {shape} is not supported")
    return _const_result(cx, np.full(shape, _plain(fill_value)))


@aten("aten::scalar_tensor.default")
def _scalar_tensor(cx: _Ctx, s: Any, **kw: Any) -> Value:
    return _const_result(cx, np.asarray(_plain(s)))


@aten("aten::arange.start_step")
def _arange(cx: _Ctx, start: Any, end: Any, step: Any = 1, **kw: Any) -> Value:
    return _const_result(cx, np.arange(_plain(start), _plain(end), _plain(step)))


@aten("aten::full_like.default", "aten::empty.memory_format", "aten::empty_strided.default",
      "aten::fill.Scalar")
def _full_like(cx: _Ctx, x: Any, fill_value: Any = 0, *rest: Any, **kw: Any) -> Value:
    """A constant of the result's shape (empty tensors are zeros)."""
    shape = cx.out_shape
    if not all(isinstance(d, int) for d in shape):
        raise GraphError(f"node '{cx.base}': a filled tensor of symbolic shape {shape} is not "
                         f"supported")
    op = overload_name(cx.node.target)
    fill = _plain(fill_value) if op in ("aten::full_like.default", "aten::fill.Scalar") else 0
    return _const_result(cx, np.full(shape, fill))


@aten("aten::_assert_tensor_metadata.default", "aten::_assert_scalar.default",
      "aten::sym_constrain_range_for_size.default")
def _no_op(cx: _Ctx, *args: Any, **kw: Any) -> None:
    """Checks export leaves in the graph: nothing to compute."""
    return None


@aten("aten::sym_numel.default")
def _sym_numel(cx: _Ctx, x: Value) -> Any:
    return cx.dim(cx.node.meta["val"])


@aten("aten::sym_size.int")
def _sym_size(cx: _Ctx, x: Value, dim: int) -> Any:
    return x.shape[int(dim)]


# ----------------------------------------------------------------------------- conversion
def _location(node: Any) -> str:
    """The user's source line of an fx node (the last frame of its stack trace)."""
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
    if not frames:
        return "unknown source location"
    # the innermost frame outside torch's own modules (nn.Linear's forward is not the user's)
    own = [f for f in frames if f"{os.sep}torch{os.sep}" not in f[0]]
    path, line, fn, code = (own or frames)[-1]
    return f'{path}:{line} in {fn}: {code.strip()}'


def check_supported(graph_module: Any) -> None:
    """GraphError listing every op of an exported (core ATen) graph that `ATEN` does not map:
    each overload, how many nodes use it and where the first one comes from."""
    missing: Counter = Counter()
    first: dict[str, Any] = {}
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem or _is_sym(node):
            continue
        name = overload_name(node.target)
        if name in ATEN or _is_cond(node.target):
            continue
        missing[name] += 1
        first.setdefault(name, node)
    for mod in _submodules(graph_module):      # torch.cond's branches
        check_supported(mod)
    if missing:
        lines = [f"{name} (x{count}, first at node '{first[name].name}': "
                 f"{_location(first[name])})" for name, count in missing.most_common()]
        raise GraphError("PyTorch op(s) with no ascendsim mapping: " + "; ".join(lines))


def _is_sym(node: Any) -> bool:
    """Arithmetic on sizes (operator.mul of two SymInts, torch.sym_max, ...): not a tensor op;
    its value is the symbolic expression export recorded."""
    target = node.target
    return not hasattr(target, "_schema") and (
        getattr(target, "__module__", "") in ("_operator", "operator")
        or getattr(target, "__name__", "").startswith("sym_"))


def _submodules(gm: Any) -> list:
    torch = _require_torch()
    return [m for _, m in gm.named_children() if isinstance(m, torch.fx.GraphModule)]


def _is_cond(target: Any) -> bool:
    return getattr(target, "__name__", "") == "cond" and "higher_order" in repr(target)


def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    # export writes "L['self'].layer1[0]" forms in some versions: keep the dotted path
    path = re.sub(r"^L\['self'\]\.?", "", path)
    path = re.sub(r"\[(\d+)\]", r".\1", path).replace("['", ".").replace("']", "")
    return path.strip(".")


_MAIN_OPS = frozenset({"aten::convolution.default", "aten::mm.default", "aten::bmm.default",
                       "aten::addmm.default", "aten::linear.default", "aten::matmul.default"})


def _names(gm: Any) -> dict[Any, str]:
    """fx node -> base name: the module path for a module's main op (its one matmul or
    convolution, else its last op), `<path>/<fx name>` for the rest."""
    groups: dict[str, list] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem and \
                not _is_sym(node):
            groups.setdefault(_module_path(node), []).append(node)
    names: dict[Any, str] = {}
    for path, nodes in groups.items():
        main = None
        if path:
            cube = [n for n in nodes if overload_name(n.target) in _MAIN_OPS]
            main = cube[0] if len(cube) == 1 else (None if cube else nodes[-1])
        for n in nodes:
            names[n] = path if n is main else (f"{path}/{n.name}" if path else n.name)
    return names


class _Converter:
    def __init__(self, torch: Any, g: Graph, dims: dict[str, str]) -> None:
        self.torch, self.g = torch, g
        self.cx = _Ctx(g, dims)

    def run(self, gm: Any, env: dict) -> list:
        """Convert the call_function nodes of `gm` (placeholders already in `env`); return the
        converted outputs."""
        names = _names(gm)
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is operator.getitem:
                src, i = node.args
                node.meta["_getitem"] = i
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                env[node] = getattr(gm, node.target)
                continue
            if node.op == "output":
                return [self._arg(a, env) for a in node.args[0]]
            if node.target is operator.getitem:
                src, i = node.args
                env[node] = env[src][i]
                continue
            if _is_sym(node):
                env[node] = self.cx.dim(node.meta["val"])
                continue
            args = [self._arg(a, env) for a in node.args]
            kwargs = {k: self._arg(v, env) for k, v in node.kwargs.items()}
            self.cx.base, self.cx.node, self.cx.emitted = names[node], node, []
            if _is_cond(node.target):
                env[node] = self._cond(node, *args)
                continue
            fn = ATEN[overload_name(node.target)]
            try:
                env[node] = self._renamed(fn(self.cx, *args, **kwargs))
            except AscendSimError as exc:
                msg = str(exc)
                raise GraphError(f"{overload_name(node.target)} at node '{node.name}' "
                                 f"({_location(node)}): {msg}") from None
        raise GraphError(f"graph '{self.g.name}' has no output node")

    def _renamed(self, result: Any) -> Any:
        """`result` with the Values of the nodes just made under their settled names."""
        vals = self.cx.settle_names()

        def fix(r: Any) -> Any:
            if isinstance(r, Value):
                return self.g.values[vals.get(r.name, r.name)]
            if isinstance(r, (tuple, list)):
                return type(r)(fix(x) for x in r)
            return r
        return fix(result)

    def _arg(self, a: Any, env: dict) -> Any:
        fx = self.torch.fx
        if isinstance(a, fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x, env) for x in a)
        return a

    def _cond(self, node: Any, pred: Any, true_gm: Any, false_gm: Any,
              operands: Sequence[Any]) -> Any:
        if not isinstance(pred, Value):
            return self._inline(true_gm if bool(pred) else false_gm, operands)
        base = self.cx.base
        if pred.dtype != "bool":
            self.cx.base = f"{base}/pred"
            pred = self._renamed(self.cx.emit("Cast", [pred], {"to": "bool"}))
        branches = [self._branch(gm, operands, f"{base}/{which}")
                    for gm, which in ((true_gm, "true"), (false_gm, "false"))]
        self.cx.base, self.cx.node, self.cx.emitted = base, node, []
        outs = self._renamed(self.cx.emit("If", [pred, *operands],
                                          {"then_branch": branches[0],
                                           "else_branch": branches[1]}))
        return outs if isinstance(outs, tuple) else (outs,)

    def _branch(self, gm: Any, operands: Sequence[Value], name: str) -> Graph:
        sub = Graph(name)
        env: dict = {}
        places = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for ph, v in zip(places, operands):
            env[ph] = sub.input(f"{name}/{ph.name}", v.shape, v.dtype)
        inner = _Converter(self.torch, sub, self.cx.dims)
        outs = inner.run(gm, env)
        _mark_outputs(sub, outs, f"{name}/output")
        return sub

    def _inline(self, gm: Any, operands: Sequence[Any]) -> Any:
        env = {ph: v for ph, v in zip((n for n in gm.graph.nodes if n.op == "placeholder"),
                                      operands)}
        saved = (self.cx.base, self.cx.node, self.cx.emitted)
        outs = self.run(gm, env)
        self.cx.base, self.cx.node, self.cx.emitted = saved
        return tuple(outs)


def _mark_outputs(g: Graph, outs: Sequence[Any], base: str) -> None:
    """Make the converted outputs the graph's outputs, named `base` / `base_i`."""
    flat = [o for o in outs if o is not None]
    names = [base] if len(flat) == 1 else [f"{base}_{i}" for i in range(len(flat))]
    for v, name in zip(flat, names):
        if not isinstance(v, Value):
            v = g.const(np.asarray(v), g.fresh_value_name(name))
        if v.name in g.inputs or v.name in g.constants or v.name in g.outputs:
            g.add_node("Identity", [v], name=name, outputs=[name])
        else:
            _rename_value(g, v.name, name)
        g.output(name)


def _rename_value(g: Graph, old: str, new: str) -> None:
    """Rename a node output in place (its producer, its users, the graph's lists)."""
    from ..ir.graph import Node

    if new in g.values:
        raise GraphError(f"cannot name an output '{new}': the name is taken")
    v = g.values.pop(old)
    g.values[new] = Value(new, v.shape, v.dtype, v.layout)
    sub = {old: new}
    g.nodes = [Node(n.name, n.op_type, tuple(sub.get(i, i) for i in n.inputs),
                    tuple(sub.get(o, o) for o in n.outputs), n.attrs, n.subgraph)
               for n in g.nodes]
    g.outputs = [sub.get(o, o) for o in g.outputs]


def _dim_names(ep: Any, dynamic_shapes: Any, names: list[str]) -> dict[str, str]:
    """sympy symbol name (s0, s77, ...) -> the Dim's name the user gave."""
    if dynamic_shapes is None:
        return {}
    specs = dynamic_shapes
    if isinstance(specs, dict):
        specs = [specs.get(n) for n in names]
    out: dict[str, str] = {}
    place = [n for n in ep.graph.nodes if n.op == "placeholder"]
    users = [p for p in place if p.name in set(ep.graph_signature.user_inputs)]
    for node, spec in zip(users, specs):
        if spec is None:
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        val = node.meta.get("val")
        for axis, dim in items:
            if dim is None or val is None:
                continue
            d = val.shape[int(axis)]
            if hasattr(d, "node"):
                out[str(d.node.expr)] = getattr(dim, "__name__", str(dim))
    return out


def parameter_values(module: Any) -> dict[str, np.ndarray]:
    """The module's parameters and buffers as arrays, by module path (the values of the graph
    inputs `from_torch(..., params="inputs")` makes)."""
    return {k: _to_numpy(v) for k, v in module.state_dict(keep_vars=False).items()}


def from_torch(module: Any, example_inputs: Any, dynamic_shapes: Any = None,
               params: str = "constants", name: str | None = None) -> Graph:
    """Import a `torch.nn.Module` as a Graph (see the module note).

    `example_inputs`: a tuple of tensors (or one tensor) for `forward`; `dynamic_shapes`: as
    `torch.export.export` takes it (`torch.export.Dim` objects name the symbolic dims);
    `params`: "constants" (weights in the graph) or "inputs" (graph inputs by module path).
    Raises GraphError naming each unmapped ATen op and its source line, or why export failed.
    """
    torch = _require_torch()
    if params not in PARAM_MODES:
        from ..errors import ConfigError
        raise ConfigError(f"params={params!r}: valid values are {', '.join(PARAM_MODES)}")
    if not isinstance(module, torch.nn.Module):
        raise GraphError(f"from_torch() takes a torch.nn.Module, got {type(module).__name__}")
    args = example_inputs if isinstance(example_inputs, tuple) else (
        tuple(example_inputs) if isinstance(example_inputs, list) else (example_inputs,))
    try:
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
        ep = ep.run_decompositions(decomposition_table())
    except Exception as exc:
        raise GraphError(f"torch.export of {type(module).__name__} failed: "
                         f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}") from exc
    gm = ep.graph_module
    sig = ep.graph_signature
    mutated = getattr(sig, "buffers_to_mutate", {}) or {}
    if mutated:
        raise GraphError(f"{type(module).__name__} updates buffer(s) "
                         f"{', '.join(sorted(mutated.values()))} in forward (BatchNorm in "
                         f"training mode?): call module.eval() before from_torch")
    check_supported(gm)
    g = Graph(name or type(module).__name__)
    env: dict = {}
    user = list(sig.user_inputs)
    dims = _dim_names(ep, dynamic_shapes, user)
    cx = _Ctx(g, dims)
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    buffers = set(sig.inputs_to_buffers.values())
    kinds = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
             **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if node.name in kinds:
            fqn = kinds[node.name]
            data = state[fqn]
            dtype = _dtype(data.dtype, fqn)
            if params == "inputs" and node.name in sig.inputs_to_parameters:
                env[node] = g.input(fqn, tuple(data.shape), dtype)
            else:
                env[node] = g.const(_to_numpy(data), fqn, dtype=dtype,
                                    buffer=fqn in buffers or node.name not in
                                    sig.inputs_to_parameters)
        elif node.name in user:
            if not isinstance(val, torch.Tensor):
                env[node] = val
                continue
            env[node] = g.input(node.name, cx.shape_of(val), _dtype(val.dtype, node.name))
        else:
            raise GraphError(f"exported input '{node.name}' is neither a user input nor a "
                             f"parameter/buffer (mutated state is not supported)")
    conv = _Converter(torch, g, dims)
    outs = conv.run(gm, env)
    n_user = len(sig.user_outputs)
    _mark_outputs(g, outs[len(outs) - n_user:], "output")
    g.validate()
    return g


def decomposition_table() -> dict:
    """torch's default decompositions, minus the ops `ATEN` maps whole."""
    torch = _require_torch()
    table = dict(torch.export.default_decompositions())
    for op in list(table):
        if overload_name(op) in ATEN:
            del table[op]
    return table


__all__ = ["from_torch", "parameter_values", "ATEN", "aten", "core_aten_overloads",
           "check_supported", "decomposition_table", "overload_name"]
