"""ascendsim: a cycle-approximate simulator of the Huawei Ascend AI Core.

The public surface (see docs/api.md) is listed once in `__all__`; names are imported on first use,
so ``import ascendsim`` stays fast and does not compile kernels.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import (
    AscendSimError,
    CapacityError,
    ConfigError,
    GraphError,
    SimulationError,
    UnsupportedOpError,
)
from .execute import execute  # bound eagerly: the submodule of the same name must not shadow it
from .ir import Graph, Node, Value

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    "load_onnx": "ascendsim.frontend.onnx",
    "from_torch": "ascendsim.frontend.pytorch",
    "optimize": "ascendsim.api",
    "simulate": "ascendsim.plan",
    "simulate_parallel": "ascendsim.plan",
    "run_parallel": "ascendsim.plan",
    "ParallelResult": "ascendsim.plan",
    "Parallel": "ascendsim.models.parallel",
    "ParallelModel": "ascendsim.models.parallel",
    "Box": "ascendsim.hw.box",
    "compare": "ascendsim.api",
    "Result": "ascendsim.api",
    "Comparison": "ascendsim.report",
    "Chip": "ascendsim.hw",
    "chips": "ascendsim.hw",
    "get_chip": "ascendsim.hw",
    "load_chip": "ascendsim.hw",
    "validate": "ascendsim.validation.validate",
    "load_msprof": "ascendsim.validation.msprof",
    "calibrate": "ascendsim.validation.calibrate",
    "sweep": "ascendsim.sweep",
    "simulate_data_parallel": "ascendsim.multichip",
    "grad": "ascendsim.autodiff",
    "training_step": "ascendsim.autodiff",
    "MemoryPlan": "ascendsim.lower.memory",
    "attribute": "ascendsim.attribution",
    "Attribution": "ascendsim.attribution",
    "advise": "ascendsim.advice",
    "Advice": "ascendsim.advice",
}
_SUBMODULES = ("models", "ir", "passes", "hw", "lower", "sim", "report", "frontend", "kernels",
               "api", "llm", "autodiff")

__all__ = ["AscendSimError", "CapacityError", "ConfigError", "GraphError", "SimulationError",
           "UnsupportedOpError", "Graph", "Node", "Value", "execute", *_LAZY, *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"ascendsim.{name}")
    raise AttributeError(f"module 'ascendsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
