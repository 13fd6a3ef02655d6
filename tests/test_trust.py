"""Issue 23's first-use findings: each surface a new user tripped over, pinned by a test."""

from __future__ import annotations

import pytest

import ascendsim as asim
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
