"""BERT encoders (base, large, or any size), one encoder layer alone, and a pre-training step.

The forward graph is written the way PyTorch/HF exports it to ONNX, so the fusion passes have
the real patterns to find: embeddings as Gather from a word table plus position and token-type
embeddings and a LayerNorm; attention as MatMul + Add (bias), Reshape, Transpose, MatMul of Q by
K^T, Mul by 1/sqrt(head_dim), Softmax, MatMul by V, Transpose, Reshape, output projection,
residual Add and LayerNorm; the FFN as MatMul + Add, GELU (decomposed erf form by default, or
the Gelu op), MatMul + Add, residual Add and LayerNorm. Dropout is omitted (inference; a
training step with dropout would add one Mul by a mask per dropout site).
"""

from __future__ import annotations

import numpy as np

from ..autodiff import OPTIMIZERS, training_step
from ..errors import ConfigError
from ..ir.graph import Graph
from ..ir.tensor import Value
from .blocks import (
    ModelBuilder,
    add,
    check_choice,
    check_positive,
    linear,
    reshape,
    transpose,
)
from .blocks import gelu as _gelu
from .blocks import layer_norm as _layer_norm

GELU_FORMS = ("erf", "op")
LAYER_NORM_FORMS = ("op", "decomposed")
VOCAB = 30522
MAX_POSITION = 512
TYPE_VOCAB = 2


def _check(batch: int, seq_len: int, hidden: int, heads: int, layers: int, ffn: int,
           gelu_form: str, layer_norm_form: str) -> None:
    check_positive(batch=batch, seq_len=seq_len, hidden=hidden, heads=heads, layers=layers,
                   ffn=ffn)
    if hidden % heads:
        raise ConfigError(f"hidden={hidden} is not a multiple of heads={heads}")
    check_choice("gelu", gelu_form, GELU_FORMS)
    check_choice("layer_norm", layer_norm_form, LAYER_NORM_FORMS)


def encoder_layer(mb: ModelBuilder, x: Value, name: str, heads: int, ffn: int,
                  gelu_form: str = "erf", layer_norm_form: str = "op",
                  mask: Value | None = None) -> Value:
    """One post-LN transformer encoder layer on x (batch, seq, hidden); `mask` is an additive
    attention bias (batch, 1, 1, seq), 0 to attend and a large negative number to ignore."""
    g = mb.g
    b, s, h = (int(d) for d in x.shape)
    d = h // heads
    ln_dec = layer_norm_form == "decomposed"

    def heads_of(v: Value, perm: list[int]) -> Value:
        return transpose(mb, reshape(mb, v, [b, s, heads, d]), perm)

    q = heads_of(linear(mb, x, f"{name}.attention.query", h), [0, 2, 1, 3])
    k = heads_of(linear(mb, x, f"{name}.attention.key", h), [0, 2, 3, 1])
    v = heads_of(linear(mb, x, f"{name}.attention.value", h), [0, 2, 1, 3])
    scores = g.mul(g.matmul(q, k), mb.scalar(1.0 / float(np.sqrt(d))))
    if mask is not None:
        scores = add(mb, scores, mask)
    ctx = g.matmul(g.softmax(scores, axis=-1), v)                      # (b, heads, s, d)
    ctx = reshape(mb, transpose(mb, ctx, [0, 2, 1, 3]), [b, s, h])
    attn = linear(mb, ctx, f"{name}.attention.output", h)
    x = _layer_norm(mb, add(mb, attn, x), f"{name}.attention.ln", decomposed=ln_dec)
    inner = _gelu(mb, linear(mb, x, f"{name}.intermediate", ffn), gelu_form == "op")
    out = linear(mb, inner, f"{name}.output", h)
    return _layer_norm(mb, add(mb, out, x), f"{name}.output.ln", decomposed=ln_dec)


