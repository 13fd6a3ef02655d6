"""ascendsim.lower: graphs -> task streams (`lower`), tilings and the instruction model.

`lower(graph, chip, detail)` returns a `Program`: tasks in launch order, each on an engine
(AI Core, AI CPU), split over cores (`CoreGroup`), tiled into chains of pipe `Stage`s whose
`Instr`s carry cycles, bytes and memory levels; `expand_flags` derives the set_flag /
wait_flag and buffer-slot events of the double-buffered chain. Notes on the model: see
`lowering` (the table of lowerings, one module per kind of op, and engines), `formats`,
`context` (L2, streams), `vector`, `cube`, `cube_tiling` (CANN's Matmul/Conv tiling),
`tiling` (vector tilings) and `program` (the instruction model).
"""

from .cube_tiling import GemmSpec, gemm_tiling
from .formats import padded_bytes, padded_numel
from .lowering import lower
from .program import (
                      CoreGroup,
                      Instr,
                      Phase,
                      Program,
                      Segment,
                      Stage,
                      Task,
                      expand_flags,
)
from .tiling import VecSpec

__all__ = ["lower", "Program", "Task", "Phase", "CoreGroup", "Segment", "Stage", "Instr",
           "expand_flags", "GemmSpec", "VecSpec",
           "gemm_tiling", "padded_bytes", "padded_numel"]
