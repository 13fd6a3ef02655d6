"""One row per converter of `ATEN` that the model tests do not reach: a one-op module against
torch eager (float32; tolerance as in test_torch_models.py: float32 rounding of a different
evaluation order, rtol 1e-5 for a single op)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import ascendsim as asim  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")   # torch.export's own


class _Fn(torch.nn.Module):
    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))


def _pos(*shape: int) -> torch.Tensor:
    return _x(*shape).abs() + 0.5


# (id, function, inputs)
ROWS = [
    ("log1p_expm1_log2_log10", lambda x: torch.log1p(x) + torch.expm1(x) + torch.log2(x)
     + torch.log10(x), (_pos(3, 4),)),
    ("tan_sinh_cosh_trunc", lambda x: torch.tan(x) + torch.sinh(x) + torch.cosh(x)
     + torch.trunc(3 * x), (_x(3, 4),)),
    ("remainder_fmod", lambda a, b: torch.remainder(a, b) + torch.fmod(a, b)
     + torch.remainder(a, 0.7), (_x(3, 4) * 3, _pos(3, 4))),
    ("div_modes", lambda a, b: torch.div(a, b, rounding_mode="floor")
     + torch.div(a, b, rounding_mode="trunc") + torch.div(a, 2.0, rounding_mode="floor"),
     (_x(3, 4) * 3, _pos(3, 4))),
    ("pow_scalar_base", lambda x: torch.pow(2.0, x) + x ** 3, (_x(5),)),
    ("var_std", lambda x: x.var(-1) + x.var(0, unbiased=False) .sum() + x.std(),
     (_x(4, 6),)),
    ("group_norm", lambda x: F.group_norm(x, 2, torch.linspace(0.5, 1.5, 6),
                                          torch.linspace(-1, 1, 6)), (_x(2, 6, 3, 3),)),
    ("gather_index_select", lambda x: torch.gather(x, 1, torch.tensor([[0, 2], [1, 1], [3, 0]]))
     .sum() + torch.index_select(x, 1, torch.tensor([3, 0])), (_x(3, 4),)),
    ("scatter", lambda x: torch.zeros(3, 4).scatter(1, torch.tensor([[0], [2], [1]]), x[:, :1])
     + torch.zeros(3, 4).scatter_add(1, torch.tensor([[0, 0], [2, 1], [1, 3]]), x[:, :2]),
     (_x(3, 4),)),
    ("scatter_reduce", lambda x: torch.ones(3, 4).scatter_reduce(
        1, torch.tensor([[0, 0], [2, 1], [3, 3]]), x[:, :2], "sum")
     + torch.zeros(3, 4).scatter_reduce(1, torch.tensor([[1, 1], [0, 2], [3, 0]]), x[:, :2],
                                        "amax"), (_x(3, 4),)),
    ("slice_and_select_scatter", lambda x, y: torch.slice_scatter(x, y, dim=1, start=1, end=3)
     + torch.select_scatter(x, y[:, 0], 1, -1), (_x(3, 4), _x(3, 2))),
    ("repeat_flip", lambda x: x.repeat(2, 1, 3).flip(-1).flip(0), (_x(2, 3),)),
    ("pads", lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect").sum()
     + F.pad(x, (1, 1, 1, 1), mode="replicate") .mean() + F.pad(x, (1, 0, 0, 2), value=0.5)
     .sum(), (_x(1, 2, 4, 5),)),
    ("upsample_nearest", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
     (_x(1, 2, 3, 4),)),
    ("upsample_bilinear", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear"),
     (_x(1, 2, 3, 4),)),
    ("upsample_bilinear_aligned", lambda x: F.interpolate(x, size=(5, 7), mode="bilinear",
                                                          align_corners=True),
     (_x(1, 2, 3, 4),)),
    ("activations", lambda x: F.leaky_relu(x, 0.2) + F.elu(x) + F.selu(x) + F.hardtanh(x)
     + F.relu6(x) + F.hardsigmoid(x) + F.hardswish(x) + F.gelu(x, approximate="tanh")
     + F.silu(x) + F.softplus(x) + torch.erf(x), (_x(3, 5),)),
    ("clamp_where_compare", lambda x: torch.where(x > 0.2, x.clamp(-0.5, 0.5), x * 2)
     + (x != 0.1).float() + (x <= 0).float() + torch.maximum(x, -x) + torch.minimum(x, x * 0.5),
     (_x(4, 4),)),
    ("reductions", lambda x: x.sum(1) + x.mean(1) + x.amax(1) + x.amin(1) + x.max(1).values
     + x.argmax(1).float() + x.prod(1) + torch.logsumexp(x, 1), (_x(3, 5),)),
    ("log_softmax_avg_pool", lambda x: F.log_softmax(x, 1).sum() + F.avg_pool2d(x, 2, 1)
     .sum((2, 3)).sum() + F.adaptive_avg_pool2d(x, 2), (_x(1, 3, 4, 4),)),
    ("conv_transpose_grouped", lambda x: F.conv_transpose2d(x, torch.linspace(-1, 1, 4 * 2 * 9)
                                                            .reshape(4, 2, 3, 3), stride=2,
                                                            padding=1, output_padding=1),
     (_x(1, 4, 3, 3),)),
    ("bmm_addmm_select_split", lambda a, b: torch.bmm(a, b)[:, 1].sum()
     + torch.addmm(torch.ones(3), a[0], b[0], beta=0.5, alpha=2.0)
     + torch.split(a[0], [1, 1], dim=0)[1], (_x(2, 2, 3), _x(2, 3, 3))),
]


@pytest.mark.parametrize("name,fn,inputs", ROWS, ids=[r[0] for r in ROWS])
def test_op_against_torch(name, fn, inputs) -> None:
    module = _Fn(fn)
    graph = asim.from_torch(module, inputs)
    with torch.no_grad():
        ref = module(*inputs).numpy()
    got = asim.execute(graph, {k: v.numpy() for k, v in zip(graph.inputs, inputs)})["output"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * (np.abs(ref).max() + 1))
