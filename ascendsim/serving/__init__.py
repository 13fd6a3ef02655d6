"""LLM serving, simulated: requests (`workload`), the scheduler and paged KV cache
(`scheduler`), iteration times from memoised chip simulations (`steps`), `serve` and its
`ServingReport`, and the configuration search (`search`)."""

from .report import ServingReport
from .scheduler import HOST_OVERHEAD_US, SchedulerConfig
from .search import DEFAULT_SPACE, Point, SearchResult, search
from .serve import DEFAULT_SERVING_CHIP, kv_transfer_us, serve
from .steps import PointTime, StepModel, simulate_point
from .workload import Request, load_requests, synthetic, write_requests

__all__ = ["serve", "ServingReport", "SchedulerConfig", "HOST_OVERHEAD_US", "Request",
           "synthetic", "load_requests", "write_requests", "simulate_point", "StepModel",
           "PointTime", "kv_transfer_us", "DEFAULT_SERVING_CHIP", "search", "SearchResult",
           "Point", "DEFAULT_SPACE"]
