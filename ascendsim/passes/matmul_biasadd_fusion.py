"""MatMulBiasAddFusionPass (GraphFusion): MatMul + Add/BiasAdd of a 1-D bias -> MatMul(bias).

The bias joins the cube's fp32 accumulator (CANN MatMulV2 with bias), removing one vector pass
over the output. CANN's conditions: one Add input is 1-D and its length equals the output's
last dim; no broadcast of any other kind. Refused: a 2-D (or other rank) "bias", a length that
differs, a MatMul output that is also used elsewhere, a MatMul that already has a bias.
Precision note (CANN): an fp16 bias is accumulated in fp32 after fusion, so fp16 results may
differ in the last bit from the unfused graph; the log notes it.
"""

from __future__ import annotations

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, replace_nodes

MATMUL_OPS = ("MatMul",)
BIAS_OPS = ("Add", "BiasAdd")
#: BiasAdd formats whose channel axis is the last one (a MatMul's N)
CHANNEL_LAST = ("NHWC", "NDHWC")


class MatMulBiasAddFusionPass(RewritePass):
    name = "MatMulBiasAddFusionPass"
    group = GRAPH_FUSION
    patterns = ("MatMulBiasAddFusion",)
    batch = True            # one rewrite per layer: every disjoint match of a scan

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset(BIAS_OPS)

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type not in BIAS_OPS:
            return None
        for k, x in enumerate(node.inputs[:2]):
            mm = view.producer(x, MATMUL_OPS)
            if mm is not None and (node.op_type == "Add" or k == 0):
                bias = node.inputs[1 - k]
                return Match(node, [mm, node], {"mm": mm, "x": x, "bias": bias})
        return None

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        mm, node = m["mm"], m.anchor
        out, bias = view.value(m["x"]), view.value(m["bias"])
        d = require(bias.rank == 1, f"bias '{bias.name}' has rank {bias.rank} "
                                    f"{list(bias.shape)}; MatMulBiasAdd needs a 1-D bias")
        d = d.and_(lambda: require(bias.shape[0] == out.shape[-1],
                                   f"bias length {bias.shape[0]} != output last dim "
                                   f"{out.shape[-1]} (no broadcast)"))
        d = d.and_(lambda: require(len(mm.inputs) < 3 or not mm.inputs[2],
                                   f"MatMul '{mm.name}' already has a bias"))
        d = d.and_(lambda: require(view.only_user(m["x"]) is node,
                                   f"MatMul output '{m['x']}' has other uses"))
        d = d.and_(lambda: require(bias.dtype == out.dtype,
                                   f"bias dtype {bias.dtype} != output dtype {out.dtype}"))
        if node.op_type == "BiasAdd":
            d = d.and_(lambda: require(node.attrs.get("data_format") in CHANNEL_LAST or
                                       out.rank == 2, "BiasAdd is not along the last axis"))
        return d

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        mm, node = m["mm"], m.anchor
        replace_nodes(graph, [mm, node], mm.op_type, [mm.inputs[0], mm.inputs[1], m["bias"]],
                      mm.attrs, mm.name, node.outputs)

    def run(self, graph: Graph, ctx: PassContext):  # type: ignore[override]
        res = super().run(graph, ctx)
        fused = [n for n in graph.nodes if n.op_type in MATMUL_OPS and len(n.inputs) > 2
                 and n.inputs[2] and graph.values[n.outputs[0]].dtype == "float16"]
        if fused and res.changed:
            res.note("fp16 bias is accumulated in fp32 inside the fused MatMul (CANN precision "
                     "note): results may differ from the unfused graph in the last bit")
        return res
