"""`load_msprof()`: an msprof op_summary CSV beside the simulator, op by op.

Reads the op_summary_*.csv that msprof (CANN 7 and 8) writes: per task "Op Name", "OP Type",
"Task Type", "Task Duration(us)", "Input Shapes" ("4096,4096;4096,4096"), "Input Data Types"
("DT_FLOAT16;DT_FLOAT16"), "Input Formats" ("ND;FRACTAL_NZ"), "Output Shapes", ... and, when
PMU data was collected, pipe ratio columns (CANN 8: aic_mac_ratio, aiv_vec_ratio,
aic_mte2_ratio, ...; CANN 7 on coupled chips: mac_ratio, vec_ratio, mte2_ratio, ...).

Every row is mapped through one table, `CANN_OPS` (CANN op type -> registry op and how its
attributes follow from the shapes), built as a one-op graph with the row's shapes and dtypes
(inputs produced by a warm-up task first: in a profiled model run an op's inputs were just
written by its producer, so they are warm in L2), simulated as given (fusion=False, sink
mode), and compared by kernel time (the op's own task; a TransData row is the registry's
TransData from its input's stored layout to its output's). Shapes in a fractal format are read
back to their logical shape (FRACTAL_NZ (.., n1, m1, m0, n0) -> (.., m1*m0, n1*n0);
NC1HWC0 (N, C1, H, W, C0) -> (N, C1*C0, H, W); Conv2D's FRACTAL_Z weight from the input and
output channels, a square kernel assumed).

The single op's inputs are warm by default (`load_msprof(data="warm")`: each produced by a
task just before, as its producer wrote it in the model run); data="cold" reads them from
HBM; the table states which. A fused kernel (`FusionOp_<member>_<member>...`) is refused by
name, listing its members; `ProfileComparison.unmapped` counts the op types the table lacks.

Faults: a file-level fault (unreadable, not a CSV, a required column missing) raises
`ConfigError` naming the file and the column; a row-level fault (an op type not in
`CANN_OPS`, an unparsable shape, a build or simulation error) is recorded on that row
(status "error", with the reason) and the other rows are still reported.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import permutations
from pathlib import Path
from typing import Any

import numpy as np

from ..api import simulate
from ..errors import AscendSimError, ConfigError
from ..hw import Chip, get_chip
from ..ir import Graph

#: columns every op_summary file must have (CANN 7 and 8)
REQUIRED_COLUMNS = ("Op Name", "OP Type", "Task Type", "Task Duration(us)", "Input Shapes",
                    "Input Data Types")
#: msprof dtype names -> registry dtypes (CANN 8 also writes them without "DT_")
DTYPES = {"FLOAT16": "float16", "FLOAT": "float32", "FLOAT32": "float32", "BF16": "bfloat16",
          "BFLOAT16": "bfloat16", "INT8": "int8", "UINT8": "uint8", "INT16": "int16",
          "INT32": "int32", "INT64": "int64", "BOOL": "bool", "DOUBLE": "float64",
          "F16": "float16", "F32": "float32"}
#: pipe ratio column stem (after an optional aic_/aiv_/ai*_ prefix) -> simulator pipe
RATIO_PIPES = {"mac": "M", "cube": "M", "vec": "V", "scalar": "S", "mte1": "MTE1",
               "mte2": "MTE2", "mte3": "MTE3", "fixpipe": "FIX"}
_RATIO_RE = re.compile(r"^(?:aic_|aiv_|ai\*_)?(" + "|".join(RATIO_PIPES) + r")_ratio$")
#: the measured node of a row's graph
OP_NODE = "op"

#: how a single op's inputs meet L2 (`load_msprof(data=)`): "warm" = each input produced by a
#: task just before (in a profiled model run an op's inputs were just written by their
#: producer), "cold" = read from HBM (first touch misses L2)
DATA_STATES = ("warm", "cold")
DEFAULT_DATA = "warm"
#: how the table states the assumption
L2_STATE = {"warm": "warm in L2 (each produced just before, as in a model run; data='cold' "
                    "reads them from HBM)",
            "cold": "cold (read from HBM; data='warm' produces each just before)"}


# ----------------------------------------------------------------------------- parsing
def parse_shapes(text: str) -> list[tuple[int, ...]]:
    """"4096,4096;4096,4096" -> [(4096, 4096), (4096, 4096)]; an empty entry is a scalar ()."""
    text = (text or "").strip().strip('"')
    if not text or text.upper() == "N/A":
        return []
    out = []
    for part in text.split(";"):
        part = part.strip().strip("[]")
        if not part:
            out.append(())
            continue
        try:
            dims = tuple(int(d) for d in part.split(","))
        except ValueError:
            raise ValueError(f"unparsable shape {part!r} in {text!r}") from None
        if any(d < 0 for d in dims):
            raise ValueError(f"negative (dynamic) dimension in shape {part!r}")
        out.append(dims)
    return out


def parse_dtypes(text: str) -> list[str]:
    """"DT_FLOAT16;DT_INT64" -> ["float16", "int64"]; an empty entry (an absent optional
    input) -> ""; unknown names raise ValueError."""
    text = (text or "").strip().strip('"')
    if not text:
        return []
    out = []
    for part in text.split(";"):
        key = part.strip().upper().removeprefix("DT_")
        if not key:                 # an absent optional input (its shape entry is empty too)
            out.append("")
            continue
        if key not in DTYPES:
            raise ValueError(f"unknown data type {part.strip()!r}")
        out.append(DTYPES[key])
    return out


def _split(text: str) -> list[str]:
    text = (text or "").strip().strip('"')
    return [p.strip() for p in text.split(";")] if text else []


def logical_shape(shape: tuple[int, ...], fmt: str) -> tuple[int, ...]:
    """The logical (ND / NCHW) shape of a shape given in msprof's storage format."""
    fmt = fmt.upper()
    if fmt == "FRACTAL_NZ" and len(shape) >= 4:
        *lead, n1, m1, m0, n0 = shape
        return (*lead, m1 * m0, n1 * n0)
    if fmt == "NC1HWC0" and len(shape) == 5:
        n, c1, h, w, c0 = shape
        return (n, c1 * c0, h, w)
    if fmt == "NHWC" and len(shape) == 4:
        n, h, w, c = shape
        return (n, c, h, w)
    return shape


