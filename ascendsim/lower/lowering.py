"""`lower(graph, chip)`: every node of a graph becomes a task on an engine, in launch order.

Note on the model
-----------------
Engines. The registry says which unit runs an op (`get_op(t).unit_for(node, consts)`):
cube ops (MatMul, Gemm, Conv...) and vector ops become AI Core tasks, AI CPU ops (Pow) an
AI CPU task, `Unit.NONE` ops (reshape-like views) no task at all (their output aliases their
input). A fused node (op_type "FusedOp", `node.subgraph`) is ONE task: with fusion "UB" or
"GraphKernel" its intermediates stay in UB, it reads only its external inputs from GM and
writes only its outputs; its vector work is the sum of its parts; a cube op at its head keeps
its cube tiling and the rest runs on V per output tile (on split chips, as a second phase on
the AIV cores, reading the cube result back through L2). With fusion "L2" the inner ops stay
separate tasks whose intermediates (`attrs["l2_values"]`) are kept in L2; with
`attrs["batch_split"] = k` the chain is lowered k times on `chunk_batch` samples (tasks named
`<op>#<chunk>`, each chunk converting its own slice of the chain's inputs).

Formats. Activations feeding the cube live in NC1HWC0 (conv, C0 = the K fractal: 16, int8 32)
or FRACTAL_NZ (matmul, 16x16 blocks; on split chips (910B) MatMul takes and gives ND, converting
in flight: `cube_tiling.takes_nd`); element-wise, broadcast, reduce and segment ops keep the
5-D/NZ format of their input, so a chain conv -> bn -> relu -> conv converts nothing. Where a
value's format must change (an ND graph input feeding a conv; a 5-D value feeding a reshape,
a transpose, an AI CPU op or a graph output) one TransData task is inserted per (value,
format), not per consumer. Constants (weights) are assumed converted offline. Padded formats
cost their padded bytes.

Vector cost. An op's vector work is its instruction sequence (lower/vector_seq.py): the op's
row of `SEQUENCES` (Softmax: vconv, vcmax, vsub, vexp, vcadd, vdiv, vconv) or, for ops not in
that table, the sequence the registry's cost fields describe (`vec_instrs` instructions of its
`vec_class` plus its `vec_extra`; flops only feed the roofline). Each instruction costs its
256-byte repeats (a partial repeat is a masked full one) at its own rate per dtype
(`chip.vector_rate`), at least `vector_min_cycles`; reductions pay the reduce rate only for
their reduce tree's whole-reduce repeats; a fused node concatenates its members' sequences
and `explain()` shows them. An op whose `reads_inputs` is False (NPUGetFloatStatus) moves no
input bytes; its inputs only order it. An op on NC1HWC0 (FRACTAL_NZ) data whose other
outputs are per-channel (per-column) vectors reads it in place, keeps the format for its
same-rank outputs and writes the vectors in ND (BNTrainingReduce/Update,
LayerNormBetaGammaBackprop). A BINARY-class instruction whose op's operands other than its
largest have ONE element (x + 2.0, Mul by a broadcast scalar, Clip by scalar bounds, Max(x, 0))
is the scalar-operand form vadds/vmuls/vmaxs, which the hardware issues at the one-operand
(unary) rate (msKPP 910B1: 256 B/cycle vs 128 for vadd; `vec_class_of`).

Cube dtype. The cube runs int8 in its int8 mode, bfloat16 and float32 in the chip's own modes
when `chip.cube_mkn` has them (910B: fp32 at a quarter of the fp16 rate), and everything
else (float32 on 910/310, CANN's allow_fp32_to_fp16) in its float16 mode; GM and buffer
bytes stay those of the operand dtype.

L2. Residency is not decided here: the simulator's L2 cache (`ascendsim.sim.l2cache`) tracks
it while the program runs, shared by every core and stream, and decides when each GM move
starts what part of it hits. The lowering states only each task's own access pattern, the
same whatever ran before: a read's miss fraction when nothing of the tensor is resident
yet (its first read of each byte misses; repeated reads of it within the task, a GEMM
operand re-read by every tile column, hit L2 when the task's operands fit in half of L2,
else only reads shared by the cores of one wave, a gm x gn grid of concurrently running
tiles, hit), and the GM tensor each move touches (`GmFraction`). Writes land in L2 (write
fraction 0); the cache writes dirty data back to HBM on eviction and at the end of the
graph. The miss fraction of a move (decided at run time) drives both its HBM traffic and
the msKPP per-core de-rate. The static `Task.traffic` and roofline are those of a cold L2
with every write kept; the trace's task traffic is the simulated one.

Streams. With `streams=1` every task is on stream 0 in graph order. With more, a task
continues its first producer's stream when that producer is the stream's last task, else it
opens the least-used stream; a task waits for every producer (cross-stream events).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import ConfigError, GraphError, SimulationError, UnsupportedOpError
from ..hw.names import (
    DETAILS,
    ENGINE_AICORE,
    GM,
    TASK_AI_CORE,
    TASK_AI_CPU,
    TASK_AI_VECTOR_CORE,
    TASK_MIX_AIC,
)
from ..ir.graph import rebound_subgraph
from ..ir.registry import FUSED_OP, Category, Unit, get_op, weight_inputs
from ..ir.tensor import Value, itemsize
from .aicpu import lower_aicpu
from .attention import FUSED_HEAD_LOWERINGS, SPECIAL_LOWERINGS
from .bf16 import BF16_NOTE, bf16_vector_work, vconv_parts, widened
from .cube_tiling import GemmSpec, gemm_tiling, operand_read_bytes, takes_nd
from .matmul_format import ND2NZ_DMA_MAX_STRIDE, MatmulFormats, matmul_formats, nd2nz_head
from .memo import gemm_work, vector_work
from .program import CoreGroup, GmFraction, Phase, Program, Task
from .tiling import VecPart, VecSpec, cdiv, ceil_to
from .vector_seq import SeqPart, resolve, vclass_of_registry

ND, NC1HWC0, NZ = "ND", "NC1HWC0", "FRACTAL_NZ"

# Layout and model constants (not chip data: CANN's formats are the same on every chip, and the
# rest are rules of this model, named here once):
#: the fractal edge of FRACTAL_NZ (16 x 16 blocks) and NC1HWC0's C0 for 2- and 4-byte dtypes
FRACTAL = 16
#: NC1HWC0's C0 for 1-byte dtypes (the int8 K fractal is 32 wide)
FRACTAL_INT8 = 32
#: bytes of one L0C accumulator element: mmad accumulates fp16/bf16 in fp32 and int8 in int32
ACC_BYTES = 4
#: an operand with 1/8 or fewer of the elements of the op's largest value (a bias, a
#: per-channel scale, a per-row statistic) is broadcast from ND, never converted to the
#: 5-D or fractal format
SMALL_OPERAND_RATIO = 8


def is_small_operand(numel: int, largest: int) -> bool:
    """Whether an operand is small enough to stay ND beside a larger value (see above)."""
    return numel * SMALL_OPERAND_RATIO <= largest

FUSION_L2 = "L2"


def vec_class_of(opdef: Any, ins: list[Value]) -> str:
    """The chip vector class an op's registry `vec_class` runs at (module note, "Vector
    cost"): a BINARY op whose other operands have one element runs at the unary rate
    (vadds/vmuls/vmaxs take a scalar register operand)."""
    return vclass_of_registry(opdef, ins)


# ----------------------------------------------------------------------------- formats
def c0_of(dtype: str) -> int:
    """NC1HWC0's C0: 32 for 1-byte dtypes (the int8 K fractal), else 16."""
    return FRACTAL_INT8 if itemsize(dtype) == 1 else FRACTAL


