"""MulAddNFusion: AddN(Mul(x, scalar constant), y) as one FusedMulAddN kernel.

MindSpore's Ascend backend (mindspore/ccsrc/backend/optimizer/ascend/ir_fusion/
mul_addn_fusion.cc, class MulAddNFusion) rewrites AddN(Mul(X, Z), Y), Z a scalar or shape-(1,)
constant and the Mul read by nothing else, into FusedMulAddN(X, Y, Z). In a training step
this is the L2 weight decay, grad + weight * decay: the MindSpore ResNet-50 training profile
on a first-generation 910 (Huawei-Performance-Model/Ascend-910B, application_test/final_test/
resnet50_16_224_224) runs one optimizer-Momentum/FusedMulAddN per decayed parameter.

The fused node is a FusedOp (pattern "MulAddNFusion", shown as FusedMulAddN) whose subgraph
keeps the Mul and the Add, so its values are exactly the unfused ones; it lowers as one vector
task that keeps the product in UB.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Node
from ..ir.registry import Unit
from .fusion_rules import UbRules
from .partition import FusionGraph, unit_of
from .ub_fusion import UbFusionPass

#: the ops the pattern matches (pattern data): AddN of two inputs, and the scaling Mul
ADDN_OPS = ("Add", "Sum")
MUL_OPS = ("Mul",)
FUSED_TYPE = "FusedMulAddN"


def _scalar_const(fg: FusionGraph, value: str) -> bool:
    """A constant of one element (MindSpore: scalar or shape (1,))."""
    if not value or value not in fg.graph.constants:
        return False
    shape = tuple(fg.graph.values[value].shape)
    return shape in ((), (1,)) and np.asarray(fg.graph.const_value(value)).size == 1


class MulAddNFusion(UbFusionPass):
    """AddN(Mul(x, c), y), c a scalar constant: one FusedMulAddN task."""

    name = "MulAddNFusion"
    patterns = ("MulAddNFusion",)
    pattern = "MulAddNFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset(ADDN_OPS)

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if node.op_type not in ADDN_OPS or node.subgraph is not None \
                or len([i for i in node.inputs if i]) != 2 \
                or unit_of(fg.graph, node) != Unit.VECTOR:
            return None
        for v in node.inputs:
            mul = fg.producer_of(v) if v else None
            if mul is None or mul.op_type not in MUL_OPS or mul.subgraph is not None \
                    or len(fg.users(v)) != 1 or v in fg.graph_outputs:
                continue
            if sum(_scalar_const(fg, i) for i in mul.inputs) == 1:
                return [mul, node]
        return None

    def attrs(self, group: list[Node]) -> dict:
        return {**super().attrs(group), "display_type": FUSED_TYPE}


__all__ = ["MulAddNFusion", "FUSED_TYPE"]
