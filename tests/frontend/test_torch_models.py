"""`from_torch` on the test set (tests/frontend/torch_models.py): every model imports, executes
on the numba kernels equal to PyTorch's own output, optimises (fused values equal too) and
simulates, fused and as given.

Tolerance: both sides compute in float32, but in different orders (torch's blocked oneDNN/MKL
GEMMs and vectorised softmax/erf vs the numba kernels' loops), so results differ by float32
rounding that grows with the reduction length and the depth: measured at most ~5e-7 of the
output's largest magnitude on these models. rtol 1e-4 with an atol of 1e-5 of that magnitude
(for elements near zero, where a relative bound means nothing) leaves a margin of > 20x.
bf16 autocast rounds every matmul input and output to bfloat16 (8 bits of mantissa): one
rounding that falls the other way is a relative 2^-8 ~ 4e-3, so that model gets 1e-2.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_models import MODELS  # noqa: E402

import ascendsim as asim  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")   # torch.export's own
RTOL = {"float32": 1e-4, "bfloat16": 1e-2}
#: bfloat16 needs a chip whose vector unit has it (the 910B family)
CHIP = {"bf16_autocast": "ascend910b"}


@pytest.fixture(scope="module", params=sorted(MODELS))
def imported(request):
    name = request.param
    module, args = MODELS[name]()
    graph = asim.from_torch(module, args)
    with torch.no_grad():
        ref = module(*args).float().numpy()
    feeds = {k: a.numpy() for k, a in zip(graph.inputs, args)}
    return name, graph, feeds, ref


def _close(name: str, got: np.ndarray, ref: np.ndarray) -> None:
    rtol = RTOL["bfloat16" if "bf16" in name else "float32"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * 0.1 * np.abs(ref).max())


def test_values_equal_torch(imported) -> None:
    name, graph, feeds, ref = imported
    _close(name, asim.execute(graph, feeds)["output"], ref)


def test_optimised_values_equal_torch(imported) -> None:
    name, graph, feeds, ref = imported
    opt = asim.optimize(graph)
    assert len(opt.graph.nodes) < len(graph.nodes)
    _close(name, asim.execute(opt.graph, feeds)["output"], ref)


def test_simulates_fused_and_unfused(imported) -> None:
    name, graph, feeds, ref = imported
    chip = CHIP.get(name, "ascend910")
    fused = asim.simulate(graph, chip=chip)
    plain = asim.simulate(graph, chip=chip, fusion=False)
    assert 0 < fused.time_us <= plain.time_us
    assert fused.summary()


def test_node_names_are_module_paths() -> None:
    module, args = MODELS["resnet"]()
    graph = asim.from_torch(module, args)
    names = {n.name for n in graph.nodes}
    assert {"stem.0", "layer1.conv1", "layer2.down.0", "fc"} <= names
    res = asim.simulate(graph, fusion=False)
    assert "layer1.conv1" in res.explain("layer1.conv1")
    fused = asim.simulate(graph)
    assert "was fused into" in fused.explain("layer1.conv1")   # a ConvRelu holds it


def test_parameters_as_constants_or_inputs() -> None:
    module, args = MODELS["resnet"]()
    g_const = asim.from_torch(module, args)
    assert "layer1.conv1.weight" in g_const.constants
    assert "layer1.bn1.running_mean" in g_const.buffers
    g_in = asim.from_torch(module, args, params="inputs")
    assert "layer1.conv1.weight" in g_in.inputs
    assert "layer1.bn1.running_mean" not in g_in.inputs      # buffers stay constants
    params = asim.frontend.pytorch.parameter_values(module)
    feeds = {"x": args[0].numpy(), **{k: v for k, v in params.items() if k in g_in.inputs}}
    with torch.no_grad():
        ref = module(*args).numpy()
    _close("resnet", asim.execute(g_in, feeds)["output"], ref)


def test_cond_becomes_if() -> None:
    module, (x,) = MODELS["cond"]()
    graph = asim.from_torch(module, (x,))
    assert [n.op_type for n in graph.nodes].count("If") == 1
    for sign in (1.0, -1.0):       # both branches, chosen at run time
        xs = x * sign
        with torch.no_grad():
            ref = module(xs).numpy()
        _close("cond", asim.execute(graph, {"x": xs.numpy()})["output"], ref)


@pytest.mark.parametrize("name", ["resnet", "llama"])
def test_dynamic_batch_is_a_symbolic_dim(name: str) -> None:
    module, args = MODELS[name]()
    batch = torch.export.Dim("batch", min=2, max=64)
    graph = asim.from_torch(module, args, dynamic_shapes=({0: batch},))
    first = graph.inputs[0]
    assert graph.values[first].shape[0] == "batch"
    bound = graph.bind(batch=3)
    x3 = torch.cat([args[0], args[0][:1]])
    with torch.no_grad():
        ref = module(x3).numpy()
    _close(name, asim.execute(bound, {first: x3.numpy()})["output"], ref)
    assert asim.simulate(bound).time_us > 0


def test_symbolic_expand_from_size_one_is_a_graph_error() -> None:
    module, args = MODELS["vit"]()       # cls token: expand (1, 1, D) to (batch, 1, D)
    batch = torch.export.Dim("batch", min=2, max=64)
    with pytest.raises(asim.GraphError, match="torch_models.py.*symbolic size 'batch'"):
        asim.from_torch(module, args, dynamic_shapes=({0: batch},))


def test_bad_params_mode_is_a_config_error() -> None:
    module, args = MODELS["cond"]()
    with pytest.raises(asim.ConfigError, match="params="):
        asim.from_torch(module, args, params="weights")
