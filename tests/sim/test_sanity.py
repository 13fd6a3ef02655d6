"""Sanity figures of the model, with the bounds the issue states (must-show)."""

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.errors import ConfigError, SimulationError
from ascendsim.hw import get_chip

CHIP = get_chip("ascend910")


def _sim(build, chip=CHIP, **kw):
    g = asim.Graph("t")
    build(g)
    return simulate(g, chip, **kw, fusion=False)


def _matmul(n, dtype="float16"):
    def build(g):
        a = g.input("a", (n, n), dtype)
        b = g.input("b", (n, n), dtype)
        g.output(g.matmul(a, b, name="mm"))
    return build


@pytest.mark.parametrize("detail", ["block", "tile"])
def test_gemm_4096_reaches_70_to_95_percent_of_cube_peak(detail):
    """A 4096^3 fp16 MatMul on ascend910 runs at 70-95% of the chip's cube peak."""
    res = _sim(_matmul(4096), detail=detail)
    mm = res.trace.task("mm")
    util = 2 * 4096 ** 3 / (mm.duration * CHIP.ai_cores * CHIP.flops_per_cycle("float16"))
    assert 0.70 <= util <= 0.95, f"cube utilisation {util:.3f}"
    assert mm.block_dim == CHIP.ai_cores


@pytest.mark.parametrize("detail", ["block", "tile"])
def test_add_64m_is_bound_by_hbm_bandwidth(detail):
    """A 64M-element fp16 Add moves 3 x 128 MiB at >= 70% of HBM bandwidth."""
    n = 64 * 1024 * 1024

    def build(g):
        a = g.input("a", (n,), "float16")
        b = g.input("b", (n,), "float16")
        g.output(g.add(a, b, name="add"))
    res = _sim(build, detail=detail)
    add = res.trace.task("add")
    assert add.traffic[("DDR", "read")] == 2 * n * 2
    # the 128 MiB output passes through the 32 MiB L2: written back while the Add runs, but
    # for what is still dirty at the end (flushed after it); once, within rounding
    assert add.traffic[("DDR", "write")] + res.trace.l2.flush_bytes == pytest.approx(n * 2,
                                                                                   abs=2)
    # the write-backs run on behind the Add (the L2 controller's): count the flush's time
    ddr = add.traffic[("DDR", "read")] + add.traffic[("DDR", "write")] \
        + res.trace.l2.flush_bytes
    hbm_per_cycle = CHIP.hbm_bandwidth_bytes_per_s / CHIP.clock_hz
    frac = ddr / (add.duration + res.trace.l2.flush_cycles) / hbm_per_cycle
    assert 0.70 <= frac <= 1.0, f"HBM bandwidth fraction {frac:.3f}"
    # HBM, not the vector unit, bounds it
    assert add.pipe_cycles["V"] < 0.2 * add.duration


def _conv(cin):
    def build(g):
        x = g.input("x", (8, cin, 56, 56), "float16")
        w = g.weight("w", (64, cin, 3, 3), "float16")
        g.output(g.conv(x, w, pads=[1, 1, 1, 1], name="conv"))
    return build


def test_conv_17_channels_costs_the_cube_cycles_of_32():
    """NC1HWC0 pads C to 32 (two C0=16 slices): 17 channels cost exactly the M cycles of 32,
    and more than 16."""
    m = {c: _sim(_conv(c), detail="tile").trace.task("conv").pipe_cycles["M"]
         for c in (16, 17, 32)}
    assert m[17] == m[32]
    assert m[16] < m[17]


def test_pow_on_ai_cpu_is_at_least_5x_slower_than_mul_on_ai_core():
    """Pow(x, 2.0) runs on the AI CPU; Mul(x, x) on the AI Core is >= 5x faster at 1M."""
    n = 1024 * 1024

    def pw(g):
        x = g.input("x", (n,), "float16")
        g.output(g.pow(x, 2.0, name="p"))

    def ml(g):
        x = g.input("x", (n,), "float16")
        g.output(g.mul(x, x, name="m"))
    p, m = _sim(pw), _sim(ml)
    assert p.trace.task("p").task_type == "AI_CPU"
    assert m.trace.task("m").task_type == "AI_CORE"
    assert p.cycles >= 5 * m.cycles
    assert any(iv.pipe == "AICPU" for iv in p.trace.intervals)


def test_host_launch_is_slower_than_sink_by_the_launch_overheads():
    """20 tiny ops: host mode pays host_launch_us per op on the HOST lane, sink mode
    sink_launch_us and the kernel start on the device; the difference is within 15% of
    20 x (host launch - sink dispatch - kernel start): the host runs ahead while the device
    works, so in host mode the device's own per-task cost hides under the launches."""
    def chain(g):
        x = g.input("x", (1024,), "float16")
        for _ in range(20):
            x = g.relu(x)
        g.output(x)
    sink, host = _sim(chain, mode="sink"), _sim(chain, mode="host")
    per = (CHIP.cycles(CHIP.host_launch_us * 1e-6) - CHIP.cycles(CHIP.sink_launch_us * 1e-6)
           - CHIP.cycles(CHIP.kernel_start_us * 1e-6))
    diff = host.cycles - sink.cycles
    assert 0.85 * 20 * per <= diff <= 1.15 * 20 * per
    launches = [iv for iv in host.trace.intervals if iv.pipe == "HOST"]
    assert len(launches) == 20
    assert not any(iv.pipe == "HOST" for iv in sink.trace.intervals)


def test_ub_too_small_for_the_minimum_tile_names_the_buffer():
    tiny = CHIP.replace(ub_bytes=128)

    def build(g):
        a = g.input("a", (4096,), "float16")
        g.output(g.relu(a, name="r"))
    msg = r"op 'r': UB of core 0 \(128 B\) cannot hold the minimum tile"
    with pytest.raises(SimulationError, match=msg):
        _sim(build, tiny)


def test_l0c_too_small_for_the_minimum_cube_tile_names_the_buffer():
    # one 16x16 fp32 tile is 1024 B and a one-tile L0C is allowed (dbL0C = 1): 512 B is short
    tiny = CHIP.replace(l0c_bytes=512)
    with pytest.raises(SimulationError, match=r"op 'mm': L0C of core 0 \(512 B\)"):
        _sim(_matmul(256), tiny)


def test_bad_options_raise_config_errors():
    with pytest.raises(ConfigError, match="detail"):
        _sim(_matmul(64), detail="cycle")
    with pytest.raises(ConfigError, match="mode"):
        _sim(_matmul(64), mode="async")
    with pytest.raises(ConfigError, match="unknown chip"):
        _sim(_matmul(64), chip="ascend999")
