"""Confidence: how far a result's figures may be from hardware, read from the validation report.

A view over two existing things: the trace's time per op type, and the corpus's error per
validation family and chip generation (`confidence_table.json`, package data, generated from
`ascendsim validate` by `bench/confidence_table.py`; `ascendsim.validation.confidence`
builds it). Nothing here simulates or validates.

- `OP_FAMILY`: the one mapping from op type to validation family (a family of
  `ascendsim.validation.corpus.FAMILIES`, or `UNVALIDATED` when no family's rows measure that
  kind of kernel). A fused node's type that is not in the table takes the family of its
  anchor member (`family_of`): its cube op (conv, gemm, attention) when it has one, else its
  member of the highest-ranked vector family (`ANCHOR_ORDER`). Members come from the graph
  when the caller has it (`Result.confidence`), else from the type's name: fused types are
  named after their members ("MatMulGelu", "ConvBNTrainingReduce", "FusionOp_Add_Relu").
- `GENERATIONS`: the one mapping from chip name (a corpus row's `chip`, a `Chip.name`) to
  chip generation ("910", "910B", "310P", "310"); `ascend910b_gen1`, the first-generation SoC
  CANN calls "Ascend910B", is the 910 generation.
- `confidence(trace)`: per op type its share of the summed task time, its family and that
  family's validation figures on the chip's generation (n, median |error|, bias = median
  ratio), or "unvalidated"; for the run, the share of time in validated families and the
  time-weighted expected |error| over them, and beside it the same weighting of the families'
  error at first sight (each row's ratio when it was added, before any model change it
  motivated), the corpus's own measure of how the model does on kernels it was not fitted to;
  and the run's time by simulated kernel duration (`size_band`) beside the generation's
  msprof kernel rows of that size (the line names the smallest band when it holds
  `SMALL_KERNEL_LINE_SHARE` of the time and its rows are further off than the family figure).

What it does not promise (docs/api.md): the corpus error is a development-set error (held-out
error is larger), families with few rows give noisy medians, and the figure is not a bound.
"""

from __future__ import annotations

import importlib.resources
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..sim.trace import TaskRecord, Trace

UNVALIDATED = "unvalidated"
#: package data file of the table (in this package)
TABLE_FILE = "confidence_table.json"
#: families below this many rows are flagged "few rows" in the record's table
FEW_ROWS = 3
#: kernel-duration band edges (us) of the table's size bands: a kernel's error depends on its
#: size (the 910B's msprof rows under 10 us were 2-8x off where longer ones were within 20 %)
SIZE_BANDS_US: tuple[float, ...] = (10.0, 100.0)
#: the record's line names the smallest band when at least this share of time falls in it
#: and its rows are further off than the run's family figure (`Confidence.__str__`)
SMALL_KERNEL_LINE_SHARE = 0.05

#: chip name (lower case) -> chip generation; names not listed take the generation of the
#: longest listed prefix (`generation`)
GENERATIONS: dict[str, str] = {
    "ascend910": "910", "ascend910a": "910", "ascend910b_gen1": "910",
    "ascend910b": "910B", "ascend910b1": "910B", "ascend910b2": "910B", "ascend910b3": "910B",
    "ascend910b4": "910B",
    "ascend310p": "310P", "ascend310p3": "310P",
    "ascend310": "310",
    # corpus rows on a chip ascendsim does not model yet (pending rows)
    "ascend950": "950",
}