def one_hot(mb: ModelBuilder, ids: Value, depth: int, dtype: str | None = None) -> Value:
    """(rows,) int64 ids -> (rows, depth) one-hot in `dtype` (default: the compute dtype)
    (Equal + Cast)."""
    g = mb.g
    rows = int(np.prod([int(d) for d in ids.shape]))
    col = g.reshape(ids, mb.ints([rows, 1]))
    classes = g.const(np.arange(depth, dtype=np.int64))
    return g.cast(g.equal(col, classes), to=dtype or mb.dtype)


def _embeddings(mb: ModelBuilder, ids: Value, types: Value, hidden: int, vocab: int,
                max_position: int, ln_dec: bool) -> tuple[Value, Value]:
    """Word + position + token-type embeddings, LayerNorm; returns (output, word table)."""
    g = mb.g
    s = int(ids.shape[1])
    table = mb.weight("embeddings.word", (vocab, hidden), scale=0.02)
    pos_table = mb.weight("embeddings.position", (max_position, hidden), scale=0.02)
    type_table = mb.weight("embeddings.token_type", (TYPE_VOCAB, hidden), scale=0.02)
    word = g.gather(table, ids, axis=0, name="embeddings.word_lookup")
    pos = g.gather(pos_table, g.const(np.arange(s, dtype=np.int64)), axis=0,
                   name="embeddings.position_lookup")
    typ = g.gather(type_table, types, axis=0, name="embeddings.token_type_lookup")
    e = g.add(g.add(word, pos), typ)
    return _layer_norm(mb, e, "embeddings.ln", decomposed=ln_dec), table


def _encoder(mb: ModelBuilder, batch: int, seq_len: int, layers: int, hidden: int, heads: int,
             ffn: int, vocab: int, max_position: int, gelu_form: str, layer_norm_form: str,
             attention_mask: bool) -> tuple[Value, Value]:
    g = mb.g
    if seq_len > max_position:
        raise ConfigError(f"seq_len={seq_len} exceeds max_position={max_position}")
    ids = g.input("input_ids", (batch, seq_len), "int64")
    types = g.input("token_type_ids", (batch, seq_len), "int64")
    mask = g.input("attention_mask", (batch, 1, 1, seq_len), mb.dtype) if attention_mask \
        else None
    x, table = _embeddings(mb, ids, types, hidden, vocab, max_position,
                           layer_norm_form == "decomposed")
    for i in range(layers):
        x = encoder_layer(mb, x, f"layer{i}", heads, ffn, gelu_form, layer_norm_form, mask)
    return x, table


def bert(batch: int = 8, seq_len: int = 128, layers: int = 12, hidden: int = 768,
         heads: int = 12, ffn: int | None = None, vocab: int = VOCAB,
         max_position: int = MAX_POSITION, dtype: str = "float16", gelu: str = "erf",
         layer_norm: str = "op", attention_mask: bool = False, seed: int = 0) -> Graph:
    """A BERT encoder of any size (forward).

    Inputs "input_ids" and "token_type_ids" (batch, seq_len) int64 (and, with
    attention_mask=True, an additive "attention_mask" (batch, 1, 1, seq_len) added to every
    layer's attention scores); output the last hidden state (batch, seq_len, hidden).
    ffn defaults to 4*hidden."""
    ffn = 4 * hidden if ffn is None else ffn
    _check(batch, seq_len, hidden, heads, layers, ffn, gelu, layer_norm)
    check_positive(vocab=vocab, max_position=max_position)
    mb = ModelBuilder(f"BERT-L{layers}-H{hidden}", dtype, seed)
    x, _ = _encoder(mb, batch, seq_len, layers, hidden, heads, ffn, vocab, max_position, gelu,
                    layer_norm, attention_mask)
    mb.g.output(x)
    return mb.g


def bert_base(batch: int = 32, seq_len: int = 128, dtype: str = "float16", gelu: str = "erf",
              layer_norm: str = "op", attention_mask: bool = False, seed: int = 0) -> Graph:
    """BERT-base forward: 12 layers, hidden 768, 12 heads, FFN 3072."""
    return bert(batch, seq_len, 12, 768, 12, 3072, dtype=dtype, gelu=gelu,
                layer_norm=layer_norm, attention_mask=attention_mask, seed=seed)


