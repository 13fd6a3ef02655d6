"""Execute every notebook in notebooks/ (issue 6 section 6): each must run clean, and fast.

Notebooks are stored with outputs cleared; this runs them in a fresh kernel of the current
Python (nbclient, the machinery nbmake uses) from the notebooks folder.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: per-cell limit; the notebooks are meant to take well under a minute each
CELL_TIMEOUT_S = 300


def test_notebooks_exist() -> None:
    names = [p.stem[:2] for p in NOTEBOOKS]
    assert names == ["01", "02", "03", "04", "05", "06", "07", "08", "09"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_outputs_cleared(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, \
                f"{path.name}: clear the outputs before committing"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}})
    # run the kernel on this interpreter (the venv that has ascendsim), not a global one
    client.kernel_manager_class = _manager_for(sys.executable)
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    print(f"{path.name}: {elapsed:.1f} s")


def _manager_for(python: str):
    from jupyter_client.manager import KernelManager

    class _Here(KernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            return [python, "-m", "ipykernel_launcher", "-f", self.connection_file]

    return _Here
