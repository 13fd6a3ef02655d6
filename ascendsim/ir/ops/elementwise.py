"""Element-wise ops (ONNX opset-21 signatures): arithmetic (Add Sub Mul Div Pow), unary math,
activations (Relu LeakyRelu PRelu Sigmoid Tanh Erf Gelu Elu Selu HardSigmoid HardSwish Softplus),
rounding/sign/trigonometry, Where, Clip, Cast, comparisons and logic, the n-ary Sum/Max/Min,
IsNaN/IsInf and Dropout.

Everything an op costs is in the `OPS` table below: its vector instruction class, its flops
per output element (arithmetic work: the roofline and the reports) and its vector instructions
per element (`instrs`: what the lowering times, each instruction at the chip's rate for the
op's class). The two differ: Exp is ONE vexp instruction (msKPP: 64 B/cycle fp16) but counts
2 flops. Each row's comment lists the instruction sequence its count stands for (CANN's
decomposition); helper instructions of a cheaper class (a vadds inside Sigmoid) are timed at
the op's class, a slight over-estimate. The lowering runs a BINARY op whose other operands
are one-element (x + 2.0: vadds, vmuls, vmaxs) at the unary rate (see lower/vector.py).
Nothing else about an op's cost is hard-coded elsewhere.

Units: every op runs on the vector unit except
- `Pow`, on the AI CPU. CANN places a general Pow (tensor or non-integer exponent, int types)
  on the AI CPU; the seed's example is exactly Pow(x, 2) being slow until the PowToMul graph
  pass rewrites it to Mul(x, x) on the AI Core. So Pow is AI CPU whatever its exponent, and the
  speed-up of that rewrite is visible. Pow stays category BROADCAST: it is element-wise, and
  graph-kernel fusion (which compiles it into an AI Core composite) may fuse it; UB fusion must
  ask `unit` and refuse AI CPU ops.
- inference `Dropout`, a view (Unit.NONE, no task). (Identity is registered with the views,
  in ops/tensor.py.)

Fused kernels call `OpDef.scalar` with the op's inputs followed by `scalar_args(op, attrs)`
(LeakyRelu's alpha, Gelu's approximate flag); see kernels/elementwise.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import GraphError
from ...kernels import elementwise as ew
from ..registry import (
    Category,
    OpDef,
    Unit,
    VecClass,
    broadcast_shapes,
    register,
    register_grads,
)
from ..tensor import ONNX_DTYPES, dtype_name  # noqa: F401  (ONNX_DTYPES: re-exported)

FLOATS = frozenset({"float16", "float32", "float64", "bfloat16"})
SIGNED = frozenset({"int8", "int16", "int32", "int64"})
INTS = SIGNED | {"uint8", "uint16", "uint32", "uint64"}
NUMERIC = FLOATS | INTS
SIGNED_NUMERIC = FLOATS | SIGNED
BOOL = frozenset({"bool"})
ANY = NUMERIC | BOOL


# ----------------------------------------------------------------------------- checks
def check_dtype(value: Any, allowed: frozenset, what: str = "input") -> None:
    """GraphError unless `value.dtype` is one of `allowed`."""
    if value.dtype not in allowed:
        raise GraphError(f"{what} '{value.name}' has dtype {value.dtype}; expected one of "
                         f"{', '.join(sorted(allowed))}")


def same_dtype(values: Sequence[Any]) -> str:
    """The common dtype of `values`, or GraphError naming the mismatch."""
    dtypes = {v.dtype for v in values}
    if len(dtypes) > 1:
        desc = ", ".join(f"'{v.name}': {v.dtype}" for v in values)
        raise GraphError(f"inputs have different dtypes ({desc})")
    return values[0].dtype


def _present(ins: Sequence[Any]) -> list:
    return [v for v in ins if v is not None]


def unary_infer(allowed: frozenset, out_dtype: str | None = None) -> Callable:
    def infer(ins, attrs, consts):
        check_dtype(ins[0], allowed)
        return [(ins[0].shape, out_dtype or ins[0].dtype)]
    return infer


def bcast_infer(allowed: frozenset, out_dtype: str | None = None) -> Callable:
    """Multidirectional broadcasting of every input, one dtype; output `out_dtype` or it."""
    def infer(ins, attrs, consts):
        ins = _present(ins)
        if not ins:
            raise GraphError("needs at least one input")
        dtype = same_dtype(ins)
        check_dtype(ins[0], allowed)
        return [(broadcast_shapes(*(v.shape for v in ins)), out_dtype or dtype)]
    return infer


def _pow_infer(ins, attrs, consts):
    check_dtype(ins[0], NUMERIC - {"uint8", "uint16", "int8", "int16"}, "base")
    check_dtype(ins[1], NUMERIC, "exponent")
    return [(broadcast_shapes(ins[0].shape, ins[1].shape), ins[0].dtype)]


def _prelu_infer(ins, attrs, consts):
    """PRelu: `slope` broadcasts to X (unidirectionally); the output has X's shape."""
    x, slope = ins
    same_dtype([x, slope])
    check_dtype(x, SIGNED_NUMERIC)
    try:
        ok = broadcast_shapes(x.shape, slope.shape) == tuple(x.shape)
    except GraphError:
        ok = False
    if not ok:
        raise GraphError(f"slope '{slope.name}' of shape {tuple(slope.shape)} does not "
                         f"broadcast to X '{x.name}' {tuple(x.shape)}")
    return [(x.shape, x.dtype)]


