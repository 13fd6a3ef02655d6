"""The op registry: one `OpDef` per op type, registered once, in one place.

Everything the rest of the simulator needs to know about an op is data here: how to infer its
output shapes and dtypes, its fusion category (an ordered rank, as in TVM's TOpPattern), the
unit that runs it, how many flops and bytes it costs, and the kernel that computes its values.
No other module compares op-type strings; they ask the registry (`get_op(t).category`, ...).

Families of ops register themselves from `ascendsim/ir/ops/<family>.py`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UnsupportedOpError

if TYPE_CHECKING:
    from .graph import Node
    from .tensor import Shape, Value
    from .vjp import VJP


class Category(IntEnum):
    """Fusion category, ordered: rules compare ranks ("every op on the path <= INJECTIVE")."""

    ELEMWISE = 0    # out[i] = f(in[i]) for same-shaped operands
    BROADCAST = 1   # element-wise with broadcasting of some operand
    INJECTIVE = 2   # each output element reads one input element (reshape, transpose, slice)
    REDUCE = 3      # reduces one or more axes (ReduceSum, Softmax's inner reductions)
    SEGMENT = 4     # reduces segments / windows (pooling, LRN, segment-sum)
    CUBE = 5        # runs on the cube: MatMul, Conv; may fuse element-wise epilogues
    OPAQUE = 6      # nothing fuses across it (control flow, AI CPU ops, shape queries)


class Unit(str, Enum):
    """The hardware unit that runs an op."""

    CUBE = "cube"
    VECTOR = "vector"
    SCALAR = "scalar"
    AICPU = "aicpu"
    NONE = "none"    # a view or a compile-time op: no task at run time


class VecClass(str, Enum):
    """Vector instruction class, which sets the vector pipe's bytes/cycle (chip table)."""

    UNARY = "unary"
    BINARY = "binary"
    TERNARY = "ternary"
    EXP = "exp"        # exp, ln, sigmoid, tanh, erf (transcendental)
    SQRT = "sqrt"
    DIV = "div"
    REDUCE = "reduce"
    MOVE = "move"      # copies, transposes, gathers done by the vector unit


# (args: list of arrays, attrs) -> list of arrays; a control-flow op's kernel also takes
# `run_body(graph, arrays) -> arrays` (the executor's, so ir never imports the executor)
Kernel = Callable[..., list]
BodyRunner = Callable[[Any, list], list]

#: the op type of a fused node (its computation is `node.subgraph`); Graph.add_fused makes them
FUSED_OP = "FusedOp"


@dataclass(frozen=True)
class ControlFlow:
    """How a control-flow op carries closed body graphs in its attributes.

    bodies: the attributes that hold body Graphs. condition: for a conditional, the input index
    of its predicate. first_carried / captured_attr: for a loop, the first loop-carried input
    (after trip count and condition) and the attribute counting the trailing captured inputs.
    body_input_hints: (node inputs, attrs) -> Values the body's inputs take, for importers whose
    bodies declare no shapes."""

    bodies: tuple[str, ...]
    condition: int | None = None
    first_carried: int | None = None
    captured_attr: str | None = None
    body_input_hints: Callable[[list, dict], list] | None = None

    @property
    def is_loop(self) -> bool:
        """A loop whose carried shapes are found by iterating inference to a fixpoint."""
        return self.first_carried is not None
# (inputs: Values, attrs, constant data of the inputs or None) -> [(shape, dtype), ...]
Infer = Callable[[Sequence["Value"], dict, Sequence["np.ndarray | None"]], list]


def _elem_flops(ins: Sequence[Value], outs: Sequence[Value], attrs: dict) -> int:
    return sum(o.numel for o in outs)


#: vector instructions per element, as a function of (inputs, outputs, attrs)
VecInstrs = Callable[[Sequence["Value"], Sequence["Value"], dict], float]
#: A gradient rule (vector-Jacobian product): given the forward node in a `VJP` context and the
#: cotangents of its outputs (None where no gradient flows), build the cotangents of its inputs
#: with Graph builder calls; None for an input that has no gradient (an index, a shape).
GradRule = Callable[["VJP", list], list]


