"""Figures that were module constants or missing: each is chip data with a source, is
validated, and is what the lowering and the simulator actually read."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import chips, get_chip, load_chip
from ascendsim.lower.tiling import gm_read, scalar_stage
from ascendsim.sim import Fabric

NEW = ("gm_same_address_slowdown", "gm_min_efficient_transfer_bytes", "scalar_ops_per_instr",
       "l2_write_bandwidth_bytes_per_s")


@pytest.mark.parametrize("name", chips())
def test_new_figures_have_values_and_tagged_sources(name):
    c = get_chip(name)
    for key in NEW:
        assert key in c.figure_keys() and len(c.source(key)) > 10, key
    assert c.gm_same_address_slowdown == 1.15  # midpoint of "about 10-20%"
    assert c.source("gm_same_address_slowdown").startswith("S: HIA-HW-CONSTRAINTS")
    assert c.gm_min_efficient_transfer_bytes == 16384
    assert c.source("gm_min_efficient_transfer_bytes").startswith("S: HIA-HW-CONSTRAINTS")
    assert c.scalar_ops_per_instr == 4 and c.confidence("scalar_ops_per_instr") == "G"
    # writes into L2 are slower than reads on every chip whose ini gives both
    assert c.l2_write_bandwidth_bytes_per_s < c.l2_bandwidth_bytes_per_s


def test_l2_write_bandwidth_per_chip():
    b = get_chip("ascend910b")  # B1 sample ini l2_write_rate = 86 B/cycle/core
    assert b.l2_write_bandwidth_bytes_per_s == pytest.approx(86 * 24 * 1.8e9)
    assert b.confidence("l2_write_bandwidth_bytes_per_s") == "D"
    s = get_chip("ascend310")  # 310 fixture l2_write_rate = 64 B/cycle/core
    assert s.l2_write_bandwidth_bytes_per_s == pytest.approx(64 * 2 * s.clock_hz)
    assert get_chip("ascend910").confidence("l2_write_bandwidth_bytes_per_s") == "G"



def test_first_generation_910_memory_rates_from_its_platform_ini():
    """ascend910b_gen1 takes the per-core rates of its own Ascend910B.ini
    ([AICoreMemoryRates]: l2_read_rate 110, l2_write_rate 86, ddr_read_rate 32,
    l0_c_to_ub_rate 256 B/cycle), F-tagged, where the 910A it derives from keeps the
    Ascend 310 fixture's rates (its own ini was not found)."""
    gen1 = get_chip("ascend910b_gen1")
    paths = gen1.path_bytes_per_cycle
    assert (paths.gm_l1, paths.gm_ub, paths.l0c_ub) == (110, 110, 256)
    assert (paths.l1_l0a, paths.l1_l0b, paths.ub_gm) == (512, 256, 64)
    assert gen1.source("path_bytes_per_cycle.gm_l1").startswith("F: Ascend910B.ini")
    # a read that misses L2 streams at the ini's DDR rate, 32 B/cycle per core
    assert paths.gm_l1 / gen1.l2_miss_slowdown == pytest.approx(32)
    assert gen1.confidence("l2_miss_slowdown") == "D"
    assert gen1.l2_bandwidth_bytes_per_s == pytest.approx(110 * 30 * 0.9e9)
    assert gen1.l2_write_bandwidth_bytes_per_s == pytest.approx(86 * 30 * 0.9e9)

def test_fp32_cube_mode_only_on_910b_at_a_quarter_of_fp16():
    b = get_chip("ascend910b")
    assert b.cube_shape("float32") == b.cube_shape("fp32") == (16, 4, 16)
    assert b.peak_flops("float32") == pytest.approx(b.peak_flops("float16") / 4)
    # TORCHPERF-910B2 measured 84.5 TFLOPS for a 4096^3 fp32 GEMM: below the modelled peak
    assert 84.5e12 < b.peak_flops("float32") < 1.1 * 84.5e12
    assert "TORCHPERF-910B2" in b.source("cube_mkn.float32")
    for name in ("ascend910", "ascend310"):  # no fp32 cube mode: runs in fp16 mode
        with pytest.raises(ConfigError, match="no mode for dtype 'float32'"):
            get_chip(name).cube_shape("float32")


