"""The LLM namespace users import (`asim.llm`): generation on one chip or across chips
(parallel plans), serving under a request stream and the search for the best serving
configuration.

This module only gathers public names; the work is done in the modules named below, each in
its layer (see pyproject's import contracts). Nothing inside the package imports it.
"""

from __future__ import annotations

from .generation import (
    DEFAULT_DECODE_SAMPLES,
    SLO_METRICS,
    GenerationResult,
    MemoryPlan,
    activation_peak,
    check_capacity,
    check_slo,
    decode_contexts,
    generate,
    meets_slo,
    memory_plan,
    smallest_plan,
    tpot_ms,
    ttft_ms,
)
from .hw.box import Box
from .models.parallel import Collective, Parallel, ParallelModel
from .plan import CollectiveTime, ParallelResult, run_parallel, simulate_parallel
from .serving import (
    DEFAULT_SPACE,
    HOST_OVERHEAD_US,
    Request,
    SchedulerConfig,
    SearchResult,
    ServingReport,
    StepModel,
    load_requests,
    search,
    serve,
    simulate_point,
    synthetic,
    write_requests,
)

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
    "DEFAULT_SPACE",
    "GenerationResult",
    "HOST_OVERHEAD_US",
    "MemoryPlan",
    "Request",
    "SLO_METRICS",
    "SchedulerConfig",
    "SearchResult",
    "ServingReport",
    "StepModel",
    "activation_peak",
    "check_capacity",
    "check_slo",
    "decode_contexts",
    "generate",
    "load_requests",
    "meets_slo",
    "memory_plan",
    "search",
    "serve",
    "simulate_point",
    "synthetic",
    "tpot_ms",
    "ttft_ms",
    "write_requests",
]
