"""Small PyTorch models for the `from_torch` tests, written as plain nn.Modules (no torchvision,
no downloads): each has the structure of the family it stands for at a size that executes in
well under a second. `MODELS` maps a name to a builder returning (module, example inputs);
weights are random from a fixed seed."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class SmallResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


# ----------------------------------------------------------------------------- MobileNetV3
class SqueezeExcite(nn.Module):
    def __init__(self, c: int, r: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, exp: int, cout: int, stride: int, se: bool) -> None:
        super().__init__()
        self.expand = nn.Sequential(nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp),
                                    nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(exp, exp, 3, stride, 1, groups=exp, bias=False),
                                nn.BatchNorm2d(exp), nn.Hardswish())
        self.se = SqueezeExcite(exp) if se else nn.Identity()
        self.project = nn.Sequential(nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.residual else y


class SmallMobileNetV3(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(InvertedResidual(8, 16, 8, 1, se=True),
                                    InvertedResidual(8, 24, 16, 2, se=False))
        self.head = nn.Sequential(nn.Linear(16, 32), nn.Hardswish(), nn.Linear(32, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1).flatten(1)
        return self.head(y)


# ----------------------------------------------------------------------------- ViT / BERT
class Attention(nn.Module):
    """Multi-head self-attention written out (q @ k^T, softmax, @ v), as BERT and ViT do."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        if mask is not None:
            att = att + mask
        y = att.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class EncoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int, ffn: int, pre_norm: bool) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.fc1, self.fc2 = nn.Linear(dim, ffn), nn.Linear(ffn, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        mlp = lambda h: self.fc2(F.gelu(self.fc1(h)))
        if self.pre_norm:           # ViT
            x = x + self.attn(self.ln1(x), mask)
            return x + mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, mask))      # BERT (post-norm)
        return self.ln2(x + mlp(x))


class SmallViT(nn.Module):
    def __init__(self, img: int = 16, patch: int = 4, dim: int = 32, heads: int = 4,
                 layers: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, 2 * dim, True)
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.patch(x).flatten(2).transpose(1, 2)
        y = torch.cat([self.cls.expand(y.shape[0], -1, -1), y], dim=1) + self.pos
        for layer in self.layers:
            y = layer(y)
        return self.head(self.norm(y)[:, 0])


class SmallBert(nn.Module):
    def __init__(self, vocab: int = 64, seq: int = 8, dim: int = 32, heads: int = 4,
                 layers: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.typ = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(EncoderLayer(dim, heads, 4 * dim, False)
                                    for _ in range(layers))
        self.pooler = nn.Linear(dim, dim)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1])
        h = self.ln(self.tok(ids) + self.pos(pos)[None] + self.typ(torch.zeros_like(ids)))
        mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            h = layer(h, mask)
        return torch.tanh(self.pooler(h[:, 0]))


# ----------------------------------------------------------------------------- Llama
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.q_proj = nn.Linear(dim, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads       # GQA: repeat_kv as Hugging Face writes it
        k = k[:, :, None].expand(b, self.kv_heads, rep, s, self.hd).reshape(b, self.heads, s,
                                                                             self.hd)
        v = v[:, :, None].expand(b, self.kv_heads, rep, s, self.hd).reshape(b, self.heads, s,
                                                                             self.hd)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, -1))


