"""Built-in chips load, match the hardware reference, and every figure has a source."""

from __future__ import annotations

import dataclasses

import pytest

from ascendsim.errors import ConfigError
from ascendsim.hw import Chip, chips, get_chip, load_chip

#: confidence tags of built-in figures; C = fitted on calibration rows of the corpus, which
#: tests/validation/test_calibrate.py checks it cites
TAGS = set("SDFMGC")


BUILTIN = ["ascend310", "ascend310p", "ascend910", "ascend910b", "ascend910b1", "ascend910b3",
           "ascend910b4", "ascend910b_gen1", "ascend910c"]


def test_builtin_names_are_sorted_and_complete():
    assert chips() == BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_loads_and_every_figure_has_a_tagged_source(name):
    chip = get_chip(name)
    assert isinstance(chip, Chip) and chip.name == name and chip.description
    keys = chip.figure_keys()
    assert "ub_bytes" in keys and "path_bytes_per_cycle.gm_l1" in keys
    for key in keys:
        tags = chip.confidence(key).split("/")
        assert set(tags) <= TAGS, f"{name}.{key}: {chip.source(key)!r}"
        assert len(chip.source(key)) > 4
    assert set(chip.sources) == set(keys)  # no stray or missing source entries


def test_ascend910_matches_reference():
    """32 coupled cores; 256 TFLOPS fp16 / 512 TOPS int8 peak derived within 3%."""
    c = get_chip("ascend910")
    assert c.ai_cores == 32 and c.coupled and c.aiv_cores == 0 and c.vector_cores == 32
    assert c.peak_flops("float16") == pytest.approx(256e12, rel=0.03)
    assert c.peak_flops("int8") == pytest.approx(512e12, rel=0.03)
    assert (c.l0a_bytes, c.l0b_bytes, c.l0c_bytes) == (64 << 10, 64 << 10, 256 << 10)
    assert c.l1_bytes == 1 << 20 and c.ub_bytes == 253952 and c.l2_bytes == 32 << 20
    assert "FIX" not in c.pipes and not c.has_path("l0c", "gm")
    assert c.pipe_for("l0c", "ub") == "V" and c.pipe_for("ub", "gm") == "MTE3"
    assert c.confidence("path_bytes_per_cycle.gm_l1") == "G"


def test_ascend910b_matches_reference():
    """910B2: 24 AIC / 48 AIV @ 1.8 GHz, 353.9 TFLOPS fp16, FixPipe, 192 KB UB per AIV."""
    c = get_chip("ascend910b")
    assert (c.ai_cores, c.aiv_cores, c.arch) == (24, 48, "split") and c.vector_cores == 48
    assert c.clock_hz == 1.8e9
    assert c.peak_flops("fp16") == pytest.approx(353.9e12, rel=0.01)
    assert c.peak_flops("bf16") == c.peak_flops("fp16")
    assert c.l0c_bytes == 128 << 10 and c.l1_bytes == 512 << 10 and c.ub_bytes == 192 << 10
    assert c.l2_bytes == 192 << 20 and c.hbm_bytes == 64 << 30
    assert "FIX" in c.pipes and c.pipe_for("l0c", "gm") == "FIX"
    assert not c.has_path("l0c", "ub")  # AIC and AIV meet only through GM/L2
    assert c.cube_shape("int4") == (16, 64, 16)


def test_ascend310_matches_reference():
    c = get_chip("ascend310")
    assert c.ai_cores == 2 and c.coupled
    assert c.peak_flops("float16") == pytest.approx(8e12, rel=0.03)
    assert c.peak_flops("int8") == pytest.approx(16e12, rel=0.03)
    assert c.l2_bytes == 8 << 20 and c.path_bytes_per_cycle.l1_l0a == 512


def test_cube_shapes_and_dtype_aliases():
    c = get_chip("ascend910")
    assert c.cube_shape("float16") == c.cube_shape("fp16") == (16, 16, 16)
    assert c.cube_shape("int8") == (16, 32, 16)
    assert c.flops_per_cycle() == 8192
    with pytest.raises(ConfigError, match="bfloat16"):
        c.cube_shape("bfloat16")  # no bf16 cube on the 910A


def test_vector_rates_by_class_and_dtype():
    c = get_chip("ascend910b")
    assert c.vector_rate("unary") == c.vector_bytes_per_cycle == 256
    assert c.vector_rate("binary", "float32") == 128
    assert c.vector_rate("exp", "float16") == 64 and c.vector_rate("exp", "float32") == 128
    assert c.vector_rate("reduce", "float16") < c.vector_rate("reduce", "float32")
    with pytest.raises(ConfigError, match="unknown vector class"):
        c.vector_rate("fft")


