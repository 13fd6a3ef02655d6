"""The `Chip` record: every hardware figure the lowering and the simulator read, with its source.

Note on the model
-----------------
A chip is a set of identical AI Cores sharing an L2 and an off-chip memory (HBM on 910/910B,
LPDDR4X on 310), plus AI CPU cores and a host that launches tasks.

- *Coupled* chips (910, 310): one AI Core holds cube, vector and scalar units, L0A/L0B/L0C, L1
  and UB. L0C -> UB is a PIPE_V move, results leave through UB -> GM (MTE3).
- *Split* chips (910B): an AIC (cube core: L0A/L0B/L0C/L1, pipes S M MTE1 MTE2 FIX) is paired with
  `aiv_cores // ai_cores` AIVs (vector cores: UB, pipes S V MTE2 MTE3). They exchange data only
  through GM/L2; L0C -> GM is the FixPipe (PIPE_FIX). `ub_bytes` is then the UB of one AIV.

Timing figures the simulator is expected to use:

- cube: one fractal step (`cube_mkn[dtype]`, M x K x N) per cycle per core; an mmad of
  (M, K, N) costs about ceil(M/m0)*ceil(K/k0)*ceil(N/n0) + `cube_mmad_overhead_cycles`.
- vector: an instruction on `b` bytes costs max(`vector_min_cycles`, b / rate), where rate is
  `vector_rate(op_class, dtype)` (bytes/cycle, msKPP measurements on a 910B1 AIV).
- data moves: `transfer_cycles(src, dst, nbytes)` = fixed latency + nbytes / bandwidth, per core
  (fitted to msKPP single-core curves that assume L2 hits). GM traffic is further capped by the
  chip-wide `l2_bandwidth_bytes_per_s` / `hbm_bandwidth_bytes_per_s`, shared by all cores
  (writes into GM also by the lower `l2_write_bandwidth_bytes_per_s`); an
  L2 miss divides the per-core GM bandwidth by `l2_miss_slowdown` (msKPP's model), and cube
  operand reads that several cores make of the same addresses at once divide it by
  `gm_same_address_slowdown`. Vector ops are not split so finely that a core moves less than
  `gm_min_efficient_transfer_bytes`. A write scattered in 32-byte bursts (an NZ cache column)
  takes at least `gm_write_burst_cycles` (optional) a burst on each core, and at least n /
  `gm_write_bursts_per_cycle` (optional) when n cores write such bursts at once; a read of
  many short bursts (one row per burst) likewise `gm_read_burst_cycles` and
  `gm_read_bursts_per_cycle`; where a core's reads and writes of such bursts overlap, both
  draw on the one chip-wide rate (`lower.tiling.overlapped_burst_share`).
- scalar: each issued instruction costs `scalar_ops_per_instr` scalar ops at
  `scalar_ops_per_cycle`; on chips whose vector kernels are TQue-framework Ascend C loops
  (`vector_tile_scalar_cycles_per_queue`, optional) a vector tile's scalar work is instead that
  figure per GM <-> UB transfer plus `vector_tile_scalar_cycles_per_vec_instr` per vector
  instruction (`lower.tiling.vector_scalar_stage`).
- tasks: `host_launch_us` per op launched from the host, `sink_launch_us` per op when the graph
  is sunk on the device, `host_sync_us` from a synchronised call's last task to the host's
  return from its synchronize; `task_dispatch_us` (optional) per AI Core phase outside its
  blocks, plus `block_dispatch_us` (optional) per block beyond the first; `kernel_start_us` per
  block on each core (scalar pipe) before the block's first instruction, plus `block_start_us`
  (optional) per block beyond the first of the kernel, plus `icache_cold_block_us` (optional)
  per block of the phase whose core last ran another kernel, plus `tiling_line_cycles`
  (optional) per 64-byte line of the kernel's tiling data (lines by kernel kind:
  `sim.kernelstart.tiling_lines`); AI CPU ops cost
  `ai_cpu_task_launch_us`, then read their inputs and write their outputs through the shared
  L2/HBM fabric at up to `ai_cpu_memory_bytes_per_s` (contending with the AI Cores), and
  compute elements / (`ai_cpu_op_elements_per_cycle[class]` * `ai_cpu_clock_hz`) in between.

What is an estimate: every figure's source string starts with the confidence tag of
`reference/ascend-hardware.md` (S stated, D derived, F CANN ini/fixture, M measured, G guessed;
U = set by the user or by `replace()`), see `Chip.source(key)` / `Chip.confidence(key)`. The
weakest figures are all tagged G: every 910 per-path bandwidth and DMA latency (the 910 ini
section was not found; 310 ini values are reused), the vector table on 910/310 (910B
measurements reused), the AI CPU figures (count on 910, clocks, launch cost, compute rate), the
device-side launch cost, the scalar issue rate and work per instruction, the 910/310 mmad
overhead and the 910 L2 write bandwidth. The 910B fp32 cube mode (`cube_mkn.float32`) is D:
its rate is a quarter of fp16, read off one measured fp32 GEMM, written as a K fractal of 4.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from .names import CORE_PIPES
from .precision import PRECISION_MODES

#: pipes an AI Core may have (FIX only on split, 910B-style chips)
#: core organisations
ARCHS = ("coupled", "split")
#: how built-in kernels are built for a run (`Chip.eager_kernel_build`, `api.kernel_build_for`)
KERNEL_BUILDS = ("binary", "jit")
#: Atlas product lines as CANN's documentation names them in its "supported products" lists
#: (the mapping of products to chips: hiascend 昇腾产品形态说明, AscendFAQ/ProduTech/productform):
#: Atlas training series (910), Atlas inference series (310P), Atlas 200/300/500 inference
#: (310), Atlas 200I/500 A2 inference (310B), Atlas A2 training / inference (910B), Atlas A3 (910C)
PRODUCT_LINES = ("atlas_training", "atlas_inference", "atlas_200_300_500_inference",
                 "atlas_200i_500_a2_inference", "atlas_a2", "atlas_a3")
#: memory locations that name a data path ("gm" stands for L2/HBM/DDR as seen by a core)
LOCATIONS = ("gm", "l1", "l0a", "l0b", "l0c", "ub")
#: vector instruction classes accepted by `Chip.vector_rate`
VECTOR_CLASSES = ("unary", "binary", "exp", "sqrt", "div", "ternary", "reduce", "reduce_max",
                  "block_reduce", "gather", "sort", "transpose", "transpose_b8")
#: confidence tags (reference/ascend-hardware.md), plus U for user-set figures and C for
#: figures fitted by `ascendsim.validation.calibrate` ("C: calibrated on rows <ids>")
TAGS = ("S", "D", "F", "M", "G", "U", "C")

#: Physical ceilings, per unit: a figure above one is impossible, not a what-if (1 PiB of
#: memory, a million cores, 1 PB/s, 1 THz); 10x any real figure stays far below them.
MAX_BYTES = 2**50
PHYSICAL_CEILING: dict[str, float] = {"bytes": MAX_BYTES, "cores": 2**20, "bytes/s": 1e15,
                                      "Hz": 1e12}

_SOURCE_RE = re.compile(r"^[SDFMGUC](/[SDFMGUC])*:")
_DTYPE_ALIASES = {"fp16": "float16", "half": "float16", "float16": "float16",
                  "fp32": "float32", "float32": "float32",
                  "bf16": "bfloat16", "bfloat16": "bfloat16", "int8": "int8", "int4": "int4"}
_LOC_ALIASES = {"ddr": "gm", "hbm": "gm", "l2": "gm"}


def _spec(kind: str, unit: str = "", *, gt: float | None = None, ge: float | None = None,
          choices: tuple[str, ...] = (), optional: bool = False, group: type | None = None,
          doc: str = "") -> Any:
    """A dataclass field carrying its validation rule and unit as metadata."""
    meta = {"kind": kind, "unit": unit, "gt": gt, "ge": ge, "choices": choices,
            "group": group, "doc": doc}
    if optional:
        return field(default=None, metadata=meta)
    return field(metadata=meta)


def check_source(key: str, source: object) -> str:
    """Check that a source string starts with a confidence tag ("F: ..."); return it."""
    if not isinstance(source, str) or not _SOURCE_RE.match(source):
        raise ConfigError(f"source of {key} must be a string starting with a confidence tag "
                          f"{'/'.join(TAGS)} and ':' (e.g. \"F: ini ub_size\"), got {source!r}")
    return source


def _check(key: str, value: Any, meta: Mapping[str, Any]) -> Any:
    """Validate one figure against its field spec; return it normalised (list->tuple etc.)."""
    kind = meta["kind"]
    if kind == "int":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {type(value).__name__} {value!r}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} must be a number, got {type(value).__name__} {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{key} must be finite, got {value!r}")
    elif kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {type(value).__name__} {value!r}")
        if meta["choices"] and value not in meta["choices"]:
            raise ConfigError(f"{key} must be one of {', '.join(meta['choices'])}, got {value!r}")
    elif kind == "mkn":
        if (not isinstance(value, (list, tuple)) or len(value) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in value)):
            raise ConfigError(f"{key} must be 3 positive integers [M, K, N], got {value!r}")
        value = tuple(value)
    elif kind == "pipes":
        if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) for p in value):
            raise ConfigError(f"{key} must be a list of pipe names, got {value!r}")
        bad = [p for p in value if p not in CORE_PIPES]
        if bad:
            raise ConfigError(f"{key}: unknown pipe {bad[0]!r}; pipes are {', '.join(CORE_PIPES)}")
        if len(set(value)) != len(value):
            raise ConfigError(f"{key} lists a pipe twice: {list(value)}")
        value = tuple(value)
    if meta["gt"] is not None and not value > meta["gt"]:
        raise ConfigError(f"{key} must be > {meta['gt']:g}, got {value!r}")
    if meta["ge"] is not None and not value >= meta["ge"]:
        raise ConfigError(f"{key} must be >= {meta['ge']:g}, got {value!r}")
    ceiling = PHYSICAL_CEILING.get(meta["unit"])
    if ceiling is not None and value > ceiling:
        raise ConfigError(f"{key} = {value:.4g} {meta['unit']} is beyond the physical ceiling "
                          f"of {ceiling:.4g} {meta['unit']}")
    return value


@dataclass(frozen=True)
class CubeShapes:
    """Cube fractal per input dtype, (M, K, N): one such mmad step per cycle per core.

    An absent entry means the cube has no mode for that dtype; the lowering then runs float32
    operands in the float16 mode (CANN's allow_fp32_to_fp16 precision mode).
    """

    float16: tuple[int, int, int] = _spec("mkn")
    int8: tuple[int, int, int] = _spec("mkn")
    bfloat16: tuple[int, int, int] | None = _spec("mkn", optional=True)
    float32: tuple[int, int, int] | None = _spec("mkn", optional=True)
    int4: tuple[int, int, int] | None = _spec("mkn", optional=True)


@dataclass(frozen=True)
class VectorRates:
    """Steady vector throughput per instruction class, bytes/cycle.

    Unary ops run at `Chip.vector_bytes_per_cycle`.

    `_fp16` figures apply to 1- and 2-byte dtypes, `_fp32` to 4-byte ones.
    """

    binary: float = _spec("float", gt=0, doc="vadd/vsub/vmul/vmax/vmin/vand/vsel/vcmp")
    exp_fp16: float = _spec("float", gt=0, doc="vexp/vln, 2-byte dtypes")
    exp_fp32: float = _spec("float", gt=0, doc="vexp/vln, 4-byte dtypes")
    sqrt_fp16: float = _spec("float", gt=0, doc="vsqrt, 2-byte dtypes")
    sqrt_fp32: float = _spec("float", gt=0, doc="vsqrt, 4-byte dtypes")
    div: float = _spec("float", gt=0, doc="vdiv")
    ternary: float = _spec("float", gt=0, doc="vmla/vmadd/vmaddrelu (3 operands)")
    reduce_fp16: float = _spec("float", gt=0, doc="vcadd/vcmax/vcmin, 2-byte dtypes")
    reduce_fp32: float = _spec("float", gt=0, doc="vcadd, 4-byte dtypes")
    gather: float = _spec("float", gt=0, doc="vgather")
    sort: float = _spec("float", gt=0, doc="vmrgsort")
    reduce_max_fp32: float | None = _spec("float", gt=0, optional=True,
                                          doc="vcmax/vcmin, 4-byte dtypes (absent: reduce_fp32)")
    block_reduce_fp16: float | None = _spec(
        "float", gt=0, optional=True,
        doc="vcgadd/vcgmax (BlockReduceSum/Max: one value per 32-byte block), 2-byte dtypes "
            "(absent: no kernel path on the chip uses it)")
    block_reduce_fp32: float | None = _spec(
        "float", gt=0, optional=True,
        doc="vcgadd/vcgmax (BlockReduceSum/Max), 4-byte dtypes (absent: no kernel path "
            "on the chip uses it)")
    transpose: float | None = _spec("float", gt=0, optional=True,
                                    doc="vnchwconv on 2- and 4-byte dtypes: 16 blocks of 32 B "
                                        "scattered per repeat, the reorder of a transpose "
                                        "that moves the last axis (absent: no such kernel "
                                        "path on the chip)")
    transpose_b8: float | None = _spec(
        "float", gt=0, optional=True,
        doc="vnchwconv on 1-byte dtypes: 16 blocks of 32 B read per repeat, half of each of "
            "16 blocks written (a byte transpose takes two calls, low and high halves); "
            "bytes of its 16 source blocks per cycle (absent: no such kernel path on the "
            "chip)")


@dataclass(frozen=True)
class AiCpuRates:
    """Elements one AI CPU computes per cycle of its own clock, by op class (the AI CPU class
    of an op follows its registry entry: see `ascendsim.lower.aicpu`)."""

    elementwise: float = _spec("float", gt=0, doc="add/mul/compare/select loops (NEON)")
    transcendental: float = _spec("float", gt=0, doc="exp/log/pow/sqrt/div (libm-style)")
    index: float = _spec("float", gt=0, doc="data-dependent loops: NonZero, mask generation")


@dataclass(frozen=True)
class PathTable:
    """One number per data path `<src>_<dst>` (bandwidth or fixed latency); None = no such path.

    Per core: GM -> UB and UB -> GM are per AIV on split chips, the L1/L0 paths per AIC.
    """

    gm_l1: float | None = _spec("float", gt=0, optional=True, doc="MTE2")
    gm_l1_nd2nz: float | None = _spec("float", gt=0, optional=True,
                                      doc="MTE2, ND->NZ in flight (split chips)")
    gm_ub: float | None = _spec("float", gt=0, optional=True, doc="MTE2")
    gm_l0a: float | None = _spec("float", gt=0, optional=True, doc="MTE2")
    gm_l0b: float | None = _spec("float", gt=0, optional=True, doc="MTE2")
    l1_l0a: float | None = _spec("float", gt=0, optional=True, doc="MTE1")
    l1_l0b: float | None = _spec("float", gt=0, optional=True, doc="MTE1")
    l1_ub: float | None = _spec("float", gt=0, optional=True, doc="MTE1, coupled chips")
    ub_l1: float | None = _spec("float", gt=0, optional=True, doc="MTE3, coupled chips")
    ub_gm: float | None = _spec("float", gt=0, optional=True, doc="MTE3")
    l0c_ub: float | None = _spec("float", gt=0, optional=True, doc="V, coupled chips")
    l0c_gm: float | None = _spec("float", gt=0, optional=True, doc="FIX, split chips")
    l0c_l1: float | None = _spec("float", gt=0, optional=True, doc="FIX, split chips")

    def get(self, src: str, dst: str) -> float | None:
        """The figure for src -> dst, or None if the chip has no such path."""
        return getattr(self, f"{_loc(src)}_{_loc(dst)}", None)

    def paths(self) -> tuple[str, ...]:
        """Names of the paths present on the chip."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is not None)


#: pipe that carries each data path (msKPP GetPipeByIO; UB -> L1 on coupled chips is MTE3)
PATH_PIPE = {"gm_l1": "MTE2", "gm_ub": "MTE2", "gm_l0a": "MTE2", "gm_l0b": "MTE2",
             "l1_l0a": "MTE1", "l1_l0b": "MTE1", "l1_ub": "MTE1", "ub_l1": "MTE3",
             "ub_gm": "MTE3", "l0c_ub": "V", "l0c_gm": "FIX", "l0c_l1": "FIX",
             "gm_l1_nd2nz": "MTE2"}


def _rebuild_chip(cls: type, figures: dict[str, Any], sources: dict[str, str]) -> Any:
    """Unpickle a `Chip` (see `Chip.__reduce__`)."""
    return cls(**figures, sources=sources)


def _loc(name: str) -> str:
    loc = _LOC_ALIASES.get(name.lower(), name.lower())
    if loc not in LOCATIONS:
        raise ConfigError(f"unknown memory location {name!r}; expected one of "
                          f"{', '.join(LOCATIONS)} (or ddr/hbm/l2 for gm)")
    return loc


@dataclass(frozen=True)
class Chip:
    """One Ascend chip: core counts, clocks, units, buffers, data paths and task overheads.

    Build it with `load_chip` / `get_chip` (from a TOML chip file, keeping each figure's
    source); make what-ifs with `replace(...)`. All sizes are per core unless the name says
    chip-wide (`l2_*`, `hbm_*`).
    """

    name: str = _spec("str")
    description: str = _spec("str")
    # organisation and clocks
    arch: str = _spec("str", choices=ARCHS, doc="coupled (910, 310) or split AIC/AIV (910B)")
    ai_cores: int = _spec("int", "cores", gt=0, doc="AI Cores (AIC on split chips)")
    aiv_cores: int = _spec("int", "cores", ge=0, doc="AI Vector cores; 0 on coupled chips")
    clock_hz: float = _spec("float", "Hz", gt=0, doc="AI Core clock")
    pipes: tuple[str, ...] = _spec("pipes", doc="instruction queues present")
    # compute units
    cube_mkn: CubeShapes = _spec("group", "elements", group=CubeShapes)
    cube_mmad_overhead_cycles: float = _spec("float", "cycles", ge=0, doc="c0 per mmad")
    vector_bytes_per_cycle: float = _spec("float", "bytes/cycle", gt=0, doc="unary ops")
    vector_min_cycles: float = _spec("float", "cycles", ge=0, doc="shortest vector instr")
    vector_op_bytes_per_cycle: VectorRates = _spec("group", "bytes/cycle", group=VectorRates)
    scalar_ops_per_cycle: float = _spec("float", "instr/cycle", gt=0)
    scalar_ops_per_instr: float = _spec("float", "ops/instr", gt=0,
                                        doc="scalar work (loop, address, issue) per issued instr")
    # buffers, per core (UB: per AIV on split chips), usable capacity
    l0a_bytes: int = _spec("int", "bytes", gt=0)
    l0b_bytes: int = _spec("int", "bytes", gt=0)
    l0c_bytes: int = _spec("int", "bytes", gt=0)
    l1_bytes: int = _spec("int", "bytes", gt=0)
    ub_bytes: int = _spec("int", "bytes", gt=0)
    bt_bytes: int = _spec("int", "bytes", ge=0, doc="BiasTable; 0 if absent")
    fb_bytes: int = _spec("int", "bytes", ge=0, doc="FixPipe buffers; 0 if absent")
    l0a_align_bytes: int = _spec("int", "bytes", gt=0)
    l0b_align_bytes: int = _spec("int", "bytes", gt=0)
    l0c_align_bytes: int = _spec("int", "bytes", gt=0)
    l1_align_bytes: int = _spec("int", "bytes", gt=0)
    ub_align_bytes: int = _spec("int", "bytes", gt=0)
    # data paths, per core
    path_bytes_per_cycle: PathTable = _spec("group", "bytes/cycle", group=PathTable)
    path_latency_cycles: PathTable = _spec("group", "cycles", group=PathTable)
    gm_min_efficient_transfer_bytes: int = _spec(
        "int", "bytes", gt=0, doc="per-core GM traffic from which moves reach full bandwidth")
    gm_same_address_slowdown: float = _spec(
        "float", "x", ge=1, doc="GM bandwidth divisor when cores read the same addresses at once")
    # chip-wide memory
    l2_bytes: int = _spec("int", "bytes", gt=0)
    l2_bandwidth_bytes_per_s: float = _spec("float", "bytes/s", gt=0,
                                            doc="chip-wide, reads and writes together")
    l2_write_bandwidth_bytes_per_s: float = _spec("float", "bytes/s", gt=0,
                                                  doc="chip-wide, writes into GM")
    l2_miss_slowdown: float = _spec("float", "x", ge=1, doc="GM bandwidth divisor on L2 miss")
    hbm_bytes: int = _spec("int", "bytes", gt=0, doc="device memory size")
    hbm_bandwidth_bytes_per_s: float = _spec("float", "bytes/s", gt=0, doc="chip-wide")
    # task overheads
    host_launch_us: float = _spec("float", "us", ge=0, doc="host launch per op")
    host_sync_us: float = _spec("float", "us", ge=0,
                                doc="an eager call's completion path: from the end of its last "
                                    "task to the return of the host's aclrtSynchronizeStream "
                                    "(an event task and an interrupt-woken wait on HWTS chips, "
                                    "SQ-head polling on STARS chips)")
    sink_launch_us: float = _spec("float", "us", ge=0,
                                  doc="device-side dispatch per task (every launch mode)")
    kernel_start_us: float = _spec(
        "float", "us", ge=0, doc="per block on each core before its first instruction: "
        "icache fill, kernel args and tiling data read, scalar prologue, end-of-kernel sync")
    ai_cpus: int = _spec("int", "cores", gt=0)
    ai_cpu_clock_hz: float = _spec("float", "Hz", gt=0)
    ai_cpu_task_launch_us: float = _spec("float", "us", ge=0)
    ai_cpu_op_elements_per_cycle: AiCpuRates = _spec("group", "elements/cycle",
                                                     group=AiCpuRates, doc="per AI CPU")
    ai_cpu_memory_bytes_per_s: float = _spec(
        "float", "bytes/s", gt=0, doc="one AI CPU's reads/writes of HBM/DDR (shared fabric)")
    # optional figures (absent from a chip file: None)
    block_start_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="added to every block's start per block beyond the first: the start-up overhead "
            "grows with the number of cores a kernel starts; absent: 0")
    task_dispatch_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="inside a task's msprof Task Duration but outside its blocks' own time (aiv_time / "
            "aicore_time): the task scheduler's dispatch of the first block and the end-of-task "
            "response, once per AI Core phase, on no pipe; absent: 0")
    block_dispatch_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="added to `task_dispatch_us` per block beyond the first (the blocks of a phase are "
            "dispatched one after another), on no pipe; absent: 0")
    icache_cold_block_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="added to every block's start per block of the phase whose core last ran another "
            "kernel (a cold instruction cache: the cores fetch the same kernel binary at once "
            "and are served one after another); absent: 0 (no instruction-cache state)")
    binary_block_start_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="added to every block's start of a prebuilt dynamic-shape vector kernel or TBE "
            "MatMul (`kernel_build` \"binary\", `Phase.binary` set): the binary's generic "
            "prologue, run-time tiling read and offset and loop setup, which a kernel compiled "
            "for its shapes folds into constants; absent: 0")
    tik_tiling_start_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="added, beyond `binary_block_start_us`, to every block's start of a prebuilt "
            "dynamic-shape TIK kernel (`Phase.binary` \"tik\": the A2 / A3 Transpose, "
            "`lower.dynamic_tiling.TIK_KERNELS`): its run-time tiling read, dependent GM -> UB "
            "moves of a head, a shared part and the core's own slice, then scalars set one "
            "by one from UB; absent: 0")
    tiling_line_cycles: int | None = _spec(
        "int", "cycles", ge=0, optional=True,
        doc="one 64-byte DataCache line of the kernel's tiling data read from GM by the "
            "scalar unit at each block's start (dependent reads: latency, not bandwidth); the "
            "lines per kernel kind are `sim.engine.tiling_lines`; absent: 0 (the read is "
            "folded into kernel_start_us)")
    gm_write_burst_cycles: float | None = _spec(
        "float", "cycles", gt=0, optional=True,
        doc="cycles one core's UB -> GM DMA spends per 32-byte burst of a write scattered in "
            "32-byte pieces (a DataCopy of blockLen 1 with a destination stride: an NZ cache "
            "column), when few cores write; the move is paced at no more than one burst per "
            "this many cycles (`lower.tiling.burst_cycles`); absent: the path rate")
    gm_write_bursts_per_cycle: float | None = _spec(
        "float", "bursts/cycle", gt=0, optional=True,
        doc="such 32-byte scattered write bursts the whole chip completes per cycle: with n "
            "cores writing them at once, each core's burst takes at least n / this cycles; "
            "absent: no chip-wide limit beyond the L2 and HBM bandwidth")
    gm_read_burst_cycles: float | None = _spec(
        "float", "cycles", gt=0, optional=True,
        doc="cycles one core's GM -> UB DMA spends per burst of a read of many short bursts "
            "(a DataCopyPad of one row per burst, blockCount = rows), when few cores read; "
            "the move is paced at no more than one burst per this many cycles "
            "(`lower.tiling.burst_cycles`); absent: the path rate")
    gm_read_bursts_per_cycle: float | None = _spec(
        "float", "bursts/cycle", gt=0, optional=True,
        doc="such read bursts the whole chip completes per cycle: with n cores reading them "
            "at once, each core's burst takes at least n / this cycles, and where a core's "
            "reads overlap its writes of such bursts both directions draw on one budget "
            "(`lower.tiling.overlapped_burst_share`); absent: no chip-wide limit beyond the "
            "L2 and HBM bandwidth")
    scalar_gm_miss_cycles: int | None = _spec(
        "int", "cycles", ge=0, optional=True,
        doc="one scalar read of GM that misses the scalar unit's DataCache (a 64-byte line "
            "fill) when the next instruction needs its value (an address or a loop bound), so "
            "such reads follow one another; charged where a lowering counts the lines (the "
            "GroupedMatmul group walk, `lower.gmm_tiling.gmm_walk_lines`); absent: 0")
    gm_row_miss_latency_cycles: float | None = _spec(
        "float", "cycles", gt=0, optional=True,
        doc="latency of one GM -> UB DMA command of a gather's per-row reads (one command "
            "per gathered row, each waiting for the one before) when it misses the L2; a "
            "row's latency is this and the path's (L2-hit) latency weighted by the move's "
            "miss fraction (`lower.tiling.gm_read`); absent: the path latency")
    vector_dep_latency_cycles: float | None = _spec(
        "float", "cycles", ge=0, optional=True,
        doc="completion latency a dependent vector step of a sequence waits out (the "
            "PipeBarrier<PIPE_V> between dependent vector instructions), added per step after "
            "the first; absent: 0")
    vector_tile_scalar_cycles_per_queue: float | None = _spec(
        "float", "cycles", ge=0, optional=True,
        doc="scalar cycles per GM<->UB transfer of a vector kernel's tile in a TQue-framework "
            "Ascend C loop (its queue's AllocTensor/EnQue/DeQue/FreeTensor, the DMA's parameter "
            "set-up and issue, GM address arithmetic); with "
            "vector_tile_scalar_cycles_per_vec_instr, in place of scalar_ops_per_instr / "
            "scalar_ops_per_cycle for vector tiles only; absent: those")
    vector_tile_scalar_cycles_per_vec_instr: float | None = _spec(
        "float", "cycles", ge=0, optional=True,
        doc="scalar cycles per vector instruction a TQue-framework vector tile issues (API "
            "parameter and mask set-up, issue); see vector_tile_scalar_cycles_per_queue")
    cube_tile_scalar_cycles_per_instr: float | None = _spec(
        "float", "cycles", ge=0, optional=True,
        doc="scalar cycles per cube-side instruction a Matmul-API Ascend C kernel issues for "
            "a base block (each GM->L1 chunk load, L1->L0A/L0B load and mmad: the API's "
            "queue, flag and address work per step), in place of scalar_ops_per_instr / "
            "scalar_ops_per_cycle for those; absent: those")
    vector_split_bytes: int | None = _spec(
        "int", "bytes", gt=0, optional=True,
        doc="per-core data of a vector kernel's multi-core split where the chip's built-in "
            "vector kernels are TBE DSL schedules: block_dim = min(cores, ceil(bytes of the "
            "tensor split / this)) (`lower.tiling.vector_work`); absent: at least "
            "gm_min_efficient_transfer_bytes of GM traffic per core")
    precision_mode: str | None = _spec(
        "str", choices=tuple(PRECISION_MODES), optional=True,
        doc="CANN's default precision mode on this chip: the dtype a cube op reads float32 "
            "operands in (hw/precision.py); absent: must_keep_origin_dtype where the cube has "
            "a float32 mode, else allow_fp32_to_fp16")
    vector_bfloat16: str | None = _spec(
        "str", choices=("float32",), optional=True,
        doc="how the vector unit computes bf16 data: 'float32' = vconv bf16->fp32, the op's "
            "fp32 instructions, vconv back (it has no bf16 arithmetic); absent: no bf16")
    matmul_schedule: str | None = _spec(
        "str", choices=("tbe",), optional=True,
        doc="whose MatMul kernels the chip runs: 'tbe' = TBE's static matmul schedule "
            "(mmad_schedule: an operand strip that fits half of L1 is kept there, and L0C is "
            "double-buffered only when none is); absent: CANN's Matmul tiling (Ascend C)")
    eager_kernel_build: str | None = _spec(
        "str", choices=KERNEL_BUILDS, optional=True,
        doc="how a framework's eager ops (torch_npu) get their built-in kernels on this chip "
            "by default: 'binary' = the prebuilt dynamic-shape kernels of the binary op "
            "package, 'jit' = compiled online for the call's exact shapes; graph (sink) runs "
            "compile for their shapes either way (`api.kernel_build_for`); absent: 'jit'")
    eager_op_launch_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="host cost of one framework eager op call (torch_npu: Python, ATen dispatch, the "
            "aclnn workspace query and launch), the host launch of eager_call op rows; "
            "absent: host_launch_us")
    eager_fused_attention_launch_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="host cost of one torch_npu fused attention call (npu_fused_infer_attention_score, "
            "npu_fusion_attention: Python, the aclnn workspace query with its host tiling, the "
            "launch), the host launch of eager_call op rows whose cann_op is "
            "FusedInferAttentionScore or FlashAttentionScore "
            "(validation.validate.EAGER_LAUNCH_FIGURES); absent: eager_op_launch_us")
    vllm_v0_eager_step_us: float | None = _spec(
        "float", "us", ge=0, optional=True,
        doc="host time per serving step of vLLM 0.7.x's V0 engine on vLLM-Ascend 0.7.x in eager "
            "mode that the device waits for (scheduling, input preparation, sampling, output "
            "processing and the launch work the device cannot hide, on that release's stock "
            "host), the per-step host work of scheduler policy 'vllm-v0' with launch 'eager' "
            "(serving.scheduler.HOST_STEP_FIGURES); absent: the HOST_OVERHEAD_US guess")
    product_line: str | None = _spec(
        "str", choices=PRODUCT_LINES, optional=True,
        doc="the Atlas product line CANN's documentation lists the chip under: fusion passes "
            "CANN ships for some product lines only run on those "
            "(`passes.conv_double_in_fusion.PRODUCTS`); absent: such passes do not run")
    weight_quant: str | None = _spec(
        "str", choices=("int8", "int8,int4"), optional=True,
        doc="weight dtypes of weight-only quantised matmuls (CANN WeightQuantBatchMatmulV2, "
            "W8A16 / W4A16) on this chip's CANN; absent: the product has no such kernel")
    # provenance: dotted key -> "TAG: source"; not part of equality
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False,
                                       metadata={"kind": "sources"})

    # -- validation ----------------------------------------------------------------------
    def __post_init__(self) -> None:
        for f in fields(self):
            meta = f.metadata
            value = getattr(self, f.name)
            if meta["kind"] == "sources":
                if not isinstance(value, Mapping):
                    raise ConfigError(f"sources must be a mapping, got {value!r}")
                object.__setattr__(self, "sources", MappingProxyType(dict(value)))
            elif meta["kind"] == "group":
                object.__setattr__(self, f.name, _check_group(f.name, value, meta["group"]))
            elif value is None and f.default is None:
                continue   # an optional figure the chip does not have
            else:
                object.__setattr__(self, f.name, _check(f.name, value, meta))
        self._check_consistency()

    def _check_consistency(self) -> None:
        for buf in ("l0a", "l0b", "l0c", "l1", "ub"):
            align = getattr(self, f"{buf}_align_bytes")
            size = getattr(self, f"{buf}_bytes")
            if align & (align - 1):
                raise ConfigError(f"{buf}_align_bytes must be a power of two, got {align}")
            if size % align:
                raise ConfigError(f"{buf}_bytes ({size}) must be a multiple of "
                                  f"{buf}_align_bytes ({align})")
        missing = [p for p in ("S", "V", "M", "MTE1", "MTE2", "MTE3") if p not in self.pipes]
        if missing:
            raise ConfigError(f"pipes must include {', '.join(missing)}")
        split = self.arch == "split"
        if split != (self.aiv_cores > 0):
            raise ConfigError(f"aiv_cores must be > 0 exactly when arch = 'split' "
                              f"(arch = {self.arch!r}, aiv_cores = {self.aiv_cores})")
        if split != ("FIX" in self.pipes):
            raise ConfigError(f"pipes must contain FIX exactly when arch = 'split' "
                              f"(arch = {self.arch!r}, pipes = {list(self.pipes)})")
        bw, lat = self.path_bytes_per_cycle, self.path_latency_cycles
        if bw.paths() != lat.paths():
            odd = sorted(set(bw.paths()) ^ set(lat.paths()))
            raise ConfigError(f"path_bytes_per_cycle and path_latency_cycles must list the same "
                              f"paths; they differ in {', '.join(odd)}")
        for path in bw.paths():
            if PATH_PIPE[path] not in self.pipes:
                raise ConfigError(f"path_bytes_per_cycle.{path} needs pipe {PATH_PIPE[path]}, "
                                  f"which is not in pipes")
        for required in ("gm_l1", "gm_ub", "l1_l0a", "l1_l0b", "ub_gm"):
            if bw.get(*required.split("_")) is None:
                raise ConfigError(f"path_bytes_per_cycle.{required} is required")
        if not (bw.l0c_ub or bw.l0c_gm):
            raise ConfigError("path_bytes_per_cycle needs l0c_ub or l0c_gm (a way out of L0C)")

    def __reduce__(self) -> tuple:
        """Pickle through the constructor (the read-only `sources` view does not pickle), so
        chips travel to process pools and Dask workers and are re-validated there."""
        figures = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        return (_rebuild_chip, (type(self), figures, dict(self.sources)))

    # -- what-ifs and provenance -----------------------------------------------------------
    def replace(self, **changes: Any) -> Chip:
        """A copy with some figures changed, re-validated; the changed figures get source "U".

        Group fields take a dict of the entries to change:
        `chip.replace(ub_bytes=512 * 1024, path_bytes_per_cycle={"gm_ub": 256})`.
        """
        specs = {f.name: f for f in fields(self)}
        sources = dict(self.sources)
        for key, value in list(changes.items()):
            if key not in specs or key == "sources":
                raise ConfigError(f"replace(): unknown field {key!r}; fields are "
                                  f"{', '.join(n for n in specs if n != 'sources')}")
            group = specs[key].metadata["group"]
            if group is not None:
                old = getattr(self, key)
                if isinstance(value, Mapping):
                    names = {f.name for f in fields(group)}
                    for sub in value:
                        if sub not in names:
                            raise ConfigError(f"replace(): unknown key {key}.{sub}; keys are "
                                              f"{', '.join(sorted(names))}")
                    value = changes[key] = dataclasses.replace(old, **value)
                elif not isinstance(value, group):
                    raise ConfigError(f"replace(): {key} must be a {group.__name__} or a dict, "
                                      f"got {type(value).__name__}")
                for sub in fields(group):
                    new = getattr(value, sub.name)
                    if new != getattr(old, sub.name):
                        sources[f"{key}.{sub.name}"] = "U: set by replace()"
                    if new is None:
                        sources.pop(f"{key}.{sub.name}", None)
            elif key not in ("name", "description"):
                sources[key] = "U: set by replace()"
        return dataclasses.replace(self, sources=sources, **changes)

    def source(self, key: str) -> str:
        """Where a figure comes from, e.g. `source("ub_bytes")`, `source("cube_mkn.int8")`."""
        if key not in self.figure_keys(all_keys=True):
            raise ConfigError(f"{self.name}: no figure {key!r}")
        if self.figure(key) is None:
            raise ConfigError(f"{self.name}: figure {key!r} is absent on this chip")
        return self.sources.get(key, "U: no source recorded")

    def confidence(self, key: str) -> str:
        """The confidence tag(s) of a figure: "S", "D", "F", "M", "G", "U" or e.g. "F/D"."""
        return self.source(key).split(":", 1)[0]

    def figure_keys(self, all_keys: bool = False) -> tuple[str, ...]:
        """Dotted keys of every figure (group entries as `group.entry`; absent ones skipped)."""
        keys: list[str] = []
        for f in fields(self):
            if f.name in ("name", "description", "sources"):
                continue
            group = f.metadata["group"]
            if group is None:
                if all_keys or getattr(self, f.name) is not None:
                    keys.append(f.name)
                continue
            sub = getattr(self, f.name)
            keys += [f"{f.name}.{g.name}" for g in fields(group)
                     if all_keys or getattr(sub, g.name) is not None]
        return tuple(keys)

    def figure(self, key: str) -> Any:
        """The value of a dotted figure key."""
        head, _, tail = key.partition(".")
        value = getattr(self, head)
        return getattr(value, tail) if tail else value

    def table(self) -> list[tuple[str, Any, str, str]]:
        """Rows (key, value, unit, source) of every figure, for printing a chip sheet."""
        units = {f.name: f.metadata.get("unit", "") for f in fields(self)}
        return [(k, self.figure(k), units[k.split(".")[0]], self.source(k))
                for k in self.figure_keys()]

    # -- derived figures ---------------------------------------------------------------------
    @property
    def l2_resident_bytes(self) -> int:
        """Half of L2: a rule of this model, not a chip figure (the other half is left to the
        streaming working sets). The lowering's intra-task reuse rule (a task's operands that
        fit re-read from L2) and the L2 batch-split pass size against it; the simulated L2
        cache itself uses all of `l2_bytes`."""
        return self.l2_bytes // 2

    @property
    def coupled(self) -> bool:
        """True when cube and vector share one core (910, 310)."""
        return self.arch == "coupled"

    @property
    def vector_cores(self) -> int:
        """Cores that run vector work: the AIVs on split chips, else every AI Core."""
        return self.aiv_cores if self.aiv_cores else self.ai_cores

    def cycles(self, seconds: float) -> int:
        """AI Core cycles covering a time span (rounded up)."""
        return math.ceil(seconds * self.clock_hz - 1e-6)

    def seconds(self, cycles: float) -> float:
        """Seconds taken by a number of AI Core cycles."""
        return cycles / self.clock_hz

    def us(self, cycles: float) -> float:
        """Microseconds taken by a number of AI Core cycles."""
        return cycles * 1e6 / self.clock_hz

    def cube_shape(self, dtype: object = "float16") -> tuple[int, int, int]:
        """The cube fractal (M, K, N) for an input dtype ("float16", "fp16", "int8", ...)."""
        name = _DTYPE_ALIASES.get(str(dtype).lower())
        shape = getattr(self.cube_mkn, name) if name else None
        if shape is None:
            have = [f.name for f in fields(CubeShapes) if getattr(self.cube_mkn, f.name)]
            raise ConfigError(f"{self.name}: the cube has no mode for dtype {dtype!r}; "
                              f"it takes {', '.join(have)}")
        return shape

    def flops_per_cycle(self, dtype: object = "float16") -> int:
        """Cube ops (2 per MAC) per cycle of one core."""
        m, k, n = self.cube_shape(dtype)
        return 2 * m * k * n

    def peak_flops(self, dtype: object = "float16") -> float:
        """Chip-wide cube peak in ops/s (FLOPS, or OPS for integer dtypes)."""
        return self.ai_cores * self.clock_hz * self.flops_per_cycle(dtype)

    def vector_rate(self, op_class: str, dtype: object = "float16") -> float:
        """Vector throughput in bytes/cycle for an instruction class (see VECTOR_CLASSES)."""
        rates = self.vector_op_bytes_per_cycle
        wide = str(dtype).lower() in ("float32", "fp32", "int32", "uint32", "float64", "int64")
        if op_class == "unary":
            return self.vector_bytes_per_cycle
        if op_class == "reduce_max":   # vcmax/vcmin: fp16 as vcadd, fp32 its own rate
            if wide and rates.reduce_max_fp32 is not None:
                return rates.reduce_max_fp32
            op_class = "reduce"
        if op_class not in VECTOR_CLASSES:
            raise ConfigError(f"unknown vector class {op_class!r}; expected one of "
                              f"{', '.join(VECTOR_CLASSES)}")
        field = op_class                 # the classes with a rate per dtype width
        if op_class in ("exp", "sqrt", "reduce", "block_reduce"):
            field = f"{op_class}_{'fp32' if wide else 'fp16'}"
        rate = getattr(rates, field)
        if rate is None:                 # an optional class the chip file does not give
            raise ConfigError(f"{self.name}: no vector_op_bytes_per_cycle.{field} rate "
                              "in the chip file")
        return rate

    def has_path(self, src: str, dst: str) -> bool:
        """Whether data can move directly from src to dst on this chip."""
        return self.path_bytes_per_cycle.get(src, dst) is not None

    def pipe_for(self, src: str, dst: str) -> str:
        """The pipe that moves data from src to dst (e.g. gm -> ub: "MTE2")."""
        self._path(src, dst)
        return PATH_PIPE[f"{_loc(src)}_{_loc(dst)}"]

    def transfer_cycles(self, src: str, dst: str, nbytes: float) -> float:
        """Cycles for one DMA of nbytes on one core: fixed latency + nbytes / bandwidth."""
        bw, lat = self._path(src, dst)
        return lat + nbytes / bw

    def _path(self, src: str, dst: str) -> tuple[float, float]:
        bw = self.path_bytes_per_cycle.get(src, dst)
        lat = self.path_latency_cycles.get(src, dst)
        if bw is None or lat is None:
            raise ConfigError(f"{self.name} has no data path {src} -> {dst}; it has "
                              f"{', '.join(self.path_bytes_per_cycle.paths())}")
        return bw, lat


def _check_group(key: str, value: Any, group: type) -> Any:
    if not isinstance(value, group):
        raise ConfigError(f"{key} must be a {group.__name__}, got {type(value).__name__}")
    changes = {}
    for f in fields(group):
        sub = getattr(value, f.name)
        if sub is None:
            if f.default is dataclasses.MISSING:
                raise ConfigError(f"{key}.{f.name} is required")
            continue
        new = _check(f"{key}.{f.name}", sub, f.metadata)
        if new is not sub:
            changes[f.name] = new
    return dataclasses.replace(value, **changes) if changes else value
