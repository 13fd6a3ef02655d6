"""ascendsim.sim: the SimPy model of the chip (`Engine`, `Fabric`) and the trace it leaves.

See `ascendsim.sim.engine` for the note on the model (pipes, flags, buffers, shared
bandwidth, scheduler, detail levels) and the map of its modules, `ascendsim.sim.trace` for
the records (`Trace`, `Interval`, `TaskRecord`), and `ascendsim.lower` for how graphs become
tasks. The public `simulate` / `compare` live in the API layer (`ascendsim.api`).
"""

from .block import COALESCE_MIN
from .engine import Engine
from .fabric import Fabric
from .trace import Interval, TaskRecord, Trace

__all__ = ["Engine", "Fabric", "COALESCE_MIN", "Trace", "Interval", "TaskRecord"]
