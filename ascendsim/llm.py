"""The LLM namespace users import (`asim.llm`): generation on one chip and, as they land,
parallel plans, serving and configuration search.

This module only gathers public names; the work is done in the modules named below, each in
its layer (see pyproject's import contracts). Nothing inside the package imports it.
"""

from __future__ import annotations

from .generation import (
    DEFAULT_DECODE_SAMPLES,
    GenerationResult,
    MemoryPlan,
    activation_peak,
    check_capacity,
    decode_contexts,
    generate,
    memory_plan,
    smallest_plan,
)
from .hw.box import Box
from .models.parallel import Collective, Parallel, ParallelModel
from .plan import CollectiveTime, ParallelResult, run_parallel, simulate_parallel

__all__ = [
    "Box",
    "Collective",
    "CollectiveTime",
    "Parallel",
    "ParallelModel",
    "ParallelResult",
    "run_parallel",
    "simulate_parallel",
    "smallest_plan",
    "DEFAULT_DECODE_SAMPLES",
    "GenerationResult",
    "MemoryPlan",
    "activation_peak",
    "check_capacity",
    "decode_contexts",
    "generate",
    "memory_plan",
]
