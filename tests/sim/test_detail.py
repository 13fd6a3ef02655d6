"""Two levels of detail over one model: block (coalesced steady state) vs tile (every
instruction an event) agree within 5% on total time.

The test set keeps tile detail under a few seconds: GEMMs 128^3..2048^3, the distinct
ResNet-50 v1.5 conv layers at batch 32, element-wise and reduce ops of 1K..4M elements.
The full set (4096^3, 64M elements) is in bench/sim_speed.py.
"""


import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.sim import COALESCE_MIN
from ascendsim.sim.engine import KERNEL_START_KIND

TOL = 0.05


def _agree(g):
    block = simulate(g, detail="block", fusion=False)
    tile = simulate(g, detail="tile", fusion=False)
    err = abs(block.cycles - tile.cycles) / tile.cycles
    assert err <= TOL, f"block {block.cycles} vs tile {tile.cycles}: {100 * err:.2f}%"
    return block, tile


@pytest.mark.parametrize("n", [128, 256, 512, 1024, 2048])
def test_gemm(n):
    g = asim.Graph(f"gemm{n}")
    g.output(g.matmul(g.input("a", (n, n), "float16"), g.input("b", (n, n), "float16")))
    block, tile = _agree(g)
    assert tile.events >= block.events


def _resnet_layers():
    """(name, input shape, weight shape, conv attrs) of the distinct conv layers of the
    built-in ResNet-50 v1.5 at batch 32."""
    g = asim.models.resnet50(batch=32)
    seen, out = set(), []
    for n in g.nodes:
        if n.op_type != "Conv":
            continue
        x, w = g.value(n.inputs[0]).shape, g.value(n.inputs[1]).shape
        key = (x, w, tuple(n.attrs["strides"]), tuple(n.attrs["pads"]))
        if key not in seen:
            seen.add(key)
            out.append((n.name, x, w, {"strides": n.attrs["strides"], "pads": n.attrs["pads"]}))
    return out


@pytest.mark.parametrize("layer", _resnet_layers(), ids=lambda r: r[0])
def test_resnet50_conv_layer_batch32(layer):
    _, xshape, wshape, attrs = layer
    g = asim.Graph("conv")
    x = g.input("x", xshape, "float16")
    g.output(g.conv(x, g.weight("w", wshape, "float16"), **attrs))
    _agree(g)


@pytest.mark.parametrize("n", [1024, 65536, 1024 * 1024, 4 * 1024 * 1024])
@pytest.mark.parametrize("op", ["add", "reduce_sum"])
def test_elementwise_and_reduce(op, n):
    g = asim.Graph(op)
    if op == "add":
        g.output(g.add(g.input("a", (n,), "float16"), g.input("b", (n,), "float16")))
    else:
        g.output(g.reduce_sum(g.input("a", (n // 1024, 1024), "float16"), axes=[1]))
    _agree(g)


def test_block_detail_coalesces_long_programs():
    """A 4096x1024x4096 GEMM has >= COALESCE_MIN tiles per core: block detail shows at most two
    intervals per pipe per core for it (the measured prefix and the coalesced rest), standing
    for many instructions, with far fewer events than tile detail."""
    g = asim.Graph("gemm")
    g.output(g.matmul(g.input("a", (4096, 1024), "float16"),
                      g.input("b", (1024, 4096), "float16"), name="mm"))
    block = simulate(g, detail="block", fusion=False)
    tile = simulate(g, detail="tile", fusion=False)
    task = block.trace.task("mm")
    ivs = [iv for iv in block.trace.intervals_of(task.task_id) if iv.core == 0
           and iv.kind != KERNEL_START_KIND]     # the block start: one S interval apart
    pipes = {iv.pipe for iv in ivs}
    assert len(ivs) <= 2 * len(pipes)
    assert max(iv.count for iv in ivs if iv.pipe == "M") >= COALESCE_MIN
    t_task = tile.trace.task("mm")
    assert sum(iv.count for iv in ivs if iv.pipe == "M") == sum(
        iv.count for iv in tile.trace.intervals_of(t_task.task_id)
        if iv.core == 0 and iv.pipe == "M")
    assert block.events < tile.events


@pytest.mark.parametrize("x,r", [((4, 1, 64, 128), (4, 1, 1, 128)),
                                 ((64, 1, 64, 128), (64, 1, 1, 128))])
def test_head_loop_first_tile_is_not_the_pace(x, r):
    """CANN's RoPE head loop on an A2 (lower/tiling.py `head_loop_work`): the first head of a
    UB step also loads and casts cos and sin; block detail must not run that work again
    with every coalesced head (coalesce.pace_profile), so both detail levels agree."""
    g = asim.Graph("rope")
    a = g.input("x", x, "float16")
    g.output(g.rotary_mul(a, g.input("c", r, "float16"), g.input("s", r, "float16")))
    block = simulate(g, "ascend910b", detail="block", fusion=False)
    tile = simulate(g, "ascend910b", detail="tile", fusion=False)
    err = abs(block.cycles - tile.cycles) / tile.cycles
    assert err <= TOL, f"block {block.cycles} vs tile {tile.cycles}: {100 * err:.2f}%"
