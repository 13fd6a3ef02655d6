"""ascendsim.sim: the SimPy model of the chip (`simulate`, `compare`, `Result`).

See `ascendsim.sim.engine` for the note on the model (pipes, flags, buffers, shared
bandwidth, scheduler, detail levels) and `ascendsim.lower` for how graphs become tasks.
"""

from ..report.result import Result
from .engine import COALESCE_MIN, Engine, Fabric
from .simulate import compare, simulate

__all__ = ["simulate", "compare", "Result", "Engine", "Fabric", "COALESCE_MIN"]
