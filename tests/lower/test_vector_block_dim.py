"""A vector op pinned to its kernel's core count (`block_dim`, a kernel attribute every op
accepts: ir.graph.KERNEL_ATTRS), as a profile's Block Dim column shows it (torch_npu's SwiGlu
on 6 cores of the 910B4 for shapes up to 1M elements, pyasc examples/07_swiglu README)."""

import pytest

import ascendsim as asim
from ascendsim.errors import GraphError, SimulationError

B4 = "ascend910b4"        # 40 vector cores


def _relu(shape, dtype="float32", **attrs):
    g = asim.Graph("relu")
    x = g.input("x", shape, dtype)
    g.output(g.relu(x, **attrs))
    return g


def _task(g, chip=B4, fusion=False):
    res = asim.simulate(g, chip, fusion=fusion)
    return res, res.trace.tasks


def test_pinned_vector_kernel_runs_on_that_many_cores():
    _, (task,) = _task(_relu((1024, 1024), block_dim=6))
    assert task.block_dim == 6
    _, (free,) = _task(_relu((1024, 1024)))
    assert free.block_dim == 40


def test_fewer_cores_take_longer_on_a_large_streaming_op():
    """4 MB in and out on 6 of 40 cores: each core streams 40/6 as many bytes, so the kernel
    takes far longer (not the full 6.7x: six cores read at their per-core GM -> UB rate, 6 x
    49 B/cycle at 1.65 GHz = 485 GB/s, where all 40 share the chip's HBM rate, 728 GB/s; code
    cached, so the 40 blocks' cold instruction fetches do not blur the streams)."""
    pinned = asim.simulate(_relu((1024, 1024), block_dim=6), B4, fusion=False, icache="warm")
    free = asim.simulate(_relu((1024, 1024)), B4, fusion=False, icache="warm")
    assert pinned.time_us > 1.4 * free.time_us


def test_block_dim_zero_is_the_kernels_own_choice():
    a, _ = _task(_relu((256, 1024), block_dim=0))
    b, _ = _task(_relu((256, 1024)))
    assert a.cycles == b.cycles


def test_block_dim_past_the_vector_cores_fails_fast():
    with pytest.raises(SimulationError, match=r"block_dim 41 exceeds the 40 vector cores"):
        _task(_relu((256, 1024), block_dim=41))


@pytest.mark.parametrize("value, message", [
    (-1, r"'block_dim' must be >= 0"),
    (2.5, r"'block_dim' must be an integer"),
])
def test_bad_block_dim_names_the_node(value, message):
    with pytest.raises(GraphError, match=r"node 'Relu_0' \(Relu\): attribute " + message):
        _relu((16, 16), block_dim=value)


def test_unknown_attribute_lists_block_dim_among_the_valid_ones():
    g = asim.Graph("t")
    x = g.input("x", (4, 4), "float32")
    with pytest.raises(GraphError, match=r"unknown attribute\(s\) bogus; valid: block_dim"):
        g.relu(x, bogus=1)


def test_a_pinned_node_is_a_kernel_of_its_own():
    """Fusion leaves a pinned node alone (a fused kernel could not follow its core count) and
    the pass log says why; its unpinned neighbours still fuse."""
    g = asim.Graph("chain")
    x = g.input("x", (64, 1024), "float32")
    y = g.relu(g.mul(x, 2.0), block_dim=4)
    g.output(g.add(y, 1.0))
    res, tasks = _task(g, fusion=True)
    relu = [t for t in tasks if t.op_type == "Relu"]
    assert [t.block_dim for t in relu] == [4]
    assert any("has its own block_dim" in f.why for f in res.pass_log.refusals)
    free = asim.Graph("chain")
    x = free.input("x", (64, 1024), "float32")
    free.output(free.add(free.relu(free.mul(x, 2.0)), 1.0))
    _, fused = _task(free, fusion=True)
    assert len(fused) == 1


def test_a_lowering_that_cannot_follow_block_dim_refuses_it():
    """The check behind every lowering: a kernel split over more cores than the node's
    block_dim is an error, never a silently different kernel."""
    from types import SimpleNamespace

    from ascendsim.lower.lowering import check_block_dim

    node = SimpleNamespace(name="n", op_type="Foo")
    task = SimpleNamespace(op_name="n", phases=[SimpleNamespace(block_dim=8)])
    with pytest.raises(SimulationError, match=r"block_dim 4 is not followed.*8 cores"):
        check_block_dim(node, 4, [task])
    check_block_dim(node, 8, [task])
