"""`TbeConvDoubleInFusionPass`: Conv2D + a two-input element-wise op + one more element-wise op,
one Conv2D kernel (switch group "UBFusion").

CANN's UB fusion reference (graphubfusionref, "TbeConvDoubleInFusionPass", CANN 8.0.0 to
9.0.0) fuses Conv2D + Elemtwise + Elemtwise into one Conv2D fused op, for original formats
NCHW, NHWC and HWCN, where the second element-wise op takes one input, from the first. Its
supported products are the Atlas training series (910), the Atlas inference series (310P), the
Atlas 200I/500 A2 inference products and, in the 8.0.0 list, the Atlas 200/300/500 inference
products (310); the 8.0.RC1 page says outright that the Atlas A2 training series and the Atlas
800I A2 do not support it, and no later list names the A2 or A3. The chip's
`product_line` decides (`PRODUCTS`); elsewhere the pass runs but fuses nothing, and its log
says why.

"Double in": the first element-wise op reads the conv's output and one other tensor, which
the fused kernel reads in its epilogue. In a ResNet bottleneck after the BatchNorm fold that
is the residual Add, then ReLU: the conv's output, the sum and the ReLU input never reach GM,
and the separate AddRelu task (two full reads and a write of the feature map) is gone.

Matched here: a forward 2-D convolution on the cube whose only output is read by exactly one
op, an element-wise op with two data inputs of the conv output's shape (a broadcast operand is
not the pattern: a per-channel bias folds into the conv itself), whose output is read only by an
element-wise op with one data input. Not modelled: whatever whitelist of element-wise op types
CANN's pass keeps (the reference names none).
"""

from __future__ import annotations

from ..ir.graph import Node
from ..ir.registry import Unit
from .base import Decision, PassContext, PassResult, no
from .fusion_rules import UbRules
from .partition import FusionGraph, data_inputs, is_elementwise, unit_of
from .rewrite import forward_conv_ops
from .ub_fusion import UbFusionPass

#: the Atlas product lines CANN ships the pass for (`Chip.product_line`), per the module note
PRODUCTS = frozenset({"atlas_training", "atlas_inference", "atlas_200_300_500_inference",
                      "atlas_200i_500_a2_inference"})
#: original formats the pass takes: ND is how the graph holds an NCHW/NHWC/HWCN tensor
FORMATS = ("ND",)


class TbeConvDoubleInFusionPass(UbFusionPass):
    """Conv2D + a two-input element-wise op on its output (the residual Add) + a one-input
    element-wise op on that (ReLU): one conv kernel with the second tensor read in its epilogue."""

    name = "TbeConvDoubleInFusionPass"
    patterns = ("TbeConvDoubleInFusion",)
    pattern = "TbeConvDoubleInFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return forward_conv_ops()

    def run(self, graph, ctx: PassContext) -> PassResult:
        line = getattr(ctx.chip, "product_line", None)
        if line not in PRODUCTS:
            res = self.new_result()
            res.note(f"not run on {getattr(ctx.chip, 'name', 'this chip')} "
                     f"({line or 'no product line'}): CANN ships it for "
                     f"{', '.join(sorted(PRODUCTS))} only")
            return res
        return super().run(graph, ctx)

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if node.subgraph is not None or node.op_type not in forward_conv_ops() \
                or unit_of(fg.graph, node) != Unit.CUBE:
            return None
        out = [o for o in node.outputs if o]
        if len(out) != 1 or fg.graph.values[out[0]].rank != 4:
            return None
        first = _sole_reader(fg, out[0])
        if first is None or not is_elementwise(fg.graph, first):
            return None
        ins = data_inputs(fg.graph, first)
        shape = fg.graph.values[out[0]].shape
        if len(ins) != 2 or out[0] not in ins \
                or any(fg.graph.values[v].shape != shape for v in ins):
            return None
        second = _sole_reader(fg, first.outputs[0])
        if second is None or not is_elementwise(fg.graph, second) \
                or data_inputs(fg.graph, second) != [first.outputs[0]]:
            return None
        return [node, first, second]

    def check(self, fg: FusionGraph, group: list[Node], chip) -> Decision:
        values = [v for n in group for v in (*data_inputs(fg.graph, n), *n.outputs) if v]
        odd = next((v for v in values if fg.graph.values[v].layout not in FORMATS), None)
        if odd is not None:
            return no(f"'{odd}' is held as {fg.graph.values[odd].layout}; the pass takes "
                      f"NCHW, NHWC or HWCN tensors only")
        return super().check(fg, group, chip)


def _sole_reader(fg: FusionGraph, value: str) -> Node | None:
    """The one op reading `value`, when exactly one does and it is not a graph output."""
    if value in fg.graph_outputs:
        return None
    readers = [r for r in fg.users(value) if r is not None]
    return readers[0] if len(readers) == 1 else None


__all__ = ["TbeConvDoubleInFusionPass", "PRODUCTS", "FORMATS"]
