"""Seed 003's Caffe Interp case on the ascend310: what the model gives for the two shapes.

    python bench/interp.py     # a few seconds

The seed reports that making an Interp (bilinear, corners aligned) satisfy the divisibility
condition (dst-1)/(src-1) integral, [1,18,175,175] -> [1,18,350,350] changed to
[1,18,176,176] -> [1,18,351,351], cut the whole model from 20 ms to 1.6 ms on an Atlas 310.
No source found names the mechanism, so the model runs both shapes on the same vector path;
this script prints both times and the path taken, for the record. Simulated figures repeat bit
for bit.
"""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.ir.graph import Graph

CHIP = "ascend310"
CASES = ((175, 350), (176, 351))   # seed 003: as first built, then divisible


def interp_graph(src: int, dst: int, dtype: str) -> Graph:
    """One Resize as ONNX writes Caffe's Interp: linear, corners aligned, sizes given."""
    g = Graph(f"interp_{src}_{dst}_{dtype}")
    x = g.input("x", [1, 18, src, src], dtype)
    sizes = g.const(np.array([1, 18, dst, dst], dtype=np.int64), name="sizes")
    y = g.add_node("Resize", [x, None, None, sizes], {
        "mode": "linear", "coordinate_transformation_mode": "align_corners"}, name="interp")
    g.output(*y)
    return g


def main() -> None:
    print(f"{'input':>14} {'output':>14} {'(dst-1)/(src-1)':>16} {'dtype':>8} {'us':>9}  path")
    for dtype in ("float16", "float32"):
        for src, dst in CASES:
            r = asim.simulate(interp_graph(src, dst, dtype), chip=CHIP)
            path = r.explain("interp").splitlines()[0].split(": ")[0]
            print(f"{str([src, src]):>14} {str([dst, dst]):>14} {(dst - 1) / (src - 1):>16.4f} "
                  f"{dtype:>8} {r.time_us:>9.2f}  {path}")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("interp", main))
