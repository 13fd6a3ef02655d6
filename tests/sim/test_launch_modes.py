"""Launch modes: graph sink, host op-by-op and eager single-op calls.

Every task pays the device-side dispatch in every mode; host launches run ahead of the device;
eager calls are synchronised one by one. So, for any graph, sink <= host <= eager."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import ConfigError


@pytest.mark.parametrize("chip", ["ascend910", "ascend910b"])
@pytest.mark.parametrize("model", ["resnet50", "bert"])
def test_sink_is_never_slower_than_host_nor_host_than_eager(chip: str, model: str) -> None:
    g = (asim.models.resnet50(batch=2) if model == "resnet50"
         else asim.models.bert(batch=2, seq_len=64, layers=2, hidden=256, heads=4))
    sink, host, eager = (asim.simulate(g, chip, mode=m).cycles for m in ("sink", "host", "eager"))
    assert sink < host < eager


def test_one_eager_call_is_launch_dispatch_kernel_and_sync() -> None:
    chip = asim.get_chip("ascend910")
    g = asim.Graph("one_add")
    x = g.input("x", (16, 16), "float16")
    g.output(g.add(x, x))
    kernel = asim.simulate(g, chip, fusion=False).trace.tasks[0].duration
    res = asim.simulate(g, chip, fusion=False, mode="eager")
    want = (chip.cycles(chip.host_launch_us * 1e-6) + chip.cycles(chip.sink_launch_us * 1e-6)
            + kernel + chip.cycles(chip.host_sync_us * 1e-6))
    assert res.cycles == want
    lanes = {(iv.pipe, iv.kind) for iv in res.trace.intervals}
    assert ("HOST", "launch") in lanes and ("HOST", "sync") in lanes


def test_eager_calls_do_not_overlap() -> None:
    """Each call starts after the previous one finished and the host synchronised."""
    g = asim.models.conv_bn_relu(batch=1, cin=16, cout=16, h=8, w=8)
    res = asim.simulate(g, fusion=False, mode="eager")
    tasks = sorted(res.trace.tasks, key=lambda t: t.start)
    for a, b in zip(tasks, tasks[1:]):
        assert b.start > a.end


def test_unknown_mode_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="mode='async': valid values are sink, host, eager"):
        asim.simulate(asim.models.conv_bn_relu(), mode="async")
