"""`explain(trace, op)`: why an op took its time, in a few lines a performance engineer can act on.

Note on the attribution
-----------------------
Everything comes from the trace: the bound and the limiting pipe from the task's busiest-core
pipe cycles (msprof's ratios), stalls on shared L2/HBM bandwidth from `Interval.stall`, idle time
of the limiting pipe (waiting on set/wait flags of the other pipes, i.e. a pipeline that does not
overlap) as the part of the task where that pipe was not busy, the launch wait from the task
record, and lowering facts (padding, tiling, format conversion) from `TaskRecord.notes`. The advice
is a table keyed by the bound, not a special case per op.
"""

from __future__ import annotations

from ..hw.names import AICORE_TASK_TYPES
from ..sim.engine import KERNEL_START_KIND
from ..sim.trace import TaskRecord, Trace
from .summary import (
    PIPE_BOUND,
    PIPE_RATIO_COLUMNS,
    PIPE_WORDS,
    gm_bytes,
    launch_cycles,
    limiting_pipe,
    task_bound,
)

#: what usually helps, per bound
ADVICE = {
    "cube": "cube-bound work shrinks only with less padding (channels and M/N/K multiples of "
            "16) or a cheaper dtype (fp16 -> int8); fuse the following element-wise ops so "
            "they ride along in UB/L0C",
    "vector": "fuse it with its neighbours (UB fusion / graph kernels) so the data is read "
              "once, use fp16 (twice the elements per vector cycle), or aligned shapes",
    "memory": "fuse it with its producer or consumer so intermediates stay in UB (UB fusion) "
              "or L2 (L2 fusion); larger tiles / double buffering; more HBM or L2 bandwidth "
              "is the hardware what-if",
    "scalar": "the scalar unit issues every instruction and, in an Ascend C kernel, a queue "
              "round trip per tile transfer: fewer, larger tiles (fuse it with its neighbours "
              "so each transfer feeds more vector work) and aligned, static shapes (less "
              "address arithmetic) shrink it",
    "launch": "the op runs shorter than its launch: fuse it with its neighbours (one launch "
              "for several ops) or give it more work per launch (a larger batch)",
    "kernel start": "the fixed start of every block (kernel arguments and tiling data read by "
                    "the scalar unit, and after another kernel the instruction fetch: the chip's "
                    "kernel_start_us and icache_cold_block_us; in a prebuilt dynamic kernel its "
                    "run-time tiling read, binary_block_start_us, and for the A2's TIK "
                    "Transpose tik_tiling_start_us) is most of the op: fuse it with its "
                    "neighbours (one start for several ops), give it more work per launch, or "
                    "run it compiled for its shapes (a graph build, kernel_build='jit')",
    "aicpu": "it runs on the AI CPU, far slower than an AI Core: rewrite it with AI Core ops "
             "(e.g. Pow(x, 2) -> Mul(x, x)) or avoid the op",
}


def _find_task(trace: Trace, op_name: str) -> tuple[TaskRecord, str]:
    """The task of `op_name`, or of the fused node that swallowed it (with a note saying so)."""
    t = trace.task(op_name)             # raises AscendSimError naming the valid ops
    if t.op_name == op_name:
        return t, ""
    return t, (f"'{op_name}' was fused into '{t.op_name}' ({t.op_type}) with "
               f"{', '.join(o for o in t.fused_ops if o != op_name)}")