def _clip_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, NUMERIC)
    for bound in ins[1:]:
        if bound is None:
            continue
        if bound.dtype != x.dtype:
            raise GraphError(f"min/max '{bound.name}' has dtype {bound.dtype}, input "
                             f"'{x.name}' has {x.dtype}")
        if bound.shape not in ((), (1,)):
            raise GraphError(f"min/max '{bound.name}' must be a scalar, has shape {bound.shape}")
    return [(x.shape, x.dtype)]


def _where_infer(ins, attrs, consts):
    cond, a, b = ins
    check_dtype(cond, BOOL, "condition")
    dtype = same_dtype([a, b])
    return [(broadcast_shapes(cond.shape, a.shape, b.shape), dtype)]


def cast_target(to: Any) -> str:
    """Cast's `to` as a dtype name: an ONNX TensorProto code (int) or a numpy dtype name."""
    if to is None:
        raise GraphError("attribute 'to' is required")
    if isinstance(to, (int, np.integer)) and not isinstance(to, bool):
        if int(to) not in ONNX_DTYPES:
            raise GraphError(f"Cast to ONNX data type {int(to)} is not supported; supported "
                             f"codes: {sorted(ONNX_DTYPES)}")
        return ONNX_DTYPES[int(to)]
    return dtype_name(to)


def _cast_infer(ins, attrs, consts):
    check_dtype(ins[0], ANY)
    attrs["to"] = cast_target(attrs["to"])   # the node stores the dtype name
    return [(ins[0].shape, attrs["to"])]


def _cast_kernel(args: list, attrs: dict) -> list:
    return ew.cast_kernel(args, attrs, cast_target(attrs["to"]))


def _gelu_flag(attrs: dict) -> float:
    approx = attrs["approximate"]
    if approx not in ("none", "tanh"):
        raise GraphError(f"approximate must be 'none' or 'tanh', got {approx!r}")
    return 0.0 if approx == "none" else 1.0


def _gelu_infer(ins, attrs, consts):
    _gelu_flag(attrs)
    return unary_infer(FLOATS)(ins, attrs, consts)


# ----------------------------------------------------------------------------- Dropout
def _num_outputs(attrs: dict, allowed: Sequence[int]) -> int:
    n = attrs["num_outputs"]
    if n not in allowed:
        raise GraphError(f"num_outputs must be one of {list(allowed)}, got {n!r}")
    return int(n)


def _dropout_infer(ins, attrs, consts):
    x = ins[0]
    check_dtype(x, FLOATS)
    if len(ins) > 1 and ins[1] is not None:
        check_dtype(ins[1], FLOATS, "ratio")
    if len(ins) > 2 and ins[2] is not None:
        check_dtype(ins[2], BOOL, "training_mode")
    outs = [(x.shape, x.dtype), (x.shape, "bool")]
    return outs[:_num_outputs(attrs, (1, 2))]


def _scalar(arr: Any, default: Any) -> Any:
    """The single value of a scalar or 1-element tensor input, or `default` when absent."""
    return default if arr is None else np.asarray(arr).reshape(-1)[0].item()


def _dropout_kernel(args: list, attrs: dict) -> list:
    """Inference: identity (mask all True). training_mode=True: a seeded Bernoulli mask, kept
    values scaled by 1/(1-ratio) (ONNX Dropout-13)."""
    x = np.asarray(args[0])
    ratio = _scalar(args[1], 0.5) if len(args) > 1 else 0.5
    training = bool(_scalar(args[2], False)) if len(args) > 2 else False
    if not training or ratio == 0.0:
        mask = np.ones(x.shape, dtype=np.bool_)
        y = x
    else:
        seed = attrs.get("seed")
        rng = np.random.default_rng(0 if seed is None else int(seed))
        mask = rng.random(x.shape) >= ratio
        scale = 1.0 / (1.0 - ratio) if ratio < 1.0 else 0.0
        y = (x.astype(np.float32) * mask * scale).astype(x.dtype)
    return [y, mask][:int(attrs["num_outputs"])]


