"""What a kernel's blocks do before their first instruction (`Engine` note, "Kernel start"):
the tiling data they read, by kernel kind, and the instruction caches of the cores.

The host computes a kernel's tiling data and passes it as a kernel argument in GM; each block
copies it to its stack through the scalar unit (Ascend C best practices, "Limit the TilingData
size": the copy takes microseconds because GM access is slow). Scalar GM reads go through the
core's DataCache in 64-byte lines (Ascend C, "Scalar reads and writes"), so the copy is one
dependent line fill after another: its cost is lines x the chip's `tiling_line_cycles`, not
bytes over a bandwidth. Kernel arguments are 512-byte aligned (Ascend C best practices, "Avoid
same-address access"), so a struct of B bytes spans ceil(B / 64) lines.

Sizes by kernel kind: a phase with cube work runs the Matmul API and reads its TCubeTiling (50
int32 fields = 200 bytes, asc-devkit `lib/matmul/matmul_tilingdata.h`; MatMulV3's own run
fields are not counted): 4 lines. Any other kernel reads at least one line.
"""

from __future__ import annotations

from ..hw.names import CUBE_TILING_BYTES, DCACHE_LINE_BYTES


def tiling_lines(ph) -> int:
    """DataCache lines of tiling data each block of phase `ph` reads at its start: a phase
    with cube work (pipe M) reads a TCubeTiling, any other at least one line."""
    if any("M" in g.pipes for g in ph.groups):
        return -(-CUBE_TILING_BYTES // DCACHE_LINE_BYTES)
    return 1


class InstructionCaches:
    """Which kernel each AI Core last ran, for the cold-instruction-cache start
    (`Engine` note, "Kernel start"): a block whose core last ran another kernel fetches the
    kernel binary into its instruction cache before it runs, `cycles` per such block of its
    phase (the cores fetch the same binary at once and are served one after another). A
    kernel is told apart by its op type, task type, core kind and input dtypes: a prebuilt
    dynamic-shape kernel (`Phase.binary` set) is one binary per dtype signature, serving every
    shape; a kernel compiled for its shapes (a graph's static kernels, a jit build) is one
    binary per shape signature as well (its inputs' and outputs' shapes), so the same op on
    another shape starts cold. Attributes a static kernel also compiles in (a slice's bounds)
    are not part of a task and do not tell kernels apart here.

    `start`: "cold" - the cores hold no kernel when the run starts (a graph after other work,
    a benchmark harness that runs a flush kernel before the timed call); "warm" - every kernel
    finds its code cached (a loop of one kernel; no state is kept). `cycles` 0: no state."""

    def __init__(self, cycles: int, start: str = "cold") -> None:
        self.cycles = cycles
        self.tracked = cycles > 0 and start == "cold"
        self.last: dict[int, tuple] = {}

    @staticmethod
    def binary(task, ph) -> tuple:
        """What a core's instruction cache holds after running phase `ph` of `task`."""
        sig = tuple(getattr(v, "dtype", None) for v in task.inputs)
        if not ph.binary:
            sig = (sig, tuple(tuple(getattr(v, "shape", ()) or ())
                              for v in (*task.inputs, *task.outputs)))
        return (task.op_type, task.task_type, bool(ph.vector_cores), sig)

    def _count_cold(self, key: tuple, ids) -> int:
        last = self.last
        return sum(1 for c in ids if last.get(c) != key)

    def cold(self, task, ph, ids) -> int:
        """How many of the cores `ids` would start phase `ph` of `task` cold."""
        if not self.tracked:
            return 0
        return self._count_cold(self.binary(task, ph), ids)

    def touch(self, task, ph, ids) -> int:
        """The cold cores among `ids` for phase `ph` of `task`; they then hold its kernel."""
        if not self.tracked:
            return 0
        key = self.binary(task, ph)
        n = self._count_cold(key, ids)
        self.last.update(dict.fromkeys(ids, key))
        return n


__all__ = ["CUBE_TILING_BYTES", "DCACHE_LINE_BYTES", "InstructionCaches", "tiling_lines"]
