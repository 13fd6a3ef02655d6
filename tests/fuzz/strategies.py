"""Hypothesis strategies of the graph fuzzer: random graphs, fusion options and chips.

`graphs()` draws a random DAG of supported ops with valid shapes: element-wise ops with
broadcasting operands and constants, reductions over random axes (keepdims on or off), MatMul
(2-D and batched), Conv (random small channels, kernels, strides, pads, groups, bias), views
and moves (Reshape, Transpose, Slice, Concat), values read by several nodes and nodes that read
the same value twice (two edges between the same two nodes). The ops chosen keep values well
conditioned (bounded activations, no division, no exp of an unbounded value), so that an
optimised graph's outputs can be compared with the unfused graph's by a norm-wise tolerance.

`fusion_options()` draws `asim.optimize` options (passes switched off in a CANN switch dict,
graph kernels on/off, UB rule set, L2 fusion on/off); `chips()` draws a built-in chip with
buffers and bandwidths changed by `Chip.replace` within what the tiling accepts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import ascendsim as asim
from ascendsim.ir.graph import Graph
from ascendsim.ir.tensor import Value

#: bounded unary ops (outputs stay within a small multiple of the input's magnitude)
UNARY = ("relu", "tanh", "sigmoid", "abs", "neg")
BINARY = ("add", "sub", "mul", "max", "min")
REDUCE = ("reduce_sum", "reduce_mean", "reduce_max")
KINDS = ("unary", "binary", "binary_const", "same_twice", "reduce", "matmul", "conv",
         "reshape", "transpose", "slice", "concat", "new_input", "softmax", "pattern")
#: the op chains the FE graph fusion and UB fusion passes look for
PATTERNS = ("conv_bias_relu", "conv_bn_relu", "matmul_bias_relu")
#: dims of drawn tensors stay small: tile detail then runs every instruction in well under 1 s
MAX_DIM = 8
MAX_NUMEL = 4096


@dataclass
class Drawn:
    """A drawn graph and how it was drawn (shown by hypothesis on a failure)."""

    graph: Graph
    steps: list[str]

    def __repr__(self) -> str:
        return f"Drawn({self.graph.name}: {'; '.join(self.steps)})"


def _shape(draw, rank_min: int = 1, rank_max: int = 4) -> tuple[int, ...]:
    rank = draw(st.integers(rank_min, rank_max))
    return tuple(draw(st.integers(1, MAX_DIM)) for _ in range(rank))


def _broadcast_of(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `shape`: leading dims dropped, some dims set to 1."""
    drop = draw(st.integers(0, len(shape)))
    tail = shape[drop:]
    return tuple(1 if draw(st.booleans()) else d for d in tail)


def _const(draw, g: Graph, shape: tuple[int, ...], dtype: str) -> Value:
    seed = draw(st.integers(0, 2**16))
    data = np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)
    return g.const(data)


def _weight(g: Graph, shape: tuple[int, ...], dtype: str, seed: int) -> Value:
    """A constant weight scaled by 1/sqrt(fan-in), so cube outputs stay of order 1."""
    fan_in = max(1, math.prod(shape[1:]))
    data = np.random.default_rng(seed).uniform(-1.0, 1.0, shape) / math.sqrt(fan_in)
    return g.const(data.astype(dtype))