@dataclass(frozen=True)
class OpDef:
    """Everything the simulator knows about one op type.

    Two cost fields, kept apart on purpose: `flops` is the arithmetic work (the roofline's
    compute term, the reports' flops); `vec_instrs` is how many vector instructions of class
    `vec_class` one element costs (what the lowering times on the V pipe). They differ for
    transcendentals: Exp is a few flops but ONE vexp instruction.
    """

    op_type: str                      # ONNX-style name, e.g. "MatMul"
    infer: Infer
    kernel: Kernel
    category: Category
    unit: Unit | Callable[[Node, dict], Unit] = Unit.VECTOR
    inputs: tuple[str, ...] = ("x",)  # builder argument names; "name?" optional, "*name" variadic
    attrs: dict[str, Any] = field(default_factory=dict)   # attribute defaults
    num_outputs: int | str = 1        # or the attr name that gives the count
    flops: Callable[[Sequence[Value], Sequence[Value], dict], int] = _elem_flops
    vec_class: VecClass = VecClass.UNARY
    # Vector instructions of `vec_class` per element of the op's largest operand: a number or
    # (ins, outs, attrs) -> number. None: the op's flops per element (rounded, at least 1),
    # for families whose every flop is one instruction (pooling windows, ...).
    vec_instrs: float | VecInstrs | None = None
    # numba scalar function (elemwise ops): the ufunc kernel and fused composite kernels use it
    scalar: Callable | None = None
    builder: str = ""                 # snake_case builder name; default from op_type
    doc: str = ""
    commutative: bool = False
    # True when the op's output needs the input *values* to know its shape (Reshape's shape).
    needs_const_inputs: tuple[int, ...] = ()
    # inputs whose constant data, when known, `infer` checks (Gather's indices against the
    # axis size) without its shape depending on them; None is passed when not a constant
    checks_const_inputs: tuple[int, ...] = ()
    # inputs whose *shape* alone decides the output (Shape, Size): foldable when it is static
    shape_only_inputs: tuple[int, ...] = ()
    # False for ops with random outputs: never folded, never merged by CSE
    deterministic: bool = True
    # Instructions of other classes per element of the largest operand, on top of
    # `vec_instrs` of `vec_class` (an optimizer's vsqrt and vdiv among its vmul/vadd).
    vec_extra: tuple[tuple[VecClass, float], ...] = ()
    # False when the inputs only order the op (NPUGetFloatStatus reads the hardware status
    # register, not its inputs): the lowering keeps the dependencies but moves no input bytes.
    reads_inputs: bool = True
    # inputs a gather reads only where its output points (an embedding table: the rows the
    # ids select, not the whole table): the lowering moves as many of their bytes as the
    # output has elements
    gathers: tuple[int, ...] = ()
    # the input whose device block the op's output is (it writes into it in place: a KV-cache
    # append); the memory plan allocates no block for that output. None: a new block; a
    # tuple: output i is input in_place[i]'s block (a paged KV-cache scatter writes two caches)
    in_place: int | tuple[int, ...] | None = None
    # the vector-Jacobian product (reverse-mode autodiff); None: no gradient rule
    grad: GradRule | None = None
    # inputs that are never trainable parameters even when they are float constants: state
    # (BatchNorm's running statistics) and hyper-parameters (Resize's scales)
    untrainable_inputs: tuple[int, ...] = ()
    # identity flags the passes and lowering ask instead of comparing op-type strings
    conv: bool = False                # a convolution (Conv, ConvTranspose): NC1HWC0, img2col
    transposed: bool = False          # ... the transposed (backward-data) form
    # ... a weight gradient: (attrs, x, dy, dW shapes) -> the Conv it is laid out as
    # (attrs, X, W, Y shapes), for the cube's implicit-GEMM geometry
    conv_view: Callable[[dict, tuple, tuple, tuple], tuple] | None = None
    control: ControlFlow | None = None   # control flow with body graphs (If, Loop, Scan)
    # the lowering that times this op when the one of its unit cannot (a kernel with a tiling
    # of its own: "flash_attention", "grouped_matmul", ...): a key of the lowering's table
    # (ascendsim/lower/lowering.py); "" = the lowering of its unit
    lowering: str = ""

    def in_place_pairs(self) -> tuple[tuple[int, int], ...]:
        """(output, input) index pairs of the outputs written into an input's block."""
        if self.in_place is None:
            return ()
        if isinstance(self.in_place, int):
            return ((0, self.in_place),)
        return tuple(enumerate(self.in_place))

    def run_kernel(self, args: list, attrs: dict, run_body: BodyRunner) -> list:
        """The op's values; control-flow ops get the executor's body runner."""
        if self.control is not None:
            return self.kernel(args, attrs, run_body)
        return self.kernel(args, attrs)

    def unit_for(self, node: Node, consts: dict) -> Unit:
        """The unit that runs this node (some ops pick it from attrs or constant inputs)."""
        return self.unit(node, consts) if callable(self.unit) else self.unit

    def vec_passes(self, ins: Sequence[Value], outs: Sequence[Value], attrs: dict) -> float:
        """Vector instructions of `vec_class` per element of the largest operand (>= 1).

        From `vec_instrs` when the registry gives it, else flops per element: the number
        of times the op's data passes through the vector unit."""
        n = self.vec_instrs
        if callable(n):
            n = n(ins, outs, attrs)
        if n is None:
            big = max([v.numel for v in [*ins, *outs] if v is not None] + [1])
            flops = int(self.flops(ins, outs, attrs))
            n = round(flops / big) if flops else 1
        return max(1.0, float(n))

    @property
    def const_inputs(self) -> frozenset[int]:
        """Inputs whose constant data `infer` receives (needed or checked)."""
        return frozenset(self.needs_const_inputs) | frozenset(self.checks_const_inputs)

    @property
    def builder_name(self) -> str:
        return self.builder or snake_case(self.op_type)