def _bytes(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return f"{int(n)} B"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def explain(trace: Trace, op_name: str) -> str:
    """A few lines: time and share, bound and limiting pipe, stalls, notes, what would help."""
    task, fused_note = _find_task(trace, op_name)
    us = trace.us
    dur = max(task.duration, 0)
    run_total = sum(t.duration for t in trace.tasks) or 1
    lines: list[str] = []
    if fused_note:
        lines.append(fused_note + ":")
    where = (f"{task.block_dim} core{'s' if task.block_dim != 1 else ''}"
             if task.task_type in AICORE_TASK_TYPES else "AI CPU")
    head = (f"{task.op_name} ({task.op_type}, {task.task_type}, {where}): {us(dur):.2f} us, "
            f"{_pct(dur / run_total)} of all task time")
    if task.roofline_cycles > 0 and dur > 0:
        head += (f"; roofline {us(task.roofline_cycles):.2f} us "
                 f"({dur / task.roofline_cycles:.1f}x above it)")
    lines.append(head)
    if task.fused_ops and not fused_note:
        lines.append(f"fused from: {', '.join(task.fused_ops)}")

    bound = task_bound(task)
    pipe = limiting_pipe(task)
    run_bound = PIPE_BOUND.get(pipe, bound)
    ivs = trace.intervals_of(task.task_id)
    # the block's fixed start is scalar time: name it when it is what the scalar pipe did
    starts = [iv for iv in ivs if iv.kind == KERNEL_START_KIND]
    start_cycles = max((iv.end - iv.start for iv in starts), default=0)
    kernel_start = pipe == "S" and start_cycles >= 0.5 * task.pipe_cycles.get("S", 0) > 0
    lw = launch_cycles(task)
    busy = {p: task.pipe_cycles.get(p, 0) / dur for p, _ in PIPE_RATIO_COLUMNS
            if dur > 0 and task.pipe_cycles.get(p, 0) > 0}
    if bound == "launch":
        lines.append(f"bound: launch - its stream waited {us(lw):.2f} us for the launch, longer "
                     f"than the op ran ({us(dur):.2f} us)")
    if task.task_type in AICORE_TASK_TYPES and pipe:
        others = ", ".join(f"{p} {_pct(r)}" for p, r in sorted(busy.items(), key=lambda kv: -kv[1])
                           if p != pipe)
        lead = (f"while running: {run_bound} bound" if bound == "launch"
                else f"bound: {bound}") + (" (the blocks' kernel start)" if kernel_start else "")
        lines.append(f"{lead} - the limiting pipe is {PIPE_WORDS.get(pipe, pipe)}, busy "
                     f"{_pct(busy.get(pipe, 0.0))} of the task"
                     + (f" (others: {others})" if others else ""))
    elif bound != "launch":
        lines.append(f"bound: {bound}")

    stall = sum(iv.stall for iv in ivs)
    if us(stall) >= 0.005:
        by_pipe: dict[str, int] = {}
        for iv in ivs:
            if iv.stall:
                by_pipe[iv.pipe] = by_pipe.get(iv.pipe, 0) + iv.stall
        cores = len({(iv.engine, iv.core) for iv in ivs if iv.stall}) or 1
        parts = ", ".join(f"{p} {us(c / cores):.2f} us" for p, c in
                          sorted(by_pipe.items(), key=lambda kv: -kv[1])
                          if us(c / cores) >= 0.005)
        lines.append(f"stalls on shared L2/HBM bandwidth: {parts} per core "
                     f"(contention with the other cores)")
    if task.task_type in AICORE_TASK_TYPES and pipe and dur > 0:
        idle = 1.0 - busy.get(pipe, 0.0)
        if idle >= 0.2:
            lines.append(f"{pipe} is idle {_pct(idle)} of the task, waiting on flags from the "
                         f"other pipes: loads, compute and stores do not fully overlap")
    if lw > 0 and bound != "launch" and lw >= 0.1 * max(dur, 1):
        lines.append(f"its stream waited {us(lw):.2f} us for the launch before it started")
    # the dispatch head: from the task's start to its first block's start, outside the blocks
    first = min((iv.start for iv in ivs if iv.engine == "aicore"), default=task.start)
    if dur > 0 and first - task.start >= 0.2 * dur:
        lines.append(f"dispatch: {us(first - task.start):.2f} us before its blocks start "
                     f"({_pct((first - task.start) / dur)} of the task: the task scheduler "
                     f"dispatches its {task.block_dim} block(s) one after another; the chip's "
                     f"task_dispatch_us and block_dispatch_us)")
    if start_cycles and dur > 0 and start_cycles >= 0.2 * dur:
        lines.append(f"kernel start: {us(start_cycles):.2f} us per block before its first "
                     f"instruction ({_pct(start_cycles / dur)} of the task)")
    gm = gm_bytes(task)
    if task.flops and gm:
        lines.append(f"{task.flops / gm:.1f} flops per GM byte ({_bytes(gm)} moved to/from "
                     f"L2/HBM)")
    lines.extend(f"note: {n}" for n in task.notes)
    advice = ADVICE.get("kernel start" if kernel_start and bound == "scalar" else bound,
                        "no advice for this bound")
    sink = getattr(trace.chip, "sink_launch_us", 0.0)
    if bound == "launch" and us(lw) > 1.05 * sink:
        advice += ("; sinking the graph on the device (graph sink) pays the device-side "
                   f"launch ({sink:g} us) instead of the host's")
    lines.append(f"would help: {advice}")
    if bound == "launch" and run_bound in ADVICE and run_bound != "launch":
        key = "kernel start" if kernel_start else run_bound
        lines.append(f"once launched ({run_bound} bound): {ADVICE[key]}")
    return "\n".join(lines)
