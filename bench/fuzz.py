"""The fuzz surfaces of the suite: how many examples each draws by default (every suite run)
and under `pytest -m fuzz` (the heavy run), and whether they pass.

    python bench/fuzz.py            # runs the default fuzz tests, lists the heavy counts
    python bench/fuzz.py --heavy    # also runs `pytest -m fuzz` on every surface

Each surface's counts are read from its test module (the constants the tests draw with), so
the table cannot drift from the suite.
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "tests" / "fuzz"

#: (surface, test module, default-count constant, heavy-count constant, test selector)
SURFACES = (
    ("random graphs: optimised = unfused values, block/tile invariants", "test_fuzz",
     "DEFAULT_EXAMPLES", "FUZZ_EXAMPLES", ""),
    ("gradients against central finite differences (float64)", "test_fuzz_gradients",
     "DEFAULT_EXAMPLES", "FUZZ_EXAMPLES", ""),
    ("training steps: execute, fused = unfused updates", "test_fuzz_training",
     "STEP_EXAMPLES", "STEP_FUZZ_EXAMPLES", "training_steps"),
    ("data parallel on one chip = simulate()", "test_fuzz_training",
     "DP_EXAMPLES", "DP_FUZZ_EXAMPLES", "data_parallel"),
    ("decoders: prefill + decode = full forward, fused = unfused", "test_fuzz_decoders",
     "DEFAULT_EXAMPLES", "FUZZ_EXAMPLES", ""),
    ("malformed msprof CSVs: a file error naming the file, or row errors naming their line",
     "test_fuzz_files", "MSPROF_EXAMPLES", "MSPROF_FUZZ_EXAMPLES", "msprof"),
    ("malformed chip files: a ConfigError naming the file, or a chip that simulates",
     "test_fuzz_files", "CHIP_EXAMPLES", "CHIP_FUZZ_EXAMPLES", "chip"),
    ("malformed fusion-switch files: a ConfigError naming the file, or a switch that runs",
     "test_fuzz_files", "SWITCH_EXAMPLES", "SWITCH_FUZZ_EXAMPLES", "switch"),
    ("command lines: exit 0, or exit 2 with one line naming the culprit", "test_fuzz_files",
     "CLI_EXAMPLES", "CLI_FUZZ_EXAMPLES", "cli"),
)


def counts(module: str, default: str, heavy: str) -> tuple[int, int]:
    sys.path[:0] = [str(FUZZ), str(ROOT / "tests")]
    mod = importlib.import_module(module)
    return int(getattr(mod, default)), int(getattr(mod, heavy))


def run(module: str, select: str, heavy: bool) -> tuple[str, float]:
    """pytest's closing counts of one surface's default or heavy tests, and the wall time."""
    # one process (-n 0): the wall times stay comparable whatever the machine's core count
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
           str(FUZZ / f"{module}.py"), "-m", "fuzz" if heavy else "not fuzz"]
    if select:
        cmd += ["-k", select]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout
    took = time.perf_counter() - t0
    last = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    summary = re.sub(r"=+|in [\d.]+s.*", "", last[-1]).strip() if last else "no result"
    return summary, took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heavy", action="store_true", help="also run the `-m fuzz` examples")
    args = ap.parse_args(argv)
    print("| surface | default examples | default run | `-m fuzz` examples | `-m fuzz` run |")
    print("|---|---:|---|---:|---|")
    status = 0
    for surface, module, dflt, hvy, select in SURFACES:
        n_default, n_heavy = counts(module, dflt, hvy)
        res, took = run(module, select, heavy=False)
        cells = [f"{res} ({took:.0f} s)"]
        if args.heavy:
            hres, htook = run(module, select, heavy=True)
            cells.append(f"{hres} ({htook:.0f} s)")
            status |= "failed" in hres or "error" in hres
        else:
            cells.append("not run (`python bench/fuzz.py --heavy`)")
        status |= "failed" in res or "error" in res
        print(f"| {surface} | {n_default:,} | {cells[0]} | {n_heavy:,} | {cells[1]} |")
    return int(status)


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("fuzz", main))