_REGISTRY: dict[str, OpDef] = {}
_BUILDERS: dict[str, OpDef] = {}


def snake_case(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return s.lower()


def register(opdef: OpDef) -> OpDef:
    """Add an op to the registry; registering the same op type twice is a programming error."""
    if opdef.op_type in _REGISTRY:
        raise ValueError(f"op {opdef.op_type!r} registered twice")
    if opdef.builder_name in _BUILDERS:
        raise ValueError(f"builder name {opdef.builder_name!r} used by two ops")
    _REGISTRY[opdef.op_type] = opdef
    _BUILDERS[opdef.builder_name] = opdef
    return opdef


#: builder slot names of weights (Conv's and ConvTranspose's W): shared by every sample of a
#: batch even when computed (a training step's Cast of a float32 master weight)
WEIGHT_SLOTS = frozenset({"w"})


def weight_inputs(node: Node) -> frozenset[str]:
    """The value names `node` reads in weight slots (see WEIGHT_SLOTS); a fused node's are
    those its inner nodes read in theirs, among its own inputs (a fused node's subgraph
    names its inputs as the outer graph does)."""
    if node.subgraph is not None:
        inner = frozenset().union(*(weight_inputs(n) for n in node.subgraph.nodes))
        return inner & frozenset(i for i in node.inputs if i)
    spec = get_op(node.op_type, node.name).inputs
    return frozenset(v for slot, v in zip(spec, node.inputs)
                     if v and slot.strip("*?") in WEIGHT_SLOTS)


def register_grads(rules: Mapping[str, GradRule]) -> None:
    """Attach gradient rules to registered ops (a family lists its rules in one table beside
    its ops); giving an op a second rule is a programming error."""
    for op_type, rule in rules.items():
        old = _REGISTRY[op_type]
        if old.grad is not None:
            raise ValueError(f"op {op_type!r} has a gradient rule already")
        new = dataclasses.replace(old, grad=rule)
        _REGISTRY[op_type] = new
        _BUILDERS[new.builder_name] = new


def get_op(op_type: str, node: str | None = None) -> OpDef:
    """The OpDef of an op type, or UnsupportedOpError naming the node."""
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise UnsupportedOpError(op_type, node) from None


def has_op(op_type: str) -> bool:
    return op_type in _REGISTRY


def op_by_builder(name: str) -> OpDef | None:
    return _BUILDERS.get(name)


def builder_names() -> list[str]:
    """Every builder method name (`Graph.<name>`), sorted."""
    return sorted(_BUILDERS)


def registered_ops() -> list[str]:
    """Every registered op type, sorted."""
    return sorted(_REGISTRY)


def ops_where(flag: Callable[[OpDef], Any]) -> frozenset[str]:
    """Op types whose OpDef satisfies `flag` (e.g. `ops_where(lambda d: d.conv)`)."""
    return frozenset(t for t, d in _REGISTRY.items() if flag(d))


def ops_in(category: Category) -> frozenset[str]:
    """Op types of one fusion category (a group set, as tinygrad's GroupOp)."""
    return frozenset(t for t, d in _REGISTRY.items() if d.category == category)


def symbolic_base(ins: Sequence, op: str) -> str:
    """A deterministic base name for the symbolic dims of an output whose shape depends on a
    non-constant input (named after the op and its first input: "Reshape_x_d0", ...)."""
    return f"{op}_{ins[0].name}" if ins and ins[0] is not None else op


def broadcast_shapes(*shapes: Shape, node: str = "") -> Shape:
    """NumPy/ONNX multidirectional broadcasting of (possibly symbolic) shapes."""
    from ..errors import GraphError

    rank = max((len(s) for s in shapes), default=0)
    out: list = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = {d for d in dims if d != 1}
        if not known:
            out.append(1)
        elif len(known) == 1:
            out.append(known.pop())
        else:
            ints = {d for d in known if isinstance(d, int)}
            if len(ints) > 1:
                where = f" in node '{node}'" if node else ""
                raise GraphError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not "
                                 f"broadcast{where}")
            out.append(ints.pop() if ints else sorted(map(str, known))[0])
    return tuple(out)
