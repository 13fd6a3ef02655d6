"""`simulate(graph, chip, ...)` and `compare(graph, ...)`: the public entry points of the model.

Note on the model
-----------------
`simulate` optionally optimises the graph (`optimize=` kwargs for `ascendsim.passes.optimize`),
lowers it to task streams (`ascendsim.lower.lower`: tiling, formats, L2 residency), runs the
streams on the SimPy chip model (`ascendsim.sim.engine.Engine`: pipes, flags, buffers, shared
L2/HBM bandwidth, host or sink launches) and returns a `Result` whose trace holds every busy
interval and one record per task. Values are computed only when `inputs` are given (numba
kernels through `ascendsim.execute`), so a shape-only run never materialises LazyTensor
weights. Every figure comes from the chip file (`chip.source(key)` names its origin).
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError
from ..hw import Chip, get_chip
from ..lower import lower
from ..report.result import Result
from .engine import Engine


def simulate(graph, chip: str | Chip = "ascend910", optimize: dict | None = None,
             detail: str = "block", inputs: dict | None = None, mode: str = "sink",
             streams: int = 1, symmetric: bool = True) -> Result:
    """Simulate `graph` on `chip` and return a `Result` (cycles, time, trace, outputs).

    optimize: None simulates the graph as given; a dict is passed to
    `ascendsim.passes.optimize(graph, **optimize)` and the Result carries its `pass_log`.
    detail: "block" (coalesced steady state, fast) or "tile" (every tile instruction).
    mode: "sink" (graph sunk on the device) or "host" (op-by-op launches from the host).
    streams: how many streams independent branches may use (1 = one in-order stream).
    symmetric: one process set per group of identical cores (False: one per core).
    """
    chip = get_chip(chip)
    pass_log = None
    if optimize is not None:
        if not isinstance(optimize, dict):
            raise ConfigError(f"optimize must be None or a dict of optimize() options, got "
                              f"{type(optimize).__name__}")
        from ..passes import optimize as run_passes

        # UB fusion sizes its groups against the UB of the chip being simulated
        opt = run_passes(graph, **{"chip": chip, **optimize})
        graph, pass_log = opt.graph, opt.log
    t0 = time.perf_counter()
    program = lower(graph, chip, detail=detail, streams=streams)
    t1 = time.perf_counter()
    engine = Engine(program, mode=mode, symmetric=symmetric)
    trace = engine.run()
    t2 = time.perf_counter()
    outputs = None
    if inputs is not None:
        from ..execute import execute

        outputs = execute(graph, inputs)
    meta: dict[str, Any] = {
        "mode": mode, "streams": program.streams, "tasks": len(program.tasks),
        "buffer_peak": dict(engine.peaks),
        "buffer_capacity": dict(engine.caps_cube),
        "peak_l2_bytes_per_cycle": engine.fabric.peak_l2,
        "peak_hbm_bytes_per_cycle": engine.fabric.peak_hbm,
        "wall_lower_s": t1 - t0, "wall_sim_s": t2 - t1,
    }
    return Result(graph=graph, chip=chip, trace=trace, outputs=outputs, pass_log=pass_log,
                  detail=detail, events=engine.events, meta=meta)


def compare(graph, chip: str | Chip = "ascend910", **kw: Any):
    """Unfused vs fused: `simulate(graph)` and `simulate(graph, optimize={})` side by side."""
    from ..report.compare import Comparison

    kw.pop("optimize", None)
    unfused = simulate(graph, chip, optimize=None, **kw)
    fused = simulate(graph, chip, optimize={}, **kw)
    return Comparison(unfused, fused)