def _dropout_unit(node: Any, consts: dict) -> Unit:
    """A view at inference; a vector task when training_mode is (or may be) true."""
    if len(node.inputs) > 2 and node.inputs[2]:
        mode = consts.get(node.inputs[2])
        if mode is None or bool(_scalar(mode, True)):
            return Unit.VECTOR
    return Unit.NONE


# ----------------------------------------------------------------------------- the table
def _flops(per_element: int) -> Callable:
    return lambda ins, outs, attrs: per_element * sum(o.numel for o in outs[:1])


def _nary_flops(ins, outs, attrs) -> int:
    return max(len([v for v in ins if v is not None]) - 1, 0) * outs[0].numel


def _nary_instrs(ins, outs, attrs) -> int:
    return max(len([v for v in ins if v is not None]) - 1, 1)


@dataclass(frozen=True)
class Spec:
    """One row of the element-wise table (see module doc for what vec/flops/instrs mean)."""

    op: str
    infer: Callable
    kernel: Callable
    scalar: Callable | None
    vec: VecClass
    flops: int                        # per output element; -1: (inputs - 1) per element (n-ary)
    instrs: int                       # vector instructions per element; -1: inputs - 1 (n-ary)
    inputs: tuple[str, ...] = ("x",)
    attrs: dict | None = None
    category: Category = Category.ELEMWISE
    unit: Any = Unit.VECTOR
    commutative: bool = False
    builder: str = ""
    num_outputs: int | str = 1
    extra: tuple[tuple[VecClass, float], ...] = ()   # instructions of other classes per element


_B, _BC, _E = VecClass.BINARY, Category.BROADCAST, VecClass.EXP
_AB = ("a", "b")

#: Trailing scalar arguments of `OpDef.scalar` taken from attributes, per op type.
SCALAR_ATTRS: dict[str, Callable[[dict], tuple]] = {
    "LeakyRelu": lambda attrs: (float(attrs["alpha"]),),
    "Gelu": lambda attrs: (_gelu_flag(attrs),),
    "Elu": lambda attrs: (float(attrs["alpha"]),),
    "Selu": lambda attrs: (float(attrs["alpha"]), float(attrs["gamma"])),
    "HardSigmoid": lambda attrs: (float(attrs["alpha"]), float(attrs["beta"])),
    "IsInf": lambda attrs: (float(attrs["detect_negative"]), float(attrs["detect_positive"])),
}


