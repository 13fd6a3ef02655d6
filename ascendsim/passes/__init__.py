"""ascendsim.passes: GE graph optimisations, FE graph fusion, and the framework they run in.

`optimize(graph, ...)` runs the default pipeline (see manager.py) and returns the new graph
with a CANN-format pass log. One pass per file; the framework is base.py (Pass, Decision,
PassResult), manager.py (stages, PassManager, optimize), switch.py (fusion switch files),
log.py (PassLog), verify.py (the verifier run after every pass), dot.py (.dot dumps).
"""

from .base import Decision, Pass, PassContext, PassResult, RewritePass
from .gears import GearSet, build_gears
from .log import PassLog
from .manager import (
    OptimizeResult,
    PassManager,
    Stage,
    default_stages,
    load_fusion_switch,
    optimize,
)
from .switch import FusionSwitch
from .verify import verify_graph

__all__ = ["optimize", "PassManager", "PassLog", "Pass", "load_fusion_switch", "Decision",
           "PassContext", "PassResult", "RewritePass", "OptimizeResult", "Stage",
           "default_stages", "FusionSwitch", "verify_graph", "GearSet",
           "build_gears"]