def bert_large(batch: int = 32, seq_len: int = 512, dtype: str = "float16", gelu: str = "erf",
               layer_norm: str = "op", attention_mask: bool = False, seed: int = 0) -> Graph:
    """BERT-large forward: 24 layers, hidden 1024, 16 heads, FFN 4096."""
    return bert(batch, seq_len, 24, 1024, 16, 4096, dtype=dtype, gelu=gelu,
                layer_norm=layer_norm, attention_mask=attention_mask, seed=seed)


def bert_encoder_layer(batch: int = 32, seq_len: int = 512, hidden: int = 1024, heads: int = 16,
                       ffn: int | None = None, dtype: str = "float16", gelu: str = "erf",
                       layer_norm: str = "op", attention_mask: bool = False,
                       seed: int = 0) -> Graph:
    """One BERT encoder layer alone (attention + FFN), for notebooks and fusion tests.

    Input "x" (batch, seq_len, hidden) -> same shape (and an additive "attention_mask"
    (batch, 1, 1, seq_len) input with attention_mask=True)."""
    ffn = 4 * hidden if ffn is None else ffn
    _check(batch, seq_len, hidden, heads, 1, ffn, gelu, layer_norm)
    mb = ModelBuilder("BertEncoderLayer", dtype, seed)
    x = mb.g.input("x", (batch, seq_len, hidden), mb.dtype)
    mask = mb.g.input("attention_mask", (batch, 1, 1, seq_len), mb.dtype) if attention_mask \
        else None
    mb.g.output(encoder_layer(mb, x, "layer0", heads, ffn, gelu, layer_norm, mask=mask))
    return mb.g


def bert_pretraining(batch: int = 32, seq_len: int = 512, layers: int = 24,
                     hidden: int = 1024, heads: int = 16, ffn: int | None = None,
                     vocab: int = VOCAB, max_position: int = MAX_POSITION,
                     masked: int | None = None, dtype: str = "float16", gelu: str = "erf",
                     layer_norm: str = "op", attention_mask: bool = False,
                     seed: int = 0) -> Graph:
    """The masked-LM pre-training forward of a BERT encoder: encoder, the masked positions'
    transform (Linear, GELU, LayerNorm), the decoder tied to the word table, and the loss
    (SoftmaxCrossEntropyWithLogits, in float32 under float16, mean over the masked rows) as
    output "mlm_loss".

    Inputs as `bert`, plus "masked_positions" and "masked_lm_ids" (batch*masked,) int64 (flat
    positions into batch*seq_len; masked defaults to 76 at seq 512, MLPerf's max predictions,
    else 15% of seq_len)."""
    ffn = 4 * hidden if ffn is None else ffn
    _check(batch, seq_len, hidden, heads, layers, ffn, gelu, layer_norm)
    if masked is None:
        masked = 76 if seq_len >= 512 else max(1, round(0.15 * seq_len))
    check_positive(masked=masked, vocab=vocab, max_position=max_position)
    mb = ModelBuilder(f"BERT-L{layers}-H{hidden}-Pretraining", dtype, seed)
    g = mb.g
    x, table = _encoder(mb, batch, seq_len, layers, hidden, heads, ffn, vocab, max_position,
                        gelu, layer_norm, attention_mask)
    rows = batch * masked
    positions = g.input("masked_positions", (rows,), "int64")
    label_ids = g.input("masked_lm_ids", (rows,), "int64")
    flat = reshape(mb, x, [batch * seq_len, hidden])
    picked = g.gather(flat, positions, axis=0, name="mlm.gather")
    t = linear(mb, picked, "mlm.transform", hidden)
    t = _layer_norm(mb, _gelu(mb, t, gelu == "op"), "mlm.ln", decomposed=False)
    bias = mb.weight("mlm.decoder.bias", (vocab,), scale=0.02)
    logits = g.gemm(t, table, bias, transB=1, name="mlm.decoder")       # tied to the word table
    z = g.cast(logits, to="float32") if logits.dtype in ("float16", "bfloat16") else logits
    per_row, _ = g.softmax_cross_entropy_with_logits(z, one_hot(mb, label_ids, vocab, z.dtype),
                                                     name="mlm.loss")
    g.add_node("ReduceMean", [per_row, mb.ints([0])], {"keepdims": 0}, name="mlm_loss",
               outputs=["mlm_loss"])
    g.output("mlm_loss")
    return g