def test_time_conversions_and_transfers():
    c = get_chip("ascend910b")
    assert c.us(1800) == pytest.approx(1.0)
    assert c.seconds(c.clock_hz) == pytest.approx(1.0)
    assert c.cycles(1e-6) == 1800 and c.cycles(0.0) == 0
    lat, bw = c.path_latency_cycles.gm_l1, c.path_bytes_per_cycle.gm_l1
    assert c.transfer_cycles("hbm", "l1", 16384) == pytest.approx(lat + 16384 / bw)
    with pytest.raises(ConfigError, match="no data path l1 -> ub"):
        c.transfer_cycles("l1", "ub", 1024)
    with pytest.raises(ConfigError, match="unknown memory location"):
        c.has_path("l3", "ub")


def test_get_chip_errors_and_aliases():
    with pytest.raises(ConfigError, match=", ".join(BUILTIN)):
        get_chip("nope")
    assert get_chip("Ascend910B2") is get_chip("ascend910b")
    chip = get_chip("ascend310")
    assert get_chip(chip) is chip
    assert load_chip("ascend310") is chip


def test_lazy_module_constants():
    import ascendsim.hw as hw

    assert hw.Ascend910 is get_chip("ascend910") and hw.Ascend910B.name == "ascend910b"
    with pytest.raises(AttributeError):
        hw.Ascend999  # noqa: B018


def test_replace_changes_one_figure_and_revalidates():
    base = get_chip("ascend910")
    big = base.replace(ub_bytes=512 * 1024)
    assert big.ub_bytes == 512 * 1024 and base.ub_bytes == 253952
    assert big.confidence("ub_bytes") == "U" and base.confidence("ub_bytes") == "F"
    assert big.l1_bytes == base.l1_bytes and big != base
    assert base.replace() == base and hash(base.replace()) == hash(base)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.ub_bytes = 1  # type: ignore[misc]
    with pytest.raises(ConfigError, match="ub_bytes must be > 0, got -1"):
        base.replace(ub_bytes=-1)
    with pytest.raises(ConfigError, match="ub_bytes must be an integer"):
        base.replace(ub_bytes="big")
    with pytest.raises(ConfigError, match="ub_bytes .* multiple of ub_align_bytes"):
        base.replace(ub_bytes=1000)
    with pytest.raises(ConfigError, match="unknown field 'ub_size'"):
        base.replace(ub_size=1)


def test_replace_group_entries():
    base = get_chip("ascend910b")
    fast = base.replace(path_bytes_per_cycle={"gm_ub": 128}, clock_hz=2e9)
    assert fast.path_bytes_per_cycle.gm_ub == 128.0 and fast.clock_hz == 2e9
    assert fast.path_bytes_per_cycle.gm_l1 == base.path_bytes_per_cycle.gm_l1
    assert fast.confidence("path_bytes_per_cycle.gm_ub") == "U"
    assert fast.confidence("path_bytes_per_cycle.gm_l1") == "D"
    with pytest.raises(ConfigError, match="path_bytes_per_cycle.gm_ub must be > 0"):
        base.replace(path_bytes_per_cycle={"gm_ub": 0})
    with pytest.raises(ConfigError, match="unknown key path_bytes_per_cycle.gm_xx"):
        base.replace(path_bytes_per_cycle={"gm_xx": 1})
    with pytest.raises(ConfigError, match="the same paths"):
        base.replace(path_bytes_per_cycle={"l1_ub": 128})  # a bandwidth with no latency


def test_cross_field_checks():
    c = get_chip("ascend910")
    with pytest.raises(ConfigError, match="aiv_cores"):
        c.replace(aiv_cores=64)
    with pytest.raises(ConfigError, match="FIX"):
        c.replace(pipes=["S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX"])
    with pytest.raises(ConfigError, match="unknown pipe 'MTE9'"):
        c.replace(pipes=["S", "V", "M", "MTE1", "MTE2", "MTE9"])
    with pytest.raises(ConfigError, match="arch must be one of coupled, split"):
        c.replace(arch="fused")
    with pytest.raises(ConfigError, match="l0a_align_bytes must be a power of two"):
        c.replace(l0a_align_bytes=384)


def test_table_rows():
    rows = get_chip("ascend310").table()
    row = next(r for r in rows if r[0] == "ub_bytes")
    assert row[1:3] == (253952, "bytes") and row[3].startswith("F:")


def test_source_of_unknown_or_absent_figure():
    c = get_chip("ascend910")
    with pytest.raises(ConfigError, match="no figure 'ub_size'"):
        c.source("ub_size")
    with pytest.raises(ConfigError, match="absent"):
        c.source("path_bytes_per_cycle.l0c_gm")
