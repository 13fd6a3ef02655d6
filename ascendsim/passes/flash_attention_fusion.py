"""FlashAttentionFusionPass (GraphFusion): primitive attention -> FlashAttentionScore (prefill)
or IncreFlashAttention (decode: one query token).

Pattern (anchored at the Softmax), BNSD tensors as HF's eager attention exports them::

    kk = repeat(k)  (Reshape (B,Hkv,1,T,D) -> Expand (B,Hkv,G,T,D) -> Reshape (B,H,T,D),
                     or k itself when G = 1);  vv = repeat(v) likewise
    s  = Mul(MatMul(q, Transpose(kk, [0,1,3,2])), scale)     (or Div by 1/scale)
    s  = Add(s, mask)                                        (optional)
    y  = MatMul(Softmax(s, axis=-1), vv)
        ->  y = FlashAttentionScore(q, k, v[, mask]; scale_value, head_num, causal)
            or IncreFlashAttention(q, k, v[, mask]; num_heads, scale_value, num_key_value_heads)

An int8 KV cache (decode): when k and v are each an AscendAntiQuantV2 of an int8 cache, the
IncreFlashAttention takes the int8 caches and the antiquant scales/offsets as its
key/value_antiquant_scale/offset inputs (the dequantisation moves into the kernel, as CANN's
IFA does with antiquant_scale), so no float copy of the cache is written.
GQA: the fused op reads k and v with their Hkv heads (each shared by G = H / Hkv query heads),
so the repeat copies disappear. A constant mask that is exactly the bottom-right causal mask
(0 where key t <= query i + T - S, at most -1e4 elsewhere) becomes `causal=1` and is not
read (CANN sparse_mode 3); any other mask is passed as the additive `atten_mask`.
Refused: ranks other than 4, a scale that is not a scalar constant, a softmax over another
axis, a repeat that is not a per-head broadcast, an intermediate with another use (the scores
or probabilities read elsewhere, e.g. returned as attention weights).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node
from .base import GRAPH_FUSION, Decision, Match, PassContext, RewritePass, no, require
from .rewrite import GraphView, other_input, replace_nodes

MATMUL, MUL, DIV, ADD, SOFTMAX, TRANSPOSE, RESHAPE, EXPAND = (
    "MatMul", "Mul", "Div", "Add", "Softmax", "Transpose", "Reshape", "Expand")
FAS, IFA = "FlashAttentionScore", "IncreFlashAttention"
ANTIQUANT = "AscendAntiQuantV2"
#: a mask entry at or below this hides its key (fp16 masks use -65504 or -10000)
HIDDEN = -1.0e4


def _repeat_source(view: GraphView, value: str) -> tuple[str, list[Node]]:
    """(the (B, Hkv, T, D) tensor, the repeat nodes) behind a (B, H, T, D) operand: follows
    Reshape -> Expand -> Reshape when it is a per-head broadcast, else (value, [])."""
    r2 = view.producer(value, (RESHAPE,))
    ex = view.producer(r2.inputs[0], (EXPAND,)) if r2 is not None else None
    r1 = view.producer(ex.inputs[0], (RESHAPE,)) if ex is not None else None
    if r1 is None:
        return value, []
    src = view.value(r1.inputs[0]).shape
    five = view.value(r1.outputs[0]).shape
    wide = view.value(ex.outputs[0]).shape
    out = view.value(value).shape
    if (len(src) == 4 and len(five) == 5 and five == (src[0], src[1], 1, src[2], src[3])
            and wide[:2] == five[:2] and wide[3:] == five[3:]
            and out == (src[0], src[1] * wide[2], src[2], src[3])):
        return r1.inputs[0], [r1, ex, r2]
    return value, []


def is_causal_mask(mask: np.ndarray, s: int, t: int) -> bool:
    """Whether an additive mask (broadcastable to (1, 1, s, t)) hides exactly the keys after
    each query's position, bottom-right aligned (query i sees keys t' <= i + t - s)."""
    m = np.asarray(mask, dtype=np.float64)
    if m.ndim > 4 or any(d != 1 for d in m.shape[:-2]) or m.shape[-2:] != (s, t):
        return False
    m = m.reshape(s, t)
    visible = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
    return bool(np.all(m[visible] == 0.0) and np.all(m[~visible] <= HIDDEN))


class FlashAttentionFusionPass(RewritePass):
    batch = True            # one rewrite per layer: every disjoint match of a scan
    name = "FlashAttentionFusionPass"
    group = GRAPH_FUSION
    patterns = ("FlashAttentionScoreFusion", "IncreFlashAttentionFusion")

    def anchor_types(self) -> frozenset[str] | None:
        return frozenset((SOFTMAX,))

    def match(self, graph: Graph, node: Node, view: GraphView) -> Match | None:
        if node.op_type != SOFTMAX:
            return None
        pv = next((u for u in view.users(node.outputs[0])
                   if u.op_type == MATMUL and u.inputs[0] == node.outputs[0]), None)
        if pv is None:
            return None
        nodes = [node, pv]
        cur, mask = node.inputs[0], None
        add = view.producer(cur, (ADD,))
        if add is not None:
            scaled = next((i for i in add.inputs if view.producer(i, (MUL, DIV))), None)
            if scaled is None:
                return None
            mask, cur = other_input(add, scaled), scaled
            nodes.append(add)
        sc = view.producer(cur, (MUL, DIV))
        if sc is None:
            return None
        qk = next((view.producer(i, (MATMUL,)) for i in sc.inputs
                   if view.producer(i, (MATMUL,)) is not None), None)
        if qk is None:
            return None
        factor = view.scalar(other_input(sc, qk.outputs[0]))
        if factor is None or (sc.op_type == DIV and sc.inputs[0] != qk.outputs[0]):
            return None
        scale = factor if sc.op_type == MUL else 1.0 / factor
        tr = view.producer(qk.inputs[1], (TRANSPOSE,))
        if tr is None:
            return None
        k, k_rep = _repeat_source(view, tr.inputs[0])
        v, v_rep = _repeat_source(view, pv.inputs[1])
        q = qk.inputs[0]
        nodes += [sc, qk, tr, *k_rep, *v_rep]
        decode = view.value(q).rank == 4 and view.value(q).shape[2] == 1
        antiquant = None
        if decode:      # an int8 cache dequantised just before: IFA reads it as int8
            kd, vd = view.producer(k, (ANTIQUANT,)), view.producer(v, (ANTIQUANT,))
            if kd is not None and vd is not None and kd is not vd:
                antiquant = (kd, vd)
                nodes += [kd, vd]
        return Match(node, nodes, {"q": q, "k": k, "v": v, "mask": mask, "scale": scale,
                                   "tr": tr, "out": pv.outputs[0], "antiquant": antiquant,
                                   "pattern": self.patterns[1 if decode else 0]})

    def check(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> Decision:
        q, k, v = (view.value(m[n]) for n in ("q", "k", "v"))
        if not (q.rank == k.rank == v.rank == 4):
            return no(f"q/k/v ranks {q.rank}/{k.rank}/{v.rank} are not BNSD (4)")
        soft = m.anchor
        d = require(int(soft.attrs.get("axis", -1)) % 4 == 3, "the softmax is not over the keys")
        perm = list(m["tr"].attrs.get("perm") or [])
        d = d.and_(lambda: require(perm == [0, 1, 3, 2], f"key transpose perm {perm} is not "
                                                         f"[0, 1, 3, 2]"))
        d = d.and_(lambda: require(k.shape == v.shape and q.shape[0] == k.shape[0] and
                                   q.shape[3] == k.shape[3] and q.shape[1] % k.shape[1] == 0,
                                   f"q {q.shape}, k {k.shape}, v {v.shape} do not share batch, "
                                   f"head size and a head grouping"))
        inside = {n.name for n in m.nodes}
        inner = [o for n in m.nodes for o in n.outputs if o != m["out"]]
        return d.and_(lambda: require(
            all(o not in view.outputs and all(u.name in inside for u in view.users(o))
                for o in inner),
            "an intermediate of the attention (scores or probabilities) has other uses"))

    def rewrite(self, graph: Graph, m: Match, view: GraphView, ctx: PassContext) -> None:
        q, k = view.value(m["q"]), view.value(m["k"])
        heads, kv_heads = int(q.shape[1]), int(k.shape[1])
        ins = [m["q"], m["k"], m["v"]]
        causal = 0
        if m["mask"] is not None:
            data = view.const(m["mask"])
            if data is not None and is_causal_mask(data, int(q.shape[2]), int(k.shape[2])):
                causal = 1
            else:
                ins.append(m["mask"])
        if m["pattern"] == self.patterns[1]:
            op, attrs = IFA, {"num_heads": heads, "scale_value": float(m["scale"]),
                              "num_key_value_heads": kv_heads}
            if causal:      # one query at the end of the cache sees every key
                causal = 0
            if m["antiquant"] is not None:
                kd, vd = m["antiquant"]
                ins[1:3] = [kd.inputs[0], vd.inputs[0]]
                ins += [None] * (4 - len(ins))
                for d in (kd, vd):
                    ins += [d.inputs[1], d.inputs[2] if len(d.inputs) > 2 else None]
                while ins[-1] is None:
                    ins.pop()
        else:
            op, attrs = FAS, {"scale_value": float(m["scale"]), "head_num": heads,
                              "causal": causal}
        replace_nodes(graph, m.nodes, op, ins, attrs, m.anchor.name, [m["out"]])