OPS: tuple[Spec, ...] = (
    # --- broadcasting binary arithmetic
    # Add: vadd
    Spec("Add", bcast_infer(NUMERIC), ew.binary(ew.add_ufunc), ew.scalar_add, _B, 1, 1, _AB,
         category=_BC, commutative=True),
    # Sub: vsub
    Spec("Sub", bcast_infer(NUMERIC), ew.binary(ew.sub_ufunc), ew.scalar_sub, _B, 1, 1, _AB,
         category=_BC),
    # Mul: vmul
    Spec("Mul", bcast_infer(NUMERIC), ew.binary(ew.mul_ufunc), ew.scalar_mul, _B, 1, 1, _AB,
         category=_BC, commutative=True),
    # Div: vdiv
    Spec("Div", bcast_infer(NUMERIC), ew.binary(ew.div_ufunc), ew.scalar_div,
         VecClass.DIV, 1, 1, _AB,
         category=_BC),
    # Pow: vln, vmul, vexp
    Spec("Pow", _pow_infer, ew.pow_kernel, ew.scalar_pow, _E, 3, 3, ("x", "y"), category=_BC,
         unit=Unit.AICPU),
    # --- unary math
    # Sqrt: vsqrt
    Spec("Sqrt", unary_infer(FLOATS), ew.unary(ew.sqrt_ufunc), ew.scalar_sqrt, VecClass.SQRT, 1, 1),
    # Rsqrt: vsqrt, vrec
    Spec("Rsqrt", unary_infer(FLOATS), ew.unary(ew.rsqrt_ufunc), ew.scalar_rsqrt,
         VecClass.SQRT, 2, 2),
    # Exp: vexp
    Spec("Exp", unary_infer(FLOATS), ew.unary(ew.exp_ufunc), ew.scalar_exp, _E, 2, 1),
    # Log: vln
    Spec("Log", unary_infer(FLOATS), ew.unary(ew.log_ufunc), ew.scalar_log, _E, 2, 1),
    # Neg: vmuls -1
    Spec("Neg", unary_infer(SIGNED_NUMERIC), ew.unary(ew.neg_ufunc), ew.scalar_neg,
         VecClass.UNARY, 1, 1),
    # Abs: vabs
    Spec("Abs", unary_infer(NUMERIC), ew.unary(ew.abs_ufunc), ew.scalar_abs, VecClass.UNARY, 1, 1),
    # Reciprocal: vrec
    Spec("Reciprocal", unary_infer(FLOATS), ew.unary(ew.reciprocal_ufunc), ew.scalar_reciprocal,
         VecClass.DIV, 1, 1),
    # --- activations
    # Relu: vrelu
    Spec("Relu", unary_infer(SIGNED_NUMERIC), ew.unary(ew.relu_ufunc), ew.scalar_relu,
         VecClass.UNARY, 1, 1),
    # LeakyRelu: vmuls, vmax
    Spec("LeakyRelu", unary_infer(FLOATS),
         ew.with_scalars(ew.leaky_relu_ufunc, SCALAR_ATTRS["LeakyRelu"]), ew.scalar_leaky_relu,
         VecClass.UNARY, 2, 2, attrs={"alpha": 0.01}),
    # Sigmoid: vmuls -1, vexp, vadds 1, vrec
    Spec("Sigmoid", unary_infer(FLOATS), ew.unary(ew.sigmoid_ufunc), ew.scalar_sigmoid, _E, 4, 4),
    # Tanh: vmuls 2, vexp, vadds -1, vadds 1, vdiv
    Spec("Tanh", unary_infer(FLOATS), ew.unary(ew.tanh_ufunc), ew.scalar_tanh, _E, 4, 5),
    # Erf: rational approximation, ~4 at the exp rate
    Spec("Erf", unary_infer(FLOATS), ew.unary(ew.erf_ufunc), ew.scalar_erf, _E, 4, 4),
    # Gelu: x*sigmoid(k(x + c x^3)): 2 vmul, vmuls, vadd, vmuls, vexp, vadds, vdiv
    Spec("Gelu", _gelu_infer, ew.with_scalars(ew.gelu_ufunc, SCALAR_ATTRS["Gelu"]),
         ew.scalar_gelu, _E, 8, 8, attrs={"approximate": "none"}),
    # Elu: vexp, vadds -1, vmuls alpha, vsel
    Spec("Elu", unary_infer(FLOATS), ew.with_scalars(ew.elu_ufunc, SCALAR_ATTRS["Elu"]),
         ew.scalar_elu, _E, 3, 4, attrs={"alpha": 1.0}),
    # Selu: vexp, vadds -1, vmuls alpha, vsel, vmuls gamma
    Spec("Selu", unary_infer(FLOATS), ew.with_scalars(ew.selu_ufunc, SCALAR_ATTRS["Selu"]),
         ew.scalar_selu, _E, 4, 5, attrs={"alpha": 1.67326319217681884765625,
                                 "gamma": 1.05070102214813232421875}),
    # HardSigmoid: vmuls, vadds, vmins, vmaxs
    Spec("HardSigmoid", unary_infer(FLOATS),
         ew.with_scalars(ew.hard_sigmoid_ufunc, SCALAR_ATTRS["HardSigmoid"]),
         ew.scalar_hard_sigmoid, VecClass.BINARY, 3, 4, attrs={"alpha": 0.2, "beta": 0.5}),
    # HardSwish: HardSigmoid's 4, vmul
    Spec("HardSwish", unary_infer(FLOATS), ew.unary(ew.hard_swish_ufunc), ew.scalar_hard_swish,
         VecClass.BINARY, 4, 5),
    # Softplus: vexp, vadds 1, vln
    Spec("Softplus", unary_infer(FLOATS), ew.unary(ew.softplus_ufunc), ew.scalar_softplus,
         _E, 4, 3),
    # PRelu: vmul, vsel
    Spec("PRelu", _prelu_infer, ew.binary(ew.prelu_ufunc), ew.scalar_prelu,
         _B, 2, 2, ("x", "slope"),
         category=_BC, builder="prelu"),
    # --- rounding, sign, trigonometry, classification
    # Floor: vconv
    Spec("Floor", unary_infer(FLOATS), ew.unary(ew.floor_ufunc), ew.scalar_floor,
         VecClass.UNARY, 1, 1),
    # Ceil: vconv
    Spec("Ceil", unary_infer(FLOATS), ew.unary(ew.ceil_ufunc), ew.scalar_ceil,
         VecClass.UNARY, 1, 1),
    # Round: vconv
    Spec("Round", unary_infer(FLOATS), ew.unary(ew.round_ufunc), ew.scalar_round,
         VecClass.UNARY, 1, 1),
    # Sign: vcmp/vsel
    Spec("Sign", unary_infer(NUMERIC), ew.unary(ew.sign_ufunc), ew.scalar_sign,
         VecClass.UNARY, 1, 1),
    # Sin: TBE's sin_compute_v3, the A2 / A3 path (after_v200, impl_mode high_performance;
    # impl/dynamic/sin.py): range reduction by pi in two parts (vmuls x2, round_half_up x2,
    # vmuls, vsub, then 8 vmuls + vsub), then compute_fixed (vmul, vmuls, floor, vmuls x2,
    # vadd, vadds, a degree-4 polynomial in x^2: vmuls, vadds, 3 x (vmul, vadds), vmul by the
    # reduced x and by the sign, vmins, vmaxs): 16 binary and 25 unary instructions
    Spec("Sin", unary_infer(FLOATS), ew.unary(ew.sin_ufunc), ew.scalar_sin, _B, 4, 16,
         extra=((VecClass.UNARY, 25),)),
    # Cos: cos_compute_v3 (impl/dynamic/cos.py), Sin's sequence with a vadds of 0.5 before the
    # rounding and two more vadds (pi/2, its low part): 16 binary and 28 unary
    Spec("Cos", unary_infer(FLOATS), ew.unary(ew.cos_ufunc), ew.scalar_cos, _B, 4, 16,
         extra=((VecClass.UNARY, 28),)),
    # IsNaN: vcmp
    Spec("IsNaN", unary_infer(FLOATS, "bool"), ew.compare(ew.is_nan_ufunc), ew.scalar_is_nan,
         VecClass.UNARY, 1, 1, builder="is_nan"),
    # IsInf: vabs, vcmp
    Spec("IsInf", unary_infer(FLOATS, "bool"),
         ew.with_scalars(ew.is_inf_ufunc, SCALAR_ATTRS["IsInf"], np.bool_), ew.scalar_is_inf,
         VecClass.UNARY, 2, 2, attrs={"detect_negative": 1, "detect_positive": 1},
         builder="is_inf"),
    # --- selection and conversion
    # Clip: vmaxs, vmins
    Spec("Clip", _clip_infer, ew.clip_kernel, ew.scalar_clip, VecClass.BINARY, 2, 2,
         ("input", "min?", "max?")),
    # Where: vsel
    Spec("Where", _where_infer, ew.where_kernel, ew.scalar_where, VecClass.TERNARY, 1, 1,
         ("condition", "x", "y"), category=_BC),
    # Cast: vconv
    Spec("Cast", _cast_infer, _cast_kernel, ew.scalar_identity, VecClass.UNARY, 1, 1,
         ("input",), attrs={"to": None, "saturate": 1}),
    # Dropout: vmul mask, vmuls scale
    Spec("Dropout", _dropout_infer, _dropout_kernel, ew.scalar_identity, VecClass.BINARY, 2, 2,
         ("data", "ratio?", "training_mode?"), attrs={"seed": None, "num_outputs": 1},
         unit=_dropout_unit, num_outputs="num_outputs"),
    # --- comparisons and logic (bool outputs)
    # Equal: vcmp
    Spec("Equal", bcast_infer(ANY, "bool"), ew.compare(ew.equal_ufunc), ew.scalar_equal,
         _B, 1, 1, _AB,
         category=_BC, commutative=True),
    # Less: vcmp
    Spec("Less", bcast_infer(NUMERIC, "bool"), ew.compare(ew.less_ufunc), ew.scalar_less, _B, 1, 1,
         _AB, category=_BC),
    # LessOrEqual: vcmp
    Spec("LessOrEqual", bcast_infer(NUMERIC, "bool"), ew.compare(ew.less_equal_ufunc),
         ew.scalar_less_equal, _B, 1, 1, _AB, category=_BC),
    # Greater: vcmp
    Spec("Greater", bcast_infer(NUMERIC, "bool"), ew.compare(ew.greater_ufunc), ew.scalar_greater,
         _B, 1, 1, _AB, category=_BC),
    # GreaterOrEqual: vcmp
    Spec("GreaterOrEqual", bcast_infer(NUMERIC, "bool"), ew.compare(ew.greater_equal_ufunc),
         ew.scalar_greater_equal, _B, 1, 1, _AB, category=_BC),
    # Not: vnot
    Spec("Not", unary_infer(BOOL), ew.compare(ew.not_ufunc), ew.scalar_not, VecClass.UNARY, 1, 1,
         builder="not_"),
    # And: vand
    Spec("And", bcast_infer(BOOL), ew.compare(ew.and_ufunc), ew.scalar_and, _B, 1, 1, _AB,
         category=_BC, commutative=True, builder="and_"),
    # Or: vor
    Spec("Or", bcast_infer(BOOL), ew.compare(ew.or_ufunc), ew.scalar_or, _B, 1, 1, _AB,
         category=_BC, commutative=True, builder="or_"),
    # Xor: vxor
    Spec("Xor", bcast_infer(BOOL), ew.compare(ew.xor_ufunc), ew.scalar_xor, _B, 1, 1, _AB,
         category=_BC, commutative=True),
    # --- n-ary (variadic, broadcasting)
    # Max: inputs - 1 vmax
    Spec("Max", bcast_infer(NUMERIC), ew.variadic(ew.max_ufunc), ew.scalar_max, _B, -1, -1,
         ("*inputs",), category=_BC, commutative=True),
    # Min: inputs - 1 vmin
    Spec("Min", bcast_infer(NUMERIC), ew.variadic(ew.min_ufunc), ew.scalar_min, _B, -1, -1,
         ("*inputs",), category=_BC, commutative=True),
    # Sum: inputs - 1 vadd
    Spec("Sum", bcast_infer(NUMERIC), ew.variadic(ew.add_ufunc), ew.scalar_add, _B, -1, -1,
         ("*inputs",), category=_BC, commutative=True),
)

