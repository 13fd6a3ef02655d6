"""The names every layer shares: pipes, memory levels, engines, task types, detail levels.

Defined once, here at the bottom of the layers (`hw`), because the chip files name pipes, the
lowering builds tasks for engines, the engine records intervals on pipes and the reports read
them back. They are plain strings (what msprof and the trace files print), grouped in tuples.
"""

from __future__ import annotations

#: Pipes of an AI Core, in lane order for plots.
CORE_PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
#: Every trace lane: the core pipes, then the lanes of the AI CPU and host engines.
PIPES = (*CORE_PIPES, "AICPU", "HOST")

#: Memory levels, nearest the cube first ("DDR" is the off-chip HBM/DDR).
LEVELS = ("L0A", "L0B", "L0C", "UB", "L1", "L2", "DDR")
#: Global memory: where a lowered move reads or writes off the core (L2 or DDR decided later).
GM = "GM"

#: Engines a task phase runs on.
ENGINE_AICORE = "aicore"
ENGINE_AICPU = "aicpu"
ENGINE_HOST = "host"

#: Task types, as msprof names them.
TASK_AI_CORE = "AI_CORE"                 # a coupled chip's AI Core
TASK_AI_VECTOR_CORE = "AI_VECTOR_CORE"   # the AIV cores of a split chip (910B)
TASK_MIX_AIC = "MIX_AIC"                 # a 910B kernel with cube and vector phases
TASK_MIX_AIV = "MIX_AIV"
TASK_AI_CPU = "AI_CPU"
#: Task types that run on AI Cores (AIC or AIV): what "AI Core tasks" counts.
AICORE_TASK_TYPES = frozenset({TASK_AI_CORE, TASK_AI_VECTOR_CORE, TASK_MIX_AIC, TASK_MIX_AIV})


def on_ai_core(task_type: str) -> bool:
    """Whether a task of this type runs on AI Cores (AIC or AIV), not on the AI CPU."""
    return task_type in AICORE_TASK_TYPES


#: Bytes of the scalar unit's DataCache line: scalar GM reads fill it 64 bytes at a time
#: (Ascend C, "Scalar reads and writes"); the kernel start's tiling read
#: (`sim.kernelstart.tiling_lines`) and GroupedMatmul's group walk
#: (`lower.gmm_tiling.gmm_walk_lines`) count these lines.
DCACHE_LINE_BYTES = 64
#: Bytes of the Matmul API's TCubeTiling (50 int32 fields, asc-devkit
#: `lib/matmul/matmul_tilingdata.h`): the tiling a cube kernel reads at its start
#: (`sim.kernelstart.tiling_lines`; GroupedMatmul's copy, `lower.gmm_tiling`)
CUBE_TILING_BYTES = 200
#: The range GM requests are aligned to on the A2 / A3: requests of several cores that fall
#: in one such range at once are processed one after another (Ascend C best practices,
#: "Avoiding Same-Address Access", hiascend.com canncommercial 850
#: atlas_ascendc_best_practices_10_00013: MTE2, MTE3 and scalar requests are 512-byte aligned)
GM_SAME_ADDRESS_BYTES = 512

#: Levels of simulation detail: "block" coalesces identical tiles, "tile" times every one.
DETAILS = ("block", "tile")
#: Launch modes: graph sink (whole graph on the device), op by op from the host (running
#: ahead of the device), or eager synchronised single-op calls (see ascendsim.sim.engine).
MODES = ("sink", "host", "eager")
#: The cores' instruction caches when a run starts: "cold" (no kernel of the graph cached) or
#: "warm" (every kernel's code cached, as in a loop of one kernel; see ascendsim.sim.engine).
ICACHE_STARTS = ("cold", "warm")