def padded_numel(v: Value, fmt: str) -> int:
    """Elements a value occupies in a format (NC1HWC0 pads C to C0, NZ pads the last 2 dims)."""
    key = (v.shape, v.dtype, fmt)
    n = _PADDED.get(key)
    if n is None:
        shape = [int(d) for d in v.shape]
        if fmt == NC1HWC0 and len(shape) >= 3:
            shape[1] = ceil_to(shape[1], c0_of(v.dtype))
        elif fmt == NZ and len(shape) >= 2:
            shape[-1] = ceil_to(shape[-1], FRACTAL)
            shape[-2] = ceil_to(shape[-2], FRACTAL)
        n = math.prod(shape)
        if len(_PADDED) >= _PADDED_MAX:
            _PADDED.clear()
        _PADDED[key] = n
    return n


def padded_bytes(v: Value, fmt: str) -> int:
    return padded_numel(v, fmt) * itemsize(v.dtype)


#: padded_numel by (shape, dtype, format): every layer of a model asks for the same shapes
_PADDED: dict[tuple, int] = {}
_PADDED_MAX = 1 << 16


@dataclass
class TaskSpec:
    """What a lowering step hands `add_task`: the task's identity, phases, operands (value
    names and their formats), flops, and the facts worth explaining."""

    name: str
    op_type: str
    task_type: str
    phases: list[Phase]
    ins: list[str]
    outs: list[str]
    in_fmts: list[str]
    out_fmts: list[str]
    flops: int = 0
    notes: list[str] = field(default_factory=list)
    fused: tuple[str, ...] = ()
    cube_dtype: str = "float16"


# ----------------------------------------------------------------------------- cube ops
def cube_dtype(chip: Any, dtype: str, op_type: str = "", node: str | None = None) -> str:
    """The cube mode an operand dtype runs in: int8, the chip's bf16 or fp32 mode where it has
    one, else fp16 (CANN's allow_fp32_to_fp16 for fp32 on chips without an fp32 mode).
    bfloat16 on a chip without a bf16 mode (910, 310) is an UnsupportedOpError naming the op
    and the chip: such a chip cannot run it, and no CANN precision mode converts it."""
    if dtype in ("int8", "uint8"):
        return "int8"
    if dtype == "bfloat16":
        if chip.cube_mkn.bfloat16 is None:
            raise UnsupportedOpError(op_type or "cube op", node, detail=(
                f"bfloat16 operands need a bf16 cube mode, and {chip.name}'s cube has none "
                f"(its cube_mkn lists {chip_cube_modes(chip)}); use a 910B-family chip "
                f"or Cast the operands to float16"))
        return "bfloat16"
    if dtype == "float32" and chip.cube_mkn.float32 is not None:
        return "float32"
    return "float16"


def chip_cube_modes(chip: Any) -> str:
    """The dtypes the chip's cube has a mode for, for messages ("float16, int8")."""
    modes = chip.cube_mkn
    return ", ".join(f for f in ("float16", "bfloat16", "float32", "int8", "int4")
                     if getattr(modes, f, None) is not None)


@dataclass(frozen=True)
class CubeGeometry:
    """A cube op as a batched GEMM (batch x M x K x N), with a conv's row geometry for the
    img2col reads, whether a bias is accumulated in L0C, and the note `explain` shows."""

    batch: int
    m: int
    k: int
    n: int
    conv_rows: tuple[int, int, int, int, int] | None
    bias: bool
    note: str


class _Shaped(NamedTuple):
    """A shape standing in for a Value where only `.shape` is read (a weight gradient's view)."""

    shape: tuple


