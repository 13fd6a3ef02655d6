"""A convolution's feature-map windows: consecutive M tiles re-read the input rows they share,
and those re-reads hit L2 (the same core read them one tile earlier), however large the
feature map (lower/cube.py, "Feature-map windows")."""

import re

import numpy as np

import ascendsim as asim
from ascendsim.lower.cube import window_rereads
from ascendsim.lower.cube_tiling import GemmSpec

GEN1 = "ascend910b_gen1"


def _conv(k: int, batch: int = 16, c: int = 32, hw: int = 160):
    g = asim.Graph("conv")
    x = g.input("x", (batch, c, hw, hw), "float16", "NC1HWC0")
    w = g.const(np.zeros((c, c, k, k), np.float16), "w")
    g.output(*g.add_node("Conv", [x, w], {"kernel_shape": [k, k], "pads": [k // 2] * 4},
                         name="mm"))
    return g


def _a_miss(g) -> float:
    note = asim.simulate(g, GEN1, fusion=False).explain("mm")
    return float(re.search(r"A miss ([0-9.]+)", note).group(1))


def test_window_rereads_count_the_overlapping_rows():
    """m_t 512 pixels of a 160-wide output: 3.2 rows, read with 2 halo rows of the padded
    162-pixel input by a 3x3 kernel: 5.2 x 162 / (3.2 x 160) = 1.645 reads of each input
    byte; a 1x1 stride-1 kernel and a MatMul read each byte once."""
    conv3 = GemmSpec(1, 16 * 160 * 160, 32 * 9, 32, "float16", 2, 2, 4,
                     conv_rows=(160, 162, 1, 3, 3))
    unique = 16 * 32 * 160 * 160 * 2
    assert abs(window_rereads(conv3, 512, 800, unique) - 5.2 * 162 / (3.2 * 160)) < 1e-9
    conv1 = GemmSpec(1, 16 * 160 * 160, 32, 32, "float16", 2, 2, 4, conv_rows=(160, 160, 1, 1, 1))
    assert window_rereads(conv1, 512, 800, 16 * 32 * 160 * 160 * 2) == 1.0
    mm = GemmSpec(1, 4096, 4096, 4096, "float16", 2, 2, 4)
    assert window_rereads(mm, 256, 16, 4096 * 4096 * 2) == 1.0


def test_only_first_reads_of_a_large_feature_map_miss():
    """YOLOv5's 3x3 32 -> 32 convolution at batch 16 on 160x160 (26 MB in, 26 MB out, more
    than half of the 910's 32 MB L2 together): its A reads miss only 1/1.6 of the time, the
    1x1 convolution's every time."""
    assert 0.55 <= _a_miss(_conv(3)) <= 0.68
    assert _a_miss(_conv(1)) == 1.0
