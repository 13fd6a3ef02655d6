"""Wall-time measurement shared by the benchmarks."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best wall time of `repeat` calls, after one warm-up call (so JIT compiles are excluded)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def add_baseline_tree(root: Path, rev: str, tree: Path) -> Path:
    """Check out `rev` of the repository at `root` into a temporary git worktree `tree`, to be
    imported first on the path. Its numba kernels live in the top-level folder `kernels/`
    (installed as `ascendsim.kernels`): a link `ascendsim/kernels` makes the checkout import
    its own kernels, not the installed tree's."""
    subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", "--quiet", str(tree),
                    rev], check=True)
    link = tree / "ascendsim" / "kernels"
    if not link.exists():
        os.symlink(tree / "kernels", link)
    return tree