def conv_geometry(attrs: dict, transposed: bool, xv: Value, wv: Value, out_v: Value, k0: int,
                  has_bias: bool) -> CubeGeometry:
    """A convolution as an implicit GEMM: M = N*Ho*Wo, K = ceil(Cin/group)*kh*kw, N = Cout/group,
    one GEMM per group (a transposed conv's K is divided by the stride product)."""
    group = int(attrs.get("group", 1) or 1)
    n_, cin = int(out_v.shape[0]), int(xv.shape[1])
    cout = int(out_v.shape[1])
    ks = [int(d) for d in wv.shape[2:]]
    kh, kw = ks[0], int(np.prod(ks[1:])) if len(ks) > 1 else 1
    spatial_out = [int(d) for d in out_v.shape[2:]]
    m = n_ * int(np.prod(spatial_out))
    k = ceil_to(cin // group, k0) * kh * kw
    strides = attrs.get("strides") or [1] * len(ks)
    conv_rows = None
    if transposed:
        k = ceil_to(max(k // int(np.prod(strides)), k0), k0)
    else:
        pads = attrs.get("pads") or [0] * (2 * len(ks))
        win = int(xv.shape[-1]) + (int(pads[len(ks) - 1]) + int(pads[-1])
                                   if len(pads) >= 2 else 0)
        wo = spatial_out[-1] if len(spatial_out) > 1 else 1
        if len(ks) == 1:
            kh, kw = 1, ks[0]
        conv_rows = (wo, win, int(strides[0]), kh, kw)
    n = cout // group
    note = (f"implicit GEMM: M = N*Ho*Wo = {m}, K = ceil{k0}(Cin/group = {cin // group})"
            f"*kh*kw = {k}, N = Cout/group = {n}, group {group}")
    return CubeGeometry(group, m, k, n, conv_rows, has_bias, note)


def gemm_geometry(attrs: dict, xv: Value, wv: Value, out_v: Value, k0: int,
                  extra: Value | None) -> CubeGeometry:
    """A MatMul/Gemm as a batched GEMM; an extra rank <= 1 operand is a bias (L0C). M and K
    come from A (a matrix-vector product keeps A's M rows: its output drops N, not M), N from
    B; the batch is the output's leading dims beyond the matrix (or vector) ones."""
    ta = int(attrs.get("transA", 0) or 0)
    os_ = [int(d) for d in out_v.shape]
    xs = [int(d) for d in xv.shape]
    if xv.rank >= 2:
        m, k = (xs[-1], xs[-2]) if ta else (xs[-2], xs[-1])
    else:
        m, k = 1, xs[0]
    k = ceil_to(k, k0)
    n = os_[-1] if wv.rank >= 2 else 1
    matrix_dims = 2 if (xv.rank >= 2 and wv.rank >= 2) else 1 if (xv.rank >= 2 or wv.rank >= 2) \
        else 0
    batch = int(np.prod(os_[:len(os_) - matrix_dims])) if len(os_) > matrix_dims else 1
    bias = extra is not None and extra.rank <= 1
    return CubeGeometry(batch, m, k, n, None, bias, f"GEMM: batch {batch}, M {m}, K {k}, N {n}")


# ----------------------------------------------------------------------------- L2 reuse
def miss_fraction(unique: float, reads: float, fits: bool, share: int = 1) -> float:
    """L2 miss fraction of a task's reads of one tensor when none of it is resident yet (see
    the module note; the simulator's L2 cache scales it by what is resident at the time)."""
    if reads <= 0:
        return 1.0
    compulsory = min(1.0, unique / reads)
    if fits:
        return compulsory
    return min(1.0, max(compulsory, 1.0 / max(share, 1)))


# ----------------------------------------------------------------------------- lowering
#: "no value before" in `_Lowering._undo`
_UNSET = object()


class _Lowering:
    def __init__(self, graph, chip, streams: int) -> None:
        self.g = graph
        self.chip = chip
        self.tasks: list[Task] = []
        self.fmt: dict[str, str] = {}
        self.alias: dict[str, str] = {}
        self.producer: dict[str, int] = {}
        self.converted: dict[tuple[str, str], str] = {}
        #: the keys of `converted` by value (an L2 chain's chunks drop their inputs' ones)
        self._converted_by_root: dict[str, list[tuple[str, str]]] = {}
        #: inside a batch chunk of an L2 chain: each value it sets -> the value before
        #: (`_UNSET`: none), restored after the chunk (`set_value`)
        self._undo: dict[str, Any] | None = None
        #: `_node_seq` results by node key: [(constants read, by input index; result)]
        self._seq_memo: dict[tuple, list] = {}
        #: add_task's traffic and cube flag by the phases' memo templates (`_phase_facts`)
        self._facts: dict[tuple, tuple[dict, bool, float]] = {}
        #: full-size values of an L2 chain's external inputs and outputs (batch chunks read
        #: and write slices of them: the L2 cache sizes them whole)
        self.chain_full: dict[str, Value] = {}
        #: while a batch chunk of an L2 chain lowers: "#<chunk>", the suffix of the GM names
        #: of the values it writes inside the chain (see `gm_tensor`)
        self.chunk_tag = ""
        self.nstreams = streams
        self.stream_last: dict[int, int] = {}
        self.stream_count = [0] * streams
        self.small_consts = {k: v for k, v in graph.constants.items()
                             if isinstance(v, np.ndarray)}
        self.values: dict[str, Value] = dict(graph.values)
        # a graph input declared in a fractal layout sits in GM in that format
        for name in graph.inputs:
            if graph.values[name].layout in (NC1HWC0, NZ):
                self.fmt[name] = graph.values[name].layout
        #: rebound subgraphs by (fused node id, input shapes) (the node is kept alive)
        self._rebound_memo: dict[tuple, tuple[Any, Any]] = {}
        #: `values` whose shape `value` found static (speed only; `set_value` and the undo
        #: of an L2 chunk drop what they change)
        self._checked: dict[str, Value] = {}
        #: whether a shape is static, by shape (`sub_value`)
        self._static_shapes: dict[tuple, bool] = {}

    # -- helpers ---------------------------------------------------------------------------
    def root(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def is_const(self, name: str) -> bool:
        return self.root(name) in self.g.constants

    def set_value(self, name: str, v: Value) -> None:
        """Set a value's shape; inside a batch chunk of an L2 chain, undone after the chunk
        (`l2_fused`: every chunk starts from the values before the chain)."""
        undo = self._undo
        if undo is not None and name not in undo:
            undo[name] = self.values.get(name, _UNSET)
        self.values[name] = v
        self._checked.pop(name, None)

    def value(self, name: str) -> Value:
        v = self._checked.get(name)
        if v is not None:
            return v
        v = self.values.get(name)
        if v is None:
            raise GraphError(f"lowering: no value '{name}' in graph '{self.g.name}'")
        if not all(isinstance(d, int) for d in v.shape):
            raise GraphError(f"value '{name}' has symbolic shape {v.shape}; bind it "
                             f"(Graph.bind) before simulating")
        self._checked[name] = v
        return v

    def format_of(self, name: str) -> str:
        root = self.root(name)
        if root in self.g.constants:
            return "const"
        fmt = self.fmt
        return fmt.get(root, fmt.get(name, ND))

    def gm_tensor(self, name: str, fmt: str | None = None) -> tuple[str, int, int]:
        """(GM name, bytes, bytes this task covers) of a value as the L2 cache tracks it:
        views resolve to the value they alias; a batch chunk's slice of an L2 chain's input
        or output counts whole, the slice being what the chunk covers. A value a batch chunk
        writes inside the chain (an intermediate, a converted slice of an input) is the
        chunk's own (`<name>#<chunk>`): GE's memory assigner hands the next chunk the same
        block, but the cache must see this chunk's copy die after its last reader in the
        chunk, not after the last chunk's (the next chunks would write it back dirty)."""
        root = self.root(name)
        fmt = fmt or self.format_of(name)
        if fmt == "const":
            fmt = ND
        span = padded_bytes(self.value(name), fmt)
        if self.chain_full:
            v = self.chain_full.get(root)
            if v is not None:
                return root, padded_bytes(v, fmt), span
        if self.chunk_tag and root not in self.g.constants:
            root += self.chunk_tag
        return root, span, span

    def miss(self, name: str, reads: float, fits: bool = True, share: int = 1,
             fmt: str | None = None) -> GmFraction:
        """Miss fraction of `reads` bytes of `name` when none of it is resident (module
        note), naming the tensor for the simulator's L2 cache."""
        v = self.value(name)
        fmt = fmt or self.format_of(name)
        unique = padded_bytes(v, fmt)
        fits = fits and unique <= self.chip.l2_resident_bytes
        return GmFraction(miss_fraction(unique, reads, fits, share),
                          (self.gm_tensor(name, fmt),))

    def through(self, names: list[str], fmts: list[str]) -> GmFraction:
        """A write of `names` (in formats `fmts`) into GM: it lands in L2 (fraction 0); the
        simulator's L2 cache writes it back to HBM when it evicts it or at the end."""
        return GmFraction(0.0, tuple(self.gm_tensor(n, f) for n, f in zip(names, fmts)))

    def pick_stream(self, inputs: list[str]) -> int:
        if self.nstreams == 1:
            return 0
        for i in inputs:
            tid = self.producer.get(self.root(i))
            if tid is None:
                continue
            sid = self.tasks[tid].stream_id
            if self.stream_last.get(sid) == tid:
                return sid
            break
        return min(range(self.nstreams), key=lambda s: (self.stream_count[s], s))

    def add_task(self, spec: TaskSpec) -> Task:
        """Append a task (streams, dependencies, traffic, roofline) and update formats."""
        name, op_type, task_type, phases = spec.name, spec.op_type, spec.task_type, spec.phases
        ins, outs, out_fmts, flops = spec.ins, spec.outs, spec.out_fmts, spec.flops
        tid = len(self.tasks)
        sid = self.pick_stream(ins)
        producer = self.producer
        deps = sorted({producer[r] for i in ins if i and (r := self.root(i)) in producer})
        traffic, cube, memory = self._phase_facts(phases)
        compute = compute_cycles(self.chip, flops if task_type != TASK_AI_CPU else 0, cube,
                                 spec.cube_dtype)
        task = Task(tid, sid, name, op_type, task_type, tuple(phases), tuple(deps),
                    tuple(self.value(i) for i in ins), tuple(self.value(o) for o in outs),
                    tuple(spec.in_fmts), tuple(out_fmts), int(flops), traffic,
                    int(math.floor(max(compute, memory))),
                    tuple(spec.notes), spec.fused, compute_cycles=compute)
        self.tasks.append(task)
        self.stream_last[sid] = tid
        self.stream_count[sid] += 1
        for o, f in zip(outs, out_fmts):
            self.producer[o] = tid
            self.fmt[o] = f
        return task

    def _phase_facts(self, phases) -> tuple[dict, bool, float]:
        """The phases' traffic (`phase_traffic`, a fresh dict), whether they use the cube,
        and the traffic's `memory_cycles`; kept by the groups' memo templates when every
        group has one (equal templates: equal instructions but for GM tensor names, which
        none of these reads)."""
        key: tuple | None = ()
        for p in phases:
            templates = tuple(g.template for g in p.groups)
            if 0 in templates:
                key = None
                break
            key += ((p.engine, templates),)
        if key is not None:
            hit = self._facts.get(key)
            if hit is not None:
                return dict(hit[0]), hit[1], hit[2]
        traffic = phase_traffic(phases)
        cube = any(p for p in phases if p.engine == ENGINE_AICORE and _has_pipe(p, "M"))
        memory = memory_cycles(self.chip, traffic)
        if key is not None:
            self._facts[key] = (dict(traffic), cube, memory)
        return traffic, cube, memory

    # -- format conversion -----------------------------------------------------------------
    def ensure(self, name: str, fmt: str) -> str:
        """The name of `name` in format `fmt`, inserting one TransData task if needed."""
        have = self.format_of(name)
        if have == "const" or have == fmt or not name:
            return name
        key = (self.root(name), fmt)
        v = self.value(name)
        if key in self.converted:
            new = self.converted[key]
            # the converted value follows the shape seen now (an L2 chain's batch chunk)
            self.set_value(new, Value(new, v.shape, v.dtype, fmt))
            return new
        new = f"{v.name}@{fmt}"
        self.set_value(new, Value(new, v.shape, v.dtype, fmt))
        src_b, dst_b = padded_bytes(v, have), padded_bytes(v, fmt)
        n = max(padded_numel(v, have), padded_numel(v, fmt))
        spec = VecSpec(n, ((src_b / n, self.miss(name, src_b)),), dst_b / n,
                       self.through([new], [fmt]),
                       (VecPart("unary", v.dtype, max(src_b, dst_b) / n, "vec_transdata"),))
        groups, notes = vector_work(self.chip, spec, f"TransData {name}", self._vcores())
        self.add_task(TaskSpec(
            f"trans_data_{name}_{have}_to_{fmt}", "TransData", self._vtype(),
            [self._vphase(groups)], [name], [new], [have], [fmt], 0,
            notes + [f"format conversion {have} -> {fmt}: {src_b} B -> {dst_b} B"]))
        self.converted[key] = new
        self._converted_by_root.setdefault(key[0], []).append(key)
        return new

    def _vcores(self) -> int:
        return self.chip.vector_cores

    def _vtype(self) -> str:
        return TASK_AI_CORE if self.chip.coupled else TASK_AI_VECTOR_CORE

    def _vphase(self, groups: list[CoreGroup]) -> Phase:
        return Phase(ENGINE_AICORE, tuple(groups), vector_cores=not self.chip.coupled)

    # -- nodes -----------------------------------------------------------------------------
    def unit(self, node) -> Unit:
        return get_op(node.op_type, node.name).unit_for(node, self.small_consts)

    def run(self) -> None:
        for node in self.g.nodes:
            self.node(node)
        self.output_values = [self.ensure(o, ND) if self.format_of(o) not in (ND, "const")
                              else o for o in self.g.outputs]

    def node(self, node) -> None:
        if node.subgraph is not None and node.op_type == FUSED_OP:
            self.fused(node)
            return
        if node.op_type in SPECIAL_LOWERINGS:      # fused attention, KV cache, grouped matmul
            SPECIAL_LOWERINGS[node.op_type](self, node)
            return
        opdef = get_op(node.op_type, node.name)
        unit = self.unit(node)
        if unit == Unit.NONE:
            self.view(node)
        elif unit == Unit.CUBE:
            self.cube(node, node, [])
        elif unit == Unit.AICPU:
            self.aicpu(node)
        else:
            self.vector(node, [node], opdef.category)

    def view(self, node) -> None:
        src = next((i for i in node.inputs if i), None)
        if src is None:
            return
        if self.format_of(src) not in (ND, "const"):
            src = self.ensure(src, ND)
        for o in node.outputs:
            self.alias[o] = src
            self.fmt[o] = ND

    def aicpu(self, node) -> None:
        lower_aicpu(self, node)

    # -- vector ----------------------------------------------------------------------------
    def vector(self, node, parts: list, category: Category, fused: tuple[str, ...] = (),
               name: str | None = None, op_type: str | None = None,
               notes: list[str] | None = None) -> None:
        ext_in = [i for i in node.inputs if i]
        outs = list(node.outputs)
        if len(parts) == 1 and not get_op(parts[0].op_type, parts[0].name).reads_inputs:
            ext_in = []   # ordering-only inputs (module note, "Vector cost")
        keeps = category <= Category.SEGMENT
        # the special format of the main input survives element-wise/reduce work
        main = next((i for i in ext_in if not self.is_const(i)), None)
        fmt = ND
        out_fmts = [ND] * len(outs)
        if keeps and main is not None and self.format_of(main) in (NC1HWC0, NZ):
            fmt = self.format_of(main)
            keep = self.keeps_format(main, fmt, outs)
            if keep is None:
                fmt = ND
            else:
                out_fmts = [fmt if same else ND for same in keep]
        ins = []
        # an operand 8x smaller than the op's largest value (a per-channel or per-row
        # vector, a broadcast statistic) is read as it is
        value = self.value
        ext_vals = [value(i) for i in ext_in]
        out_vals = [value(o) for o in outs]
        biggest = max([v.numel for v in ext_vals] + [v.numel for v in out_vals])
        for i, v in zip(ext_in, ext_vals):
            small = is_small_operand(v.numel, biggest) or v.rank < 2
            if fmt == ND or small or self.is_const(i):
                ins.append(self.ensure(i, ND) if not self.is_const(i) and not small else i)
            else:
                ins.append(self.ensure(i, fmt))
        in_vals = [value(i) for i in ins]
        in_fmts = [self.format_of(i) for i in ins]
        in_b = [padded_bytes(v, fmt if f == fmt else ND) for f, v in zip(in_fmts, in_vals)]
        out_b = [padded_bytes(v, f) for v, f in zip(out_vals, out_fmts)]
        n = max([b // itemsize(v.dtype) for b, v in zip(in_b, in_vals)]) if in_vals else 1
        n = max([n] + [b // itemsize(v.dtype) for b, v in zip(out_b, out_vals)])
        n = max(n, 1)
        vparts, temp, flops, seq_notes = self.vec_parts(parts, n, outs, fmt=fmt)
        inputs = tuple((b / n, self.miss(i, b, fmt=f)) for i, b, f in zip(ins, in_b, in_fmts))
        through = self.through(outs, out_fmts)
        spec = VecSpec(n, inputs, sum(out_b) / n, through, tuple(vparts), temp)
        groups, vnotes = vector_work(self.chip, spec, node.name, self._vcores())
        if not ext_in and node.inputs:
            ins = [i for i in node.inputs if i]   # dependencies only: no bytes moved
            in_fmts = [self.format_of(i) for i in ins]
            vnotes = vnotes + ["inputs order the op only (no input bytes read)"]
        self.add_task(TaskSpec(name or node.name, op_type or node.op_type, self._vtype(),
                               [self._vphase(groups)], ins, outs, in_fmts, out_fmts, flops,
                               (notes or []) + seq_notes + vnotes, fused))

    def keeps_format(self, main: str, fmt: str, outs: list[str]) -> list[bool] | None:
        """Whether the op reads its main input in its special format `fmt` in place (None:
        convert it to ND) and, per output, whether the output keeps `fmt`. In place when
        every output keeps the input's rank or is a vector along the format's inner axis:
        for NC1HWC0 a per-channel vector (C,) (BNTrainingReduce's sums), for FRACTAL_NZ a
        per-column vector (last dim) (LayerNormBetaGammaBackprop's dgamma/dbeta, a bias
        gradient); such a vector output is ND."""
        mv = self.value(main)
        same = [self.value(o).rank == mv.rank for o in outs]
        axis = 1 if fmt == NC1HWC0 and mv.rank >= 3 else -1 if fmt == NZ and mv.rank >= 2 \
            else None
        channel = [axis is not None and self.value(o).rank == 1
                   and self.value(o).shape[0] == mv.shape[axis] for o in outs]
        if not all(s or c for s, c in zip(same, channel)):
            return None
        return same

    def vec_parts(self, nodes: list, n: int, ext_outs: list[str], scale: float = 1.0,
                  fmt: str = ND) -> tuple[list[SeqPart], float, int, list[str]]:
        """The vector instruction sequences of nodes (lower/vector_seq.py), concatenated, per
        element of a task of `n` elements; UB bytes/element of intermediates and fp32 working
        buffers; total flops; one note per node naming its sequence. `fmt`: the format the
        main input is read in (it can pick a kernel path, vector_seq.PATHS)."""
        parts: list[SeqPart] = []
        temp = 0.0
        total_flops = 0
        notes: list[str] = []
        for nd in nodes:
            opdef = get_op(nd.op_type, nd.name)
            ins = [self.sub_value(nd, i) for i in nd.inputs if i] if opdef.reads_inputs else []
            outs = [self.sub_value(nd, o) for o in nd.outputs]
            seq, work, text, flops, extra = self._node_seq(nd, opdef, ins, outs, n, ext_outs,
                                                           scale, fmt)
            total_flops += flops
            parts += seq
            temp += work
            notes.append(text if len(nodes) == 1 else f"{nd.name} ({nd.op_type}): {text}")
            for b in extra:
                temp += b
        return parts, temp, total_flops, notes

    def _node_seq(self, nd, opdef, ins: list, outs: list, n: int, ext_outs: list[str],
                  scale: float, fmt: str) -> tuple[list[SeqPart], float, str, int, list]:
        """One node's part of `vec_parts`: its sequence, working bytes, note, flops and the
        UB bytes per element of its outputs that stay inside the task. Kept by everything
        it reads but the names (op, attributes, operand shapes/dtypes/layouts, which outputs
        leave the task, n, scale, format), with the constant data it read checked on reuse:
        identical layers resolve once."""
        key = None
        akey = _attrs_key(nd.attrs)
        if akey is not None:
            key = (nd.op_type, akey, n, scale, fmt,
                   tuple((v.shape, v.dtype, v.layout) for v in ins),
                   tuple((v.shape, v.dtype, v.layout, v.name in ext_outs) for v in outs))
            for consts, hit in self._seq_memo.get(key, ()):
                if all(_same_const(self.const_value(ins[i].name), c) for i, c in consts):
                    seq, work, text, flops, extra = hit
                    return list(seq), work, text, flops, extra
        read: list[tuple[int, Any]] = []
        in_names = [v.name for v in ins]

        def const(name: str) -> Any:
            c = self.const_value(name)
            read.append((in_names.index(name) if name in in_names else -1, c))
            return c

        flops = int(opdef.flops(ins, outs, nd.attrs))
        big = max([v.numel for v in ins + outs] + [1])
        bf16 = bf16_vector_work(self.chip, opdef, nd.name, ins, outs)
        if bf16 is not None:   # bf16 math as fp32 between vconvs (lower/bf16.py)
            before, after = vconv_parts(ins, outs, scale / max(n, 1))
            ins, outs = widened(ins, bf16), widened(outs, bf16)
        seq, work, text = resolve(nd.op_type, opdef, ins, outs, nd.attrs,
                                  big / max(n, 1) * scale, const,
                                  self.chip.ub_align_bytes, fmt, self.chip.name)
        if bf16 is not None:
            seq = [*before, *seq, *after]
            text += f"; {BF16_NOTE}"
        extra = [o.numel * itemsize(o.dtype) / max(n, 1) * scale for o in outs
                 if o.name not in ext_outs]
        if key is not None and all(i >= 0 for i, _ in read):
            self._seq_memo.setdefault(key, []).append(
                (tuple(read), (tuple(seq), work, text, flops, extra)))
        return seq, work, text, flops, extra

    def const_value(self, name: str) -> Any:
        """The constant data of a value (a fused node's own constants first), or None."""
        sub = getattr(self, "_sub", None)
        if sub is not None and name in sub.constants:
            return sub.constants[name]
        return self.g.constants.get(self.root(name))

    def sub_value(self, node, name: str) -> Value:
        sub = getattr(self, "_sub", None)
        if sub is not None:
            v = sub.values.get(name)
            if v is not None:
                static = self._static_shapes.get(v.shape)
                if static is None:
                    static = self._static_shapes[v.shape] = all(isinstance(d, int)
                                                                for d in v.shape)
                if static:
                    return v
        return self.value(name)

    # -- cube ------------------------------------------------------------------------------
    def cube(self, node, head, tail: list, fused: tuple[str, ...] = (),
             name: str | None = None, op_type: str | None = None) -> None:
        chip = self.chip
        opdef = get_op(head.op_type, head.name)
        conv = opdef.conv
        x_name, w_name = head.inputs[0], head.inputs[1]
        extra = [i for i in head.inputs[2:] if i]
        # split chips' MatMul kernels take ND (nd2nz on the GM->L1 move) and give ND, unless
        # CANN's ND/NZ rule sends a 2-D MatMul through TransData to NZ (lower/matmul_format.py)
        nd = not conv and takes_nd(chip)
        formats = self.split_matmul_formats(head.op_type, x_name, w_name) if nd else None
        if formats is not None and not formats.nd_in:
            nd = False
        need = NC1HWC0 if conv else ND if nd else NZ
        x_name = self.ensure(x_name, need) if self.format_of(x_name) != NZ or not nd else x_name
        if not self.is_const(w_name) and (self.format_of(w_name) != NZ or not nd):
            w_name = self.ensure(w_name, need)
        xv, wv = self.sub_value(head, x_name), self.sub_value(head, w_name)
        out_v = self.sub_value(head, head.outputs[0])
        cdt = cube_dtype(chip, xv.dtype, head.op_type, head.name)
        m0, k0, n0 = chip.cube_shape(cdt)
        in_b = itemsize(xv.dtype)
        notes: list[str] = []
        if cdt == "bfloat16":
            notes.append(f"bfloat16 operands run in the cube's bf16 mode (cube_mkn.bfloat16 "
                         f"{m0}x{k0}x{n0} per cycle), accumulated in fp32 in L0C")
        if xv.dtype in ("float32", "float64") and cdt == "float16":
            notes.append(f"{xv.dtype} operands run in the cube's float16 mode (CANN "
                         f"allow_fp32_to_fp16 precision mode); GM bytes stay {xv.dtype}")
        if conv and opdef.conv_view is not None:     # a weight gradient: the Conv it equals
            v_attrs, *shapes = opdef.conv_view(head.attrs, xv.shape, wv.shape, out_v.shape)
            geo = conv_geometry(v_attrs, False, *(_Shaped(sh) for sh in shapes), k0, False)
            notes.append(f"{head.op_type}: the Conv of X^T {shapes[0]} by dY^T {shapes[1]}, "
                         f"read in place (no transposes)")
        elif conv:
            geo = conv_geometry(head.attrs, opdef.transposed, xv, wv, out_v, k0, bool(extra))
        else:
            geo = gemm_geometry(head.attrs, xv, wv, out_v, k0,
                                self.value(extra[0]) if extra else None)
        batch, m, k, n, conv_rows, bias = geo.batch, geo.m, geo.k, geo.n, geo.conv_rows, geo.bias
        notes.append(geo.note)
        if formats is not None:
            notes.append(f"formats: {formats.reason}")
        # the fused tail: element-wise ops per output element, extra inputs from GM
        out_names = list(node.outputs)
        out_fmt = NC1HWC0 if conv else ND if nd or (formats and formats.nd_out) else NZ
        out_vals = [self.value(o) for o in out_names]
        n_out = max(padded_numel(v, out_fmt) for v in out_vals)
        tail_in = [i for i in node.inputs if i and i not in head.inputs]
        if not bias:
            tail_in += extra
        tail_in = [self.ensure(i, out_fmt) if (not self.is_const(i) and not
                   is_small_operand(self.value(i).numel, n_out)) else i for i in tail_in]
        # output bytes per output element of the head's output
        head_out = self.sub_value(head, head.outputs[0])
        per_out = padded_numel(head_out, out_fmt)
        out_bytes = sum(padded_bytes(v, out_fmt) for v in out_vals) / per_out
        acc = ACC_BYTES
        probe = GemmSpec(batch, m, k, n, cdt, in_b, max(1, round(out_bytes)), acc,
                         conv_rows=conv_rows)
        miss_a, miss_b, fits, gm, gn, block = self._operand_misses(probe, node.name, x_name,
                                                                   w_name, xv, wv)
        through = self.through(out_names, [out_fmt if self.value(o).rank == head_out.rank
                                           else ND for o in out_names])
        epi_parts: list[SeqPart] = []
        epi_inputs: tuple = ()
        if tail:
            epi_parts, _, _, epi_notes = self.vec_parts(tail, per_out, out_names)
            notes += [f"epilogue {t}" for t in epi_notes]
            epi_inputs = tuple((padded_bytes(self.value(i), ND if is_small_operand(
                                             self.value(i).numel, n_out) else out_fmt) / per_out,
                                self.miss(i, padded_bytes(self.value(i), ND)))
                               for i in tail_in)
        phases: list[Phase] = []
        # ND operands too wide for the on-the-fly ND->NZ DMA: a vector head converts them
        head_a, head_b = nd2nz_head(k, n) if nd and formats is not None else (False, False)
        head_a = head_a and self.format_of(x_name) == ND
        head_b = head_b and self.format_of(w_name) == ND
        workspace = 0
        for operand, v, on in ((x_name, xv, head_a), (w_name, wv, head_b)):
            if on:
                ph, ws_fits, hnotes = self.nd2nz_head_phase(operand, v)
                phases.append(ph)
                notes += hnotes
                workspace += padded_bytes(v, NZ)
                if operand == x_name:
                    miss_a = 0.0 if ws_fits else 1.0
                else:
                    miss_b = 0.0 if ws_fits else 1.0
        split_tail = tail and not chip.coupled
        spec = GemmSpec(batch, m, k, n, cdt, in_b, max(1, round(out_bytes)) if not split_tail
                        else itemsize(head_out.dtype), acc, miss_a, miss_b,
                        0.0 if split_tail else through, bias, conv_rows,
                        () if split_tail else tuple(epi_parts),
                        () if split_tail else epi_inputs, shared_a=gn > 1 and block > 1,
                        shared_b=gm > 1 and block > 1,
                        nd2nz_a=nd and self.format_of(x_name) == ND and not head_a,
                        nd2nz_b=nd and self.format_of(w_name) == ND and not head_b,
                        blocks=int(head.attrs.get("block_dim") or 0),
                        batched_b=not conv and batch > 1 and wv.rank > 2
                        and wv.numel > int(wv.shape[-1]) * int(wv.shape[-2]))
        groups, cnotes, t = gemm_work(chip, spec, node.name)
        notes += cnotes
        notes.append(f"L2: A miss {miss_a:.2f}, B miss {miss_b:.2f} when not resident "
                     f"(operands {'fit' if fits else 'do not fit'} in half of L2, wave "
                     f"{gm}x{gn}); the output is written to L2 (the simulated L2 decides hits "
                     f"and write-backs)")
        if bias:
            notes.append("bias accumulated in L0C (no extra pass over the output)")
        phases.append(Phase(ENGINE_AICORE, tuple(groups)))
        task_type = TASK_AI_CORE
        if split_tail:
            vspec = VecSpec(per_out, ((itemsize(head_out.dtype), 0.0),) + epi_inputs,
                            out_bytes, through, tuple(epi_parts))
            vgroups, vnotes = vector_work(chip, vspec, node.name, chip.vector_cores)
            phases.append(self._vphase(vgroups))
            notes += ["mix kernel: the cube result goes through L2 to the AIV cores"] + vnotes
            task_type = TASK_MIX_AIC
        ins = [x_name, w_name] + ([extra[0]] if bias else []) + tail_in
        ins = list(dict.fromkeys(ins))
        flops = int(get_op(head.op_type).flops(
            [self.sub_value(head, i) for i in head.inputs if i],
            [head_out], head.attrs))
        if tail:
            flops += self.vec_parts(tail, per_out, out_names)[2]
        # per-channel outputs of an epilogue (Conv + BNTrainingReduce's sums) are ND vectors
        out_fmts = [out_fmt if self.value(o).rank == head_out.rank else ND for o in out_names]
        if head_a or head_b:
            task_type = TASK_MIX_AIC
        task = self.add_task(TaskSpec(name or node.name, op_type or node.op_type, task_type,
                                      phases, ins, out_names, [self.format_of(i) for i in ins],
                                      out_fmts, flops, notes, fused, cube_dtype=cdt))
        if split_tail:   # the cube result waits in a GM workspace for the AIV phase
            workspace += padded_bytes(head_out, out_fmt)
        task.workspace_bytes = workspace

    def nd2nz_head_phase(self, name: str, v: Value) -> tuple[Phase, bool, list[str]]:
        """The AIV phase at a MatMul kernel's head that converts an ND operand too wide for the
        ND->NZ DMA into an NZ workspace (lower/matmul_format.py); returns the phase, whether
        the workspace stays in L2 (the cube then reads it from there) and notes."""
        src_b, dst_b = padded_bytes(v, ND), padded_bytes(v, NZ)
        n = max(padded_numel(v, ND), padded_numel(v, NZ))
        # the workspace is no graph value: the cache does not track it, so the lowering
        # says whether it stays in L2 (the chip's residency limit), as for other workspaces
        fits = dst_b <= self.chip.l2_resident_bytes
        spec = VecSpec(n, ((src_b / n, self.miss(name, src_b)),), dst_b / n,
                       0.0 if fits else 1.0,
                       (VecPart("unary", v.dtype, max(src_b, dst_b) / n, "vec_transdata"),))
        groups, vnotes = vector_work(self.chip, spec, f"nd2nz head {name}", self._vcores())
        notes = [f"'{name}' rows exceed the ND->NZ DMA stride ({ND2NZ_DMA_MAX_STRIDE} "
                 f"elements): the AIV cores convert it to an NZ workspace at the kernel's head "
                 f"({src_b} B -> {dst_b} B, {'kept in L2' if fits else 'through HBM'}), then "
                 f"the cube reads the workspace (MatMulV3 V_HEAD_ND2NZ)"] + vnotes
        return self._vphase(groups), fits, notes

    def split_matmul_formats(self, op_type: str, x_name: str, w_name: str
                             ) -> MatmulFormats | None:
        """CANN's ND/NZ choice for a 2-D MatMul (A 2-D, B 2-D or a vector) on a split chip,
        None for other cube ops (lower/matmul_format.py)."""
        xv, wv = self.value(x_name), self.value(w_name)
        if op_type != "MatMul" or xv.rank != 2 or wv.rank not in (1, 2):
            return None
        m, k = (int(d) for d in xv.shape)
        n = int(wv.shape[-1]) if wv.rank == 2 else 1
        return matmul_formats(m, k, n, xv.dtype, self.chip.ai_cores)

    def _operand_misses(self, probe: GemmSpec, op: str, x_name: str, w_name: str, xv: Value,
                        wv: Value) -> tuple[float, float, bool, int, int, int]:
        """L2 miss fractions of a cube op's A and B reads: a first tiling gives the tile grid
        and the wave of cores (gm x gn) that share each strip; returns (miss A, miss B,
        whether the operands fit the L2 residency limit, gm, gn, block dim)."""
        m0, _, n0 = self.chip.cube_shape(probe.in_dtype)
        t0 = gemm_tiling(self.chip, probe, op)
        tm, tn = cdiv(ceil_to(probe.m, m0), t0.m_t), cdiv(ceil_to(probe.n, n0), t0.n_t)
        gn = min(tn, max(1, math.isqrt(t0.block)))
        gm = max(1, min(tm * probe.batch, cdiv(t0.block, gn)))
        a_unique = padded_bytes(xv, self.format_of(x_name) if self.format_of(x_name) !=
                                "const" else ND)
        w_unique = wv.numel * itemsize(wv.dtype)
        fits = a_unique + w_unique <= self.chip.l2_resident_bytes
        # the reads as the CANN tiling does them (L1-resident strips are not re-read): the
        # cold miss fraction is the share of them that first touches each byte
        a_reads, b_reads = operand_read_bytes(probe, t0)
        miss_a = self.miss(x_name, max(a_reads, a_unique), fits, gn)
        miss_b = self.miss(w_name, max(b_reads, w_unique), fits, gm)
        return miss_a, miss_b, fits, gm, gn, t0.block

    # -- fused -----------------------------------------------------------------------------
    def l2_fused(self, node) -> None:
        """L2 fusion: the inner ops stay separate tasks handing their intermediates over through
        L2 (the simulated L2 keeps what fits); with `batch_split = k` the chain runs k times on
        `chunk_batch` samples (tasks named `<op>#<chunk>`), each chunk's intermediates reusing
        the previous chunk's (same names: the same buffers)."""
        sub = node.subgraph
        k = int(node.attrs.get("batch_split") or 1)
        values = self.values
        self.chain_full = {n: values[n] for n in (*sub.inputs, *sub.outputs)
                           if n in values} if k > 1 else {}
        # every chunk has the same shapes: inferred once
        chunk = _chunk_values(node, k, self.g.constants) if k > 1 else sub.values
        outer = self._undo
        for c in range(k):
            # the chunk's values over the outer ones; what the chunk sets is undone after it
            # (`set_value`): each chunk starts from the same values
            undo = self._undo = {}
            for key, v in chunk.items():
                self.set_value(key, v)
            if k > 1:
                # each chunk converts its own slice of the chain's inputs
                for name in sub.inputs:
                    for key in self._converted_by_root.pop(name, ()):
                        self.converted.pop(key, None)
            start = len(self.tasks)
            self.chunk_tag = f"#{c}" if k > 1 else ""
            try:
                for n in sub.nodes:
                    self.node(n)
            finally:
                self.chunk_tag = ""
                self._undo = outer
                for key, old in undo.items():
                    self._checked.pop(key, None)
                    if old is _UNSET:
                        del values[key]
                    else:
                        values[key] = old
            if k > 1:
                for t in self.tasks[start:]:
                    t.op_name = f"{t.op_name}#{c}"
                    t.notes = t.notes + (f"L2 fusion: batch chunk {c + 1} of {k} "
                                         f"({node.attrs.get('chunk_batch')} samples)",)
        self.chain_full = {}
        # consumers outside the chain see the full-size outputs
        outs = set(sub.outputs)
        for k2, v in sub.values.items():
            if k2 not in values or k2 in outs:
                self.set_value(k2, v)

    def _rebound(self, node) -> Any:
        """`rebound_subgraph` of `node` at the current input shapes, once per node and
        shapes (the chunks of an L2 chain lower the same inner nodes at the same shapes; the
        subgraph is only read)."""
        key = (id(node), tuple((v.shape, v.dtype) if (v := self.values.get(i)) is not None
                               else None for i in node.inputs))
        hit = self._rebound_memo.get(key)
        if hit is None:
            hit = self._rebound_memo[key] = (rebound_subgraph(node, self.values), node)
        return hit[0]

    def fused(self, node) -> None:
        sub = self._rebound(node)
        kind = node.attrs.get("fusion", "")
        display = node.attrs.get("display_type") or node.op_type
        inner = tuple(n.name for n in sub.nodes)
        if kind == FUSION_L2:
            self.l2_fused(node)
            return
        self._sub = sub
        try:
            units = [self.unit(n) for n in sub.nodes]
            if Unit.CUBE in units:
                head = sub.nodes[units.index(Unit.CUBE)]
                tail = [n for n in sub.nodes if n is not head and self.unit(n) != Unit.NONE]
                if head.op_type in FUSED_HEAD_LOWERINGS:   # grouped matmul + epilogue
                    FUSED_HEAD_LOWERINGS[head.op_type](self, node, head, tail, inner, display)
                    return
                self.cube(node, head, tail, inner, node.name, display)
            else:
                nodes = [n for n in sub.nodes if self.unit(n) != Unit.NONE]
                cat = max((get_op(n.op_type).category for n in nodes), default=Category.ELEMWISE)
                self.vector(node, nodes, cat, inner, node.name, display,
                            [f"{kind or 'UB'} fusion of {len(nodes)} ops: intermediates stay "
                             f"in UB"])
        finally:
            self._sub = None


def _attrs_key(attrs: dict) -> tuple | None:
    """A node's attributes as a hashable key that tells apart anything that could lower
    differently (types, float bits, -0.0); None when one is not a plain scalar or a
    sequence of them (such a node is not kept by `_node_seq`)."""
    out = []
    for k, v in attrs.items():
        kv = _plain_key(v)
        if kv is None:
            return None
        out.append((k, kv))
    return tuple(out)


def _plain_key(v: Any) -> tuple | None:
    t = type(v)
    if t is float:
        return (t, v.hex())
    if t in (int, str, bool) or v is None:
        return (t, v)
    if t in (list, tuple):
        items = []
        for x in v:
            kx = _plain_key(x)
            if kx is None:
                return None
            items.append(kx)
        return (t, tuple(items))
    return None


def _same_const(a: Any, b: Any) -> bool:
    """Whether two constants (arrays, scalars or None) are the same data."""
    if a is b:
        return True
    if a is None or b is None or type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b)


def _chunk_values(node, k: int, outer_constants) -> dict[str, Value]:
    """Values of a batch-split L2 chain for one chunk: every activation input (not a weight,
    computed or constant, nor another constant of the outer graph) whose leading dim is the
    full batch gets
    `chunk_batch`, shapes re-inferred through the chain."""
    sub = node.subgraph.copy()
    chunk = int(node.attrs.get("chunk_batch") or 0)
    full = chunk * k
    weights = set().union(*(weight_inputs(n) for n in sub.nodes))
    for n in reversed(sub.nodes):        # a weight's Cast inside the chain: its input too
        if n.outputs and all(o in weights for o in n.outputs):
            weights.update(i for i in n.inputs if i)
    for name in sub.inputs:
        v = sub.values[name]
        if v.shape and v.shape[0] == full and name not in outer_constants \
                and name not in weights:
            sub.values[name] = Value(name, (chunk,) + tuple(v.shape[1:]), v.dtype, v.layout)
    sub.infer_shapes()
    return dict(sub.values)


def _has_pipe(phase: Phase, pipe: str) -> bool:
    return any(pipe in g.pipes for g in phase.groups)


def phase_traffic(phases) -> dict[tuple[str, str], int]:
    """Bytes per (level, read|write) over all cores, from the instructions (exact)."""
    acc: dict[tuple[str, str], float] = {}

    def add(key, b):
        acc[key] = acc.get(key, 0.0) + b

    for ph in phases:
        for g in ph.groups:
            mult = len(g.cores)
            for seg in g.layout:          # (names do not matter: no renamed copy built)
                for st in seg.stages:
                    for ins, times in ((i, st.units) for i in st.instrs):
                        _account(add, ins, mult * seg.count * times)
                    for ins in st.head:
                        _account(add, ins, mult * seg.count)
    return {k: int(round(v)) for k, v in acc.items()}


def _account(add, ins, times: int) -> None:
    if not ins.nbytes:
        return
    b = ins.nbytes * times
    if ins.src == GM:
        add(("DDR", "read"), b * ins.hbm)
        add(("L2", "read"), b * (1 - ins.hbm))
    elif ins.src:
        add((ins.src, "read"), b)
    if ins.dst == GM:
        add(("L2", "write"), b)
        if ins.hbm:
            add(("DDR", "write"), b * ins.hbm)
    elif ins.dst:
        add((ins.dst, "write"), b)


def compute_cycles(chip, flops: int, cube: bool, cube_dtype: str = "float16") -> float:
    """flops / chip peak, cycles (0 off the cube); the peak is the cube's in `cube_dtype`."""
    peak = chip.ai_cores * chip.flops_per_cycle(cube_dtype) if cube else 0
    return flops / peak if peak else 0.0


def memory_cycles(chip, traffic: dict) -> float:
    """max(DDR bytes / HBM bandwidth, GM bytes / L2 bandwidth, GM writes / L2 write
    bandwidth), cycles."""
    ddr = traffic.get(("DDR", "read"), 0) + traffic.get(("DDR", "write"), 0)
    gm = ddr + traffic.get(("L2", "read"), 0) + traffic.get(("L2", "write"), 0) \
        - traffic.get(("DDR", "write"), 0)
    hbm_bw = chip.hbm_bandwidth_bytes_per_s / chip.clock_hz
    l2_bw = chip.l2_bandwidth_bytes_per_s / chip.clock_hz
    l2_wr = chip.l2_write_bandwidth_bytes_per_s / chip.clock_hz
    writes = traffic.get(("L2", "write"), 0)
    return max(ddr / hbm_bw, gm / l2_bw, writes / l2_wr)


def lower(graph, chip: Any = "ascend910", detail: str = "block", streams: int = 1) -> Program:
    """Lower a graph to a Program of tasks (see the module note); deterministic."""
    from ..hw import get_chip

    chip = get_chip(chip)
    if detail not in DETAILS:
        raise ConfigError(f"detail must be one of {', '.join(DETAILS)}, got {detail!r}")
    if not isinstance(streams, int) or streams < 1:
        raise ConfigError(f"streams must be a positive integer, got {streams!r}")
    low = _Lowering(graph, chip, streams)
    low._sub = None
    try:
        low.run()
    except (ZeroDivisionError, IndexError, ValueError, TypeError) as exc:  # pragma: no cover
        raise SimulationError(f"lowering graph '{graph.name}' failed: {exc}") from exc
    used = sorted({t.stream_id for t in low.tasks}) or [0]
    return Program(graph.name, chip, low.tasks, max(used) + 1, detail, dict(low.alias),
                   tuple(low.output_values))
