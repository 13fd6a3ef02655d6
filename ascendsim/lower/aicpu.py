"""Lowering of an op that runs on the AI CPU: one task of launch, reads, compute and writes.

Note on the model
-----------------
An AI CPU op is one task on one AI CPU. Its time has the parts msprof's aicpu CSV splits
(Dispatch_time, Memcpy_time, Compute_time; reference section 6, HIA-AICPU-CSV), in turn:
`ai_cpu_task_launch_us` (the framework's dispatch), the reads of every input from GM, the
compute, the writes of every output to GM. The reads and writes are flows through the same
shared L2/HBM fabric the AI Cores use (`ascendsim.sim.engine`), each capped at one AI CPU's
`ai_cpu_memory_bytes_per_s` and counted as HBM traffic (the AI CPU does not see the AI
Cores' L2 residency in this model), so an AI CPU op slows when AI Cores saturate HBM.
The compute is work items (the larger of the op's largest operand's elements and its flops)
/ (`ai_cpu_op_elements_per_cycle[class]` x `ai_cpu_clock_hz`), with
the class read off the op's registry entry (`aicpu_class`): data-dependent ops (category
opaque, e.g. NonZero, DropOutGenMask) are "index", ops whose vector class is transcendental
(exp, sqrt, div: e.g. Pow) are "transcendental", the rest "elementwise".
"""

from __future__ import annotations

from ..hw.names import ENGINE_AICPU, TASK_AI_CPU
from ..ir.graph import Node
from ..ir.registry import Category, OpDef, VecClass, get_op
from .context import Lowering, TaskSpec
from .formats import ND
from .movement import ensure
from .program import Phase

#: registry vector class -> AI CPU op class (anything else computes as "elementwise")
AICPU_CLASS_OF_VEC = {VecClass.EXP: "transcendental", VecClass.SQRT: "transcendental",
                      VecClass.DIV: "transcendental"}


def aicpu_class(opdef: OpDef) -> str:
    """The AI CPU op class of a registry op (see the module note)."""
    if opdef.category == Category.OPAQUE:
        return "index"
    return AICPU_CLASS_OF_VEC.get(opdef.vec_class, "elementwise")


def lower_aicpu(low: Lowering, node: Node) -> None:
    """One AI_CPU task for `node` (see the module note)."""
    chip = low.chip
    ins = [ensure(low, i, ND) for i in node.inputs if i]
    outs = list(node.outputs)
    in_vals = [low.value(i) for i in ins]
    out_vals = [low.value(o) for o in outs]
    opdef = get_op(node.op_type, node.name)
    flops = int(opdef.flops(in_vals, out_vals, node.attrs))
    elems = max([v.numel for v in in_vals + out_vals] + [flops])
    cls = aicpu_class(opdef)
    rate = getattr(chip.ai_cpu_op_elements_per_cycle, cls)
    compute = chip.cycles(elems / (rate * chip.ai_cpu_clock_hz))
    launch = chip.cycles(chip.ai_cpu_task_launch_us * 1e-6)
    rd = sum(v.nbytes for v in in_vals)
    wr = sum(v.nbytes for v in out_vals)
    phase = Phase(ENGINE_AICPU, aicpu_cycles=compute, aicpu_cores=1,
                  aicpu_launch_cycles=launch, aicpu_read_bytes=rd, aicpu_write_bytes=wr)
    bw = chip.ai_cpu_memory_bytes_per_s / 1e9
    task = low.add_task(TaskSpec(
        node.name, node.op_type, TASK_AI_CPU, [phase], ins, outs, [ND] * len(ins),
        [ND] * len(outs), flops,
        [f"AI CPU ({cls} op): {chip.ai_cpu_task_launch_us:g} us launch, then {rd} B read "
         f"from HBM at up to {bw:g} GB/s (shared with the AI Cores), {elems} elements at "
         f"{rate:g} element/cycle x {chip.ai_cpu_clock_hz / 1e9:g} GHz, {wr} B written"]))
    task.traffic.update({("DDR", "read"): rd, ("DDR", "write"): wr})


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"aicpu": lower_aicpu}

__all__ = ["AICPU_CLASS_OF_VEC", "aicpu_class", "lower_aicpu", "LOWERINGS"]
