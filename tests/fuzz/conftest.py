"""The heavy fuzz run (`@pytest.mark.fuzz`) runs only when selected: `pytest -m fuzz`."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "fuzz" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="the heavy fuzz run: select it with `pytest -m fuzz`")
    for item in items:
        if item.get_closest_marker("fuzz") is not None:
            item.add_marker(skip)
