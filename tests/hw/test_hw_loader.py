"""User chip files: base + overrides, and clear ConfigErrors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip, load_chip


def write(tmp_path: Path, text: str, name: str = "my.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_user_file_with_base_overrides_one_figure(tmp_path):
    path = write(tmp_path, 'base = "ascend910"\nub_bytes = 524288\n', "big_ub.toml")
    chip = load_chip(path)
    base = get_chip("ascend910")
    assert chip.ub_bytes == 524288 and chip.name == "big_ub"
    assert chip.replace(ub_bytes=base.ub_bytes, name=base.name) == base
    assert chip.source("ub_bytes") == "U: big_ub.toml"
    assert chip.source("l1_bytes") == base.source("l1_bytes")


def test_user_file_overrides_group_entry_with_source(tmp_path):
    path = write(tmp_path, 'base = "ascend910b"\nname = "b-fast"\n[path_bytes_per_cycle]\n'
                           'gm_ub = {value = 111, source = "M: 910B3 curve"}\n')
    chip = load_chip(str(path))
    assert chip.name == "b-fast" and chip.path_bytes_per_cycle.gm_ub == 111.0
    assert chip.path_bytes_per_cycle.gm_l1 == get_chip("ascend910b").path_bytes_per_cycle.gm_l1
    assert chip.confidence("path_bytes_per_cycle.gm_ub") == "M"


def test_base_may_be_another_file(tmp_path):
    write(tmp_path, 'base = "ascend310"\nai_cores = 4\n', "mid.toml")
    path = write(tmp_path, 'base = "mid.toml"\nl2_bytes = 16777216\n', "top.toml")
    chip = load_chip(path)
    assert (chip.ai_cores, chip.l2_bytes, chip.l1_bytes) == (4, 16 << 20, 1 << 20)


def test_complete_file_round_trip(tmp_path):
    import importlib.resources

    text = (importlib.resources.files("ascendsim.hw") / "chips" / "ascend310.toml").read_text()
    chip = load_chip(write(tmp_path, text.replace('name = "ascend310"', 'name = "copy"')))
    assert chip.replace(name="ascend310") == get_chip("ascend310")


B = 'base = "ascend910"\n'


@pytest.mark.parametrize("text, pattern", [
    (B + 'ub_size = 1\n', r"my\.toml: unknown key 'ub_size' \(did you mean 'ub_bytes'\?\)"),
    (B + 'ub_bytes = -1\n', r"my\.toml: ub_bytes must be > 0, got -1"),
    (B + 'ai_cores = "many"\n', r"my\.toml: ai_cores must be an integer, got str"),
    (B + 'clock_hz = true\n', r"my\.toml: clock_hz must be a number"),
    (B + '[cube_mkn]\nfloat16 = [16, 16]\n', r"my\.toml: cube_mkn\.float16 must be 3"),
    (B + '[cube_mkn]\nfp8 = [16, 16, 16]\n', r"my\.toml: unknown key cube_mkn\.fp8"),
    (B + 'cube_mkn = 3\n', r"my\.toml: cube_mkn must be a table"),
    ('base = "nope"\n', r"my\.toml: base 'nope' is neither a built-in chip"),
    ('base = 3\n', r"my\.toml: base must be"),
    ('name = "x"\nai_cores = {value = 2, source = "F: x"}\n', r"my\.toml: missing key 'arch'"),
    (B + 'ai_cores = {value = 2, source = "trust me"}\n', r"source of ai_cores"),
    (B + 'ai_cores = {value = 2}\n', r"my\.toml: ai_cores must be \{value"),
    (B + 'ai_cores = = 2\n', r"my\.toml: not valid TOML"),
])
def test_bad_files_name_the_key_and_the_file(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_chip(write(tmp_path, text))


def test_missing_group_entry(tmp_path):
    import importlib.resources

    text = (importlib.resources.files("ascendsim.hw") / "chips" / "ascend910.toml").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("int8 ="))
    with pytest.raises(ConfigError, match=r"missing key cube_mkn\.int8"):
        load_chip(write(tmp_path, text))


def test_base_cycle_and_missing_file(tmp_path):
    write(tmp_path, 'base = "b.toml"\n', "a.toml")
    write(tmp_path, 'base = "a.toml"\n', "b.toml")
    with pytest.raises(ConfigError, match="cycle"):
        load_chip(tmp_path / "a.toml")
    with pytest.raises(ConfigError, match="not found"):
        load_chip(tmp_path / "missing.toml")


def test_complete_user_file_may_use_plain_values(tmp_path):
    """Outside the built-in files a figure may be a plain value; its source is then the file."""
    import importlib.resources

    lines = []
    text = (importlib.resources.files("ascendsim.hw") / "chips" / "ascend310.toml").read_text()
    for line in text.splitlines():
        if "= {value = " in line:
            key, rest = line.split(" = {value = ", 1)
            line = f"{key} = {rest.rsplit(', source = ', 1)[0]}"
        lines.append(line)
    chip = load_chip(write(tmp_path, "\n".join(lines), "plain.toml"))
    assert chip.replace(name="ascend310") == get_chip("ascend310")
    assert chip.source("ub_bytes") == "U: plain.toml"