@st.composite
def graphs(draw, max_ops: int = 8) -> Drawn:
    """A random valid DAG (see the module docstring); float32, or float16 for a few."""
    dtype = draw(st.sampled_from(["float32", "float32", "float32", "float16"]))
    g = Graph("fuzz")
    steps: list[str] = []
    pool: list[Value] = []
    n_inputs = 0

    def new_input(shape) -> Value:
        nonlocal n_inputs
        v = g.input(f"x{n_inputs}", shape, dtype)
        n_inputs += 1
        pool.append(v)
        steps.append(f"input {v.name}{shape}")
        return v

    new_input(_shape(draw))
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(KINDS))
        v = draw(st.sampled_from(pool))
        shape = tuple(int(d) for d in v.shape)
        out: Value | None = None
        if kind == "new_input":
            new_input(_shape(draw) if draw(st.booleans()) else _broadcast_of(draw, shape)
                      or (1,))
            continue
        if kind == "unary":
            op = draw(st.sampled_from(UNARY))
            out = getattr(g, op)(v)
        elif kind == "binary":
            op = draw(st.sampled_from(BINARY))
            others = [w for w in pool if _broadcasts(tuple(w.shape), shape)]
            w = draw(st.sampled_from(others))
            out = getattr(g, op)(v, w) if draw(st.booleans()) else getattr(g, op)(w, v)
        elif kind == "binary_const":
            op = draw(st.sampled_from(BINARY))
            if draw(st.booleans()):
                out = getattr(g, op)(v, draw(st.floats(-2, 2, allow_nan=False, width=16)))
            else:
                out = getattr(g, op)(v, _const(draw, g, _broadcast_of(draw, shape) or (1,),
                                               dtype))
        elif kind == "same_twice":      # two edges between the same two nodes
            op = draw(st.sampled_from(("add", "mul", "max", "concat")))
            out = g.concat(v, v, axis=draw(st.integers(0, len(shape) - 1))) \
                if op == "concat" else getattr(g, op)(v, v)
        elif kind == "reduce":
            op = draw(st.sampled_from(REDUCE))
            axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
            keep = draw(st.sampled_from([0, 1]))
            if not keep and len(axes) == len(shape):
                keep = 1                                 # keep at least a 1-D result
            out = getattr(g, op)(v, g.const(np.array(axes, np.int64)), keepdims=keep)
        elif kind == "softmax":
            out = g.softmax(v, axis=draw(st.integers(-len(shape), len(shape) - 1)))
        elif kind == "pattern":
            out = _pattern(draw, g, v, shape, dtype, pool, new_input)
        elif kind == "matmul":
            out = _matmul(draw, g, v, shape, dtype, pool)
        elif kind == "conv":
            out = _conv(draw, g, v, shape, dtype, new_input)
        elif kind == "reshape":
            out = g.reshape(v, g.const(np.array(_reshaped(draw, shape), np.int64)))
        elif kind == "transpose":
            perm = draw(st.permutations(range(len(shape))))
            out = g.transpose(v, perm=list(perm))
        elif kind == "slice":
            axis = draw(st.integers(0, len(shape) - 1))
            start = draw(st.integers(0, shape[axis] - 1))
            end = draw(st.integers(start + 1, shape[axis]))
            out = g.slice(v, g.const(np.array([start], np.int64)),
                          g.const(np.array([end], np.int64)),
                          g.const(np.array([axis], np.int64)))
        elif kind == "concat":
            axis = draw(st.integers(0, len(shape) - 1))
            same = [w for w in pool if len(w.shape) == len(shape) and all(
                int(a) == int(b) for k, (a, b) in enumerate(zip(w.shape, shape)) if k != axis)]
            ws = draw(st.lists(st.sampled_from(same), min_size=1, max_size=2))
            out = g.concat(v, *ws, axis=axis)
        if out is None:
            continue
        if math.prod(int(d) for d in out.shape) > MAX_NUMEL:
            steps.append(f"({kind} too large, not kept)")
            g.output(out)
            continue
        steps.append(f"{kind} -> {out.name}{tuple(out.shape)}")
        pool.append(out)
    made = [p for p in pool if p.name not in g.inputs]
    if not made:            # at least one op
        made.append(g.relu(pool[0]))
    read = {i for n in g.nodes for i in n.inputs}
    sinks = [p for p in made if p.name not in read]
    extra = draw(st.lists(st.sampled_from(made), max_size=2))
    for o in dict.fromkeys([*sinks, made[-1], *extra]):
        if o.name not in g.outputs:
            g.output(o)
    g.remove_unused()
    return Drawn(g, steps)