@dataclass(frozen=True)
class OpCall:
    """One profiled call, decoded: what to build."""

    op_type: str
    inputs: tuple[tuple[tuple[int, ...], str, str], ...]     # (shape, dtype, format)
    outputs: tuple[tuple[tuple[int, ...], str, str], ...]


# ----------------------------------------------------------------------------- the op table
Builder = Callable[[Graph, list, OpCall], Any]


@dataclass(frozen=True)
class CannOp:
    """How one CANN op type maps to the registry: the op and how to build it from a call."""

    registry_op: str
    build: Builder
    #: True: the graph inputs are declared in their profiled storage layout (TransData);
    #: False: in ND, the lowering converting what the op needs
    input_layouts: bool = False
    doc: str = ""
    #: logical input shapes -> the shapes to build (transposed operands, fractal weights)
    shapes: Callable[[list, OpCall], list] | None = None


def _matmul_shapes(shapes: list[tuple[int, ...]], call: OpCall) -> list[tuple[int, ...]]:
    """(.., m, k), (.., k, n): an operand stored transposed is read in its logical layout."""
    sa, sb = shapes[0], shapes[1]
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError(f"matmul operands must be at least 2-D, got {sa} and {sb}")
    if sa[-1] != sb[-2]:
        if sa[-1] == sb[-1]:
            sb = (*sb[:-2], sb[-1], sb[-2])
        elif sa[-2] == sb[-2]:
            sa = (*sa[:-2], sa[-1], sa[-2])
        elif sa[-2] == sb[-1]:
            sa, sb = (*sa[:-2], sa[-1], sa[-2]), (*sb[:-2], sb[-1], sb[-2])
        else:
            raise ValueError(f"matmul shapes {sa} and {sb} do not chain")
    bias = [s for s in shapes[2:3] if s and s[-1] == sb[-1]]
    return [sa, sb, *bias]


def _matmul(g: Graph, xs: list, call: OpCall) -> Any:
    return g.matmul(*xs[:3], name=OP_NODE)