_E, _C, _T, _G = "elementwise", "copy", "transpose", "embedding"
#: op type -> validation family, or UNVALIDATED. Every registered op type is listed
#: (tests/report/test_confidence.py), plus the types the lowering and the passes give tasks
#: (TransData, the fused kernels CANN names). Backward and training kernels take the family of
#: their kernel kind (a conv backprop is a cube conv, BN training kernels are norms).
OP_FAMILY: dict[str, str] = {
    # cube
    "MatMul": "gemm", "Gemm": "gemm", "QuantBatchMatmul": "gemm", "GroupedMatmul": "gemm",
    "BatchMatMul": "batch_matmul", "BatchMatMulV2": "batch_matmul",
    "Conv": "conv", "ConvTranspose": "conv", "Conv2DBackpropFilter": "conv",
    "Conv2DBackpropInput": "conv", "Conv2D": "conv", "Conv2DTranspose": "conv",
    "FlashAttentionScore": "attention", "FlashAttentionScoreGrad": "attention",
    "IncreFlashAttention": "attention", "FusedInferAttentionScore": "attention",
    "PromptFlashAttention": "attention",
    # vector: norms and softmax
    "LayerNormalization": "norm", "LayerNormXBackprop": "norm",
    "LayerNormBetaGammaBackprop": "norm", "BatchNormalization": "norm",
    "InstanceNormalization": "norm", "RmsNorm": "norm", "RmsNormGrad": "norm",
    "AddRmsNorm": "norm", "AddLayerNormalization": "norm",
    "BNTrainingReduce": "norm", "BNTrainingUpdate": "norm", "BNTrainingReduceGrad": "norm",
    "BNTrainingUpdateGrad": "norm",
    "Softmax": "softmax", "LogSoftmax": "softmax",
    # reductions
    "ReduceSum": "reduce", "ReduceMean": "reduce", "ReduceMax": "reduce", "ReduceMin": "reduce",
    "ReduceProd": "reduce", "ReduceL1": "reduce", "ReduceL2": "reduce",
    "ReduceLogSum": "reduce", "ReduceLogSumExp": "reduce", "ReduceSumSquare": "reduce",
    "ArgMax": "reduce", "ArgMin": "reduce", "GlobalAveragePool": "reduce",
    "GlobalMaxPool": "reduce",
    # layout and data movement
    "Transpose": _T, "DepthToSpace": _T, "SpaceToDepth": _T,
    "TransData": _C, "Identity": _C, "Reshape": _C, "Flatten": _C, "Squeeze": _C,
    "Unsqueeze": _C, "Concat": _C, "Split": _C, "Tile": _C, "Expand": _C, "Pad": _C,
    "KvCacheAppend": _C, "ScatterPaKvCache": _C, "ReverseSequence": _C, "CenterCropPad": _C,
    "Gather": _G, "GatherElements": _G, "GatherND": _G,
    # elementwise (streaming vector kernels, optimizer updates included)
    **dict.fromkeys((
        "Abs", "Add", "And", "BiasAdd", "Cast", "Ceil", "Clip", "Cos", "Div", "Dropout",
        "DropOutDoMask", "Elu", "Equal", "Erf", "Exp", "Floor", "Gelu", "Greater",
        "GreaterOrEqual", "HardSigmoid", "HardSwish", "IsInf", "IsNaN", "LeakyRelu", "Less",
        "LessOrEqual", "Log", "Max", "Min", "Mul", "Neg", "Not", "Or", "PRelu", "Pow",
        "Reciprocal", "Relu", "Round", "Rsqrt", "Selu", "Sigmoid", "Sign", "Sin", "Slice",
        "Softplus", "Sqrt", "Sub", "Sum", "Tanh", "Where", "Xor", "SwiGlu", "SwiGluGrad",
        "RotaryMul", "RotaryMulGrad", "DynamicQuant", "AscendQuantV2", "AscendAntiQuantV2",
        "ApplyAdam", "ApplyAdamW",
        "ApplyMomentum", "LambApplyOptimizerAssign", "LambApplyWeightAssign", "AddN",
        "FusedMulAddN", "Trilu",
    ), _E),
    # no family measures these kernels: pooling, scatters, routing, AI CPU and control flow
    **dict.fromkeys((
        "AveragePool", "MaxPool", "MaxPoolWithArgmax", "MaxPoolGradWithArgmax", "LRN",
        "ScatterElements", "ScatterND", "OneHot", "Resize", "SoftmaxCrossEntropyWithLogits",
        "MoeFinalizeRouting", "MoeFinalizeRoutingV2Grad", "MoeGatingTopK",
        "MoeGatingTopKSoftmax", "MoeInitRouting", "MoeInitRoutingV2Grad",
        "WeightQuantBatchMatmulV2",
        "DropOutGenMask", "NPUClearFloatStatus", "NPUGetFloatStatus", "NonZero", "Compress",
        "Constant", "ConstantOfShape", "EyeLike", "Range", "Shape", "Size", "If", "Loop",
        "Scan", "FusedOp", "Memset", "TopK",
    ), UNVALIDATED),
}