def scalar_args(op_type: str, attrs: dict) -> tuple:
    """Extra scalar arguments a fused kernel passes to `get_op(op_type).scalar` after the
    op's input elements (empty for ops without attributes)."""
    fn = SCALAR_ATTRS.get(op_type)
    return fn(attrs) if fn else ()


for _s in OPS:
    register(OpDef(
        _s.op, _s.infer, _s.kernel, _s.category, unit=_s.unit, inputs=_s.inputs,
        attrs=dict(_s.attrs or {}), num_outputs=_s.num_outputs,
        flops=_nary_flops if _s.flops < 0 else _flops(_s.flops), vec_class=_s.vec,
        vec_instrs=_nary_instrs if _s.instrs < 0 else _s.instrs, vec_extra=_s.extra,
        scalar=_s.scalar, builder=_s.builder, commutative=_s.commutative,
        doc=f"ONNX {_s.op} (element-wise, {_s.vec.value}, {max(_s.flops, 1)} flop/elem, "
            f"{max(_s.instrs, 1)} vector instr/elem)"))


# ----------------------------------------------------------------------------- gradients
# Vector-Jacobian products (see ir/vjp.py). x, y: the op's input and output; dy: the output's
# cotangent. Broadcasting ops sum their cotangents back to each operand's shape.
def _c(ctx, v: float) -> Any:
    return ctx.scalar(v, ctx.outs[0].dtype)


