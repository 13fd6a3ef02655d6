"""`lower(graph, chip)`: every node of a graph becomes a task on an engine, in launch order.

The lowering is a table of lowerings (`LOWERINGS`), one module per kind of op, and this
dispatcher, which walks the graph and looks each node's lowering up by its registry entry:

    key = opdef.lowering or opdef.unit_for(node)     # (a Unit keys as its value)

A registry entry that names a lowering of its own (`OpDef.lowering`: "fused",
"flash_attention", "grouped_matmul", ...) gets it; every other op gets its unit's. The
modules, each exposing its rows as `LOWERINGS`:

- movement.py   `Unit.NONE` views (no task: the output aliases the input), format
                conversion (`ensure`: TransData), the in-place KV-cache append
- vector.py     vector and scalar unit ops: instruction sequences on V
- cube.py       cube unit ops (Conv, MatMul, Gemm: GEMM geometry, tiling by cube_tiling.py,
                fused epilogues) and GroupedMatmul
- aicpu.py      AI CPU ops: launch, reads, compute, writes
- weight_quant.py  WeightQuantBatchMatmulV2 (W8A16/W4A16): the weight's antiquant on the
                vector cores, the float GEMM on the cube
- attention.py / attention_grad.py   fused attention forward and backward
- composite.py  fused nodes: one task for a UB/GraphKernel group, separate tasks for an L2
                chain (each inner node through this table again)

They share the state and task builder of context.py (`Lowering`) and the formats of
formats.py. To add an op's lowering: write it in the module of its kind (or a new module
with its own `LOWERINGS`, added to `MODULES` below) and name it in the op's registry entry
(`OpDef.lowering`).

Note on the model
-----------------
Engines. The registry says which unit runs an op (`get_op(t).unit_for(node, consts)`):
cube ops (MatMul, Gemm, Conv...) and vector ops become AI Core tasks, AI CPU ops (Pow) an
AI CPU task, `Unit.NONE` ops (reshape-like views) no task at all (their output aliases their
input). A fused node (op_type "FusedOp", `node.subgraph`) is one task or, with L2 fusion, a
chain of them (composite.py). Formats: formats.py; vector cost: vector.py; cube dtype:
cube.py; L2 and streams: context.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, SimulationError
from ..hw.chip import KERNEL_BUILDS
from ..hw.names import DETAILS
from ..ir.registry import get_op
from . import (
    aicpu,
    attention,
    attention_grad,
    composite,
    cube,
    movement,
    pool,
    vector,
    weight_quant,
)
from .context import Lowering, NodeLowering, memory_cycles
from .cube import gemm_geometry
from .formats import NC1HWC0, ND, NZ, padded_bytes, padded_numel
from .movement import ensure
from .program import Program
from .vector import vec_class_of

#: the modules whose `LOWERINGS` make the table, one per kind of op
MODULES = (movement, vector, pool, cube, aicpu, attention, attention_grad, composite,
           weight_quant)


def _table(modules) -> dict[str, NodeLowering]:
    table: dict[str, NodeLowering] = {}
    for mod in modules:
        rows: Mapping[str, NodeLowering] = mod.LOWERINGS
        for key, fn in rows.items():
            if key in table:
                raise RuntimeError(f"lowering '{key}' is in two modules' tables")
            table[key] = fn
    return table


#: the lowering of one node by its key (module note): a registry `lowering` name or a unit
LOWERINGS: dict[str, NodeLowering] = _table(MODULES)


def lowering_key(node, small_consts: dict) -> str:
    """The key of a node's lowering in `LOWERINGS` (module note); a unit keys as its value
    (`Unit` is a str enum: `Unit.CUBE == "cube"`, with the same hash)."""
    opdef = get_op(node.op_type, node.name)
    return opdef.lowering or opdef.unit_for(node, small_consts)


def lower_node(low: Lowering, node) -> None:
    """Lower one node by its row of the table (`lowering_key`, inlined: once per node)."""
    opdef = get_op(node.op_type, node.name)
    pinned = node.attrs.get("block_dim")
    first = len(low.tasks)
    LOWERINGS[opdef.lowering or opdef.unit_for(node, low.small_consts)](low, node)
    if pinned:
        check_block_dim(node, pinned, low.tasks[first:])


def check_block_dim(node, pinned: int, tasks) -> None:
    """Refuse a node's `block_dim` (`ir.graph.KERNEL_ATTRS`) that its kernel did not follow:
    a lowering whose split cannot take a given core count would otherwise simulate another
    kernel than the one asked for."""
    for t in tasks:
        if t.op_name != node.name:
            continue
        used = max((ph.block_dim for ph in t.phases), default=0)
        if used > pinned:
            raise SimulationError(f"node '{node.name}' ({node.op_type}): block_dim {pinned} is "
                                  f"not followed by its kernel's lowering (it splits over "
                                  f"{used} cores); leave block_dim out for this op")


def lower(graph, chip: Any = "ascend910", detail: str = "block", streams: int = 1,
          kernel_build: str = "jit") -> Program:
    """Lower a graph to a Program of tasks (see the module note); deterministic.
    `kernel_build`: how the built-in kernels were built (`api.kernel_build_for`)."""
    from ..hw import get_chip

    chip = get_chip(chip)
    if detail not in DETAILS:
        raise ConfigError(f"detail must be one of {', '.join(DETAILS)}, got {detail!r}")
    if not isinstance(streams, int) or streams < 1:
        raise ConfigError(f"streams must be a positive integer, got {streams!r}")
    if kernel_build not in KERNEL_BUILDS:
        raise ConfigError(f"kernel_build must be one of {', '.join(KERNEL_BUILDS)}, got "
                          f"{kernel_build!r}")
    low = Lowering(graph, chip, streams, lower_node, kernel_build)
    try:
        for node in graph.nodes:
            lower_node(low, node)
        low.output_values = [ensure(low, o, ND) if low.format_of(o) not in (ND, "const")
                             else o for o in graph.outputs]
    except (ZeroDivisionError, IndexError, ValueError, TypeError) as exc:  # pragma: no cover
        raise SimulationError(f"lowering graph '{graph.name}' failed: {exc}") from exc
    used = sorted({t.stream_id for t in low.tasks}) or [0]
    return Program(graph.name, chip, low.tasks, max(used) + 1, detail, dict(low.alias),
                   tuple(low.output_values))


__all__ = ["lower", "lower_node", "lowering_key", "LOWERINGS",
           # read by other packages from here (the engine's roofline, tests)
           "memory_cycles", "padded_bytes", "padded_numel", "ND", "NC1HWC0", "NZ",
           "gemm_geometry", "vec_class_of"]
