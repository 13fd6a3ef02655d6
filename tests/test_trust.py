"""Issue 23's first-use findings: each surface a new user tripped over, pinned by a test."""

from __future__ import annotations

import time

import pytest

import ascendsim as asim
from ascendsim.api import shape_capacity
from ascendsim.cli import main
from ascendsim.errors import ConfigError


def _tiny() -> asim.Graph:
    g = asim.Graph("tiny")
    x = g.input("x", shape=(4, 4), dtype="float32")
    g.output(g.relu(g.add(x, 1.0)))
    return g


# -- item 13: a typo in the fusion options is an error naming the key -----------------------
@pytest.mark.parametrize("call", [
    lambda g: asim.simulate(g, fusion={"graph_kernal": True}),
    lambda g: asim.optimize(g, "ascend910", graph_kernal=True),
    lambda g: asim.compare(g, fusion={"graph_kernal": True}, inputs=None),
])
def test_fusion_option_typo_names_the_key(call):
    with pytest.raises(ConfigError, match="graph_kernal.*did you mean 'graph_kernel'"):
        call(_tiny())


def test_known_fusion_options_still_run():
    assert asim.simulate(_tiny(), fusion={"graph_kernel": True, "ub_rules": "seed",
                                          "l2_fusion": False}).cycles > 0


# -- simulate(progress=False) is "no progress", a non-callable is a ConfigError --------------
def test_progress_false_means_none():
    assert asim.simulate(_tiny(), progress=False).cycles == asim.simulate(_tiny()).cycles


@pytest.mark.parametrize("bad", [True, 3, "yes"])
def test_progress_not_callable_is_config_error(bad):
    with pytest.raises(ConfigError, match="progress="):
        asim.simulate(_tiny(), progress=bad)


# -- item 12: a huge batch fails fast, from the shapes, naming the largest tensor ------------
@pytest.mark.parametrize("batch", [100_000, 100_000_000])
def test_huge_batch_fails_fast_from_shapes(batch):
    t0 = time.perf_counter()
    with pytest.raises(asim.CapacityError,
                       match=r"from its shapes.*largest tensors: \S+ \(fused stem\.conv"):
        asim.simulate(asim.models.resnet50(batch=batch), "ascend910")
    assert time.perf_counter() - t0 < 5.0     # was 104 s (batch 100000), 10 min (1e8)


def test_huge_batch_cli_exit_2_one_line(capsys):
    t0 = time.perf_counter()
    assert main(["run", "resnet50", "--batch", "100000", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "exceeds the 32.00 GiB HBM of ascend910" in err
    assert time.perf_counter() - t0 < 5.0


def test_shape_bound_is_below_the_plan_peak():
    """The shape check never refuses what the memory plan accepts (built-in models)."""
    for g in (asim.models.resnet50(batch=2), asim.models.bert_base(batch=1, seq_len=32),
              asim.models.decoder("tiny-gqa-1m", batch=2, phase="decode", context_len=40)):
        res = asim.simulate(g, "ascend910b")
        fused = asim.optimize(g, "ascend910b", l2_fusion=False).graph
        assert shape_capacity(fused)[0] <= res.memory.peak_bytes
