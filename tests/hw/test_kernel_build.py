"""How a run's built-in kernels are built (`api.kernel_build_for`): a framework's eager ops
take the chip's default (torch_npu: prebuilt binary kernels on the A2, compiled for the
shapes on the 910), a graph sunk on the device is compiled for its shapes, and a run may
name the build."""

import pytest

import ascendsim as asim
from ascendsim.api import kernel_build_for
from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip


@pytest.mark.parametrize("chip, mode, want", [
    ("ascend910b", "eager", "binary"),
    ("ascend910b4", "host", "binary"),
    ("ascend910b", "sink", "jit"),
    ("ascend910", "eager", "jit"),
    ("ascend910b_gen1", "host", "jit"),
    ("ascend310", "eager", "jit"),          # no figure: compiled for the shapes
])
def test_the_default_build_follows_the_launch_mode_and_the_chip(chip, mode, want):
    assert kernel_build_for(get_chip(chip), mode) == want


def test_a_named_build_wins_and_a_bad_one_is_refused():
    assert kernel_build_for(get_chip("ascend910b"), "eager", "jit") == "jit"
    with pytest.raises(ConfigError, match=r"kernel_build='static': expected one of binary, jit"):
        kernel_build_for(get_chip("ascend910b"), "eager", "static")


def test_the_result_records_the_build():
    g = asim.Graph("sm")
    g.output(g.softmax(g.input("x", (4, 64), "float32")))
    assert asim.simulate(g, "ascend910b", mode="eager").meta["kernel_build"] == "binary"
    assert asim.simulate(g, "ascend910b").meta["kernel_build"] == "jit"
    with pytest.raises(ConfigError, match="kernel_build"):
        asim.simulate(g, "ascend910b", kernel_build="dynamic")


def test_the_cli_passes_the_build_to_the_run(monkeypatch, capsys):
    """`ascendsim run --kernel-build` reaches simulate(); an unknown build is a usage error."""
    from ascendsim.cli import main

    seen = []
    real = asim.simulate

    def spy(*args, **kwargs):
        seen.append(kwargs.get("kernel_build"))
        return real(*args, **kwargs)

    monkeypatch.setattr(asim, "simulate", spy)
    assert main(["run", "conv_bn_relu", "--chip", "ascend910b", "--mode", "host",
                 "--kernel-build", "jit", "--no-progress"]) == 0
    assert seen == ["jit"]
    with pytest.raises(SystemExit):
        main(["run", "conv_bn_relu", "--kernel-build", "static"])
    assert "invalid choice: 'static'" in capsys.readouterr().err