class LlamaMLP(nn.Module):
    def __init__(self, dim: int, ffn: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(dim, ffn, bias=False)
        self.up_proj = nn.Linear(dim, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, ffn: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(dim)
        self.self_attn = LlamaAttention(dim, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(dim)
        self.mlp = LlamaMLP(dim, ffn)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class SmallLlama(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, kv_heads: int = 2,
                 ffn: int = 64, layers: int = 2, seq: int = 8) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(LlamaLayer(dim, heads, kv_heads, ffn)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        hd = dim // heads
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin)
        return self.lm_head(self.norm(h))


# ----------------------------------------------------------------------------- small cases
class SDPA(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


class CondModel(nn.Module):
    """torch.cond on a data-dependent predicate: each branch its own small computation."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return torch.cond(h.sum() > 0, lambda t: torch.relu(t) * 2.0,
                          lambda t: torch.sigmoid(t) - 1.0, (h,))


class Bf16Autocast(nn.Module):
    """A linear-GELU-linear under CPU bf16 autocast: the matmuls run in bfloat16."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.fc2(F.gelu(self.fc1(x)))
        return y.float()


class MLP(nn.Module):
    def __init__(self, din: int = 16, hidden: int = 32, dout: int = 4) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(din, hidden), nn.Linear(hidden, dout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x)))


def _seeded(build):
    def make():
        torch.manual_seed(0)
        return build()
    return make


def _bn_stats(m: nn.Module) -> nn.Module:
    """Non-trivial running statistics, so that BatchNorm is not an identity."""
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.copy_(0.1 * torch.randn(mod.num_features, generator=g))
            mod.running_var.copy_(1.0 + 0.2 * torch.rand(mod.num_features, generator=g))
    return m.eval()


MODELS = {
    "resnet": _seeded(lambda: (_bn_stats(SmallResNet()), (torch.randn(2, 3, 16, 16),))),
    "mobilenetv3": _seeded(lambda: (_bn_stats(SmallMobileNetV3()),
                                    (torch.randn(2, 3, 16, 16),))),
    "vit": _seeded(lambda: (SmallViT().eval(), (torch.randn(2, 3, 16, 16),))),
    "bert": _seeded(lambda: (SmallBert().eval(),
                             (torch.randint(0, 64, (2, 8)),
                              torch.tensor([[1] * 8, [1] * 5 + [0] * 3])))),
    "llama": _seeded(lambda: (SmallLlama().eval(), (torch.randint(0, 64, (2, 8)),))),
    "sdpa": _seeded(lambda: (SDPA(), tuple(torch.randn(2, 4, 8, 16) for _ in range(3)))),
    "cond": _seeded(lambda: (CondModel().eval(), (torch.randn(2, 8),))),
    "bf16_autocast": _seeded(lambda: (Bf16Autocast().eval(), (torch.randn(4, 16),))),
}


class SDPAMasked(nn.Module):
    """SDPA with grouped-query heads, a boolean mask and an explicit scale."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3,
                                              enable_gqa=True)


MODELS["sdpa_gqa_mask"] = _seeded(lambda: (SDPAMasked(), (torch.randn(2, 4, 8, 16),
                                                           torch.randn(2, 2, 8, 16),
                                                           torch.randn(2, 2, 8, 16))))


# ----------------------------------------------------------------------------- decoder mirror
class DecoderMirror(nn.Module):
    """The decoder `asim.models.decoder` builds (ascendsim/models/decoder.py), written in
    PyTorch op for op: residual stream as (tokens, hidden), weights stored (in, out) and used
    with `@`, RMSNorm as x / sqrt(mean(x*x) + eps) * w, rotary from slices and a cat, the KV
    cache written with slice_scatter (KvCacheAppend), repeat_kv as view/expand/reshape, one
    merged gate/up projection, only the last token's logits. Prefill after `ctx` cached
    tokens; the caches are inputs (batch, kv_heads, ctx + seq, head_dim)."""

    def __init__(self, cfg, batch: int, seq: int, ctx: int = 0) -> None:
        super().__init__()
        self.cfg, self.b, self.s, self.ctx = cfg, batch, seq, ctx
        h, d = cfg.hidden, cfg.head_dim
        p = lambda *shape: nn.Parameter(torch.randn(*shape) * 0.05)
        self.embed = p(cfg.vocab, h)
        self.layers = nn.ModuleList()
        for _ in range(cfg.layers):
            layer = nn.Module()
            layer.ln1, layer.ln2 = p(h), p(h)
            layer.q, layer.o = p(h, cfg.heads * d), p(cfg.heads * d, h)
            layer.k, layer.v = p(h, cfg.kv_heads * d), p(h, cfg.kv_heads * d)
            layer.gate_up, layer.down = p(h, 2 * cfg.ffn), p(cfg.ffn, h)
            self.layers.append(layer)
        self.norm, self.lm_head = p(h), p(h, cfg.vocab)
        inv = cfg.rope_theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.arange(ctx, ctx + seq, dtype=torch.float64)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1).reshape(1, 1, seq, d)
        self.register_buffer("cos", ang.cos().float())
        self.register_buffer("sin", ang.sin().float())
        t, i = torch.arange(ctx + seq)[None, :], torch.arange(seq)[:, None]
        self.register_buffer("mask", torch.where(t <= i + ctx, 0.0, -65504.0)
                             .reshape(1, 1, seq, ctx + seq))

    def rms(self, x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + self.cfg.eps) * w

    def rotary(self, x):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        rot = torch.cat([-x2, x1], dim=-1)
        return x * self.cos + rot * self.sin

    def heads(self, x, n):
        return x.view(self.b, self.s, n, self.cfg.head_dim).permute(0, 2, 1, 3)

    def repeat_kv(self, x):
        b, hk, t, d = x.shape
        g = self.cfg.heads // self.cfg.kv_heads
        return x.view(b, hk, 1, t, d).expand(b, hk, g, t, d).reshape(b, hk * g, t, d)

    def forward(self, input_ids, *caches):
        cfg, b, s = self.cfg, self.b, self.s
        x = self.embed[input_ids].reshape(b * s, cfg.hidden)
        presents = []
        for i, ly in enumerate(self.layers):
            hn = self.rms(x, ly.ln1)
            q, k = self.heads(hn @ ly.q, cfg.heads), self.heads(hn @ ly.k, cfg.kv_heads)
            v = self.heads(hn @ ly.v, cfg.kv_heads)
            q, k = self.rotary(q), self.rotary(k)
            kc = torch.slice_scatter(caches[2 * i], k, dim=2, start=self.ctx,
                                     end=self.ctx + s)
            vc = torch.slice_scatter(caches[2 * i + 1], v, dim=2, start=self.ctx,
                                     end=self.ctx + s)
            presents += [kc, vc]
            scores = (q @ self.repeat_kv(kc).transpose(2, 3)) * (1.0 / math.sqrt(cfg.head_dim))
            att = torch.softmax(scores + self.mask, dim=-1) @ self.repeat_kv(vc)
            att = att.permute(0, 2, 1, 3).reshape(b * s, cfg.heads * cfg.head_dim)
            x = x + att @ ly.o
            hn = self.rms(x, ly.ln2)
            gu = hn @ ly.gate_up
            a, up = gu[..., :cfg.ffn], gu[..., cfg.ffn:]
            x = x + (a * torch.sigmoid(a) * up) @ ly.down
        x = self.rms(x, self.norm).reshape(b, s, cfg.hidden)[:, s - 1:s]
        logits = (x.reshape(b, cfg.hidden) @ self.lm_head).reshape(b, 1, cfg.vocab)
        return (logits, *presents)