def bert_training_step(batch: int = 16, seq_len: int = 512, layers: int = 24,
                       hidden: int = 1024, heads: int = 16, ffn: int | None = None,
                       vocab: int = VOCAB, max_position: int = MAX_POSITION,
                       masked: int | None = None, dtype: str = "float16",
                       optimizer: str = "adam", lr: float = 1e-4, weight_decay: float = 0.01,
                       gelu: str = "erf", attention_mask: bool = False,
                       seed: int = 0) -> Graph:
    """One masked-LM pre-training step of a BERT encoder of any size:
    `training_step(bert_pretraining(...), loss="mlm_loss", optimizer, ...)` (float16 compute
    with float32 masters and dynamic loss scaling when dtype is float16). See
    `bert_large_training_step`."""
    check_choice("optimizer", optimizer, OPTIMIZERS)
    g = bert_pretraining(batch, seq_len, layers, hidden, heads, ffn, vocab, max_position,
                         masked, dtype, gelu, "op", attention_mask, seed)
    return training_step(g, "mlm_loss", optimizer, lr, weight_decay=weight_decay, eps=1e-6,
                         mixed_precision=dtype == "float16",
                         name=f"BERT-L{layers}-H{hidden}-TrainingStep")


def bert_large_training_step(batch: int = 16, seq_len: int = 512, dtype: str = "float16",
                             optimizer: str = "adam", masked: int | None = None,
                             seed: int = 0) -> Graph:
    """One BERT-large masked-LM pre-training step (24 layers, hidden 1024, 16 heads, FFN 4096).

    Batch 16 by default: at batch 32, seq 512 the step's peak live device memory (40.4 GiB, of
    which 33.6 GiB are activations kept for the backward; `Result.memory`) exceeds the 32 GiB
    of an Ascend 910, and `simulate` refuses it with CapacityError (batch 16 needs 24.9 GiB).

    Inputs: "input_ids", "token_type_ids" (batch, seq_len) int64, "masked_positions" and
    "masked_lm_ids" (batch*masked,) int64 (flat positions into batch*seq_len; masked defaults
    to 76 at seq 512, MLPerf's max predictions, else 15% of seq_len), every parameter
    (float32 masters), its optimizer state ("_m", "_v"), "step", "loss_scale", "good_steps".
    Outputs "loss", then `<param>_new`, `<param>_m_new`, `<param>_v_new`, "step_new",
    "loss_scale_new", "good_steps_new".

    The backward comes from the registry's gradient rules: MatMul/Gemm gradients on the cube,
    LayerNorm as LayerNormXBackprop/LayerNormBetaGammaBackprop, the lookups' gradients as
    ScatterND-add, the loss through SoftmaxCrossEntropyWithLogits' backprop; the update is
    ApplyAdam (or ApplyAdamW, LAMB's two phases, ApplyMomentum) on float32 masters.
    Omitted: the next-sentence head and dropout.
    """
    return bert_training_step(batch, seq_len, 24, 1024, 16, 4096, masked=masked, dtype=dtype,
                              optimizer=optimizer, seed=seed)


__all__ = ["bert", "bert_base", "bert_large", "bert_encoder_layer", "bert_pretraining",
           "bert_training_step",
           "bert_large_training_step", "encoder_layer", "one_hot"]