@pytest.mark.parametrize("key, value, pattern", [
    ("gm_same_address_slowdown", 0.9, r"gm_same_address_slowdown must be >= 1, got 0\.9"),
    ("gm_same_address_slowdown", "x", r"gm_same_address_slowdown must be a number"),
    ("gm_min_efficient_transfer_bytes", 0, r"gm_min_efficient_transfer_bytes must be > 0"),
    ("gm_min_efficient_transfer_bytes", 1.5, r"gm_min_efficient_transfer_bytes must be an int"),
    ("scalar_ops_per_instr", 0, r"scalar_ops_per_instr must be > 0, got 0"),
    ("l2_write_bandwidth_bytes_per_s", -1.0, r"l2_write_bandwidth_bytes_per_s must be > 0"),
    ("l2_write_bandwidth_bytes_per_s", float("inf"),
     r"l2_write_bandwidth_bytes_per_s must be finite"),
    ("cube_mkn", {"float32": (16, 0, 16)}, r"cube_mkn\.float32 must be 3 positive integers"),
])
def test_bad_values_raise_config_errors_naming_the_key(key, value, pattern):
    with pytest.raises(ConfigError, match=pattern):
        get_chip("ascend910b").replace(**{key: value})


def test_bad_and_missing_figures_in_files_name_key_and_file(tmp_path: Path):
    import importlib.resources

    bad = tmp_path / "my.toml"
    bad.write_text('base = "ascend910"\ngm_same_address_slowdown = 0.5\n')
    with pytest.raises(ConfigError, match=r"my\.toml: gm_same_address_slowdown must be >= 1"):
        load_chip(bad)
    text = (importlib.resources.files("ascendsim.hw") / "chips" / "ascend910.toml").read_text()
    for key in NEW:
        cut = tmp_path / f"no_{key}.toml"
        cut.write_text("\n".join(line for line in text.splitlines()
                                 if not line.startswith(f"{key} =")))
        with pytest.raises(ConfigError, match=rf"no_{key}\.toml: missing key '{key}'"):
            load_chip(cut)
    ok = tmp_path / "fp32.toml"
    ok.write_text('base = "ascend910"\n[cube_mkn]\n'
                  'float32 = {value = [16, 8, 16], source = "G: what-if"}\n')
    chip = load_chip(ok)
    assert chip.cube_shape("float32") == (16, 8, 16)
    assert chip.confidence("cube_mkn.float32") == "G"


# ---------------------------------------------------------------- the figures are read
def test_scalar_cost_reads_the_chip():
    c = get_chip("ascend910")
    assert scalar_stage(c, 10).instrs[0].cycles == 40  # 10 instr x 4 ops at 1 op/cycle
    assert scalar_stage(c.replace(scalar_ops_per_instr=8), 10).instrs[0].cycles == 80


def test_same_address_slowdown_reads_the_chip():
    c = get_chip("ascend910b")
    bw = c.path_bytes_per_cycle.gm_l1
    assert gm_read(c, "MTE2", "L1", 4096, 0.0).bw == pytest.approx(bw)
    assert gm_read(c, "MTE2", "L1", 4096, 0.0, same_address=True).bw == pytest.approx(bw / 1.15)
    flat = c.replace(gm_same_address_slowdown=1.0)
    assert gm_read(flat, "MTE2", "L1", 4096, 0.0, same_address=True).bw == pytest.approx(bw)


def _add(n: int, chip, **kw):
    g = asim.Graph("t")
    a = g.input("a", (n,), "float16")
    b = g.input("b", (n,), "float16")
    g.output(g.add(a, b, name="add"))
    return simulate(g, chip, **kw, fusion=False).trace.task("add")


def test_vector_split_reads_the_min_efficient_transfer():
    """16384 fp16 elements move 6 x 16384 B: without TBE's split, 6 cores at 16 KB per core,
    24 at 4 KB; with it (the 910's vector_split_bytes = 1024), one core per KB of the 32 KB
    tensor: all 32 cores."""
    c = get_chip("ascend910")
    assert _add(16384, c).block_dim == 32
    c = c.replace(vector_split_bytes=None)
    assert _add(16384, c).block_dim == 6
    assert _add(16384, c.replace(gm_min_efficient_transfer_bytes=4096)).block_dim == 24


