"""UB fusions CANN applies to training graphs (switch group "UBFusion"), with CANN's names:

1. `TbeConvBnreduceFusionPass`: Conv + BNTrainingReduce. The per-channel sum and square sum
   of the conv output are accumulated in the conv's epilogue, from the output tiles while
   they are still on chip, so the separate BNTrainingReduce task (a full read of the conv
   output) disappears; the conv output is still written (BNTrainingUpdate and the backward
   read it). MindSpore's Ascend backend: `ConvBnReduceFusionPass`
   (mindspore/ccsrc/plugin/device/ascend/optimizer/buffer_fusion/conv_bnreduce_fusion_pass.h);
   CANN's switch name TbeConvBnreduceFusionPass (graphubfusionref).
2. `TbeBnupdateEltwiseEltwiseFusionPass` and `TbeBnupdateEltwiseFusionPass`: BNTrainingUpdate
   + element-wise ops on its y (ReLU; Add of the residual then ReLU). MindSpore:
   `BnupdateEltwiseFusionPass`, `BnupdateEltwiseEltwiseFusionPass` (same folder). y stays in
   the UB; when it is also read outside (the ReLU gradient of an autodiff graph reads the ReLU
   input; CANN's ReluV2 would write a bit mask instead) it is written as an extra output.

3. `MatmulDropoutDoMaskAddFusionPass`: MatMul + DropOutDoMask of its output + Add (the
   transformer's dense -> dropout -> residual add), the dropout and the residual add in the
   matmul's epilogue. MindSpore: `MatmulDropoutDoMaskV3AddFusionPass` (same folder, the
   DoMaskV3 form of the mask); it skips cube/vector split chips (MS_CHECK_CUBE_VECTOR_SPLIT
   in plugin/device/ascend/optimizer/platform.h), and so does this pass (910B: refused with
   the reason in the log).

CANN's own ops source has the BNTrainingUpdate patterns as BnupdateEltwiseFusionPass and
BnupdateEltwiseEltwiseFusionPass (ops/built-in/fusion_pass/buffer_fusion/ub_fusion/ai_core/
bnupdate/: head BNTrainingUpdate, y into the element-wise op, every output may also leave the
group, TBE_OUTPUT_BRANCH_MULTI); the switch names used here follow CANN's "Tbe..." form of
TbeConvBnreduceFusionPass.

The fused node is a FusedOp (fusion "UB") whose subgraph keeps the original nodes, so its
values are exactly the unfused ones; its cost is one task (see lower/composite.py: a cube head
runs the rest as its epilogue; a vector group keeps intermediates in UB).

Working set: a per-channel reduction in a conv epilogue accumulates partial sums per output
tile (C0 lanes), so it needs the conv tile and two C-vectors, not whole reduced rows; the UB
check therefore runs over the cube head alone for pattern 1.
"""

from __future__ import annotations

from ..ir.graph import Node
from ..ir.registry import Category, Unit
from .base import Decision, no
from .fusion_rules import UbRules
from .partition import FusionGraph, check_ub, data_inputs, is_elementwise, opdef, unit_of
from .rewrite import forward_conv_ops
from .ub_fusion import UbFusionPass

#: the ops the patterns match (pattern data)
BN_REDUCE = "BNTrainingReduce"
BN_UPDATE = "BNTrainingUpdate"
DO_MASK = "DropOutDoMask"
MATMUL_OPS = ("MatMul",)
ADD_OPS = ("Add",)


def _readers(fg: FusionGraph, value: str) -> list[Node]:
    return list(fg.users(value))


class _MultiOutputUbPass(UbFusionPass):
    """A UB pattern whose members' outputs may all leave the group (written to GM)."""

    def last_values(self, group: list[Node]) -> set[str]:
        return {o for n in group for o in n.outputs if o}

    def ub_members(self, group: list[Node]) -> list[Node]:
        return group

    def check(self, fg: FusionGraph, group: list[Node], chip) -> Decision:
        why = fg.creates_cycle(fg.members(group))
        if why:
            return no(why)
        return check_ub(fg.graph, self.ub_members(group), chip, fg)