#: a fused node's family is its anchor member's: the first of these families among its
#: members (cube kernels first: the cube op's tiling drives a fused cube kernel)
ANCHOR_ORDER = ("attention", "conv", "batch_matmul", "gemm", "norm", "softmax", "reduce",
                _T, _G, _E, _C)

#: whole-model families of the table: reported beside the op figures, never weighed in
MODEL_FAMILIES = ("model_training", "model_inference", "serving")
_SEP = re.compile(r"[_\s;,+]+")


def generation(chip: Any) -> str | None:
    """The generation of a chip (a `Chip` or its name): "910", "910B", "310P" or "310";
    None for a chip no table entry or prefix names (a user's own chip file)."""
    name = str(getattr(chip, "name", chip)).lower()
    if name in GENERATIONS:
        return GENERATIONS[name]
    best = max((k for k in GENERATIONS if name.startswith(k)), key=len, default=None)
    return GENERATIONS[best] if best is not None else None


def size_bands() -> tuple[str, ...]:
    """Every kernel-duration band label, smallest first ("< 10 us", "10-100 us", ">= 100 us"
    with the default `SIZE_BANDS_US`)."""
    edges = SIZE_BANDS_US
    return (f"< {edges[0]:g} us", *(f"{lo:g}-{hi:g} us" for lo, hi in zip(edges, edges[1:])),
            f">= {edges[-1]:g} us")


def size_band(us: float) -> str:
    """The label of the kernel-duration band holding `us` microseconds."""
    labels = size_bands()
    return next((lab for edge, lab in zip(SIZE_BANDS_US, labels) if us < edge), labels[-1])


def split_fused_type(op_type: str) -> tuple[str, ...]:
    """Member op types read off a fused type's name, longest known type first at each
    position ("MatMulGelu" -> ("MatMul", "Gelu"), "FusionOp_Add_Relu" -> ("Add", "Relu"));
    () when some part is not a known type."""
    parts = [p for p in _SEP.split(op_type) if p and p not in ("FusionOp", "Fused", "Fusion")]
    out: list[str] = []
    for part in parts:
        if part.startswith("Fused") and part != "Fused":
            part = part[5:]
        i = 0
        while i < len(part):
            hit = next((k for k in _KNOWN_BY_LENGTH if part.startswith(k, i)), None)
            if hit is None:
                return ()
            out.append(hit)
            i += len(hit)
    return tuple(out)


_KNOWN_BY_LENGTH = tuple(sorted(OP_FAMILY, key=len, reverse=True))


def family_of(op_type: str, members: Sequence[str] = (),
              input_shapes: Sequence[str] = ()) -> str:
    """The validation family of an op type (or UNVALIDATED).

    members: the op types inside a fused node (from the graph), when known; else a fused
    type's members are read off its name (`split_fused_type`). input_shapes: the task's
    input shapes ("2,128,64" strings, as the trace keeps them): a MatMul whose two inputs
    both have batch dimensions is a batched matmul (the corpus's batch_matmul family)."""
    fam = OP_FAMILY.get(op_type)
    if fam == "gemm" and op_type == "MatMul" and _batched(input_shapes):
        return "batch_matmul"
    if fam is not None and not (fam == UNVALIDATED and members):
        return fam
    inner = tuple(members) or split_fused_type(op_type)
    fams = {OP_FAMILY.get(m, UNVALIDATED) for m in inner}
    for f in ANCHOR_ORDER:
        if f in fams:
            return f
    return UNVALIDATED


