"""ConvBatchnormFusionPass (GraphFusion): Conv + BatchNormalization (inference) -> one Conv.

BN in inference is a per-channel affine map, so it folds into the conv's weights and bias:
s = scale / sqrt(var + eps); W' = W * s (per output channel); b' = (b - mean) * s + beta.
The new weights are lazy constants: nothing is computed until values are needed, so a
shape-only run of a full-size model stays free. Conditions (CANN: filter, bias and all BN
inputs must be constant; onnxoptimizer fuse_bn_into_conv: the conv output has no other use,
float types only, BN with one output, not training mode). Grouped/depthwise convs are fine:
the scale is per output channel either way.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.tensor import LazyTensor, is_static, materialize
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, require
from .rewrite import GraphView, add_const, forward_conv_ops, replace_nodes

BN_OPS = ("BatchNormalization",)
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class ConvBatchnormFusionPass(RewritePass):
    name = "ConvBatchnormFusionPass"
    group = GRAPH_FUSION
    patterns = ("ConvBatchnormFusion",)

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset(BN_OPS)

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type not in BN_OPS:
            return None
        conv = view.producer(node.inputs[0], forward_conv_ops())
        return None if conv is None else Match(node, [conv, node], {"conv": conv})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        bn, conv = m.anchor, m["conv"]
        y = view.value(conv.outputs[0])
        consts = [i for i in conv.inputs[1:] if i] + list(bn.inputs[1:5])
        d = require(view.only_user(conv.outputs[0]) is bn,
                    f"conv output '{conv.outputs[0]}' is also used elsewhere")
        d = d.and_(lambda: require(not bn.attrs.get("training_mode") and
                                   len([o for o in bn.outputs if o]) == 1,
                                   "BatchNormalization is in training mode (several outputs)"))
        d = d.and_(lambda: require(all(view.is_const(i) for i in consts),
                                   "a conv weight/bias or BN parameter is not constant: "
                                   + ", ".join(i for i in consts if not view.is_const(i))))
        d = d.and_(lambda: require(y.dtype in FLOAT_DTYPES, f"dtype {y.dtype} is not float"))
        return d.and_(lambda: require(is_static(view.value(conv.inputs[1]).shape),
                                      "conv weight shape is not static"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        bn, conv = m.anchor, m["conv"]
        w_src = graph.constants[conv.inputs[1]]
        b_src = graph.constants[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] \
            else None
        params = [graph.constants[i] for i in bn.inputs[1:5]]
        eps = float(bn.attrs.get("epsilon", 1e-5))
        wv = view.value(conv.inputs[1])
        cout = int(wv.shape[0])
        dtype = wv.dtype

        def scale() -> np.ndarray:
            gamma, _, _, var = (materialize(p).astype(np.float64) for p in params)
            return gamma / np.sqrt(var + eps)

        def new_w() -> np.ndarray:
            w = materialize(w_src).astype(np.float64)
            # float64 here: LazyTensor.materialize converts to `dtype` (bf16 rounds once)
            return w * scale().reshape((cout,) + (1,) * (w.ndim - 1))

        def new_b() -> np.ndarray:
            _, beta, mean, _ = (materialize(p).astype(np.float64) for p in params)
            b = np.zeros(cout) if b_src is None else materialize(b_src).astype(np.float64)
            return (b - mean) * scale() + beta

        w = add_const(graph, LazyTensor(tuple(wv.shape), dtype, new_w,
                                        f"bn-folded weight of {conv.name}"), f"{conv.name}_w")
        b = add_const(graph, LazyTensor((cout,), dtype, new_b,
                                        f"bn-folded bias of {conv.name}"), f"{conv.name}_b")
        replace_nodes(graph, [conv, bn], conv.op_type, [conv.inputs[0], w.name, b.name],
                      conv.attrs, conv.name, [bn.outputs[0]])