def _broadcasts(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    return all(int(a) in (1, int(b)) for a, b in zip(reversed(small), reversed(big)))


def _reshaped(draw, shape: tuple[int, ...]) -> list[int]:
    """A new shape of the same size: flattened, two adjacent dims merged, or a dim split."""
    n = math.prod(shape)
    how = draw(st.sampled_from(["flat", "merge", "split", "minus_one"]))
    if how == "flat" or len(shape) == 1 and how == "merge":
        return [n]
    if how == "merge":
        k = draw(st.integers(0, len(shape) - 2))
        return [*shape[:k], shape[k] * shape[k + 1], *shape[k + 2:]]
    if how == "split":
        k = draw(st.integers(0, len(shape) - 1))
        divs = [d for d in range(1, shape[k] + 1) if shape[k] % d == 0]
        d = draw(st.sampled_from(divs))
        new = [*shape[:k], d, shape[k] // d, *shape[k + 1:]]
        return new if len(new) <= 5 else [n]
    return [-1, shape[-1]] if len(shape) > 1 else [n]


def _matmul(draw, g: Graph, a: Value, shape, dtype: str, pool) -> Value:
    """A @ B: B a constant weight (K, N), or a batched right operand of A's batch dims."""
    if len(shape) == 1:
        a = g.reshape(a, g.const(np.array([1, shape[0]], np.int64)))
        shape = (1, shape[0])
    k = shape[-1]
    n = draw(st.integers(1, 2 * MAX_DIM))
    if len(shape) > 2 and draw(st.booleans()):
        bshape = (*shape[:-2], k, n)
        cands = [w for w in pool if tuple(int(d) for d in w.shape) == bshape]
        b = draw(st.sampled_from(cands)) if cands and draw(st.booleans()) else \
            g.input(f"b{len(g.inputs)}", bshape, dtype)
        if b.name in g.inputs and b not in pool:
            pool.append(b)
        return g.matmul(a, b)
    return g.matmul(a, _weight(g, (k, n), dtype, draw(st.integers(0, 2**16))))


def _pattern(draw, g: Graph, v: Value, shape, dtype: str, pool, new_input) -> Value:
    """A chain a fusion pass looks for: Conv (+ bias) + Relu, Conv + BatchNormalization +
    Relu, MatMul + bias Add + Relu."""
    which = draw(st.sampled_from(PATTERNS))
    if which == "matmul_bias_relu":
        y = _matmul(draw, g, v, shape, dtype, pool)
        n = int(y.shape[-1])
        return g.relu(g.add(y, _weight(g, (n,), dtype, draw(st.integers(0, 2**16)))))
    y = _conv(draw, g, v, shape, dtype, new_input, bias=which == "conv_bias_relu")
    if which == "conv_bn_relu":
        c = int(y.shape[1])
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        scale, shift, mean = (rng.uniform(-1, 1, c).astype(dtype) for _ in range(3))
        var = rng.uniform(0.5, 2.0, c).astype(dtype)       # well conditioned: var >= 0.5
        y = g.batch_normalization(y, g.const(scale), g.const(shift), g.const(mean),
                                  g.const(var))
    return g.relu(y)


def _conv(draw, g: Graph, v: Value, shape, dtype: str, new_input,
          bias: bool | None = None) -> Value:
    """Conv 2-D on a rank-4 value (a new NCHW input when `v` is not rank 4)."""
    if len(shape) != 4:
        v = new_input((draw(st.integers(1, 3)), draw(st.integers(1, 8)),
                       draw(st.integers(3, 8)), draw(st.integers(3, 8))))
        shape = tuple(int(d) for d in v.shape)
    n, c, h, w = shape
    group = draw(st.sampled_from([g_ for g_ in (1, 2) if c % g_ == 0]))
    cout = group * draw(st.integers(1, 8))
    pads = draw(st.integers(0, 1))
    kh = draw(st.integers(1, min(3, h + 2 * pads)))
    kw = draw(st.integers(1, min(3, w + 2 * pads)))
    stride = draw(st.integers(1, 2))
    wt = _weight(g, (cout, c // group, kh, kw), dtype, draw(st.integers(0, 2**16)))
    if bias is None:
        bias = draw(st.booleans())
    bias = _weight(g, (cout,), dtype, draw(st.integers(0, 2**16))) if bias else None
    args = (v, wt) if bias is None else (v, wt, bias)
    return g.conv(*args, strides=[stride, stride], pads=[pads] * 4, group=group)


#: (field, smallest and largest factor of the built-in figure) for `chips()`; buffers go down
#: to half (the tiling of MAX_DIM-sized operands still fits) and bandwidths over 16x
CHIP_FACTORS = {
    "ub_bytes": (0.5, 2.0),
    "l1_bytes": (0.5, 2.0),
    "l2_bytes": (0.25, 4.0),
    "hbm_bandwidth_bytes_per_s": (0.25, 4.0),
    "l2_bandwidth_bytes_per_s": (0.25, 4.0),
}
BYTE_FIELDS = {"ub_bytes", "l1_bytes", "l2_bytes"}


@dataclass(frozen=True)
class DrawnChip:
    """A built-in chip and the figures changed by `Chip.replace` (a short repr)."""

    name: str
    changes: tuple[tuple[str, float], ...]

    @property
    def chip(self) -> asim.Chip:
        base = asim.get_chip(self.name)
        return base.replace(**dict(self.changes)) if self.changes else base


@st.composite
def chips(draw) -> DrawnChip:
    """A built-in chip, some of its buffers and bandwidths scaled by `Chip.replace`."""
    chip = asim.get_chip(draw(st.sampled_from(["ascend910", "ascend910b", "ascend310"])))
    changes = {}
    for fld, (lo, hi) in CHIP_FACTORS.items():
        if not draw(st.booleans()):
            continue
        factor = draw(st.sampled_from([f for f in (0.25, 0.5, 2.0, 4.0) if lo <= f <= hi]))
        old = getattr(chip, fld)
        changes[fld] = int(old * factor) // 1024 * 1024 if fld in BYTE_FIELDS \
            else float(old * factor)
    return DrawnChip(chip.name, tuple(changes.items()))


#: passes a switch file may turn off (the GE passes always run, as in CANN)
SWITCHABLE = {
    "GraphFusion": ("ConvBatchnormFusionPass", "MatMulBiasAddFusionPass",
                    "SoftmaxSmallOpFusionPass", "LayerNormFusionPass", "GeluFusionPass",
                    "SplitConcatElemwiseFusionPass"),
    "UBFusion": ("TbeConvElemwiseFusionPass", "TbeReduceElemwiseFusionPass",
                 "TbeSegmentElemwiseFusionPass", "TbeEltwiseFusionPass", "AutomaticUbFusion"),
}


@st.composite
def fusion_options(draw) -> dict:
    """`asim.optimize` options: random passes off, graph kernels, UB rule set, L2 fusion."""
    opts: dict = {"graph_kernel": draw(st.booleans()),
                  "ub_rules": draw(st.sampled_from(["seed", "cann8"])),
                  "l2_fusion": draw(st.booleans())}
    switch = {}
    for group, names in SWITCHABLE.items():
        off = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
        if draw(st.integers(0, 5)) == 0:
            switch[group] = {"ALL": "off"}
        elif off:
            switch[group] = {name: "off" for name in off}
    if switch:
        opts["fusion_switch"] = {"Switch": switch}
    return opts


@dataclass
class DrawnStep:
    """A drawn graph made trainable (its extra inputs as constant weights) and how a
    training step of it is configured."""

    drawn: Drawn
    optimizer: str
    mixed_precision: bool

    @property
    def graph(self) -> Graph:
        return self.drawn.graph

    def step(self, **kw) -> Graph:
        return asim.training_step(self.graph, "mse", self.optimizer,
                                  mixed_precision=self.mixed_precision, **kw)

    def __repr__(self) -> str:
        return (f"DrawnStep({self.drawn!r}, optimizer={self.optimizer!r}, "
                f"mixed_precision={self.mixed_precision})")


def _trainable(g: Graph, seed: int) -> Graph:
    """`g` with every input but the first as a seeded constant (a weight) and only the
    outputs a parameter reaches, the first of which the mse loss reads."""
    rng = np.random.default_rng(seed)
    keep = g.inputs[:1]
    for name in g.inputs[1:]:
        v = g.values[name]
        g.constants[name] = rng.uniform(-1.0, 1.0, tuple(v.shape)).astype(v.dtype)
    g.inputs = list(keep)
    params = set(asim.autodiff.parameters(g))
    g.outputs = [o for o in g.outputs if params & g.ancestors([o])]
    g.remove_unused()
    return g


@st.composite
def training_graphs(draw, max_ops: int = 6) -> DrawnStep:
    """A random graph (`graphs`) whose first output depends on a parameter, with an
    optimizer and mixed precision on or off for `training_step(graph, "mse", ...)`."""
    drawn = draw(graphs(max_ops=max_ops))
    g = _trainable(drawn.graph, draw(st.integers(0, 2**16)))
    assume(g.outputs and g.inputs)
    return DrawnStep(Drawn(g, drawn.steps), draw(st.sampled_from(asim.autodiff.OPTIMIZERS)),
                     draw(st.booleans()))


# ----------------------------------------------------------------------------- gradients
#: float64 ops with a gradient rule, each on values that keep it smooth where the rule is
#: checked (positive arguments of Log/Sqrt/Rsqrt/Reciprocal/Pow, denominators >= 1, bounded
#: Exp); kinks (Relu, Abs, Max, pools) are met with probability ~0 by continuous draws
GRAD_UNARY = {
    "tanh": lambda g, v: g.tanh(v), "sigmoid": lambda g, v: g.sigmoid(v),
    "softplus": lambda g, v: g.softplus(v), "erf": lambda g, v: g.erf(v),
    "gelu": lambda g, v: g.gelu(v), "gelu_tanh": lambda g, v: g.gelu(v, approximate="tanh"),
    "neg": lambda g, v: g.neg(v), "abs": lambda g, v: g.abs(v), "relu": lambda g, v: g.relu(v),
    "leaky_relu": lambda g, v: g.leaky_relu(v, alpha=0.1),
    "elu": lambda g, v: g.elu(v, alpha=0.7), "selu": lambda g, v: g.selu(v),
    "hard_sigmoid": lambda g, v: g.hard_sigmoid(v), "hard_swish": lambda g, v: g.hard_swish(v),
    "exp_tanh": lambda g, v: g.exp(g.tanh(v)),
    "log": lambda g, v: g.log(g.add(g.mul(v, v), 1.0)),
    "sqrt": lambda g, v: g.sqrt(g.add(g.mul(v, v), 1.0)),
    "rsqrt": lambda g, v: g.rsqrt(g.add(g.mul(v, v), 1.0)),
    "reciprocal": lambda g, v: g.reciprocal(g.add(g.mul(v, v), 1.0)),
    "pow2": lambda g, v: g.pow(v, 2.0),
    "cast_identity": lambda g, v: g.identity(g.cast(v, to="float64")),
}
GRAD_BINARY = {
    "add": lambda g, a, b: g.add(a, b), "sub": lambda g, a, b: g.sub(a, b),
    "mul": lambda g, a, b: g.mul(a, b),
    "div": lambda g, a, b: g.div(a, g.add(g.mul(b, b), 1.0)),
    "max": lambda g, a, b: g.max(a, b), "min": lambda g, a, b: g.min(a, b),
    "pow": lambda g, a, b: g.pow(g.add(g.mul(a, a), 1.0), g.tanh(b)),
    "where": lambda g, a, b: g.where(g.greater(a, 0.0), a, b),
    "sum3": lambda g, a, b: g.sum(a, b, a),
}
GRAD_KINDS = ("unary", "binary", "binary_const", "reduce", "matmul", "conv", "pool",
              "softmax", "norm", "move", "new_input")


def _f64(draw, g: Graph, shape, scale: float = 1.0, positive: bool = False) -> Value:
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    data = rng.uniform(-1.0, 1.0, shape) * scale
    return g.const(np.abs(data) + 0.5 if positive else data)


@st.composite
def grad_graphs(draw, max_ops: int = 5) -> Drawn:
    """A random float64 graph of ops with gradient rules (broadcasting, reductions, MatMul,
    Conv, pooling, Softmax, LayerNorm / BatchNorm / BNTraining / RmsNorm, moves), for
    `gradcheck.directional_check` over its inputs and parameters; its first output is the
    last value made."""
    g = Graph("gradfuzz")
    steps: list[str] = []
    pool: list[Value] = []

    def new_input(shape) -> Value:
        v = g.input(f"x{len(g.inputs)}", tuple(shape), "float64")
        pool.append(v)
        steps.append(f"input {v.name}{tuple(shape)}")
        return v

    new_input(_shape(draw, 1, 4))
    last = None
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(GRAD_KINDS))
        v = draw(st.sampled_from(pool))
        shape = tuple(int(d) for d in v.shape)
        if kind == "new_input":
            new_input(_shape(draw, 1, 4) if draw(st.booleans())
                      else _broadcast_of(draw, shape) or (1,))
            continue
        name = kind
        if kind == "unary":
            name = draw(st.sampled_from(sorted(GRAD_UNARY)))
            out = GRAD_UNARY[name](g, v)
        elif kind in ("binary", "binary_const"):
            name = draw(st.sampled_from(sorted(GRAD_BINARY)))
            if kind == "binary":
                w = draw(st.sampled_from([p for p in pool
                                          if _broadcasts(tuple(p.shape), shape)]))
            else:
                w = _f64(draw, g, _broadcast_of(draw, shape) or (1,))
            a, b = (v, w) if draw(st.booleans()) else (w, v)
            out = GRAD_BINARY[name](g, a, b)
        elif kind == "reduce":
            name = draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_max",
                                         "reduce_min", "reduce_sum_square"]))
            axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
            keep = draw(st.sampled_from([0, 1]))
            if not keep and len(axes) == len(shape):
                keep = 1
            out = getattr(g, name)(v, axes, keepdims=keep)
        elif kind == "matmul":
            out = _matmul(draw, g, v, shape, "float64", pool) if draw(st.booleans()) else \
                _gemm(draw, g, v, shape)
        elif kind in ("conv", "pool") or (kind == "norm" and len(shape) != 4 and
                                          draw(st.booleans())):
            if len(shape) != 4:
                v = new_input((draw(st.integers(1, 2)), draw(st.integers(1, 4)),
                               draw(st.integers(3, 6)), draw(st.integers(3, 6))))
                shape = tuple(int(d) for d in v.shape)
            if kind == "conv":
                out = _conv(draw, g, v, shape, "float64", new_input)
            elif kind == "pool":
                name, out = _pool(draw, g, v, shape)
            else:
                name, out = _norm4(draw, g, v, shape)
        elif kind == "softmax":
            name = draw(st.sampled_from(["softmax", "log_softmax"]))
            out = getattr(g, name)(v, axis=draw(st.integers(-len(shape), len(shape) - 1)))
        elif kind == "norm":
            name, out = _norm4(draw, g, v, shape) if len(shape) == 4 else \
                _norm_last(draw, g, v, shape)
        else:
            name, out = _move(draw, g, v, shape, pool)
        if out is None:
            continue
        if math.prod(int(d) for d in out.shape) > MAX_NUMEL:
            continue
        steps.append(f"{name} -> {out.name}{tuple(out.shape)}")
        pool.append(out)
        last = out
    if last is None:
        last = g.tanh(pool[0])
        steps.append(f"tanh -> {last.name}")
    g.output(last)
    g.remove_unused()
    return Drawn(g, steps)