class TbeConvBnreduceFusionPass(_MultiOutputUbPass):
    """Conv + BNTrainingReduce of its output: the statistics in the conv's epilogue."""

    name = "TbeConvBnreduceFusionPass"
    patterns = ("TbeConvBnreduceFusion",)
    pattern = "TbeConvBnreduceFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return forward_conv_ops()

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if node.subgraph is not None or node.op_type not in forward_conv_ops() \
                or unit_of(fg.graph, node) != Unit.CUBE:
            return None
        out = [o for o in node.outputs if o]
        if len(out) != 1:
            return None
        reduce = next((r for r in _readers(fg, out[0])
                       if r is not None and r.op_type == BN_REDUCE and r.subgraph is None),
                      None)
        return [node, reduce] if reduce is not None else None

    def ub_members(self, group: list[Node]) -> list[Node]:
        return group[:1]


class TbeBnupdateEltwiseEltwiseFusionPass(_MultiOutputUbPass):
    """BNTrainingUpdate + two element-wise ops on y (the residual Add, then ReLU)."""

    name = "TbeBnupdateEltwiseEltwiseFusionPass"
    patterns = ("TbeBnupdateEltwiseEltwiseFusion",)
    pattern = "TbeBnupdateEltwiseEltwiseFusion"
    followers = 2

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((BN_UPDATE,))

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if node.subgraph is not None or node.op_type != BN_UPDATE \
                or unit_of(fg.graph, node) != Unit.VECTOR:
            return None
        chain = self._followers(fg, node.outputs[0], self.followers)
        return [node, *chain] if chain else None

    def _followers(self, fg: FusionGraph, value: str, k: int) -> list[Node] | None:
        """The first chain (readers in topological order) of k element-wise ops from `value`,
        each reading the previous one's output."""
        if k == 0:
            return []
        for r in _readers(fg, value):
            if r is None or not is_elementwise(fg.graph, r) \
                    or value not in data_inputs(fg.graph, r) \
                    or opdef(r).category > Category.BROADCAST:
                continue
            rest = self._followers(fg, r.outputs[0], k - 1)
            if rest is not None:
                return [r, *rest]
        return None


class TbeBnupdateEltwiseFusionPass(TbeBnupdateEltwiseEltwiseFusionPass):
    """BNTrainingUpdate + one element-wise op on y (ReLU)."""

    name = "TbeBnupdateEltwiseFusionPass"
    patterns = ("TbeBnupdateEltwiseFusion",)
    pattern = "TbeBnupdateEltwiseFusion"
    followers = 1


class MatmulDropoutDoMaskAddFusionPass(_MultiOutputUbPass):
    """MatMul -> DropOutDoMask -> Add: dropout and residual add in the matmul's epilogue."""

    name = "MatmulDropoutDoMaskAddFusionPass"
    patterns = ("MatmulDropoutDoMaskAddFusion",)
    pattern = "MatmulDropoutDoMaskAddFusion"

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset(ADD_OPS)

    def match(self, fg: FusionGraph, node: Node, rules: UbRules) -> list[Node] | None:
        if node.subgraph is not None or node.op_type not in ADD_OPS:
            return None
        for v in node.inputs:
            mask = fg.producer_of(v) if v else None
            if mask is None or mask.op_type != DO_MASK or mask.subgraph is not None:
                continue
            mm = fg.producer_of(mask.inputs[0])
            if mm is not None and mm.op_type in MATMUL_OPS and mm.subgraph is None \
                    and unit_of(fg.graph, mm) == Unit.CUBE:
                return [mm, mask, node]
        return None

    def check(self, fg: FusionGraph, group: list[Node], chip) -> Decision:
        if not chip.coupled:
            return no(f"{chip.name} splits cube and vector cores (MindSpore skips this pass "
                      f"there)")
        return super().check(fg, group, chip)

    def ub_members(self, group: list[Node]) -> list[Node]:
        return group[:1]


#: the training UB passes, in priority order (they run before the generic UB passes: CANN's
#: named patterns take their ops first)
TRAINING_UB_PASSES = (TbeConvBnreduceFusionPass, TbeBnupdateEltwiseEltwiseFusionPass,
                      TbeBnupdateEltwiseFusionPass, MatmulDropoutDoMaskAddFusionPass)

__all__ = ["TRAINING_UB_PASSES", "TbeConvBnreduceFusionPass", "MatmulDropoutDoMaskAddFusionPass",
           "TbeBnupdateEltwiseEltwiseFusionPass", "TbeBnupdateEltwiseFusionPass"]