def _add_grad(ctx, douts):
    dy = douts[0]
    return [ctx.unbroadcast(dy, v) if ctx.needs(i) else None for i, v in enumerate(ctx.ins)]


def _sub_grad(ctx, douts):
    dy, (a, b) = douts[0], ctx.ins
    return [ctx.unbroadcast(dy, a) if ctx.needs(0) else None,
            ctx.unbroadcast(ctx.g.neg(dy), b) if ctx.needs(1) else None]


def _mul_grad(ctx, douts):
    g, dy, (a, b) = ctx.g, douts[0], ctx.ins
    return [ctx.unbroadcast(g.mul(dy, b), a) if ctx.needs(0) else None,
            ctx.unbroadcast(g.mul(dy, a), b) if ctx.needs(1) else None]


def _div_grad(ctx, douts):
    g, dy, (a, b), y = ctx.g, douts[0], ctx.ins, ctx.outs[0]
    da = g.div(dy, b)
    return [ctx.unbroadcast(da, a) if ctx.needs(0) else None,
            ctx.unbroadcast(g.neg(g.mul(da, y)), b) if ctx.needs(1) else None]


def _pow_grad(ctx, douts):
    """d(x^p)/dx = p x^(p-1) (p = 2 as 2x, on the vector unit); d/dp = x^p ln x."""
    g, dy, (x, p), y = ctx.g, douts[0], ctx.ins, ctx.outs[0]
    dx = dp = None
    if ctx.needs(0):
        const = ctx.const_input(1)
        if const is not None and const.size == 1 and float(const.reshape(-1)[0]) == 2.0:
            dx = g.mul(dy, g.mul(x, _c(ctx, 2.0)))
        else:
            dx = ctx.unbroadcast(g.mul(dy, g.mul(p, g.pow(x, g.sub(p, _c(ctx, 1.0))))), x)
    if ctx.needs(1):
        dp = ctx.unbroadcast(g.mul(dy, g.mul(y, g.log(x))), p)
    return [dx, dp]


