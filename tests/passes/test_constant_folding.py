"""ConstantFoldingPass: shape chains fold with shape inference to a fixpoint; lazy and capped."""

from __future__ import annotations

import numpy as np

import ascendsim as asim
from ascendsim.api import optimize
from ascendsim.ir.tensor import LazyTensor


def op_types(graph: asim.Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _shape_chain() -> asim.Graph:
    g = asim.Graph("chain")
    x = g.input("x", (2, 3, 4))
    d0 = g.gather(g.shape(x), np.array([0], np.int64), axis=0)
    y = g.reshape(x, g.concat(d0, np.array([-1], np.int64), axis=0))
    g.output(g.relu(y))
    return g


def test_shape_gather_reshape_folds(same_outputs):
    g = _shape_chain()
    assert g.values[g.nodes[3].outputs[0]].shape != (2, 12)
    res = same_outputs(g)
    assert op_types(res.graph) == ["Reshape", "Relu"]
    assert res.graph.values[res.graph.nodes[0].outputs[0]].shape == (2, 12)
    assert res.log.counts()["ConstantFoldingPass"] == (3, 3)     # Shape, Gather, Concat
    assert res.log.record("ConstantFoldingPass").result.patterns["ShapeFolding"].effected == 1


def test_constant_of_shape_becomes_lazy_constant():
    g = asim.Graph("cos")
    x = g.input("x", (512, 1024))
    c = g.constant_of_shape(np.array([512, 1024], np.int64), value=np.array([0.5], np.float32))
    g.output(g.add(x, c))
    res = optimize(g)
    assert op_types(res.graph) == ["Add"]
    const = res.graph.constants[res.graph.nodes[0].inputs[1]]
    assert isinstance(const, LazyTensor) and not const._cache     # not materialised yet
    assert const.nbytes == 512 * 1024 * 4
    out = asim.execute(res.graph, {"x": np.zeros((512, 1024), np.float32)})
    assert float(out[res.graph.outputs[0]][3, 7]) == 0.5


def test_expand_of_constant_folds(same_outputs):
    g = asim.Graph("exp")
    x = g.input("x", (3, 4))
    e = g.expand(np.arange(4, dtype=np.float32), np.array([3, 4], np.int64))
    g.output(g.mul(x, e))
    res = same_outputs(g)
    assert op_types(res.graph) == ["Mul"]


def test_fold_over_limit_is_refused_and_logged(same_outputs):
    g = asim.Graph("big")
    x = g.input("x", (64, 64))
    w = g.const(np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64), name="w")
    g.output(g.mul(x, g.transpose(w, perm=[1, 0])))
    res = same_outputs(g, fold_limit_bytes=1024)
    assert op_types(res.graph) == ["Transpose", "Mul"]
    assert res.log.counts()["ConstantFoldingPass"] == (1, 0)     # refused once, not per round
    why = "fold would materialise 16.0 KiB > limit 1.0 KiB (fold_limit_bytes)"
    assert [r.why for r in res.log.refusals] == [why]
    assert f"not folded 'Transpose_0' (Transpose): {why}" in res.log.explain()


def test_generator_fold_is_free_whatever_its_size(opt):
    """A ConstantOfShape of 1 GiB folds to a description; nothing is allocated."""
    g = asim.Graph("huge")
    x = g.input("x", (16384, 16384))
    c = g.constant_of_shape(np.array([16384, 16384], np.int64),
                            value=np.array([1.0], np.float32))
    g.output(g.mul(x, c))
    res = opt(g, fold_limit_bytes=1024)
    assert op_types(res.graph) == ["Mul"]
    lazy = res.graph.constants[res.graph.nodes[0].inputs[1]]
    assert isinstance(lazy, LazyTensor) and lazy.nbytes == 2**30 and not lazy._cache


def test_non_constant_input_is_not_folded(same_outputs):
    g = asim.Graph("nf")
    x = g.input("x", (4,))
    g.output(g.add(g.relu(x), g.exp(np.ones(4, np.float32))))
    res = same_outputs(g)
    assert sorted(op_types(res.graph)) == ["Add", "Relu"]
