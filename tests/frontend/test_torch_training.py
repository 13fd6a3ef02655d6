"""Training from PyTorch: `training_step(from_torch(m), loss="mse", optimizer="sgd", lr=1)`
updates each parameter by exactly its gradient, so p - p_new is the project's autodiff
gradient; it must equal torch.autograd's on the same inputs and weights.

Tolerance: float32 on both sides, the backward of a small model summing a few hundred terms
per gradient element in different orders; differences measured ~1e-7 of the largest gradient.
p - p_new also loses the bits of p below the gradient's scale (|p| <= ~1 here, float32
epsilon 6e-8), so atol is 1e-5 of the model's largest gradient element and rtol 1e-4. (A
convolution's bias before BatchNorm has a zero gradient: both sides give rounding noise.)"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_models import MLP, EncoderLayer, SmallLlama  # noqa: E402

import ascendsim as asim  # noqa: E402
from ascendsim.autodiff.training import initial_state  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")   # torch.export's own


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(y.flatten(1))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = EncoderLayer(16, 2, 32, pre_norm=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layer(x))


def _cases():
    torch.manual_seed(0)
    return {
        "mlp": (MLP(), torch.randn(4, 16)),
        "cnn_batchnorm": (SmallCNN(), torch.randn(2, 3, 8, 8)),
        "encoder": (Encoder(), torch.randn(2, 5, 16)),
        "llama": (SmallLlama(layers=1), torch.randint(0, 64, (2, 8))),
    }


@pytest.mark.parametrize("name", ["mlp", "cnn_batchnorm", "encoder", "llama"])
def test_training_step_gradients_equal_autograd(name: str) -> None:
    module, x = _cases()[name]
    module.eval()
    graph = asim.from_torch(module, (x,))
    step = asim.training_step(graph, loss="mse", optimizer="sgd", lr=1.0,
                              mixed_precision=False)
    # torch: the same step in train mode (BatchNorm on batch statistics, as the step does)
    module.train()
    out = module(x)
    labels = torch.randn(out.shape, generator=torch.Generator().manual_seed(7))
    F.mse_loss(out, labels).backward()
    state = initial_state(step)
    feeds = {**state, graph.inputs[0]: x.numpy(), "labels": labels.numpy()}
    got = asim.execute(step, feeds)
    torch_grads = {k: p.grad.numpy() for k, p in module.named_parameters()}
    trained = [o[: -len("_new")] for o in step.outputs if o.endswith("_new")
               and o[: -len("_new")] in torch_grads]
    assert set(trained) == {k for k, p in module.named_parameters()}
    scale = max(np.abs(g).max() for g in torch_grads.values())
    for p in trained:
        grad = state[p] - got[f"{p}_new"]
        np.testing.assert_allclose(grad, torch_grads[p], rtol=1e-4, atol=1e-5 * scale,
                                   err_msg=f"gradient of {p}")
    with torch.no_grad():
        loss = F.mse_loss(module(x), labels).item()
    assert got["loss"] == pytest.approx(loss, rel=1e-5)


def test_training_step_simulates() -> None:
    module, x = _cases()["cnn_batchnorm"]
    step = asim.training_step(asim.from_torch(module.eval(), (x,)), loss="mse",
                              optimizer="adam")
    assert asim.simulate(step).time_us > 0