def _unary(fn: Callable) -> Callable:
    """A rule for a one-input op whose cotangent is fn(ctx, x, y, dy)."""
    def rule(ctx, douts):
        return [fn(ctx, ctx.g, ctx.ins[0], ctx.outs[0], douts[0])]
    return rule


def _relu_dx(ctx, g, x, y, dy):
    return g.where(g.greater(x, _c(ctx, 0.0)), dy, _c(ctx, 0.0))


def _leaky_relu_dx(ctx, g, x, y, dy):
    return g.where(g.greater(x, _c(ctx, 0.0)), dy,
                   g.mul(dy, _c(ctx, float(ctx.attrs["alpha"]))))


def _erf_dx(ctx, g, x, y, dy):
    e = g.exp(g.neg(g.mul(x, x)))
    return g.mul(dy, g.mul(e, _c(ctx, 2.0 / np.sqrt(np.pi))))


def _gelu_dx(ctx, g, x, y, dy):
    """erf form: Phi(x) + x phi(x); tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) u'."""
    if _gelu_flag(ctx.attrs) == 0.0:
        cdf = g.mul(g.add(g.erf(g.mul(x, _c(ctx, 1 / np.sqrt(2.0)))), _c(ctx, 1.0)),
                    _c(ctx, 0.5))
        pdf = g.mul(g.exp(g.mul(g.mul(x, x), _c(ctx, -0.5))), _c(ctx, 1 / np.sqrt(2 * np.pi)))
        return g.mul(dy, g.add(cdf, g.mul(x, pdf)))
    k, a = np.sqrt(2 / np.pi), 0.044715
    x2 = g.mul(x, x)
    t = g.tanh(g.mul(g.mul(x, g.add(g.mul(x2, _c(ctx, a)), _c(ctx, 1.0))), _c(ctx, k)))
    du = g.mul(g.add(g.mul(x2, _c(ctx, 3 * a)), _c(ctx, 1.0)), _c(ctx, k))
    left = g.mul(g.add(t, _c(ctx, 1.0)), _c(ctx, 0.5))
    right = g.mul(g.mul(g.mul(x, _c(ctx, 0.5)), g.sub(_c(ctx, 1.0), g.mul(t, t))), du)
    return g.mul(dy, g.add(left, right))


def _cast_grad(ctx, douts):
    x = ctx.ins[0]
    if x.dtype not in FLOATS:
        return [None]
    return [douts[0] if douts[0].dtype == x.dtype else ctx.g.cast(douts[0], to=x.dtype)]


def _dropout_grad(ctx, douts):
    """Inference Dropout is the identity; training-mode Dropout routes through its mask
    (the node must expose it: num_outputs=2)."""
    node = ctx.node
    mode = ctx.const_input(2) if len(node.inputs) > 2 and node.inputs[2] else np.False_
    if mode is not None and not bool(_scalar(mode, False)):
        return [douts[0]]
    if len(ctx.outs) < 2:
        from ...errors import UnsupportedOpError
        raise UnsupportedOpError("Dropout", node.name, detail="no gradient rule for a "
                                 "training-mode Dropout without its mask output")
    ratio = ctx.const_input(1) if len(node.inputs) > 1 and node.inputs[1] else None
    keep = 1.0 - (_scalar(ratio, 0.5) if ratio is not None else 0.5)
    g = ctx.g
    mask = g.cast(ctx.outs[1], to=ctx.outs[0].dtype)
    return [g.mul(g.mul(douts[0], mask), _c(ctx, 1.0 / keep))]


def _where_grad(ctx, douts):
    g, dy, (cond, a, b) = ctx.g, douts[0], ctx.ins
    zero = _c(ctx, 0.0)
    return [None, ctx.unbroadcast(g.where(cond, dy, zero), a) if ctx.needs(1) else None,
            ctx.unbroadcast(g.where(cond, zero, dy), b) if ctx.needs(2) else None]


def _clip_grad(ctx, douts):
    """The cotangent passes where min <= x <= max; a bound, when asked for, gets the sum of
    the cotangent where x lies beyond it."""
    g, x, dy = ctx.g, ctx.ins[0], douts[0]
    inside = None
    out: list = [None] * len(ctx.ins)
    for bound, compare, beyond in ((1, g.greater_or_equal, g.less),
                                   (2, g.less_or_equal, g.greater)):
        if len(ctx.ins) > bound and ctx.ins[bound] is not None:
            test = compare(x, ctx.ins[bound])
            inside = test if inside is None else g.and_(inside, test)
            if ctx.needs(bound):
                past = g.where(beyond(x, ctx.ins[bound]), dy, _c(ctx, 0.0))
                out[bound] = ctx.unbroadcast(past, ctx.ins[bound])
    out[0] = dy if inside is None else g.where(inside, dy, _c(ctx, 0.0))
    return out


