"""Property: for random element-wise DAGs (broadcasting operands, shared values, several
outputs), UB fusion and graph-kernel fusion leave the outputs unchanged."""

from __future__ import annotations

from fusion_helpers import assert_same_values, gk_stages, ub_stage
from hypothesis import given, settings
from hypothesis import strategies as st

from ascendsim.ir.graph import Graph

UNARY = ("relu", "neg", "abs", "sigmoid", "tanh")
BINARY = ("add", "sub", "mul")
BASE = (2, 3, 4)


@st.composite
def graphs(draw) -> Graph:
    g = Graph("random")
    vals = []
    for i in range(draw(st.integers(1, 3))):
        mask = draw(st.tuples(*[st.booleans()] * len(BASE)))
        shape = tuple(1 if m else d for m, d in zip(mask, BASE))
        vals.append(g.input(f"x{i}", shape[draw(st.integers(0, 2)):]))
    for _ in range(draw(st.integers(2, 9))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            vals.append(getattr(g, op)(draw(st.sampled_from(vals))))
        else:
            op = draw(st.sampled_from(BINARY))
            a = draw(st.sampled_from(vals))
            b = draw(st.sampled_from(vals)) if draw(st.booleans()) else \
                draw(st.floats(-2, 2, allow_nan=False, width=32))
            vals.append(getattr(g, op)(a, b))
    made = [v for v in vals if v.name not in g.inputs]
    g.output(made[-1])
    if draw(st.booleans()):
        g.output(draw(st.sampled_from(made)))
    g.remove_unused()
    return g


@settings(max_examples=20, derandomize=True, deadline=None)
@given(graphs(), st.sampled_from(["seed", "cann8"]))
def test_ub_fusion_preserves_values(g, rules):
    assert_same_values(g, ub_stage(g, rules=rules).graph)


@settings(max_examples=20, derandomize=True, deadline=None)
@given(graphs())
def test_graph_kernel_fusion_preserves_values(g):
    assert_same_values(g, gk_stages(g).graph)
