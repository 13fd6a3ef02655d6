"""Validation at the door (issue 14, Found 4-6): the builder rejects what it used to accept
and simulate, with a GraphError naming the node, value or attribute."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError


def test_reshape_with_wrong_element_count_names_the_node():
    g = asim.Graph("g")
    x = g.input("x", (2, 3))
    with pytest.raises(GraphError, match=r"node 'bad' \(Reshape\).*\(2, 3\) \(6 elements\) to "
                                         r"\[4, 2\] \(8 elements\)"):
        g.reshape(x, np.array([4, 2]), name="bad")
    assert g.reshape(x, np.array([3, -1])).shape == (3, 2)     # -1 and 0 still work
    assert g.reshape(x, np.array([0, 3])).shape == (2, 3)


@pytest.mark.parametrize("shape, bad", [((2, -3), "-3"), ((2, 2.5), "2.5"), ((2, True), "True"),
                                        ((2, ""), "''"), ((2, None), "None")])
def test_input_with_a_bad_dimension_names_the_input(shape, bad):
    with pytest.raises(GraphError, match=rf"'x'.*{bad}"):
        asim.Graph("g").input("x", shape)


def test_numpy_and_symbolic_dims_are_accepted():
    v = asim.Graph("g").input("x", (np.int64(2), "batch", 0))
    assert v.shape == (2, "batch", 0) and isinstance(v.shape[0], int)


def test_tensor_beyond_any_device_memory_is_rejected():
    g = asim.Graph("g")
    with pytest.raises(GraphError, match=r"value 'x' float16\[1099511627776, 1099511627776\]"):
        g.input("x", (2**40, 2**40), "float16")
    x = g.input("y", (2**24, 2**12), "float16")       # 2^37 bytes: large but possible
    with pytest.raises(GraphError, match="value 'big'"):   # an op output too
        g.tile(x, np.array([2**10, 2**10]), name="big")


@pytest.mark.parametrize("kw, attr", [({"axis": 1.5}, "axis"), ({"axis": "1"}, "axis"),
                                      ({"axis": [1]}, "axis")])
def test_integer_attribute_of_another_type_names_node_and_attribute(kw, attr):
    g = asim.Graph("g")
    x = g.input("x", (2, 3))
    with pytest.raises(GraphError, match=rf"node 'sm' \(Softmax\): attribute '{attr}' must be "
                                         rf"an integer"):
        g.softmax(x, name="sm", **kw)


def test_attribute_types_checked_and_normalised():
    g = asim.Graph("g")
    x = g.input("x", (2, 3))
    y = g.softmax(x, axis=np.int64(0))
    assert g.producer(y.name).attrs["axis"] == 0 and type(g.producer(y.name).attrs["axis"]) is int
    assert g.leaky_relu(x, alpha=1).name    # an int where a float is expected is a number
    with pytest.raises(GraphError, match="attribute 'alpha' must be a number"):
        g.leaky_relu(x, alpha="0.1", name="lr")
    with pytest.raises(GraphError, match="attribute 'alpha' must be finite"):
        g.leaky_relu(x, alpha=float("nan"), name="lr2")
    with pytest.raises(GraphError, match="attribute 'perm' must be a list of integers"):
        g.transpose(x, perm=[1.5, 0], name="tr")
    with pytest.raises(GraphError, match="attribute 'approximate' must be a string"):
        g.gelu(x, approximate=1, name="ge")


def test_constant_gather_index_out_of_range_names_the_indices():
    g = asim.Graph("g")
    x = g.input("x", (5, 3))
    idx = g.const(np.array([0, 7], np.int64), name="idx")
    with pytest.raises(GraphError, match=r"node 'ga' \(Gather\): constant indices 'idx' hold 7"):
        g.gather(x, idx, name="ga")
    ok = g.gather(x, np.array([-5, 4], np.int64), axis=0)      # the edges are in range
    assert ok.shape == (2, 3)
    runtime = g.gather(x, g.input("i", (2,), "int64"))          # not a constant: run time
    assert runtime.shape == (2, 3)


def test_negative_dimension_cli_exits_2(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from ascendsim.cli import main

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "neg",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, -3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "neg.onnx"
    onnx.save(model, path)
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "negative dimension -3" in err and "'x'" in err


def test_a_graph_without_outputs_is_not_simulated_in_zero_cycles():
    g = asim.Graph("mute")
    g.relu(g.input("x", (2, 3)))
    with pytest.raises(GraphError, match="graph 'mute' has no outputs"):
        asim.simulate(g)


def _nchw():
    g = asim.Graph("g")
    return g, g.input("x", (1, 4, 8, 8)), g.const(np.ones((4, 4, 3, 3), np.float32), name="w")


@pytest.mark.parametrize("build, named", [
    (lambda g, x, w: g.conv(x, w, strides=[0, 0], name="n"), r"node 'n' \(Conv\): strides"),
    (lambda g, x, w: g.conv(x, w, pads=[-1, -1, -1, -1], name="n"), "pads"),
    (lambda g, x, w: g.conv(x, w, group=0, name="n"), "group"),
    (lambda g, x, w: g.max_pool(x, kernel_shape=[0, 0], name="n"), "kernel_shape"),
    (lambda g, x, w: g.lrn(x, size=0, name="n"), "size"),
    (lambda g, x, w: g.depth_to_space(x, blocksize=0, name="n"), "blocksize"),
    (lambda g, x, w: g.space_to_depth(x, blocksize=3, name="n"), "not divisible by blocksize"),
    (lambda g, x, w: g.split(x, axis=1, num_outputs=3, name="n"), "split dim 4 into 3"),
    (lambda g, x, w: g.concat(x, x, axis=4, name="n"), "axis 4"),
    (lambda g, x, w: g.tile(x, np.array([1, -1, 1, 1]), name="n"), "negative dimension -4"),
    (lambda g, x, w: g.pad(x, np.array([0, 0, -5, -5, 0, 0, -5, -5]), name="n"),
     "negative dimension"),
    (lambda g, x, w: g.constant_of_shape(np.array([2, -1]), name="n"), "negative dim"),
    (lambda g, x, w: g.range(np.float32(0), np.float32(1e18), np.float32(1e-3), name="n"),
     "physical ceiling"),
    (lambda g, x, w: g.reduce_sum(x, np.array([1.5]), name="n"), "must hold integers"),
])
def test_attribute_and_shape_ranges_name_the_node(build, named):
    g, x, w = _nchw()
    with pytest.raises(GraphError, match="node 'n'") as err:
        build(g, x, w)
    assert re.search(named, str(err.value)), str(err.value)
