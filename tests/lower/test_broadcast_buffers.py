"""A prebuilt TBE broadcast-pattern kernel's UB slots (broadcast_tilingcase.py: double-buffered
tiling cases only for a trailing-axes broadcast whose UB split falls on its last axis, and
for the pure element-wise pattern) and its tile bound (SPLIT_FACTORS, as ELEWISE's); a
prebuilt reduce kernel, single-buffered (reduce_tilingcase.py)."""

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.ir.tensor import Value
from ascendsim.lower.dynamic_tiling import broadcast_buffers

UB = 196608


class _Node:
    def __init__(self, op_type):
        self.op_type, self.name, self.attrs = op_type, "n", {}


def _v(shape, dtype="float16"):
    return Value("v", tuple(shape), dtype)


@pytest.mark.parametrize("op, ins, out, elem, want", [
    # Div (RealDiv) [4, 12, 256, 256] / [4, 12, 256, 1]: rows of 256 fit a tile: single-buffered
    ("Div", [(4, 12, 256, 256), (4, 12, 256, 1)], (4, 12, 256, 256), 4.0, (1, 32767)),
    # rows of 65536 fp32 are over the 16383-element limit: the UB split is on the last axis
    ("Mul", [(64, 65536), (64, 1)], (64, 65536), 12.0, (2, 16383)),
    # a broadcast that is not along the trailing axes: single-buffered
    ("Add", [(2, 1024, 4), (4,)], (2, 1024, 4), 6.0, (1, 32767)),
    ("BroadcastTo", [(64, 256, 1)], (64, 256, 3), 4.0, (1, 32767)),
])
def test_broadcast_kernels(op, ins, out, elem, want):
    dtype = "float32" if want[1] == 16383 else "float16"
    got = broadcast_buffers([_Node(op)], [_v(s, dtype) for s in ins], [_v(out, dtype)],
                            elem, UB)
    assert got == want


def test_same_shapes_and_scalars_are_not_broadcast_kernels():
    # the ELEWISE path (lower.tiling.elewise_tiles) takes these
    assert broadcast_buffers([_Node("Add")], [_v((8, 1024)), _v((8, 1024))], [_v((8, 1024))],
                             6.0, UB) is None
    assert broadcast_buffers([_Node("Mul")], [_v((8, 1024)), _v((1,))], [_v((8, 1024))],
                             4.0, UB) is None
    assert broadcast_buffers([_Node("Relu")], [_v((8, 1024))], [_v((8, 1024))], 4.0,
                             UB) is None


def test_a_binary_div_is_single_buffered():
    g = asim.Graph("div")
    x = g.input("x", shape=(4, 12, 256, 256), dtype="float16")
    y = g.input("y", shape=(4, 12, 256, 1), dtype="float16")
    g.output(g.add_node("Div", [x, y], name="op")[0])
    binary = asim.simulate(g, chip="ascend910b4", kernel_build="binary", fusion=False)
    jit = asim.simulate(g, chip="ascend910b4", kernel_build="jit", fusion=False)
    assert any("1 slot x" in n for n in binary.explain("op").splitlines())
    assert any("2 slots x" in n for n in jit.explain("op").splitlines())
    # serial tiles: the single-buffered kernel takes longer than the double-buffered one
    assert binary.trace.task("op").duration > jit.trace.task("op").duration


def test_a_binary_reduce_is_single_buffered():
    # TBE's dynamic reduce schedule sets no double buffer for a normal (not atomic) reduce
    g = asim.Graph("rs")
    x = g.input("x", shape=(32, 256, 384), dtype="float16")
    g.output(g.add_node("ReduceSum", [x, g.const(np.array([-1], np.int64), name="axes")],
                        {"keepdims": 0}, name="op")[0])
    binary = asim.simulate(g, chip="ascend910b4", kernel_build="binary", fusion=False)
    jit = asim.simulate(g, chip="ascend910b4", kernel_build="jit", fusion=False)
    assert any("1 slot x" in n for n in binary.explain("op").splitlines())
    # a jit build's static ReduceSumD (CceOp.core_schedule_reduce) is single-buffered too
    # (lower/dynamic_tiling.py `static_reduce`)
    assert any("1 slot x" in n for n in jit.explain("op").splitlines())


@pytest.mark.parametrize("dtype, tile", [
    # the UB over 8 live buffers of the compute dtype: bf16 computes in fp32
    ("float32", 6144), ("bfloat16", 6144), ("float16", 12288)])
def test_apply_adam_w_is_a_single_buffered_broadcast_kernel(dtype, tile):
    # apply_adam_w.py broadcasts its one-element tensors under an ELEWISE classify: the
    # broadcast schedule's original one-dim case, which has no double-buffered twin
    ins = [_v((1024, 1024), dtype)] * 3 + [_v((1,), dtype)] * 7 + [_v((1024, 1024), dtype)]
    outs = [_v((1024, 1024), dtype)] * 3
    assert broadcast_buffers([_Node("ApplyAdamW")], ins, outs, 28.0, UB) == (1, tile)


def test_a_binary_apply_adam_w_serialises_its_tiles():
    g = asim.Graph("adamw")
    big = [g.input(n, shape=(1024, 1024), dtype="float16") for n in ("var", "m", "v")]
    scalars = [g.input(n, shape=(1,), dtype="float16")
               for n in ("b1p", "b2p", "lr", "wd", "b1", "b2", "eps")]
    grad = g.input("grad", shape=(1024, 1024), dtype="float16")
    outs = g.add_node("ApplyAdamW", [*big, *scalars, grad], name="op")
    for o in outs:
        g.output(o)
    binary = asim.simulate(g, chip="ascend910b2", kernel_build="binary", fusion=False)
    jit = asim.simulate(g, chip="ascend910b2", kernel_build="jit", fusion=False)
    assert any("1 slot x" in n for n in binary.explain("op").splitlines())
    assert any("2 slots x" in n for n in jit.explain("op").splitlines())
    assert binary.trace.task("op").duration > jit.trace.task("op").duration
