"""Packaging follows the layout: a wheel built from the repository holds every package and data
file of the source tree, and imports and runs from a plain (non-editable) install."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_SUFFIXES = (".toml", ".csv", ".json")


def _source_tree() -> tuple[set[str], set[str]]:
    """Packages and data files the wheel must hold, as paths inside it."""
    packages, data = set(), set()
    for top, inside in ((ROOT / "ascendsim", "ascendsim"), (ROOT / "kernels", "ascendsim/kernels")):
        for path in top.rglob("*"):
            if "__pycache__" in path.parts:
                continue
            rel = f"{inside}/{path.relative_to(top).as_posix()}"
            if path.name == "__init__.py":
                packages.add(rel.rsplit("/", 1)[0].replace("/", "."))
            elif path.suffix in DATA_SUFFIXES:
                data.add(rel)
    return packages, data


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                          str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    (whl,) = out.glob("ascendsim-*.whl")
    return whl


def test_wheel_holds_every_package_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packages, data = _source_tree()
    missing_pkgs = [p for p in packages if f"{p.replace('.', '/')}/__init__.py" not in names]
    assert not missing_pkgs, f"packages missing from the wheel: {missing_pkgs}"
    missing_data = sorted(d for d in data if d not in names)
    assert not missing_data, f"data files missing from the wheel: {missing_data}"


def test_plain_install_imports_and_simulates(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                          "--target", str(target), str(wheel)], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    packages, _ = _source_tree()
    code = (
        "import importlib, sys\n"
        "import ascendsim as asim\n"
        f"assert asim.__file__.startswith({str(target)!r}), asim.__file__\n"
        f"for p in {sorted(packages)!r}:\n"
        "    importlib.import_module(p)\n"
        "for c in asim.chips():\n"
        "    asim.get_chip(c)\n"
        "r = asim.simulate(asim.models.conv_bn_relu(), 'ascend910', fusion=False)\n"
        "assert r.cycles > 0\n"
        "print('ok', len(asim.chips()))\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("ok")


def test_lowest_versions_constraints_follow_pyproject() -> None:
    """CI's second run installs `.ci/constraints-lowest.txt`: it must pin exactly the lower
    bounds pyproject.toml declares (regenerate with `python .ci/lowest_constraints.py`)."""
    res = subprocess.run([sys.executable, str(ROOT / ".ci" / "lowest_constraints.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