def test_fabric_caps_writes_at_the_l2_write_bandwidth():
    """A read and a write flow of 1000 B each, L2 100 B/cycle of which writes at most 40: the
    read gets 60 B/cycle (done at 17), the write 40 B/cycle (done at 25)."""
    env = simpy.Environment()
    fab = Fabric(env, 100.0, 1000.0, 40.0)
    done = {}

    def run(tag, write):
        yield fab.transfer(1000, 100.0, 0.0, 1, write=write)
        done[tag] = env.now

    env.process(run("read", False))
    env.process(run("write", True))
    env.run()
    assert done == {"read": 17, "write": 25}
    # without a write limit the two share L2 equally
    env = simpy.Environment()
    fab = Fabric(env, 100.0, 1000.0)
    done.clear()
    env.process(run("read", False))
    env.process(run("write", True))
    env.run()
    assert done == {"read": 20, "write": 20}
    # without a write limit a write flow below its cap keeps filling (no early freeze)
    env = simpy.Environment()
    fab = Fabric(env, 100.0, 1000.0)
    done.clear()

    def capped(tag, cap, write):
        yield fab.transfer(1000, cap, 0.0, 1, write=write)
        done[tag] = env.now

    env.process(capped("read", 10.0, False))
    env.process(capped("write", 100.0, True))
    env.run()
    assert done == {"read": 100, "write": 12}  # the write gets the 90 B/cycle left


def test_simulated_writes_respect_the_chip_l2_write_bandwidth():
    n = 1 << 20
    c = get_chip("ascend910")
    slow = c.replace(l2_write_bandwidth_bytes_per_s=1e11)  # 100 B/cycle at 1 GHz
    fast_t, slow_t = _add(n, c), _add(n, slow)
    writes = slow_t.traffic[("L2", "write")]
    assert writes == 2 * n
    assert slow_t.duration >= writes / 100 > 2 * fast_t.duration
    assert slow_t.roofline_cycles == writes // 100  # the roofline names the write bound


def _mm(n: int, dtype: str, chip):
    g = asim.Graph("t")
    a = g.input("a", (n, n), dtype)
    b = g.input("b", (n, n), dtype)
    g.output(g.matmul(a, b, name="mm"))
    return simulate(g, chip, fusion=False).trace.task("mm")


def test_fp32_matmul_uses_the_chip_fp32_cube_rate():
    b = get_chip("ascend910b")
    f16, f32 = _mm(512, "float16", b), _mm(512, "float32", b)
    # the cube's work over all blocks (the two dtypes may tile the GEMM on different block
    # counts: pipe_cycles is one block's)
    # (a quarter of the fp16 rate; each mmad also pays its issue overhead, cube_mmad_overhead_
    # cycles, so the ratio moves with the baseK each dtype's tiling picks: 3.5-4.6)
    m16, m32 = f16.pipe_cycles["M"] * f16.block_dim, f32.pipe_cycles["M"] * f32.block_dim
    assert 3.5 * m16 <= m32 <= 4.6 * m16
    assert not any("float16 mode" in note for note in f32.notes)
    # the roofline takes the peak of the cube mode the task runs in
    assert f32.roofline_cycles >= 2 * 512 ** 3 // (b.ai_cores * b.flops_per_cycle("float32"))
    # faster than the fp16 peak allows: the int8 peak bounds it (2048^3: large enough that
    # the fixed kernel start, kernel_start_us, is a few % of the time)
    i8 = _mm(2048, "int8", b)
    assert i8.roofline_cycles <= i8.duration < 2 * 2048 ** 3 / (b.ai_cores * 8192)
    # the 910A cube has no fp32 mode: fp32 operands run at the fp16 rate, and say so
    a = get_chip("ascend910")
    a16, a32 = _mm(512, "float16", a), _mm(512, "float32", a)
    assert a32.pipe_cycles["M"] <= 1.2 * a16.pipe_cycles["M"]
    assert any("float16 mode" in note for note in a32.notes)