def _gemm(draw, g: Graph, v: Value, shape) -> Value:
    """Gemm of a 2-D view of v, transposes and alpha/beta drawn, with a bias C."""
    a = v if len(shape) == 2 else g.reshape(v, [-1, shape[-1]])
    m, k = (int(d) for d in a.shape)
    n = draw(st.integers(1, MAX_DIM))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    if ta:
        a = g.transpose(a, perm=[1, 0])
    b = _f64(draw, g, (n, k) if tb else (k, n), 1.0 / math.sqrt(k))
    c = _f64(draw, g, draw(st.sampled_from([(n,), (1, n), (m, n)])))
    return g.gemm(a, b, c, transA=int(ta), transB=int(tb), alpha=0.5, beta=1.5)


def _pool(draw, g: Graph, v: Value, shape) -> tuple[str, Value]:
    n, c, h, w = shape
    name = draw(st.sampled_from(["max_pool", "average_pool", "average_pool_pads",
                                 "global_average_pool", "global_max_pool"]))
    if name.startswith("global"):
        return name, getattr(g, name)(v)
    k = draw(st.integers(1, min(3, h, w)))
    s = draw(st.integers(1, 2))
    p = draw(st.integers(0, k // 2))
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4}
    if name == "max_pool":
        return name, g.max_pool(v, **attrs)
    return name, g.average_pool(v, count_include_pad=int(name.endswith("pads")), **attrs)


def _norm4(draw, g: Graph, v: Value, shape) -> tuple[str, Value]:
    c = shape[1]
    name = draw(st.sampled_from(["batch_norm", "batch_norm_wrt_stats", "bn_training"]))
    scale, bias = _f64(draw, g, (c,)), _f64(draw, g, (c,))
    mean, var = _f64(draw, g, (c,)), _f64(draw, g, (c,), positive=True)
    if name == "bn_training":
        if shape[0] * shape[2] * shape[3] < 4:       # batch statistics of 1-3 values: skip
            return name, None
        total, square = g.bn_training_reduce(v)
        return name, g.bn_training_update(v, total, square, scale, bias, mean, var,
                                          epsilon=1e-3)[0]
    if name == "batch_norm_wrt_stats":                 # statistics computed upstream
        mean = g.add(mean, g.reduce_mean(v, [0, 2, 3], keepdims=0))
        var = g.add(var, g.reduce_mean(g.mul(v, v), [0, 2, 3], keepdims=0))
    return name, g.batch_normalization(v, scale, bias, mean, var)


def _norm_last(draw, g: Graph, v: Value, shape) -> tuple[str, Value]:
    name = draw(st.sampled_from(["layer_norm", "layer_norm_axis", "rms_norm"]))
    if shape[-1] < 2:
        return name, None
    if name == "rms_norm":
        return name, g.rms_norm(v, _f64(draw, g, (shape[-1],)), epsilon=1e-3)
    axis = -1 if name == "layer_norm" or len(shape) < 2 else \
        draw(st.integers(1, len(shape) - 1))
    norm = shape[axis:]
    # statistics stashed in float64 (ONNX's default stash is float32: its rounding, ~1e-7,
    # would exceed the check's tolerance on a badly conditioned row of two elements)
    return name, g.layer_normalization(v, _f64(draw, g, norm), _f64(draw, g, norm),
                                       axis=axis, epsilon=1e-3, stash_type=11)


def _move(draw, g: Graph, v: Value, shape, pool) -> tuple[str, Value | None]:
    name = draw(st.sampled_from(["reshape", "transpose", "slice", "concat", "pad", "gather",
                                 "expand", "clip", "unsqueeze_squeeze", "split"]))
    rank = len(shape)
    if name == "reshape":
        return name, g.reshape(v, g.const(np.array(_reshaped(draw, shape), np.int64)))
    if name == "transpose":
        return name, g.transpose(v, perm=list(draw(st.permutations(range(rank)))))
    if name == "slice":
        axis = draw(st.integers(0, rank - 1))
        start = draw(st.integers(0, shape[axis] - 1))
        return name, g.slice(v, [start], [draw(st.integers(start + 1, shape[axis]))], [axis])
    if name == "concat":
        axis = draw(st.integers(0, rank - 1))
        same = [w for w in pool if len(w.shape) == rank and all(
            int(a) == int(b) for k, (a, b) in enumerate(zip(w.shape, shape)) if k != axis)]
        return name, g.concat(v, draw(st.sampled_from(same)), axis=axis)
    if name == "pad":
        pads = [draw(st.integers(0, 2)) for _ in range(2 * rank)]
        value = g.reshape(_f64(draw, g, (1,)), g.const(np.array([], np.int64)))
        return name, g.pad(v, g.const(np.array(pads, np.int64)), value)
    if name == "gather":
        axis = draw(st.integers(0, rank - 1))
        idx = draw(st.lists(st.integers(-shape[axis], shape[axis] - 1), min_size=1,
                            max_size=4))
        return name, g.gather(v, g.const(np.array(idx, np.int64)), axis=axis)
    if name == "expand":
        return name, g.expand(v, [draw(st.integers(1, 3)), *shape])
    if name == "clip":
        lo = g.reshape(_f64(draw, g, (1,), 0.5), g.const(np.array([], np.int64)))
        return name, g.clip(v, lo, g.add(lo, 0.7))
    if name == "split":
        axis = draw(st.integers(0, rank - 1))
        if shape[axis] % 2:
            return name, None
        a, b = g.split(v, axis=axis, num_outputs=2)
        return name, g.mul(a, b)
    return name, g.squeeze(g.unsqueeze(v, [0]), [0])


# ----------------------------------------------------------------------------- decoders
@dataclass(frozen=True)
class DrawnDecoder:
    """A small random decoder configuration and a sequence split into prompt and decode."""

    config: object          # ascendsim.models.decoder.DecoderConfig
    batch: int
    length: int             # tokens in all
    prompt: int             # the prefill's tokens; decode steps add the rest one by one
    dtype: str              # of the fused-equals-unfused check
    seed: int


@st.composite
def decoder_configs(draw) -> DrawnDecoder:
    """GQA/MHA/MQA heads, head_dim 2-8, 1-2 layers, biases, tied embeddings, MoE with or
    without a shared expert, a prompt of 1 to length - 1 tokens."""
    from ascendsim.models.decoder import DecoderConfig

    heads = draw(st.integers(1, 4))
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    head_dim = draw(st.sampled_from([2, 4, 8]))
    moe = draw(st.booleans())
    experts = draw(st.integers(2, 4)) if moe else 0
    cfg = DecoderConfig(
        hidden=heads * head_dim, layers=draw(st.integers(1, 2)), heads=heads, kv_heads=kv,
        ffn=draw(st.integers(2, 24)), vocab=draw(st.integers(4, 48)),
        eps=draw(st.sampled_from([1e-6, 1e-5])),
        rope_theta=draw(st.sampled_from([100.0, 10000.0, 1e6])),
        qkv_bias=draw(st.booleans()), tie_embeddings=draw(st.booleans()),
        experts=experts, top_k=draw(st.integers(1, experts)) if moe else 0,
        expert_ffn=draw(st.integers(2, 12)) if moe else 0,
        shared_ffn=draw(st.sampled_from([0, 4, 8])) if moe else 0, source="fuzz")
    length = draw(st.integers(2, 6))
    return DrawnDecoder(cfg, draw(st.integers(1, 2)), length, draw(st.integers(1, length - 1)),
                        draw(st.sampled_from(["float32", "float16"])),
                        draw(st.integers(0, 2**16)))