def _extreme_grad(ctx, douts):
    """n-ary Max/Min: each operand gets the cotangent where it is the result; tied operands
    share it evenly (Max(a, a) = a passes dy once, as PyTorch's maximum does)."""
    g, y, dy = ctx.g, ctx.outs[0], douts[0]
    hits = [g.cast(g.equal(v, y), to=dy.dtype) for v in ctx.ins]
    share = g.div(dy, hits[0] if len(hits) == 1 else g.sum(*hits))
    return [ctx.unbroadcast(g.mul(hit, share), v) if ctx.needs(i) else None
            for i, (v, hit) in enumerate(zip(ctx.ins, hits))]


def _hard_sigmoid_dx(ctx, g, x, y, dy):
    alpha, beta = float(ctx.attrs["alpha"]), float(ctx.attrs["beta"])
    lin = g.mul(x, _c(ctx, alpha))
    inside = g.and_(g.greater(lin, _c(ctx, -beta)), g.less(lin, _c(ctx, 1.0 - beta)))
    return g.where(inside, g.mul(dy, _c(ctx, alpha)), _c(ctx, 0.0))


def _hard_swish_dx(ctx, g, x, y, dy):
    """x relu6(x + 3) / 6: 0 below -3, 1 above 3, (2x + 3) / 6 between."""
    mid = g.mul(g.add(g.mul(x, _c(ctx, 2.0)), _c(ctx, 3.0)), _c(ctx, 1.0 / 6.0))
    d = g.where(g.less(x, _c(ctx, -3.0)), _c(ctx, 0.0),
                g.where(g.greater(x, _c(ctx, 3.0)), _c(ctx, 1.0), mid))
    return g.mul(dy, d)


def _elu_dx(ctx, g, x, y, dy):
    """x > 0: 1; else alpha e^x = y + alpha."""
    alpha = _c(ctx, float(ctx.attrs["alpha"]))
    return g.where(g.greater(x, _c(ctx, 0.0)), dy, g.mul(dy, g.add(y, alpha)))


def _selu_dx(ctx, g, x, y, dy):
    """x > 0: gamma; else gamma alpha e^x = y + gamma alpha."""
    a, gm = float(ctx.attrs["alpha"]), float(ctx.attrs["gamma"])
    return g.where(g.greater(x, _c(ctx, 0.0)), g.mul(dy, _c(ctx, gm)),
                   g.mul(dy, g.add(y, _c(ctx, a * gm))))


register_grads({
    "Clip": _clip_grad, "Max": _extreme_grad, "Min": _extreme_grad,
    "HardSigmoid": _unary(_hard_sigmoid_dx), "HardSwish": _unary(_hard_swish_dx),
    "Elu": _unary(_elu_dx), "Selu": _unary(_selu_dx),
    "Add": _add_grad, "Sum": _add_grad, "Sub": _sub_grad, "Mul": _mul_grad,
    "Div": _div_grad, "Pow": _pow_grad, "Where": _where_grad, "Cast": _cast_grad,
    "Dropout": _dropout_grad,
    "Neg": _unary(lambda ctx, g, x, y, dy: g.neg(dy)),
    "Relu": _unary(_relu_dx),
    "LeakyRelu": _unary(_leaky_relu_dx),
    "Sqrt": _unary(lambda ctx, g, x, y, dy: g.div(g.mul(dy, _c(ctx, 0.5)), y)),
    "Rsqrt": _unary(lambda ctx, g, x, y, dy: g.mul(g.mul(dy, _c(ctx, -0.5)),
                                                   g.mul(y, g.mul(y, y)))),
    "Exp": _unary(lambda ctx, g, x, y, dy: g.mul(dy, y)),
    "Log": _unary(lambda ctx, g, x, y, dy: g.div(dy, x)),
    "Reciprocal": _unary(lambda ctx, g, x, y, dy: g.neg(g.mul(dy, g.mul(y, y)))),
    "Abs": _unary(lambda ctx, g, x, y, dy: g.mul(dy, g.sign(x))),
    "Tanh": _unary(lambda ctx, g, x, y, dy: g.mul(dy, g.sub(_c(ctx, 1.0), g.mul(y, y)))),
    "Sigmoid": _unary(lambda ctx, g, x, y, dy: g.mul(dy, g.mul(y, g.sub(_c(ctx, 1.0), y)))),
    "Softplus": _unary(lambda ctx, g, x, y, dy: g.mul(dy, g.sigmoid(x))),
    "Erf": _unary(_erf_dx),
    "Gelu": _unary(_gelu_dx),
})
