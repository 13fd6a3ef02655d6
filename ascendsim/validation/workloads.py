"""Build the graph a corpus row measured: a one-op graph, a built-in model, or a DMA probe.

Op rows become a one-op `Graph` named "op" with the row's input shapes, dtypes and
attributes; an input with a ``const`` value becomes a constant of that value (a vector-scalar
operand). When the row's data is warm, every non-constant input is first produced by a cheap
warm-up task (a Relu named ``warm_<i>``) so that it is resident in L2 when the measured op
runs, as it is in a benchmark loop that calls the op repeatedly; the warm-up tasks are not
measured. Cold rows read their inputs from HBM (the lowering's graph inputs are not in L2).
An input's stated `format` (FRACTAL_NZ, NC1HWC0) becomes the graph input's layout when the
lowering reads that format in place (element-wise, broadcast, reduce and segment ops), so a
LayerNorm measured on NZ data takes CANN's NZ kernel path (`_layout`).

Looped rows in steady state. A warm (or unknown) op row timed by msprof over a benchmark loop
(`msprof_kernel`) or as a loop of back-to-back eager calls (`eager_call` with `loop` or a
throughput metric) measures a call that meets what the previous call left in L2: its
output, dirty (L2 is write-back; the allocator's freed block is not written back by
anyone), and whatever of the inputs survived. So the graph runs the op `LOOP_CALLS` times on
the same inputs, earlier calls as nodes named ``prev_call_<i>`` whose outputs are graph
outputs (the user's tensors of earlier iterations, never dropped from L2 unwritten), and the
measured call (node "op") is the last; its fills evict the previous output and pay its
write-back, as each call of the real loop does. Three calls: the second still finds the
inputs dirty from their warm-up producers (its fills evict them with a write-back no call of a
long loop pays: the loop's input lines are clean once refilled), the third finds them as the
loop does. Assumptions: the earlier outputs are distinct tensors (a loop alternating two
output blocks overwrites the older one in place; the model evicts it, writing back what of it
is still dirty, which overstates a call whose inputs and two outputs fit in L2 together only
when that sum exceeds L2); the inputs' format conversions (TransData) run once, before the
first call, and count for the measured call. Cold rows (L2 flushed between calls),
instruction-level rows (``measure`` = "pipe:P" or "launch") and aclnn chain rows (below) run
the op once.

A cold row whose source times with a harness that flushes L2 by writing a buffer
(`FLUSH_HARNESSES`, by the repository of the row's source table) meets an L2 full of that
buffer's dirty lines, not an empty one: triton's do_bench zeroes a buffer before every timed
call (`cache.zero_()`; on the NPU driver of triton-ascend the buffer is 192 MiB,
`get_empty_cache_for_benchmark`), the L2 allocates on write (msprof's L2Cache events count
`write_cache_miss_allocate`), and a line it replaces must first be written back to GM,
"occupying GM bandwidth" (Ascend C best practices, "Set a reasonable L2 CacheMode"). So the
graph writes that buffer first (node "warm_flush", a graph output: user memory, written back
when evicted, never dropped) and the measured call's fills pay the write-backs. A buffer at
least as large as the L2 leaves every line dirty, so its exact size matters only through that.
Whether the flush also leaves the measured kernel's code out of the cores' instruction caches
depends on the flush kernel: a CANN kernel binary (`cache.zero_()`) evicts it, a harness's own
store loop (`SMALL_CLEAR_KERNEL_HARNESSES`) does not.

An op row whose ``cann_op`` is in `CANN_CHAINS` measured one aclnn call that launches a chain
of kernels; its inputs are the aclnn call's, and the graph is the chain as the aclnn source
builds it (the main op is the node "op", the others "op_<step>"). Such a row's kernel time is
every kernel of the call (`measures_whole_call`). ``Addmv`` (ops-nn
matmul/addmv/op_host/op_api/aclnn_addmv.cpp, inputs self [M], mat [M, K], vec [K]; attrs
alpha, beta, default 1): vec is unsqueezed to [K, 1] (a view), MatMul(mat, vec) gives [M, 1],
squeezed to [M] (a view); alpha != 1 adds a Mul of the product, beta != 1 a Mul of self; an
Add of the two gives the output (same dtypes: the source's Casts and its final Cast/ViewCopy
into a contiguous output of the promoted dtype launch nothing).

An op row whose ``cann_op`` is in `CANN_FUSIONS` measured one fused kernel CANN's UB fusion
formed around the op (a profile's ``FusionOp_Conv2D_BNTrainingReduce``): the graph adds the
kernel's other members after the op ("op_1", ...), the row runs with fusion on, so the
simulator's own passes fuse them (passes/training_fusion.py), and the kernel time is the
task(s) carrying those nodes (`measured_nodes`).

Model rows use `ascendsim.models` builders through `MODELS` (a data table: model name ->
inference builder, training-step builder, and the size arguments the row gives).
`precision` maps to the dtype through `PRECISION_DTYPES` ("mixed" = float16 compute with the
float32 master weights the training steps keep). Transformer models deeper than
`EXTRAPOLATE_ABOVE_LAYERS` are simulated at 1 and 2 layers and extrapolated linearly in the
layer count (every encoder layer is the same graph), because a 24-layer training step takes
minutes to fuse; `model_plan` says which graphs a row needs.

Decoder rows build `ascendsim.models.decoder` (a preset, with the row's config overrides) for
the measured step: prefill of seq_len tokens after context_len cached ones, or one decode
token per sequence against context_len cached tokens. Decoder layers are identical graphs,
so a model deeper than `EXTRAPOLATE_ABOVE_LAYERS` is simulated at 1 and 2 layers and
extrapolated linearly (the embedding, final norm and LM head are the constant part). The
layers' times are equal up to their kernels' cold starts: on a split chip the vector kernels
take the AIV cores in turn (`sim.cores.Pool`), so a kernel on fewer blocks than the AIVs
may start on other cores in another layer (a 4-layer toy decoder: 0.2 % from the whole step;
a 7B decode or prefill, whose kernels fill the AIVs: exact).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import models
from ..errors import ConfigError, GraphError
from ..ir import Graph
from ..ir.graph import KERNEL_ATTRS
from ..ir.registry import Category, get_op
from ..lower.formats import FRACTAL, c0_of
from ..models.decoder import decoder_config
from .corpus import CorpusRow

#: corpus precision -> the dtype the model builders take
PRECISION_DTYPES = {"fp16": "float16", "float16": "float16", "mixed": "float16",
                    "amp": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16",
                    "fp32": "float32", "float32": "float32", "int8": "int8"}

#: the name of the measured node in an op row's graph
OP_NODE = "op"
#: op type of the warm-up task that leaves an input in L2 (a copy-like vector op)
WARM_OP = "Relu"
#: name of the node that writes a cold row's flush buffer (the `warm_` prefix: not measured)
FLUSH_NODE = "warm_flush"
#: bytes each cold-timing harness writes to flush L2 before a timed call, by the repository
#: of a row's source table (module note): triton.testing.do_bench with the NPU driver of
#: triton-ascend (`get_empty_cache_for_benchmark`: 192 MiB of int32, `clear_cache`:
#: `cache.zero_()`), which FlagGems' and FlagGems-vllm's 'kernel' mode call; pto-dsl's own
#: do_bench zeroes 256 MB (ptodsl/utils/bench.py, quoted in its rows' notes); MindSpore AKG's
#: NPU profiler, with which its verifier times the torch reference by default
#: (akg_agents/python/akg_agents/op/verifier/kernel_verifier.py `_generate_base_benchmark_code`,
#: `clear_l2_cache: bool = True`), stores zeros over an int32 buffer of the device's
#: L2_cache_size, 192 MiB when torch_npu reports none (op/verifier/l2_cache_clear.py), before
#: every timed call (op/verifier/profiler.py `profiler_npu_core`)
FLUSH_HARNESSES: dict[str, int] = {
    "github.com/Ascend/triton-ascend": 192 * 2**20,
    "github.com/flagos-ai/FlagGems": 192 * 2**20,
    "github.com/flagos-ai/FlagGems-vllm": 192 * 2**20,
    "github.com/huawei-csl/pto-dsl": 256 * 2**20,
    "github.com/mindspore-ai/akg": 192 * 2**20,
}
#: flushing harnesses whose clear kernel is a loop of stores of their own (AKG's
#: `AKG_l2cache_clear`, a Triton kernel on every vector core), a few instructions against an
#: AIV's 16 KB instruction cache (Ascend C ICachePreLoad reference), so the measured kernel's
#: code, cached by the call before, mostly survives it; `cache.zero_()` runs a CANN kernel
#: binary instead
SMALL_CLEAR_KERNEL_HARNESSES = frozenset({"github.com/mindspore-ai/akg"})
#: the harnesses that run a kernel of their own on the cores just before each timed call, so
#: that the measured kernel's cores last ran another kernel (`icache_start`), by the repository
#: of a cold row's source table: the flushing do_bench harnesses (`FLUSH_HARNESSES`: their
#: `cache.zero_()` is a kernel over the whole buffer) and msprof op's kernel replay, which
#: clears L2 with a DFX kernel over every core before the launch (Ascend/msopcom
#: `DataCollectInDevice::ReplayOnce`, `ClearL2Cache`; docs/corpus.md, "Rows timed with msprof
#: op"): the pyasc torch_npu rows and Huawei's asc-devkit samples (msopprof); and CANN-Bench's
#: evaluator, which runs a MatMul and a ReduceMax over 192 MiB before every timed call
#: (hicann/cann-bench src/kernel_eval/eval/perf_eval.py `_boost_freq_and_clear_cache`): its
#: reads leave the L2 full of clean lines, evicted without a write-back, so it needs no flush
#: node (`FLUSH_HARNESSES`), only the cold code
CLEARING_HARNESSES = frozenset({*FLUSH_HARNESSES.keys() - SMALL_CLEAR_KERNEL_HARNESSES,
                                "github.com/compiler-team-ru/pyasc",
                                "github.com/mirror-cann/asc-devkit",
                                "github.com/hicann/cann-bench"})
#: calls of a looped op row simulated back to back; the last one is measured (module note)
LOOP_CALLS = 3
#: name prefix of the earlier calls of a looped op row (not measured)
PREV_CALL = "prev_call_"


@dataclass(frozen=True)
class ModelSpec:
    """How to build one model: builders for each phase, the size keys they take, and fixed
    keyword arguments (e.g. BERT-base's hidden size for the generic training step)."""

    inference: str
    training: str
    sizes: tuple[str, ...]                    # row keys passed through (batch, seq_len, image)
    inference_kwargs: tuple[tuple[str, Any], ...] = ()
    training_kwargs: tuple[tuple[str, Any], ...] = ()
    layers: int = 0                            # encoder layers (0: not a layered transformer)
    unit: str = "samples"                      # what one sample is: samples, images, tokens


_BERT_BASE = (("hidden", 768), ("heads", 12), ("ffn", 3072))
_BERT_LARGE = (("hidden", 1024), ("heads", 16), ("ffn", 4096))

#: model name (as rows spell it) -> how to build it
MODELS: dict[str, ModelSpec] = {
    "resnet50": ModelSpec("resnet50", "resnet50_training_step", ("batch", "image"),
                          unit="images"),
    "bert_base": ModelSpec("bert", "bert_training_step", ("batch", "seq_len"),
                           _BERT_BASE, _BERT_BASE, layers=12),
    "bert_large": ModelSpec("bert", "bert_training_step", ("batch", "seq_len"),
                            _BERT_LARGE, _BERT_LARGE, layers=24),
}
MODEL_ALIASES = {"resnet-50": "resnet50", "resnet50_v1.5": "resnet50", "bert-base": "bert_base",
                 "bert-large": "bert_large", "bert_base_uncased": "bert_base",
                 "bert-base-uncased": "bert_base", "bert-large-uncased": "bert_large"}
#: transformers deeper than this are simulated at 1 and 2 layers and extrapolated
EXTRAPOLATE_ABOVE_LAYERS = 2


def model_spec(name: str) -> ModelSpec:
    """The build recipe of a model named in a row; ConfigError naming the valid models."""
    key = MODEL_ALIASES.get(name.lower(), name.lower())
    if key not in MODELS:
        raise ConfigError(f"unknown model {name!r}; the corpus can build "
                          f"{', '.join(MODELS)} (aliases {', '.join(MODEL_ALIASES)})")
    return MODELS[key]


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def workload_key(row: CorpusRow) -> tuple:
    """A hashable key of what a row builds (rows that build the same graph share it)."""
    return (_freeze(row.workload), row.data)


# ----------------------------------------------------------------------------- op rows
def build_op_graph(row: CorpusRow) -> Graph:
    """The op graph of an op row (the measured node "op"), with warm-up producers for warm
    data and, for a looped row, the earlier calls before it (`loop_calls`)."""
    warm = row.data in ("warm", "unknown")
    key = ("op", _freeze(row.workload), warm, loop_calls(row), flush_bytes(row))
    if key not in _GRAPHS:
        _GRAPHS[key] = _op_graph(row.workload, warm, key[3], key[4])
    return _GRAPHS[key]


def flush_bytes(row: CorpusRow) -> int:
    """Bytes of the buffer a cold row's timing harness writes before the call to flush L2
    (`FLUSH_HARNESSES`; 0: the row's source flushes no such way, or the row is not cold)."""
    if row.data != "cold":
        return 0
    return FLUSH_HARNESSES.get(row.source_table.split(":", 1)[0], 0)


def icache_start(row: CorpusRow) -> str:
    """The cores' instruction caches when a row's run starts (`simulate(icache=)`): "cold"
    where the measured kernel follows other kernels on its cores - a whole model or decoder
    step, a cold row whose harness runs a kernel of its own just before the call
    (`CLEARING_HARNESSES`), an op profiled inside a graph whose profile shows its instruction
    cache missing (``icache = "cold"``); else "warm", a loop of the measured call (its earlier
    calls cached its code)."""
    if row.workload.get("kind", "op") != "op" or row.workload.get("icache") == "cold":
        return "cold"
    clearing = row.source_table.split(":", 1)[0] in CLEARING_HARNESSES
    return "cold" if row.data == "cold" and clearing else "warm"


def loop_calls(row: CorpusRow) -> int:
    """How many back-to-back calls of the op a row's graph runs (see the module note); one
    for an op profiled inside a graph (``icache = "cold"``: it follows its producers, not an
    earlier call of itself)."""
    w = row.workload
    if w.get("icache") == "cold":
        return 1
    measure = str(w.get("measure", "task"))
    looped = row.timing == "msprof_kernel" or (
        row.timing == "eager_call" and (row.metric == "throughput" or bool(w.get("loop"))))
    if (not looped or row.data not in ("warm", "unknown") or measure == "launch"
            or measure.startswith("pipe:") or w.get("cann_op", "") in CANN_CHAINS):
        return 1
    return LOOP_CALLS


def is_earlier_call(name: str) -> bool:
    """Whether a task or node name belongs to a looped row's earlier calls (not measured):
    the call itself or the format conversion of its output."""
    return PREV_CALL in name


#: graphs built so far, by workload key (rows sharing a workload share the graph)
_GRAPHS: dict[tuple, Graph] = {}


def _op_graph(w: Mapping[str, Any], warm: bool, calls: int = 1, flush: int = 0) -> Graph:
    op_type = w["op"]
    opdef = get_op(op_type)          # UnsupportedOpError names an unknown op
    chain = CANN_CHAINS.get(w.get("cann_op", ""))
    g = Graph(f"row_{w.get('cann_op') if chain else op_type}")
    args: list[Any] = []
    flushed: list[Any] = []
    if flush:
        # the harness's cache.zero_(): a fill of `flush` bytes, kept as user memory
        seed = g.input("flush_seed", (1,), "int32")
        shape = g.const(np.array([flush // 4], dtype=np.int64), name="flush_shape")
        flushed = g.add_node("Expand", [seed, shape], name=FLUSH_NODE)
    for i, spec in enumerate(w["inputs"]):
        dtype = spec.get("dtype", "float16")
        shape = _storage_shape(opdef, spec)
        if "const" in spec:
            args.append(g.const(np.full(shape, spec["const"], dtype=np.dtype(dtype)),
                                name=f"c{i}"))
            continue
        if "values" in spec:
            args.append(g.const(np.asarray(spec["values"], dtype=np.dtype(dtype)).reshape(shape),
                                name=f"c{i}"))
            continue
        x = g.input(f"x{i}", shape, dtype, _layout(opdef, spec))
        if warm and np.dtype(_np_dtype(dtype)).kind == "f":
            x = g.add_node(WARM_OP, [x], name=f"warm_{i}")[0]
        args.append(x)
    attrs = dict(w.get("attrs", {}))
    if chain is not None:
        if chain.op != op_type:
            raise GraphError(f"cann_op {w['cann_op']}: its chain's main op is {chain.op}, "
                             f"the row says op = {op_type!r}")
        g.output(*chain.build(g, args, attrs), *flushed)
        return g
    fusion = CANN_FUSIONS.get(w.get("cann_op", ""))
    if fusion is not None and fusion.op != op_type:
        raise GraphError(f"cann_op {w['cann_op']}: its fused kernel's head is {fusion.op}, "
                         f"the row says op = {op_type!r}")
    unknown = sorted(set(attrs) - set(opdef.attrs) - KERNEL_ATTRS)
    if unknown:
        raise GraphError(f"op {op_type}: unknown attribute(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(sorted(set(opdef.attrs) | KERNEL_ATTRS))}")
    attrs = {k: _attr(v) for k, v in attrs.items()}
    followers = fusion.followers if fusion is not None else ()
    earlier = []
    for c in range(calls - 1):
        earlier += _call(g, op_type, args, dict(attrs), f"{PREV_CALL}{c}", followers)
    outs = _call(g, op_type, args, attrs, OP_NODE, followers)
    g.output(*earlier, *outs, *flushed)
    return g


def _call(g: Graph, op_type: str, args: list[Any], attrs: dict[str, Any], name: str,
          followers: tuple[str, ...]) -> list[Any]:
    """One call of the row's op (node `name`) and, for a CANN fused kernel, the ops that read
    its first output (`name`_1, ...); every output is returned."""
    outs = g.add_node(op_type, args, attrs, name=name)
    head = outs[0]
    for i, follower in enumerate(followers, 1):
        outs += g.add_node(follower, [head], name=_member(name, i))
    return outs


def _member(call: str, i: int) -> str:
    """The node name of the i-th member (from 1) after a fused kernel's head node `call`."""
    return f"{call}_{i}"


def _layout(opdef, spec: Mapping[str, Any]) -> str:
    """The layout an op row's input is declared in: the row's `format` (FRACTAL_NZ,
    NC1HWC0) for ops the lowering reads in place in that format (element-wise, broadcast,
    reduce, segment ops: LayerNorm on NZ); ND for the rest, whose measured kernel took the
    stated format directly where the lowering would insert a TransData (a transpose of NZ
    data is CANN's ConfusionTransposeD, which the lowering does not model)."""
    fmt = spec.get("format", "ND")
    if opdef.category == Category.INJECTIVE or opdef.category > Category.SEGMENT:
        return "ND"
    return fmt if fmt in ("FRACTAL_NZ", "NC1HWC0") else "ND"


#: the names a row gives Conv2D's weight format, FRACTAL_Z (profiles print "FracZ")
FRACTAL_Z_NAMES = ("FracZ", "FRACTAL_Z")


def _storage_shape(opdef, spec: Mapping[str, Any]) -> tuple[int, ...]:
    """The shape an op row's input is built with: its logical shape, or, for an element-wise
    op on a FRACTAL_Z value (a conv weight [N, C, H, W] kept in the cube's format, read by a
    Cast or an optimizer update), the storage shape (C1 * H * W, N1, N0, C0) with C padded to
    C0 and N to N0 = 16. A TBE element-wise kernel is compiled for the storage shape GE gives
    it and moves every padded element: mindinsight's AlexNet profile prints conv1's 96 x 3 x
    11 x 11 weight as FracZ [121, 6, 16, 16] (5.3 times its logical size), and its update's
    block_dim 18 is what TBE's apply-op schedule makes of 185,856 elements
    (impl/util/util_apply_op_schedule.py `_execute_split_core`; public copy
    jizhuoran/caffe-huawei-atlas-convertor at ff9768e). Ops that read the format's axes
    (reductions, pooling, the cube) keep the logical shape."""
    shape = tuple(int(d) for d in spec["shape"])
    if (spec.get("format") not in FRACTAL_Z_NAMES or len(shape) != 4
            or opdef.category > Category.BROADCAST):
        return shape
    n, c, h, w = shape
    c0 = c0_of(spec.get("dtype", "float16"))
    return (-(-c // c0) * h * w, -(-n // FRACTAL), FRACTAL, c0)


def _np_dtype(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


def _attr(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# ----------------------------------------------------------------------------- aclnn chains
@dataclass(frozen=True)
class CannChain:
    """An aclnn call that launches several kernels: its main registry op and a builder that
    adds the chain to a graph from the call's inputs and attributes, returning the outputs."""

    op: str
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, float], ...]
    build: Callable[[Graph, list[Any], dict[str, Any]], list[Any]]


def _chain_args(name: str, chain: CannChain, args: list[Any], attrs: dict[str, Any]
                ) -> dict[str, Any]:
    if len(args) != len(chain.inputs):
        raise GraphError(f"cann_op {name}: takes {len(chain.inputs)} inputs "
                         f"({', '.join(chain.inputs)}), the row gives {len(args)}")
    valid = dict(chain.attrs)
    unknown = sorted(set(attrs) - set(valid))
    if unknown:
        raise GraphError(f"cann_op {name}: unknown attribute(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(valid)}")
    return {**dict(zip(chain.inputs, args)), **valid, **attrs}


def _scaled(g: Graph, x: Any, factor: float, name: str) -> Any:
    """x, or x times a scalar constant (aclnn's MulScalar) when the factor is not 1."""
    if float(factor) == 1.0:
        return x
    scale = g.const(np.full((1,), factor, dtype=np.float32), name=f"{name}_k", dtype=x.dtype)
    return g.add_node("Mul", [x, scale], name=name)[0]


def _addmv(g: Graph, args: list[Any], attrs: dict[str, Any]) -> list[Any]:
    a = _chain_args("Addmv", CANN_CHAINS["Addmv"], args, attrs)
    self_, mat, vec = a["self"], a["mat"], a["vec"]
    if mat.rank != 2 or vec.rank != 1 or self_.rank > 1:
        raise GraphError(f"cann_op Addmv: needs self [M] (or a scalar), mat [M, K], vec [K]; "
                         f"got {self_.shape}, {mat.shape}, {vec.shape}")
    col = g.add_node("Unsqueeze", [vec, g.const(np.array([1], np.int64), name="op_vec_axis")],
                     name="op_unsqueeze")[0]
    prod = g.add_node("MatMul", [mat, col], name=OP_NODE)[0]
    prod = g.add_node("Squeeze", [prod, g.const(np.array([1], np.int64), name="op_out_axis")],
                      name="op_squeeze")[0]
    prod = _scaled(g, prod, a["alpha"], "op_alpha")
    self_ = _scaled(g, self_, a["beta"], "op_beta")
    return g.add_node("Add", [prod, self_], name="op_add")


#: cann_op -> the kernel chain its aclnn call launches (see the module docstring)
CANN_CHAINS: dict[str, CannChain] = {
    "Addmv": CannChain("MatMul", ("self", "mat", "vec"), (("alpha", 1.0), ("beta", 1.0)),
                       _addmv),
}


@dataclass(frozen=True)
class CannFusion:
    """A fused kernel CANN's UB fusion forms around the row's op: the head op (node "op") and
    the ops that read its first output, in order (nodes "op_1", ...). The row's graph runs
    the simulator's own fusion passes, and its kernel time is the tasks that carry those
    nodes (one, when the simulator fuses them as CANN did: `measured_nodes`)."""

    op: str
    followers: tuple[str, ...]


#: cann_op -> the fused kernel a profile names (MindSpore/CANN FusionOp_<head>_<member>):
#: TbeConvBnreduceFusionPass's Conv2D + BNTrainingReduce (passes/training_fusion.py)
CANN_FUSIONS: dict[str, CannFusion] = {
    "FusionOp_Conv2D_BNTrainingReduce": CannFusion("Conv", ("BNTrainingReduce",)),
}


def is_cann_fusion(row: CorpusRow) -> bool:
    """Whether a row measured a fused kernel of `CANN_FUSIONS` (run with fusion on)."""
    return row.workload.get("kind", "op") == "op" and row.workload.get("cann_op") in CANN_FUSIONS


def measured_nodes(row: CorpusRow) -> frozenset[str]:
    """The graph nodes whose tasks make an op row's kernel time: "op", and the members of a
    CANN fused kernel ("op_1", ...)."""
    fusion = CANN_FUSIONS.get(row.workload.get("cann_op", "")) if is_cann_fusion(row) else None
    n = len(fusion.followers) if fusion is not None else 0
    return frozenset((OP_NODE, *(_member(OP_NODE, i) for i in range(1, n + 1))))


def measures_whole_call(row: CorpusRow) -> bool:
    """Whether a row's kernel time is every kernel its call launches (an aclnn chain)."""
    return row.workload.get("kind", "op") == "op" and row.workload.get("cann_op") in CANN_CHAINS


# ----------------------------------------------------------------------------- model rows
@dataclass(frozen=True)
class ModelPlan:
    """The graphs a model row needs: (layers, graph) pairs and the row's real layer count.

    One pair: simulate it as is. Two pairs (1 and 2 layers): extrapolate the step time
    linearly to `layers`."""

    graphs: tuple[tuple[int, Graph], ...]
    layers: int
    spec: ModelSpec


def model_plan(row: CorpusRow) -> ModelPlan:
    """The graph(s) of a model row (see the module docstring on layer extrapolation)."""
    w = row.workload
    spec = model_spec(w["model"])
    phase = w.get("phase", "inference")
    precision = str(w.get("precision", "fp16")).lower()
    if precision not in PRECISION_DTYPES:
        raise ConfigError(f"precision {precision!r}: expected one of "
                          f"{', '.join(PRECISION_DTYPES)}")
    kwargs = {k: w[k] for k in spec.sizes if k in w}
    kwargs["dtype"] = PRECISION_DTYPES[precision]
    layers = int(w.get("layers", spec.layers))
    if spec.layers and layers > EXTRAPOLATE_ABOVE_LAYERS:
        graphs = tuple((n, _model_graph(spec, phase, n, kwargs)) for n in (1, 2))
    else:
        graphs = ((layers, _model_graph(spec, phase, layers, kwargs)),)
    return ModelPlan(graphs, layers, spec)


def _model_graph(spec: ModelSpec, phase: str, layers: int, kwargs: dict[str, Any]) -> Graph:
    key = ("model", spec, phase, layers, _freeze(kwargs))
    if key not in _GRAPHS:
        _GRAPHS[key] = _build_model(spec, phase, layers, kwargs)
    return _GRAPHS[key]


def _build_model(spec: ModelSpec, phase: str, layers: int, kwargs: dict[str, Any]) -> Graph:
    if phase == "training":
        name, fixed = spec.training, dict(spec.training_kwargs)
    else:
        name, fixed = spec.inference, dict(spec.inference_kwargs)
    if spec.layers:
        fixed["layers"] = layers
    return models.get(name, **fixed, **kwargs)


# ----------------------------------------------------------------------------- decoder rows
def decoder_plan(row: CorpusRow) -> ModelPlan:
    """The graph(s) of a decoder row: the measured step at 1 and 2 layers (extrapolated to the
    model's layer count), or the whole model when it has at most 2 layers."""
    w = row.workload
    precision = str(w.get("precision", "fp16")).lower()
    if precision not in PRECISION_DTYPES:
        raise ConfigError(f"precision {precision!r}: expected one of "
                          f"{', '.join(PRECISION_DTYPES)}")
    overrides = dict(w.get("overrides", {}))
    if "layers" in w:
        overrides["layers"] = int(w["layers"])
    cfg = decoder_config(w["preset"], **overrides)     # ConfigError names a bad preset/field
    phase = w.get("phase", "prefill")
    kwargs = {"batch": int(w["batch"]), "phase": phase,
              "seq_len": int(w["seq_len"]) if phase == "prefill" else None,
              "context_len": int(w.get("context_len", 0)),
              "dtype": PRECISION_DTYPES[precision]}
    spec = ModelSpec("decoder", "", ("batch", "seq_len"), layers=cfg.layers, unit="tokens")
    counts = (1, 2) if cfg.layers > EXTRAPOLATE_ABOVE_LAYERS else (cfg.layers,)
    graphs = []
    for n in counts:
        key = ("decoder", _freeze(dict(w)), n)
        if key not in _GRAPHS:
            _GRAPHS[key] = models.decoder(cfg, layers=n, **kwargs)
        graphs.append((n, _GRAPHS[key]))
    return ModelPlan(tuple(graphs), cfg.layers, spec)


def decoder_tokens(row: CorpusRow) -> int:
    """Tokens one step of a decoder row processes: batch x prompt in prefill, batch in decode."""
    w = row.workload
    return int(w["batch"]) * (int(w["seq_len"]) if w.get("phase", "prefill") == "prefill"
                              else 1)


__all__ = ["build_op_graph", "loop_calls", "is_earlier_call", "LOOP_CALLS",
           "measures_whole_call", "CANN_CHAINS", "CannChain", "CANN_FUSIONS", "CannFusion",
           "is_cann_fusion", "measured_nodes",
           "model_plan", "decoder_plan", "decoder_tokens", "model_spec",
           "workload_key", "ModelPlan",
           "ModelSpec", "MODELS", "PRECISION_DTYPES", "OP_NODE", "EXTRAPOLATE_ABOVE_LAYERS"]