def _conv_shapes(shapes: list[tuple[int, ...]], call: OpCall) -> list[tuple[int, ...]]:
    """NCHW input; a FRACTAL_Z weight (C1*KH*KW, N1, N0, C0) read back to (Cout, C, K, K)
    from the input channels and the output channels (square kernel assumed)."""
    x, w = shapes[0], shapes[1]
    if len(x) != 4:
        raise ValueError(f"Conv2D input must be 4-D (NCHW/NHWC/NC1HWC0), got {x}")
    if call.inputs[1][2].upper() == "FRACTAL_Z" or len(w) != 4:
        if not call.outputs:
            raise ValueError("Conv2D with a FRACTAL_Z weight needs the output shape")
        cout = logical_shape(call.outputs[0][0], call.outputs[0][2])[1]
        c1 = math.ceil(x[1] / 16)
        k = math.isqrt(w[0] // c1) if w and w[0] % c1 == 0 else 0
        if k == 0 or k * k * c1 != w[0]:
            raise ValueError(f"cannot read the kernel size from FRACTAL_Z weight {w}")
        w = (cout, x[1], k, k)
    return [x, w, *shapes[2:3]]


def _unary(op: str, **attrs: Any) -> Builder:
    return lambda g, xs, call: g.add_node(op, xs[:1], attrs, name=OP_NODE)[0]


def _binary(op: str) -> Builder:
    return lambda g, xs, call: g.add_node(op, xs[:2], {}, name=OP_NODE)[0]


def _cast(g: Graph, xs: list, call: OpCall) -> Any:
    if not call.outputs:
        raise ValueError("Cast needs the output data type")
    return g.cast(xs[0], to=call.outputs[0][1], name=OP_NODE)


def _layer_norm(g: Graph, xs: list, call: OpCall) -> Any:
    x, rest = xs[0], xs[1:3]
    axis = -len(rest[0].shape) if rest else -1
    return g.layer_normalization(x, *rest, axis=axis, name=OP_NODE)


def _softmax(g: Graph, xs: list, call: OpCall) -> Any:
    return g.softmax(xs[0], axis=-1, name=OP_NODE)


def _reduce(op: str) -> Builder:
    def build(g: Graph, xs: list, call: OpCall) -> Any:
        x = xs[0]
        out = call.outputs[0][0] if call.outputs else ()
        axes, keep = _reduced_axes(x.shape, out)
        return g.add_node(op, [x, np.array(axes, dtype=np.int64)], {"keepdims": keep},
                          name=OP_NODE)[0]
    return build


def _reduced_axes(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[list[int], int]:
    """Reduced axes and keepdims from input and output shapes (all axes if no output)."""
    if len(out) == len(shape):
        return [i for i, (a, b) in enumerate(zip(shape, out)) if a != b and b == 1], 1
    kept, j = [], 0
    for i, d in enumerate(shape):
        if j < len(out) and out[j] == d:
            j += 1
        else:
            kept.append(i)
    if j != len(out):
        raise ValueError(f"cannot tell the reduced axes of {shape} -> {out}")
    return kept or list(range(len(shape))), 0


def _transpose(g: Graph, xs: list, call: OpCall) -> Any:
    x = xs[0]
    if not call.outputs:
        raise ValueError("Transpose needs the output shape to recover perm")
    out = call.outputs[0][0]
    perm = next((list(p) for p in permutations(range(len(x.shape)))
                 if tuple(x.shape[i] for i in p) == tuple(out)), None)
    if perm is None:
        raise ValueError(f"no permutation of {x.shape} gives {out}")
    return g.transpose(x, perm=perm, name=OP_NODE)


def _concat(g: Graph, xs: list, call: OpCall) -> Any:
    shapes = [v.shape for v in xs]
    diff = [i for i in range(len(shapes[0])) if len({s[i] for s in shapes}) > 1]
    axis = diff[0] if diff else 0
    return g.concat(*xs, axis=axis, name=OP_NODE)


def _gather(g: Graph, xs: list, call: OpCall) -> Any:
    return g.gather(xs[0], xs[1], axis=0, name=OP_NODE)


def _conv2d(g: Graph, xs: list, call: OpCall) -> Any:
    x, w = xs[0], xs[1]
    _, _, h, _ = x.shape
    _, _, kh, kw = w.shape
    out = logical_shape(call.outputs[0][0], call.outputs[0][2]) if call.outputs else None
    ho = out[2] if out and len(out) == 4 else h - kh + 1
    stride = max(1, round(h / ho))
    pad = max(0, ((ho - 1) * stride + kh - h + 1) // 2)
    return g.conv(x, w, *xs[2:3], strides=[stride, stride], pads=[pad, pad, pad, pad],
                  name=OP_NODE)


#: msprof's format names -> the storage layouts ascendsim models (`ascendsim.ir.tensor.LAYOUTS`);
#: NCHW / NHWC data is ND here (its logical shape NCHW, `logical_shape`)
STORAGE_LAYOUTS = {"ND": "ND", "NCHW": "ND", "NHWC": "ND", "NC1HWC0": "NC1HWC0",
                   "FRACTAL_NZ": "FRACTAL_NZ"}


def storage_layout(fmt: str) -> str:
    """The layout of msprof format `fmt` (ValueError for a format ascendsim does not model)."""
    layout = STORAGE_LAYOUTS.get(fmt.upper() or "ND")
    if layout is None:
        raise ValueError(f"format {fmt!r} is not modelled (modelled: "
                         f"{', '.join(STORAGE_LAYOUTS)})")
    return layout


def _transdata(g: Graph, xs: list, call: OpCall) -> Any:
    """The registry's TransData from the input's profiled layout to the output's."""
    if not call.outputs:
        raise ValueError("a TransData row needs its output format")
    return g.trans_data(xs[0], dst_format=storage_layout(call.outputs[0][2]), name=OP_NODE)


def _np(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


def _op(op: str, n_inputs: int, **attrs: Any) -> Builder:
    """The registry op `op` on the row's first `n_inputs` inputs (CANN's input order)."""
    def build(g: Graph, xs: list, call: OpCall) -> Any:
        if len(xs) < n_inputs:
            raise ValueError(f"{call.op_type} takes {n_inputs} inputs, the row gives {len(xs)}")
        return tuple(g.add_node(op, xs[:n_inputs], attrs, name=OP_NODE))
    return build


def _vectors_after_x(shapes: list[tuple[int, ...]], call: OpCall) -> list[tuple[int, ...]]:
    """BN training kernels: x (and grads) as given, every per-channel input flattened to (C,)
    (msprof lists them as NC1HWC0 (1, C1, 1, 1, C0) or (1, C, 1, 1))."""
    full = 2 if call.op_type.startswith(("BNTrainingUpdateGrad", "BNTrainingReduceGrad")) else 1
    return [*shapes[:full], *((math.prod(sh) or 1,) for sh in shapes[full:])]


def _rms_norm(g: Graph, xs: list, call: OpCall) -> Any:
    outs = min(2, max(1, len(call.outputs)))       # y, and rstd when the row lists it
    return tuple(g.add_node("RmsNorm", xs[:2], {"num_outputs": outs}, name=OP_NODE))


def _attention_shapes(shapes: list[tuple[int, ...]], call: OpCall) -> list[tuple[int, ...]]:
    """query, key, value in BNSD (4-D); the optional inputs after them are not built (a
    mask is read as the causal mask, `_attention`). BSH/TND rows are refused: an op_summary
    row does not carry head_num, so their head count is unknown."""
    q = shapes[:3]
    if len(q) < 3 or any(len(sh) != 4 for sh in q):
        raise ValueError(f"{call.op_type} with query/key/value shapes {q}: only the BNSD "
                         f"layout (4-D) is read; BSH/TND rows do not say the head count")
    return q


def _attention(op: str) -> Builder:
    def build(g: Graph, xs: list, call: OpCall) -> Any:
        q, k = xs[0].shape, xs[1].shape
        if op == "IncreFlashAttention":
            attrs = {"num_heads": q[1], "num_key_value_heads": k[1]}
        else:   # a mask input with more than one query token: CANN's causal (sparse_mode 2/3)
            masked = any(sh for sh, _, _ in call.inputs[3:])
            attrs = {"head_num": q[1], "causal": int(masked and q[2] > 1)}
        attrs["scale_value"] = 1.0 / math.sqrt(q[3])
        return g.add_node(op, xs[:3], attrs, name=OP_NODE)[0]
    return build


def _max_pool(g: Graph, xs: list, call: OpCall) -> Any:
    """A 3x3 window (msprof rows carry no window: ResNet's stem pool and Inception's are
    3x3), stride from the input/output sizes, the padding that gives the output size."""
    x = xs[0]
    h = x.shape[2]
    out = logical_shape(call.outputs[0][0], call.outputs[0][2]) if call.outputs else None
    if not out or len(out) != 4:
        raise ValueError("MaxPool needs its 4-D output shape to read the stride")
    ho, k = out[2], 3
    stride = max(1, round(h / ho))
    pad = max(0, math.ceil(((ho - 1) * stride + k - h) / 2))
    return g.add_node("MaxPool", [x], {"kernel_shape": [k, k], "strides": [stride, stride],
                                       "pads": [pad] * 4}, name=OP_NODE)[0]


#: fused CANN kernels (UB fusion) whose member ops are named in the op type
FUSION_PREFIX = "FusionOp_"


def fused_members(op_type: str) -> list[str]:
    """The member op types a fused CANN kernel's type names ("FusionOp_Conv2D_Relu" ->
    ["Conv2D", "Relu"]); [] for any other op type."""
    if not op_type.startswith(FUSION_PREFIX):
        return []
    return [m for m in op_type[len(FUSION_PREFIX):].split("_") if m]


#: CANN op type -> registry op and builder (the one place the mapping lives)
CANN_OPS: dict[str, CannOp] = {
    **{t: CannOp("MatMul", _matmul, doc="transposes read from the shapes",
                 shapes=_matmul_shapes)
       for t in ("MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2",
                 "BatchMatMulV3")},
    **{t: CannOp("Softmax", _softmax, doc="axis -1") for t in ("SoftmaxV2", "Softmax")},
    **{t: CannOp("LayerNormalization", _layer_norm, doc="normalised over gamma's dims")
       for t in ("LayerNorm", "LayerNormV3", "LayerNormV4")},
    "Conv2D": CannOp("Conv", _conv2d, doc="stride and pads from input/output sizes",
                     shapes=_conv_shapes),
    "TransData": CannOp("TransData", _transdata, input_layouts=True,
                        doc="input and output formats from the row"),
    "Cast": CannOp("Cast", _cast, doc="to = the output data type"),
    "Add": CannOp("Add", _binary("Add")), "AddV2": CannOp("Add", _binary("Add")),
    "Sub": CannOp("Sub", _binary("Sub")), "Mul": CannOp("Mul", _binary("Mul")),
    "RealDiv": CannOp("Div", _binary("Div")), "Div": CannOp("Div", _binary("Div")),
    "Maximum": CannOp("Max", _binary("Max")), "Minimum": CannOp("Min", _binary("Min")),
    "Relu": CannOp("Relu", _unary("Relu")), "Gelu": CannOp("Gelu", _unary("Gelu")),
    "FastGelu": CannOp("Gelu", _unary("Gelu", approximate="tanh"), doc="tanh approximation"),
    "Sigmoid": CannOp("Sigmoid", _unary("Sigmoid")), "Tanh": CannOp("Tanh", _unary("Tanh")),
    "Exp": CannOp("Exp", _unary("Exp")), "Sqrt": CannOp("Sqrt", _unary("Sqrt")),
    "Rsqrt": CannOp("Rsqrt", _unary("Rsqrt")), "Neg": CannOp("Neg", _unary("Neg")),
    "Abs": CannOp("Abs", _unary("Abs")), "Erf": CannOp("Erf", _unary("Erf")),
    "Transpose": CannOp("Transpose", _transpose, doc="perm from input/output shapes"),
    "TransposeD": CannOp("Transpose", _transpose, doc="perm from input/output shapes"),
    **{t: CannOp("Concat", _concat, doc="axis: the dim that differs")
       for t in ("ConcatD", "ConcatV2D", "ConcatV2", "Concat")},
    **{t: CannOp("ReduceSum", _reduce("ReduceSum"), doc="axes from input/output shapes")
       for t in ("ReduceSumD", "ReduceSum")},
    **{t: CannOp("ReduceMean", _reduce("ReduceMean"), doc="axes from input/output shapes")
       for t in ("ReduceMeanD", "ReduceMean")},
    **{t: CannOp("ReduceMax", _reduce("ReduceMax"), doc="axes from input/output shapes")
       for t in ("ReduceMaxD", "ReduceMax")},
    **{t: CannOp("Gather", _gather, doc="axis 0") for t in ("GatherV2", "GatherV2D", "Gather")},
    "FlashAttentionScore": CannOp("FlashAttentionScore", _attention("FlashAttentionScore"),
                                  shapes=_attention_shapes,
                                  doc="BNSD; head_num from the query; a mask input = causal"),
    "IncreFlashAttention": CannOp("IncreFlashAttention", _attention("IncreFlashAttention"),
                                  shapes=_attention_shapes,
                                  doc="BNSD; query and key/value heads from the shapes"),
    "RmsNorm": CannOp("RmsNorm", _rms_norm, doc="x, gamma; rstd when the row lists 2 outputs"),
    "SwiGlu": CannOp("SwiGlu", _op("SwiGlu", 1), doc="dim -1"),
    **{t: CannOp("MaxPool", _max_pool, doc="3x3 window assumed, stride from the sizes")
       for t in ("MaxPool", "MaxPoolV3")},
    "BNTrainingReduce": CannOp("BNTrainingReduce", _op("BNTrainingReduce", 1),
                               doc="x -> sum, square_sum"),
    "BNTrainingUpdate": CannOp("BNTrainingUpdate", _op("BNTrainingUpdate", 7),
                               shapes=_vectors_after_x, doc="channel vectors flattened"),
    "BNTrainingUpdateGrad": CannOp("BNTrainingUpdateGrad", _op("BNTrainingUpdateGrad", 4),
                                   shapes=_vectors_after_x, doc="channel vectors flattened"),
    "BNTrainingReduceGrad": CannOp("BNTrainingReduceGrad", _op("BNTrainingReduceGrad", 7),
                                   shapes=_vectors_after_x, doc="channel vectors flattened"),
    **{t: CannOp("ApplyAdam", _op("ApplyAdam", 10), doc="CANN's input order")
       for t in ("ApplyAdam", "ApplyAdamD")},
    "ApplyAdamW": CannOp("ApplyAdamW", _op("ApplyAdamW", 11), doc="CANN's input order"),
}


# ----------------------------------------------------------------------------- records
@dataclass(frozen=True)
class ProfileRow:
    """One op_summary row beside the simulator."""

    index: int                      # 1-based data row in the file
    op_name: str
    op_type: str
    task_type: str
    measured_us: float
    input_shapes: str
    input_dtypes: str
    input_formats: str
    output_shapes: str
    registry_op: str = ""
    simulated_us: float | None = None
    status: str = "ok"              # "ok" or "error"
    reason: str = ""
    measured_ratios: Mapping[str, float] = field(default_factory=dict)   # pipe -> ratio
    simulated_ratios: Mapping[str, float] = field(default_factory=dict)
    call: OpCall | None = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        return f"{self.index}:{self.op_name}"

    @property
    def ratio(self) -> float | None:
        """simulated / measured kernel time (> 1: the model is slow)."""
        if self.status != "ok" or not self.simulated_us or self.measured_us <= 0:
            return None
        return self.simulated_us / self.measured_us

    @property
    def error(self) -> float | None:
        r = self.ratio
        return None if r is None else r - 1.0


@dataclass
class ProfileComparison:
    """Every op of a profile, measured beside simulated."""

    path: str
    chip: Chip
    rows: list[ProfileRow]
    columns: tuple[str, ...] = ()
    data: str = DEFAULT_DATA         # how the single ops' inputs met L2 ("warm" / "cold")

    @property
    def ok_rows(self) -> list[ProfileRow]:
        return [r for r in self.rows if r.ratio is not None]

    @property
    def median_abs_error(self) -> float:
        """Median |simulated/measured - 1| over the rows that simulated (NaN if none)."""
        ratios = [r.ratio for r in self.ok_rows]
        return statistics.median(abs(x - 1) for x in ratios) if ratios else math.nan

    @property
    def bias(self) -> float:
        ratios = [r.ratio for r in self.ok_rows]
        return math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else math.nan

    @property
    def unmapped(self) -> dict[str, int]:
        """Op types the CANN op table cannot map (`CANN_OPS`; fused kernels named by their
        members), with how many rows each: rows `calibrate` cannot use."""
        return unmapped(self.rows)

    def table(self) -> str:
        pipes = sorted({p for r in self.rows for p in (*r.measured_ratios,
                                                       *r.simulated_ratios)})
        head = ["#", "op", "type", "measured us", "simulated us", "ratio",
                *[f"{p} meas/sim" for p in pipes], "status"]
        body = []
        for r in self.rows:
            pr = [f"{_r2(r.measured_ratios.get(p))}/{_r2(r.simulated_ratios.get(p))}"
                  for p in pipes]
            body.append([str(r.index), r.op_name[:40], r.op_type, f"{r.measured_us:.2f}",
                         "-" if r.simulated_us is None else f"{r.simulated_us:.2f}",
                         "-" if r.ratio is None else f"{r.ratio:.2f}", *pr,
                         r.status if r.status == "ok" else f"error: {r.reason}"])
        widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
                 for cells in [head, *body]]
        lines.insert(1, "-" * len(lines[0]))
        n_err = sum(r.status == "error" for r in self.rows)
        lines.append(f"\nmedian |error| {100 * self.median_abs_error:.1f}% over "
                     f"{len(self.ok_rows)} ops on {self.chip.name} (bias {self.bias:.2f}); "
                     f"{n_err} row(s) not simulated; inputs {L2_STATE[self.data]}")
        return "\n".join(lines)

    def to_csv(self, path: str | Path) -> None:
        """One line per op: measured, simulated, ratio, then measured/simulated pipe ratios."""
        pipes = sorted({p for r in self.rows for p in (*r.measured_ratios,
                                                       *r.simulated_ratios)})
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["index", "op_name", "op_type", "registry_op", "task_type",
                        "input_shapes", "input_dtypes", "measured_us", "simulated_us", "ratio",
                        *[f"{p}_ratio_measured" for p in pipes],
                        *[f"{p}_ratio_simulated" for p in pipes], "status", "reason"])
            for r in self.rows:
                w.writerow([r.index, r.op_name, r.op_type, r.registry_op, r.task_type,
                            r.input_shapes, r.input_dtypes, f"{r.measured_us:g}",
                            "" if r.simulated_us is None else f"{r.simulated_us:.4f}",
                            "" if r.ratio is None else f"{r.ratio:.4f}",
                            *[_opt(r.measured_ratios.get(p)) for p in pipes],
                            *[_opt(r.simulated_ratios.get(p)) for p in pipes],
                            r.status, r.reason])


def unmapped(rows: Sequence[ProfileRow]) -> dict[str, int]:
    """Op type -> rows whose op type is not in `CANN_OPS`, most rows first."""
    out: dict[str, int] = {}
    for r in rows:
        if r.op_type not in CANN_OPS:
            out[r.op_type] = out.get(r.op_type, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _r2(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _opt(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


# ----------------------------------------------------------------------------- reading
#: the key of a record's CSV line number (1-based, the header is line 1)
LINE_KEY = "\0line"


def rec_lines(rec: Sequence[str]) -> int:
    """How many physical lines a parsed CSV record spans (a quoted field may hold newlines)."""
    return 1 + sum(c.count("\n") for c in rec)


def read_op_summary(path: str | Path) -> tuple[tuple[str, ...], list[dict[str, str]]]:
    """The header and data rows of an op_summary CSV; ConfigError on a file-level fault."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the msprof file: {exc.strerror or exc}") \
            from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a CSV text file (it is not UTF-8)") from None
    try:
        reader = csv.reader(text.splitlines())
        header = next(reader, None)
        records = []
        for rec in reader:                       # (line of the row's start, fields)
            records.append((reader.line_num - rec_lines(rec) + 1, rec))
    except csv.Error as exc:
        raise ConfigError(f"{path}: not a valid CSV file: {exc}") from None
    if not header or len(header) < 2:
        raise ConfigError(f"{path}: not an msprof op_summary CSV (no comma-separated header); "
                          f"expected columns {', '.join(REQUIRED_COLUMNS)}")
    header = [h.strip() for h in header]
    for col in REQUIRED_COLUMNS:
        if col not in header:
            raise ConfigError(f"{path}: required column {col!r} is missing (msprof op_summary "
                              f"files have {', '.join(REQUIRED_COLUMNS)})")
    rows = []
    for line, rec in records:
        if not any(c.strip() for c in rec):
            continue
        row = {h: (rec[i] if i < len(rec) else "") for i, h in enumerate(header)}
        row[LINE_KEY] = str(line)
        rows.append(row)
    return tuple(header), rows


def decode_call(rec: Mapping[str, str]) -> OpCall:
    """The op type, logical input/output shapes, dtypes and formats of one CSV row."""
    shapes = parse_shapes(rec.get("Input Shapes", ""))
    dtypes = parse_dtypes(rec.get("Input Data Types", ""))
    fmts = _split(rec.get("Input Formats", "")) or ["ND"] * len(shapes)
    if len(dtypes) != len(shapes):
        raise ValueError(f"{len(shapes)} input shapes but {len(dtypes)} input data types")
    fmts += ["ND"] * (len(shapes) - len(fmts))
    oshapes = parse_shapes(rec.get("Output Shapes", ""))
    odtypes = parse_dtypes(rec.get("Output Data Types", "")) or [dtypes[0] if dtypes else
                                                                 "float16"] * len(oshapes)
    ofmts = _split(rec.get("Output Formats", "")) or ["ND"] * len(oshapes)
    ofmts += ["ND"] * (len(oshapes) - len(ofmts))
    odtypes += [odtypes[-1] if odtypes else "float16"] * (len(oshapes) - len(odtypes))
    return OpCall(rec["OP Type"].strip(),
                  tuple(zip(shapes, dtypes, fmts)), tuple(zip(oshapes, odtypes, ofmts)))


def build_call(call: OpCall, data: str = DEFAULT_DATA) -> tuple[Graph, CannOp]:
    """The one-op graph of a profiled call (data="warm": each float input produced by a Relu
    first, so it sits in L2; "cold": the graph inputs feed the op directly)."""
    spec = CANN_OPS.get(call.op_type)
    members = fused_members(call.op_type)
    if spec is None and members:
        raise KeyError(f"op type {call.op_type!r} is a fused CANN kernel of "
                       f"{', '.join(members)}: an op_summary row does not say which inputs "
                       f"feed which member, so it is not rebuilt (compare it in a model run)")
    if spec is None:
        raise KeyError(f"op type {call.op_type!r} is not in the CANN op table "
                       f"(ascendsim.validation.msprof.CANN_OPS)")
    if not call.inputs:
        raise ValueError("the row has no input shapes")
    shapes = [logical_shape(shape, fmt) for shape, _, fmt in call.inputs]
    if spec.shapes is not None:
        shapes = spec.shapes(shapes, call)
    g = Graph(f"msprof_{call.op_type}")
    xs = []
    for i, shape in enumerate(shapes):
        dtype = call.inputs[i][1]
        if not dtype:
            raise ValueError(f"input {i} of {call.op_type} is absent (no data type)")
        layout = storage_layout(call.inputs[i][2]) if spec.input_layouts else "ND"
        x = g.input(f"x{i}", shape or (1,), dtype, layout)
        warm = data == "warm" and np.dtype(_np(dtype)).kind == "f"
        xs.append(g.add_node("Relu", [x], name=f"warm_{i}")[0] if warm else x)
    out = spec.build(g, xs, call)
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return g, spec


def _measured_ratios(rec: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for col, val in rec.items():
        m = _RATIO_RE.match(col.strip().lower())
        if not m:
            continue
        try:
            x = float(val)
        except (TypeError, ValueError):
            continue
        if not math.isfinite(x):
            continue
        pipe = RATIO_PIPES[m.group(1)]
        out[pipe] = max(out.get(pipe, 0.0), x)
    return out


def simulate_call(call: OpCall, chip: Chip, cache: dict | None = None,
                  data: str = DEFAULT_DATA) -> tuple[float, dict[str, float], str]:
    """Simulated kernel time (us) of a call, its pipe ratios, and the registry op."""
    key = (call, chip, data)
    if cache is not None and key in cache:
        return cache[key]
    g, spec = build_call(call, data)
    res = simulate(g, chip, fusion=False, mode="sink", detail="block")
    mine = [t for t in res.trace.tasks if t.op_name == OP_NODE]
    if not mine:
        raise AscendSimError(f"no simulated task for {call.op_type} (tasks: "
                             f"{', '.join(t.op_name for t in res.trace.tasks)})")
    cycles = sum(t.duration for t in mine)
    ratios: dict[str, float] = {}
    for t in mine:
        for pipe, busy in t.pipe_cycles.items():
            ratios[pipe] = max(ratios.get(pipe, 0.0), busy / t.duration if t.duration else 0)
    out = (chip.us(cycles), ratios, spec.registry_op)
    if cache is not None:
        cache[key] = out
    return out


def compare_profile(path: str | Path, header: Sequence[str], records: list[dict[str, str]],
                    chip: Chip, data: str = DEFAULT_DATA) -> ProfileComparison:
    cache: dict = {}
    rows = []
    for i, rec in enumerate(records, start=1):
        base = dict(index=i, op_name=rec.get("Op Name", "").strip(),
                    op_type=rec.get("OP Type", "").strip(),
                    task_type=rec.get("Task Type", "").strip(), measured_us=math.nan,
                    input_shapes=rec.get("Input Shapes", ""),
                    input_dtypes=rec.get("Input Data Types", ""),
                    input_formats=rec.get("Input Formats", ""),
                    output_shapes=rec.get("Output Shapes", ""),
                    measured_ratios=_measured_ratios(rec))
        line = rec.get(LINE_KEY, "?")
        try:
            base["measured_us"] = float(rec["Task Duration(us)"])
            if not 0 < base["measured_us"] < math.inf:
                raise ValueError(f"Task Duration(us) = {rec['Task Duration(us)']!r} is not "
                                 f"a positive finite time")
            call = decode_call(rec)
            sim_us, ratios, reg = simulate_call(call, chip, cache, data)
            rows.append(ProfileRow(**base, registry_op=reg, simulated_us=sim_us,
                                   simulated_ratios=ratios, call=call))
        except (AscendSimError, ValueError, KeyError, TypeError, IndexError, ArithmeticError,
                MemoryError, RecursionError) as exc:
            # a malformed row (bad shape, impossible layout, a shape too large to build) is
            # that row's error, naming its CSV line, never an exception out of load_msprof
            reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            if isinstance(exc, MemoryError):
                reason = f"the row's shapes are too large to build ({reason or 'no memory'})"
            rows.append(ProfileRow(**base, status="error",
                                   reason=f"line {line}: {type(exc).__name__}: {reason}"[:300]))
    return ProfileComparison(str(path), chip, rows, tuple(header), data)


def load_msprof(path: str | Path, chip: str | Chip = "ascend910b",
                data: str = DEFAULT_DATA) -> ProfileComparison:
    """Read an msprof op_summary CSV and simulate each op on `chip` (see the module doc).
    data: "warm" (default: each op's inputs were just written, so they meet L2 as in the
    profiled model run) or "cold" (inputs read from HBM); the table says which."""
    if data not in DATA_STATES:
        raise ConfigError(f"data={data!r}: expected one of {', '.join(DATA_STATES)}")
    chip = get_chip(chip)
    header, records = read_op_summary(path)
    return compare_profile(path, header, records, chip, data)


__all__ = ["load_msprof", "ProfileComparison", "ProfileRow", "OpCall", "CANN_OPS", "CannOp",
           "fused_members", "FUSION_PREFIX", "unmapped",
           "REQUIRED_COLUMNS", "parse_shapes", "parse_dtypes", "logical_shape", "decode_call",
           "build_call", "simulate_call", "read_op_summary", "DATA_STATES", "DEFAULT_DATA"]
