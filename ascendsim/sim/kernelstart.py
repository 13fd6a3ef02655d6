"""The tiling data a kernel's blocks read at their start, by kernel kind (`Engine` note,
"Kernel start").

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

#: DataCache line of the scalar unit's GM reads (bytes)
DCACHE_LINE_BYTES = 64
#: tiling bytes of a kernel with cube work: the Matmul API's TCubeTiling (50 int32 fields)
CUBE_TILING_BYTES = 200


def tiling_lines(ph) -> int:
    """DataCache lines of tiling data each block of phase `ph` reads at its start: a phase
    with cube work (pipe M) reads a TCubeTiling, any other at least one line."""
    if any("M" in g.pipes for g in ph.groups):
        return -(-CUBE_TILING_BYTES // DCACHE_LINE_BYTES)
    return 1


__all__ = ["CUBE_TILING_BYTES", "DCACHE_LINE_BYTES", "tiling_lines"]
