"""The 910B1/B3/B4, the first-generation 30-core Ascend 910 (CANN SoC "Ascend910B") and the
310P3 chip files: each loads, every figure is sourced and tagged, the derived peaks agree with
the published ones, and the files that start from a base override only what their sources
change."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip

#: confidence tags of built-in figures; C = fitted on calibration rows of the corpus, which
#: tests/validation/test_calibrate.py checks it cites
TAGS = set("SDFMGC")
NEW = ("ascend910b1", "ascend910b3", "ascend910b4", "ascend910b_gen1", "ascend310p")
#: the chip each new file starts from (`base = ...`)
BASE = {"ascend910b1": "ascend910b", "ascend910b3": "ascend910b", "ascend910b4": "ascend910b",
        "ascend910b_gen1": "ascend910", "ascend310p": "ascend310"}


@pytest.mark.parametrize("name", NEW)
def test_new_chip_loads_with_every_figure_tagged_and_sourced(name):
    chip = get_chip(name)
    assert chip.name == name and chip.description
    for key in chip.figure_keys():
        tags = chip.confidence(key).split("/")
        assert set(tags) <= TAGS, f"{name}.{key}: {chip.source(key)!r}"
        assert len(chip.source(key)) > 4, f"{name}.{key}"
    assert set(chip.sources) == set(chip.figure_keys())


# Published (or ini-derived, as the reference table gives them) peaks, with the tolerance that
# says how exact the published figure is.
PEAKS = [
    # ascend-hardware.md section 1: B1 24 cores x 1.85 GHz -> 363.7 TFLOPS (D), rounded to 0.1
    ("ascend910b1", "float16", 363.7e12, 0.001),
    # B3: 20 x 1.8 GHz -> 294.9 TFLOPS (D)
    ("ascend910b3", "float16", 294.9e12, 0.001),
    # B4: 20 x 1.65 GHz (the clock msprof's device info and the profile's cycle counters give)
    # x 8192 -> 270.3 TFLOPS fp16 (D), 540.7 TOPS int8
    ("ascend910b4", "float16", 270.336e12, 1e-9),
    ("ascend910b4", "int8", 540.672e12, 1e-9),
    # POCKETLLM: 30 x 16^3 x 900 MHz x 2 = 221.2 TFLOPS a card, read off Ascend910B.ini
    ("ascend910b_gen1", "float16", 221.2e12, 0.001),
    # Atlas 300I Duo: 280 TOPS int8 for two 310P chips; 70 TFLOPS fp16 a chip is half of 140
    ("ascend310p", "int8", 140e12, 0.001),
    ("ascend310p", "float16", 70e12, 0.001),
]


@pytest.mark.parametrize("name, dtype, published, rel", PEAKS)
def test_derived_peak_agrees_with_the_published_figure(name, dtype, published, rel):
    assert get_chip(name).peak_flops(dtype) == pytest.approx(published, rel=rel)


def test_product_names_of_public_configs_sit_six_percent_above_the_ini_peaks():
    """Public configs name the parts '910B2 376T' and '910B3 313T': the ini-derived peaks are
    5.9-6.1% below those names for both, so the core counts and clocks are consistent with
    each other (a wrong core count would be off by 17-20%)."""
    for name, named in (("ascend910b", 376e12), ("ascend910b3", 313e12)):
        ratio = get_chip(name).peak_flops("float16") / named
        assert 0.93 < ratio < 0.95, (name, ratio)


@pytest.mark.parametrize("name", NEW)
def test_overridden_figures_carry_their_own_source(name):
    """Every figure whose value differs from the base chip's says where the new value comes
    from (its source differs from the base's); unchanged figures may keep the base source."""
    chip, base = get_chip(name), get_chip(BASE[name])
    changed = [k for k in chip.figure_keys() if chip.figure(k) != base.figure(k)]
    assert changed, name
    for key in changed:
        if base.figure(key) is None:      # a figure the base chip does not have
            assert chip.source(key), f"{name}.{key} has no source"
            continue
        assert chip.source(key) != base.source(key), f"{name}.{key} keeps the base's source"


def test_910b_variants_share_the_a2_core_and_scale_the_chip_wide_rates():
    b2 = get_chip("ascend910b")
    for name, cores, clock in (("ascend910b1", 24, 1.85e9), ("ascend910b3", 20, 1.8e9),
                               ("ascend910b4", 20, 1.65e9)):
        c = get_chip(name)
        assert (c.ai_cores, c.aiv_cores, c.clock_hz, c.arch) == (cores, 2 * cores, clock, "split")
        # same A2 core: buffers, cube fractals and vector rates are the 910B2's
        assert (c.ub_bytes, c.l1_bytes, c.l0c_bytes) == (b2.ub_bytes, b2.l1_bytes, b2.l0c_bytes)
        assert c.cube_mkn == b2.cube_mkn
        assert c.vector_op_bytes_per_cycle == b2.vector_op_bytes_per_cycle
        # chip-wide rates are the per-core ini rates times cores times clock
        per_core_cycle = cores * clock
        assert c.l2_bandwidth_bytes_per_s / per_core_cycle == pytest.approx(110)
        assert c.l2_write_bandwidth_bytes_per_s / per_core_cycle == pytest.approx(86)
        if name == "ascend910b1":            # its own ini: the per-core HBM rate x its cores
            assert c.hbm_bandwidth_bytes_per_s / per_core_cycle == pytest.approx(32)
    # the B3 carries the B2's memory (64 GB): its HBM bandwidth is the B2's, not the ini's
    # per-core rate times its 20 cores (which would be 1.152 TB/s)
    b3 = get_chip("ascend910b3")
    assert b3.hbm_bytes == b2.hbm_bytes
    assert b3.hbm_bandwidth_bytes_per_s == b2.hbm_bandwidth_bytes_per_s
    assert b3.confidence("hbm_bandwidth_bytes_per_s") == "D"
    b4 = get_chip("ascend910b4")
    assert b4.l2_bytes == b2.l2_bytes // 2 and b4.hbm_bytes == b2.hbm_bytes // 2
    # the 32 GB part's HBM is a memory configuration: half the 64 GB parts' 1.6 TB/s peak, at
    # the share of it the 64 GB A2 reaches (Huawei's Add sample: 1.456 of 1.6 TB/s)
    assert b4.hbm_bandwidth_bytes_per_s == pytest.approx(0.8e12 * 1.456 / 1.6)
    assert b4.confidence("hbm_bandwidth_bytes_per_s") == "D"
    # the B3 figures msKPP measured on a 910B3 itself
    assert b3.cube_mmad_overhead_cycles == 24 and b3.confidence("cube_mmad_overhead_cycles") == "M"
    assert b3.path_bytes_per_cycle.gm_ub > 2 * b2.path_bytes_per_cycle.gm_ub
    # a GM->UB move of 192 KB reaches the measured 111 B/cycle of the 910B3 curve within 2%
    assert 196608 / b3.transfer_cycles("gm", "ub", 196608) == pytest.approx(111, rel=0.02)


def test_first_generation_30_core_part():
    g, a = get_chip("ascend910b_gen1"), get_chip("ascend910")
    assert (g.ai_cores, g.clock_hz, g.arch, g.aiv_cores) == (30, 0.9e9, "coupled", 0)
    assert "FIX" not in g.pipes and g.pipe_for("l0c", "ub") == "V"
    assert (g.ub_bytes, g.l1_bytes, g.l0c_bytes, g.l2_bytes, g.hbm_bytes) == (
        a.ub_bytes, a.l1_bytes, a.l0c_bytes, a.l2_bytes, a.hbm_bytes)
    assert "Ascend910B.ini" in g.source("ai_cores") and "cube_freq=900" in g.source("clock_hz")
    assert g.confidence("hbm_bandwidth_bytes_per_s") == "M"


def test_310p3_is_a_coupled_eight_core_chip_with_its_own_buffers():
    p, s = get_chip("ascend310p"), get_chip("ascend310")
    assert (p.ai_cores, p.arch, p.aiv_cores) == (8, "coupled", 0)
    assert p.ub_bytes == 256 << 10 and p.l2_bytes == 16 << 20 and p.l1_bytes == 1 << 20
    assert p.path_bytes_per_cycle.l0c_ub == 256 and s.path_bytes_per_cycle.l0c_ub == 128
    assert p.hbm_bandwidth_bytes_per_s == pytest.approx(204.8e9)
    assert "not modelled" in p.description  # the 7 vector cores


def test_aliases_and_replace_on_the_new_chips():
    assert get_chip("Ascend310P3") is get_chip("ascend310p")
    assert get_chip("ASCEND910B4") is get_chip("ascend910b4")
    b4 = get_chip("ascend910b4")
    fast = b4.replace(clock_hz=1.8e9)  # a B4 at the B3's clock has the B3's cube peak
    assert fast.peak_flops() == get_chip("ascend910b3").peak_flops()
    assert fast.confidence("clock_hz") == "U" and b4.confidence("clock_hz") == "M"
    assert fast.l2_bytes == b4.l2_bytes


def _gemm_us(n: int, chip: str) -> float:
    g = asim.Graph("gemm")
    a = g.input("a", (n, n), "float16")
    b = g.input("b", (n, n), "float16")
    g.output(g.matmul(a, b, name="mm"))
    return simulate(g, chip, fusion=False).trace.task("mm").duration / get_chip(chip).clock_hz


@pytest.mark.parametrize("slow, fast", [("ascend910b4", "ascend910b"),
                                        ("ascend910b_gen1", "ascend910"),
                                        ("ascend310", "ascend310p")])
def test_new_chips_simulate_and_order_as_their_peaks(slow, fast):
    """A 2048^3 fp16 GEMM runs on every new chip, and a part with fewer cores at a lower clock
    takes longer than its faster sibling (at 1024^3 the 910B4 and the 910B2 both run two
    basic blocks on their busiest cube core, and the fixed start costs, in microseconds,
    leave them 3.5 % apart)."""
    assert _gemm_us(2048, slow) > 1.1 * _gemm_us(2048, fast)
