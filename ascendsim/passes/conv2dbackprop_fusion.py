"""UB fusions of the ReLU gradient into the data gradient's cube kernel (training graphs).

MindSpore's Ascend backend fuses ReluGradV2 into Conv2DBackpropInput (the data gradient of a
Conv, here ConvTranspose) as one TBE kernel, the ReLU gradient running in the cube's epilogue:
`Conv2DBackpropEltwiseFusionPass` (Conv2DBackpropInput -> ReluGradV2) and
`Conv2DBackpropEltwiseEltwiseFusionPass` (Conv2DBackpropInput -> AddN -> ReluGradV2, the
residual branch's gradients summed first), in mindspore/ccsrc/plugin/device/ascend/optimizer/
buffer_fusion/conv2dbackprop_eltwise{,_eltwise}_fusion_pass.cc. The MindSpore ResNet-50
training profile on a first-generation 910 (Huawei-Performance-Model/Ascend-910B,
application_test/final_test/resnet50_16_224_224) runs exactly these kernels:
FusionOp_Conv2DBackpropInput_ReluGradV2 and FusionOp_Conv2DBackpropInput_AddN_ReluGradV2.

An autodiff graph has no ReluGradV2: the ReLU gradient is Where(Greater(x, 0), dy, 0). The
pattern takes the Where and its Greater (the mask: CANN's ReluV2 writes a bit mask in the
forward kernel, the model reads x from GM in the epilogue instead, which costs more bytes but
no extra task). The fused node is a FusedOp whose subgraph keeps the original nodes (values
exactly the unfused ones); the lowering runs the cube head with the rest as its epilogue.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Node
from ..ir.registry import Unit
from .fusion_rules import UbRules
from .partition import FusionGraph, unit_of
from .ub_fusion import UbFusionPass

#: the ops the patterns match (pattern data)
RELU_GRAD_SELECT = "Where"           # Where(mask, dy, 0): the ReLU gradient of autodiff graphs
RELU_GRAD_MASK = "Greater"           # mask = Greater(x, 0)
ADDN_OPS = ("Add", "Sum")            # the AddN of the residual branch's gradients
DATA_GRAD_OPS = ("ConvTranspose",)   # Conv2DBackpropInput


def _zero_scalar(fg: FusionGraph, value: str) -> bool:
    """`value` is a constant scalar 0 (the ReLU gradient's zero and threshold)."""
    if not value or value not in fg.graph.constants:
        return False
    data = np.asarray(fg.graph.const_value(value))
    return data.size == 1 and float(data.reshape(())) == 0.0


def _relu_grad(fg: FusionGraph, node: Node) -> tuple[Node, str] | None:
    """(the mask's Greater, the gradient value) when `node` is Where(Greater(x, 0), dy, 0)."""
    if node.op_type != RELU_GRAD_SELECT or node.subgraph is not None or len(node.inputs) != 3:
        return None
    cond, dy, zero = node.inputs
    mask = fg.producer_of(cond) if cond else None
    if mask is None or mask.op_type != RELU_GRAD_MASK or mask.subgraph is not None \
            or len(mask.inputs) != 2 or not _zero_scalar(fg, mask.inputs[1]) \
            or not _zero_scalar(fg, zero) or len(fg.users(cond)) != 1:
        return None
    return mask, dy


def _data_grad(fg: FusionGraph, value: str) -> Node | None:
    """The ConvTranspose on the cube that produces `value` and is its only reader's source."""
    head = fg.producer_of(value) if value else None
    if head is None or head.op_type not in DATA_GRAD_OPS or head.subgraph is not None \
            or unit_of(fg.graph, head) != Unit.CUBE or len(fg.users(value)) != 1:
        return None
    return head


class Conv2DBackpropEltwiseFusionPass(UbFusionPass):
    """Conv2DBackpropInput (ConvTranspose) -> ReLU gradient: one cube kernel."""

    name = "Conv2DBackpropEltwiseFusionPass"
    patterns = ("Conv2DBackpropEltwiseFusion",)
    pattern = "Conv2DBackpropEltwiseFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((RELU_GRAD_SELECT,))       # `_relu_grad`

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        found = _relu_grad(fg, node)
        if found is None:
            return None
        mask, dy = found
        head = _data_grad(fg, dy)
        return [head, mask, node] if head is not None else None


class Conv2DBackpropEltwiseEltwiseFusionPass(UbFusionPass):
    """Conv2DBackpropInput -> AddN (with the other branch's gradient) -> ReLU gradient."""

    name = "Conv2DBackpropEltwiseEltwiseFusionPass"
    patterns = ("Conv2DBackpropEltwiseEltwiseFusion",)
    pattern = "Conv2DBackpropEltwiseEltwiseFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((RELU_GRAD_SELECT,))       # `_relu_grad`

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        found = _relu_grad(fg, node)
        if found is None:
            return None
        mask, dy = found
        add = fg.producer_of(dy) if dy else None
        if add is None or add.op_type not in ADDN_OPS or add.subgraph is not None \
                or len(fg.users(dy)) != 1:
            return None
        for v in add.inputs:
            head = _data_grad(fg, v)
            if head is not None:
                return [head, add, mask, node]
        return None


#: in priority order: the longer pattern first (MindSpore runs both; an AddN group must not
#: lose its ConvTranspose to the shorter one)
DX_UB_PASSES = (Conv2DBackpropEltwiseEltwiseFusionPass, Conv2DBackpropEltwiseFusionPass)

__all__ = ["DX_UB_PASSES", "Conv2DBackpropEltwiseFusionPass",
           "Conv2DBackpropEltwiseEltwiseFusionPass"]
