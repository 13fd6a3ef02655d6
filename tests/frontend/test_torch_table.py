"""The ATen table of `from_torch`: every key is a real overload, the mapped share of the core
ATen op set is the one docs/api.md states, and every core op the table does not map fails
with a GraphError naming the op and the source line that used it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import ascendsim as asim  # noqa: E402
from ascendsim.frontend import pytorch as pt  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")   # torch.export's own
API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"
CORE = pt.core_aten_overloads()
UNMAPPED = [name for name in CORE if name not in pt.ATEN]


def _resolve(name: str):
    op, overload = name.removeprefix("aten::").split(".")
    return getattr(getattr(torch.ops.aten, op), overload)


@pytest.mark.parametrize("name", sorted(pt.ATEN))
def test_every_key_is_a_torch_overload(name: str) -> None:
    assert pt.overload_name(_resolve(name)) == name


def test_a_key_registers_once_and_well_formed() -> None:
    with pytest.raises(ValueError, match="mapped twice"):
        pt.aten("aten::relu.default")(lambda cx, x: x)
    with pytest.raises(ValueError, match="aten::name.overload"):
        pt.aten("aten::relu")(lambda cx, x: x)


def test_mapped_fraction_is_in_the_docs() -> None:
    mapped = len(CORE) - len(UNMAPPED)
    text = API_MD.read_text(encoding="utf-8")
    stated = re.search(r"maps (\d+) of the (\d+) core\s+ATen overloads", text)
    assert stated, "docs/api.md must state the mapped share of the core ATen op set"
    assert (int(stated.group(1)), int(stated.group(2))) == (mapped, len(CORE))


@pytest.mark.parametrize("name", UNMAPPED)
def test_unmapped_core_op_is_a_graph_error(name: str) -> None:
    """A graph calling the op (built directly: most of these ops cannot be reached from a
    module in eval mode) is refused before anything is converted, naming op and source."""
    gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    x = gm.graph.placeholder("x")
    node = gm.graph.call_function(_resolve(name), (x,))
    node.meta["stack_trace"] = ('  File "/home/me/model.py", line 42, in forward\n'
                                '    y = self.mystery(x)\n')
    gm.graph.output(node)
    with pytest.raises(asim.GraphError) as err:
        pt.check_supported(gm)
    assert name in str(err.value) and "/home/me/model.py:42 in forward" in str(err.value)


def test_unmapped_op_in_a_module_names_the_line() -> None:
    class CumSum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1) * 2

    with pytest.raises(asim.GraphError,
                       match=r"aten::cumsum.default \(x1, first at node 'cumsum': .*"
                             r"test_torch_table.py:\d+ in forward: return torch.cumsum"):
        asim.from_torch(CumSum(), (torch.randn(2, 3),))


def test_export_failure_is_a_graph_error() -> None:
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x[: int(x.sum().item() > 0) + 1]

    with pytest.raises(asim.GraphError, match="torch.export of DataDependent failed"):
        asim.from_torch(DataDependent(), (torch.randn(4, 2),))


def test_not_a_module_is_a_graph_error() -> None:
    with pytest.raises(asim.GraphError, match="takes a torch.nn.Module"):
        asim.from_torch(lambda x: x, (torch.randn(2),))


def test_module_in_training_mode_is_a_graph_error() -> None:
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train()
    with pytest.raises(asim.GraphError, match=r"1.running_mean.*call module.eval\(\)"):
        asim.from_torch(module, (torch.randn(2, 3, 8, 8),))