def _batched(shapes: Sequence[str]) -> bool:
    dims = [[d for d in str(s).replace("x", ",").split(",") if d.strip()] for s in shapes[:2]]
    if len(dims) < 2 or any(len(d) < 3 for d in dims):
        return False
    try:
        return all(math.prod(int(x) for x in d[:-2]) > 1 for d in dims)
    except ValueError:
        return False


# ----------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class FamilyError:
    """One family's validation rows on one chip generation."""

    family: str
    generation: str
    n: int
    median_abs_error: float      # median |ratio - 1|
    bias: float                  # median ratio (> 1: the model is slow)
    #: rows of the family and generation with a ratio at first sight (before any model
    #: change they motivated), and their median |first_ratio - 1| (None: no such row)
    first_n: int = 0
    first_median_abs_error: float | None = None


@dataclass(frozen=True)
class SizeBandError:
    """The msprof kernel-time validation rows of one generation whose simulated kernel time
    falls in one band (`size_band`), whatever their family."""

    generation: str
    band: str
    n: int
    median_abs_error: float      # median |ratio - 1|
    bias: float                  # median ratio (> 1: the model is slow)


@dataclass(frozen=True)
class EagerCallError:
    """The validation rows of one generation timed as eager calls (the host clock around one
    synchronised call: the framework's host path is in the figure), whatever their family;
    kept out of the family figures."""

    generation: str
    n: int
    median_abs_error: float      # median |ratio - 1|
    bias: float                  # median ratio (> 1: the model is slow)


@dataclass(frozen=True)
class ConfidenceTable:
    """Validation error by (family, generation), by (generation, kernel-size band) and, for
    rows timed as eager calls, by generation, as shipped (`load_table`)."""

    entries: dict[tuple[str, str], FamilyError]
    meta: dict[str, Any] = field(default_factory=dict)
    bands: dict[tuple[str, str], SizeBandError] = field(default_factory=dict)
    eager: dict[str, EagerCallError] = field(default_factory=dict)

    def eager_calls(self, gen: str | None) -> EagerCallError | None:
        e = self.eager.get(gen) if gen is not None else None
        return e if e is not None and e.n > 0 else None

    def band(self, gen: str | None, band: str) -> SizeBandError | None:
        e = self.bands.get((gen, band)) if gen is not None else None
        return e if e is not None and e.n > 0 else None

    def get(self, family: str, gen: str | None) -> FamilyError | None:
        if gen is None or family == UNVALIDATED:
            return None
        e = self.entries.get((family, gen))
        return e if e is not None and e.n > 0 else None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfidenceTable:
        rows = [FamilyError(r["family"], r["generation"], int(r["n"]),
                            float(r["median_abs_error"]), float(r["bias"]),
                            int(r.get("first_n", 0)), _opt_float(r.get("first_median_abs_error")))
                for r in data.get("rows", [])]
        bands = [SizeBandError(b["generation"], b["band"], int(b["n"]),
                               float(b["median_abs_error"]), float(b["bias"]))
                 for b in data.get("size_bands", [])]
        eager = [EagerCallError(e["generation"], int(e["n"]), float(e["median_abs_error"]),
                                float(e["bias"])) for e in data.get("eager_calls", [])]
        meta = {k: v for k, v in data.items() if k not in ("rows", "size_bands", "eager_calls")}
        return cls({(r.family, r.generation): r for r in rows}, meta,
                   {(b.generation, b.band): b for b in bands},
                   {e.generation: e for e in eager})


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


