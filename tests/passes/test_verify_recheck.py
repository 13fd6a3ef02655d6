"""The verifier that re-checks only what changed since its last success (`verify._recheck`)
gives the verdict of a full check after any edit a pass can make (seeded random edits)."""

from __future__ import annotations

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.ir.graph import Node
from ascendsim.ir.tensor import Value
from ascendsim.passes import verify
from ascendsim.passes.verify import Verifier, verify_graph


def _chain_graph(seed: int) -> asim.Graph:
    rng = np.random.default_rng(seed)
    g = asim.Graph(f"r{seed}")
    vals = [g.input("x", (3, 4)), g.input("y", (3, 4))]
    g.const(np.ones((3, 4), np.float32), name="c1")
    vals.append(g.values["c1"])
    for _ in range(14):
        if rng.random() < 0.5:
            vals.append(getattr(g, str(rng.choice(["relu", "exp", "neg"])))(
                vals[int(rng.integers(len(vals)))]))
        else:
            a, b = rng.integers(len(vals), size=2)
            vals.append(getattr(g, str(rng.choice(["add", "mul"])))(vals[int(a)], vals[int(b)]))
    g.output(vals[-1], vals[-2])
    return g


def _verdict(check, graph: asim.Graph) -> str:
    try:
        check(graph)
    except GraphError as exc:
        return str(exc)
    return "ok"


def _edit(g: asim.Graph, rng: np.random.Generator) -> None:
    """One random edit: valid (a rewire to an earlier value, a node replaced by an equal new
    object, a swap that keeps the order, a fresh node appended) or breaking (a swap out of
    order, a dangling read, a value dropped or re-shaped, a duplicate name or output)."""
    nodes = g.nodes
    i = int(rng.integers(len(nodes)))
    n = nodes[i]
    kind = int(rng.integers(14))
    if kind == 0:                              # the same node as a new object
        nodes[i] = Node(n.name, n.op_type, n.inputs, n.outputs, dict(n.attrs))
    elif kind == 11:                           # a new node placed before what it reads
        out = g.fresh_value_name("v")
        g.values[out] = Value(out, (3, 4), "float32")
        nodes.insert(0, Node(g.fresh_node_name("Early"), "Neg", (nodes[-1].outputs[0],), (out,)))
    elif kind == 12:                           # a constant named as a node's output
        g.constants[n.outputs[0]] = np.zeros((3, 4), np.float32)
    elif kind == 13:                           # a new node writing a value already written
        nodes.append(Node(g.fresh_node_name("Twice"), "Relu", (g.inputs[0],), n.outputs))
    elif kind == 10:                           # replaced by a node of another name (a fusion)
        nodes[i] = Node(g.fresh_node_name("New"), n.op_type, n.inputs, n.outputs, n.attrs)
    elif kind == 1:                            # swap two neighbours (may break the order)
        j = min(i + 1, len(nodes) - 1)
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif kind == 2:                            # read a value that does not exist
        nodes[i] = Node(n.name, n.op_type, ("nowhere",) + n.inputs[1:], n.outputs, n.attrs)
    elif kind == 3:                            # drop the Value of an output
        g.values.pop(n.outputs[0], None)
    elif kind == 4:                            # re-declare an output with another shape
        g.values[n.outputs[0]] = Value(n.outputs[0], (5,), "float32")
    elif kind == 5:                            # restore a sane Value (repairs kind 3 and 4)
        for m in nodes:
            for o in m.outputs:
                if o not in g.values or g.values[o].shape != (3, 4):
                    g.values[o] = Value(o, (3, 4), "float32")
    elif kind == 6:                            # a second node of the same name
        nodes.append(Node(n.name, "Relu", (g.inputs[0],), (g.fresh_value_name("v"),)))
        g.values[nodes[-1].outputs[0]] = Value(nodes[-1].outputs[0], (3, 4), "float32")
    elif kind == 7:                            # a fresh, valid node appended
        out = g.fresh_value_name("v")
        g.values[out] = Value(out, (3, 4), "float32")
        nodes.append(Node(g.fresh_node_name("Relu"), "Relu", (n.outputs[0],), (out,)))
    elif kind == 8:                            # a node removed (its readers may dangle)
        del nodes[i]
    else:                                      # a constant replaced or removed
        if "c1" in g.constants and rng.random() < 0.5:
            del g.constants["c1"]
        else:
            g.constants["c1"] = np.full((3, 4), 2.0, np.float32)
            g.values.setdefault("c1", Value("c1", (3, 4), "float32"))


@pytest.mark.parametrize("seed", range(12))
def test_recheck_verdict_equals_the_full_check_after_random_edits(seed, monkeypatch):
    outcomes: list[bool] = []
    recheck = verify._recheck

    def counted(*args):
        passed = recheck(*args)
        outcomes.append(passed is not None)
        return passed

    monkeypatch.setattr(verify, "_recheck", counted)
    rng = np.random.default_rng(seed)
    g = _chain_graph(seed)
    check = Verifier()
    check(g, "first")
    verdicts = []
    for _ in range(80):
        before = (list(g.nodes), dict(g.values), dict(g.constants))
        _edit(g, rng)
        got = _verdict(lambda graph: check(graph, "P"), g)
        assert got == _verdict(lambda graph: verify_graph(graph, "P"), g)
        verdicts.append(got == "ok")
        if got != "ok":          # undo (the same objects): the next edits start from a sound graph
            g.nodes[:] = before[0]
            g.values.clear()
            g.values.update(before[1])
            g.constants.clear()
            g.constants.update(before[2])
            check(g, "undo")         # sound again: the check after it is a re-check
    assert sum(verdicts) > 10 and not all(verdicts)   # the edits both keep and break the graph
    assert sum(outcomes) >= 10                        # sound graphs passed by the re-check


def test_recheck_names_the_pass_and_the_node_a_removed_producer_left_dangling():
    g = _chain_graph(0)
    check = Verifier()
    check(g, "first")
    victim = next(n for n in g.nodes if any(n.outputs[0] in m.inputs for m in g.nodes))
    g.nodes.remove(victim)
    reader = next(m for m in g.nodes if victim.outputs[0] in m.inputs)
    with pytest.raises(GraphError, match=f"pass 'Broken' broke graph 'r0': node "
                                         f"'{reader.name}'.*'{victim.outputs[0]}'"):
        check(g, "Broken")
