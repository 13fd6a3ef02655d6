"""FusedOp: a node that stands for a fused group of ops (UB fusion, graph kernels, L2 fusion).

The node keeps the original ops in `node.subgraph` (inputs = the fused node's input names,
outputs = its output names). Its values come from the subgraph (see ascendsim.execute), its
cost from lowering the subgraph as one task; the registry entry exists so that validation,
printing and category queries treat it like any other op.
"""

from __future__ import annotations

from ...errors import GraphError
from ..registry import FUSED_OP, Category, OpDef, Unit, register


def _infer(ins, attrs, consts):
    raise GraphError("a FusedOp takes its output shapes from its subgraph; fusion passes "
                     "build it with Graph.add_fused, not with a builder call")


def _kernel(args, attrs):
    raise GraphError("a FusedOp is computed from its subgraph by the executor")


register(OpDef(FUSED_OP, _infer, _kernel, Category.OPAQUE, unit=Unit.VECTOR,
               inputs=("*inputs",), attrs={"fusion": "", "pattern": "", "display_type": ""},
               builder="_fused_op", lowering="fused",
               doc="a fused group of ops; see node.subgraph"))