@cache
def load_table() -> ConfidenceTable:
    """The shipped table (package data `confidence_table.json`)."""
    res = importlib.resources.files(__package__) / TABLE_FILE
    return ConfidenceTable.from_dict(json.loads(res.read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------- the record
@dataclass(frozen=True)
class OpConfidence:
    """One op type of a run (one family: a fused type whose tasks resolve to two families
    gets a row per family)."""

    op_type: str
    family: str                   # a validation family, or UNVALIDATED
    tasks: int
    time_us: float                # summed task time
    share: float                  # of the run's summed task time, 0..1
    n: int                        # validation rows of the family on this generation (0: none)
    median_abs_error: float | None
    bias: float | None            # the family's median ratio (> 1: the model is slow)
    first_n: int = 0              # the family's rows with a ratio at first sight
    first_sight_error: float | None = None   # their median |first_ratio - 1|

    @property
    def validated(self) -> bool:
        return self.n > 0

    @property
    def cell(self) -> str:
        """The op summary CSV cell: the family's median |error| in %, or "unvalidated"."""
        if not self.validated or self.median_abs_error is None:
            return UNVALIDATED
        return f"{100 * self.median_abs_error:.1f}%"

    @property
    def first_sight_cell(self) -> str:
        """The family's median |error| at first sight and its row count ("38.2% (9)"), or
        "-" when the op is unvalidated or its family has no first-sight rows."""
        if not self.validated or self.first_sight_error is None:
            return "-"
        return f"{100 * self.first_sight_error:.1f}% ({self.first_n})"


@dataclass(frozen=True)
class BandConfidence:
    """One kernel-duration band of a run: the share of task time in tasks of that simulated
    duration, and the generation's msprof rows of that size (n 0: none)."""

    band: str
    tasks: int
    share: float
    n: int
    median_abs_error: float | None
    bias: float | None


@dataclass(frozen=True)
class Confidence:
    """`Result.confidence()`: what the validation corpus says about this run's op mix.

    ops: per op type (largest share first). validated_share / unvalidated_share: of the summed
    task time. expected_error: the time-weighted mean of the validated ops' family median
    |error| (None when nothing is validated): a typical error, not a bound.
    first_sight_error: the same mean of the families' median |error| at first sight (each
    row's ratio under the model of the commit that added it, before any change it motivated:
    how the model did on kernels it had not been fitted to), over the validated ops whose
    family has such rows (`first_sight_share` of the time; None when none has)."""

    chip: str
    generation: str | None
    ops: tuple[OpConfidence, ...]
    validated_share: float
    unvalidated_share: float
    expected_error: float | None
    table_meta: dict[str, Any] = field(default_factory=dict)
    task_family: dict[int, str] = field(default_factory=dict, repr=False)
    #: whole-model validation rows on this generation ("model_training", "model_inference"):
    #: context only, not weighed into the figures (a step's error mixes every family's)
    models: dict[str, FamilyError] = field(default_factory=dict)
    first_sight_error: float | None = None
    first_sight_share: float = 0.0
    #: the run's task time by simulated kernel duration, smallest band first (`size_band`),
    #: with the generation's msprof kernel rows of that size: context, not weighed above
    bands: tuple[BandConfidence, ...] = ()
    #: the generation's validation rows timed as eager calls (host time included): context
    #: for a run in eager mode, not weighed above (None: no such rows)
    eager_calls: EagerCallError | None = None
    #: the run is a sequence of synchronised eager calls (`simulate(mode="eager")`): the line
    #: names the eager-call rows' error, whose host share the family figures leave out
    eager_run: bool = False

    @property
    def small_kernels(self) -> BandConfidence | None:
        """The smallest band, when it holds time and the generation has rows in it."""
        b = self.bands[0] if self.bands else None
        return b if b is not None and b.share > 0 and b.n > 0 else None

    @property
    def unvalidated(self) -> tuple[str, ...]:
        """Op types with time in unvalidated families, largest share first (an op type
        whose tasks fall in two families names the family: "MatMul [batch_matmul]")."""
        return tuple(dict.fromkeys(self.label(o) for o in self.ops if not o.validated))

    def label(self, o: OpConfidence) -> str:
        """The op type, with its family when the type's tasks fall in two families."""
        twice = sum(x.op_type == o.op_type for x in self.ops) > 1
        return f"{o.op_type} [{o.family}]" if twice else o.op_type

    def family(self, op_type: str) -> OpConfidence | None:
        return next((o for o in self.ops if o.op_type == op_type), None)

    def cell(self, task: TaskRecord) -> str:
        """The op summary CSV cell of one task."""
        fam = self.task_family.get(task.task_id)
        row = next((o for o in self.ops if o.op_type == task.op_type and o.family == fam),
                   None)
        return row.cell if row is not None else UNVALIDATED

    def __str__(self) -> str:
        if self.generation is None:
            return (f"confidence: no validation rows for chip {self.chip} (unknown "
                    f"generation); every op unvalidated")
        head = f"{100 * self.validated_share:.0f}% of time in validated families"
        if self.expected_error is not None:
            head += f", median error {100 * self.expected_error:.0f}%"
        if self.first_sight_error is not None:
            head += f", {100 * self.first_sight_error:.0f}% at first sight"
            if self.first_sight_share < self.validated_share - 0.005:
                head += f" (on {100 * self.first_sight_share:.0f}% of time)"
        head += f" ({self.generation} rows)"
        small = self.small_kernels
        if (small is not None and small.share >= SMALL_KERNEL_LINE_SHARE
                and small.median_abs_error > (self.expected_error or 0.0)):
            lean = "fast" if small.bias < 1 else "slow"
            under = small.band.replace("< ", "under ")
            head += (f"; {100 * small.share:.0f}% of time in kernels {under}, where "
                     f"{self.generation} kernel rows are off by "
                     f"{100 * small.median_abs_error:.0f}% (model {lean})")
        if self.eager_run and (e := self.eager_calls) is not None:
            lean = "fast" if e.bias < 1 else "slow"
            head += (f"; as eager calls, where {self.generation} rows are off by "
                     f"{100 * e.median_abs_error:.0f}% (model {lean})")
        names = self.unvalidated
        if not names:
            return head
        shown = ", ".join(names[:5]) + (f" +{len(names) - 5} more" if len(names) > 5 else "")
        return f"{head}; unvalidated: {shown} ({100 * self.unvalidated_share:.0f}%)"

    def table(self, top: int | None = None) -> str:
        """Per op type: share, family, rows, median |error|, bias, and the family's median
        |error| at first sight with its row count (largest share first)."""
        head = ("op type", "share", "family", "rows", "median |error|", "bias",
                "first sight (rows)")
        body = [(self.label(o), f"{100 * o.share:.1f}%", o.family, o.n or "-",
                 "-" if o.median_abs_error is None else f"{100 * o.median_abs_error:.1f}%"
                 + (" (few rows)" if 0 < o.n < FEW_ROWS else ""),
                 "-" if o.bias is None else f"{o.bias:.2f}", o.first_sight_cell)
                for o in (self.ops if top is None else self.ops[:top])]
        widths = [max(len(str(r[i])) for r in [head, *body]) for i in range(len(head))]
        fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
        models = [f"{m.family}: {m.n} rows, median |error| {100 * m.median_abs_error:.1f}%, "
                  f"bias {m.bias:.2f}" for m in self.models.values()]
        tail = [f"whole-model rows on this generation (not weighed above): "
                f"{'; '.join(models)}"] if models else []
        sized = [f"{b.band}: {100 * b.share:.1f}% of time"
                 + (f", {b.n} rows, median |error| {100 * b.median_abs_error:.1f}%, bias "
                    f"{b.bias:.2f}" if b.n else ", no rows")
                 for b in self.bands if b.share > 0]
        if sized:
            tail.append(f"by simulated kernel time (msprof kernel rows of this generation): "
                        f"{'; '.join(sized)}")
        if (e := self.eager_calls) is not None:
            tail.append(f"eager calls on this generation (host time included; not weighed "
                        f"above): {e.n} rows, median |error| {100 * e.median_abs_error:.1f}%, "
                        f"bias {e.bias:.2f}")
        return "\n".join([f"confidence on {self.chip} ({self.generation or 'unknown'} "
                          f"generation): {self}", fmt(head), "-" * (sum(widths) + 10),
                          *map(fmt, body), *tail])

    def as_dict(self) -> dict[str, Any]:
        return {"chip": self.chip, "generation": self.generation,
                "validated_share": self.validated_share,
                "unvalidated_share": self.unvalidated_share,
                "expected_error": self.expected_error,
                "first_sight_error": self.first_sight_error,
                "first_sight_share": self.first_sight_share, "line": str(self),
                "ops": [o.__dict__.copy() for o in self.ops],
                "bands": [b.__dict__.copy() for b in self.bands],
                "models": {k: v.__dict__.copy() for k, v in self.models.items()},
                "eager_calls": (self.eager_calls.__dict__.copy()
                                if self.eager_calls is not None else None)}


def confidence(trace: Trace, members: Mapping[str, Sequence[str]] | None = None,
               table: ConfidenceTable | None = None, eager_run: bool = False) -> Confidence:
    """The confidence record of a trace (see the module docstring).

    members: op (node) name -> member op types of fused nodes (a task named "<op>#<k>", a
    batch-split chunk, looks its node up without the suffix); without it fused types are read
    by name. table: the shipped table by default. eager_run: the trace is of synchronised
    eager calls (the line then names the generation's eager-call rows)."""
    table = table if table is not None else load_table()
    gen = generation(trace.chip)
    members = members or {}
    groups: dict[tuple[str, str], list[TaskRecord]] = {}
    task_family: dict[int, str] = {}
    for t in trace.tasks:
        inner = members.get(t.op_name) or members.get(t.op_name.split("#")[0]) or ()
        fam = family_of(t.op_type, inner, t.input_shapes)
        task_family[t.task_id] = fam
        groups.setdefault((t.op_type, fam), []).append(t)
    total = sum(t.duration for t in trace.tasks)
    ops = []
    for (op_type, fam), tasks in groups.items():
        cyc = sum(t.duration for t in tasks)
        e = table.get(fam, gen)
        ops.append(OpConfidence(op_type, fam, len(tasks), trace.us(cyc),
                                cyc / total if total > 0 else 0.0,
                                e.n if e else 0, e.median_abs_error if e else None,
                                e.bias if e else None, e.first_n if e else 0,
                                e.first_median_abs_error if e else None))
    ops.sort(key=lambda o: (-o.share, o.op_type))
    val = sum(o.share for o in ops if o.validated)
    weighted = sum(o.share * o.median_abs_error for o in ops
                   if o.validated and o.median_abs_error is not None)
    unval = sum(o.share for o in ops if not o.validated) if ops else 0.0
    seen = [o for o in ops if o.validated and o.first_sight_error is not None]
    seen_share = sum(o.share for o in seen)
    first = (sum(o.share * o.first_sight_error for o in seen) / seen_share
             if seen_share > 0 else None)
    models = {f: e for f in MODEL_FAMILIES if (e := table.get(f, gen)) is not None}
    by_band: dict[str, list[TaskRecord]] = {b: [] for b in size_bands()}
    for t in trace.tasks:
        by_band[size_band(trace.us(t.duration))].append(t)
    bands = []
    for label, tasks in by_band.items():
        e = table.band(gen, label)
        bands.append(BandConfidence(label, len(tasks),
                                    sum(t.duration for t in tasks) / total if total > 0 else 0.0,
                                    e.n if e else 0, e.median_abs_error if e else None,
                                    e.bias if e else None))
    return Confidence(trace.chip.name, gen, tuple(ops), val, unval,
                      weighted / val if val > 0 else None, dict(table.meta), task_family,
                      models, first, seen_share, tuple(bands), table.eager_calls(gen),
                      eager_run)


def fused_members(nodes: Iterable[Any]) -> dict[str, tuple[str, ...]]:
    """node name -> member op types, for the fused nodes (with a subgraph) among `nodes`."""
    return {n.name: tuple(m.op_type for m in n.subgraph.nodes)
            for n in nodes if getattr(n, "subgraph", None) is not None}


__all__ = ["UNVALIDATED", "GENERATIONS", "OP_FAMILY", "ANCHOR_ORDER", "SIZE_BANDS_US",
           "generation", "size_band", "size_bands", "family_of", "split_fused_type",
           "FamilyError", "SizeBandError", "EagerCallError", "ConfidenceTable", "load_table",
           "OpConfidence", "BandConfidence", "Confidence", "confidence", "fused_members"]
