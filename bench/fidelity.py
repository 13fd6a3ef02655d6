"""Fidelity benchmark: the simulator against measured figures, now `ascendsim validate`.

    python bench/fidelity.py                       # every corpus row (~2 minutes)
    python bench/fidelity.py --quick               # the fixed quick subset (seconds)
    python bench/fidelity.py --family copy --plot fidelity.png --csv rows.csv

The figures this script used to compare (TORCHPERF-910B2 GEMM, the POCKETLLM HBM probe and
host enqueue, msKPP DMA curves, mmad and vector rates) are rows of
`ascendsim/validation/corpus/published_figures.toml`, beside the rest of the measured corpus;
rows a chip figure was fitted to are role "calibration" and reported apart. This wrapper
only forwards to `ascendsim.validation.validate` (same table, same definitions).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ascendsim.cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    """`ascendsim validate` with the same arguments; with `--summary-only` alone, the same
    summary and a line naming the worst families."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args != ["--summary-only"]:
        return cli_main(["validate", "--no-progress", *args])
    from ascendsim.validation.validate import validate

    report = validate()
    print(report.table(rows=False))
    worst = sorted(((f, st) for f, st in report.by_family.items() if st.n >= 2),
                   key=lambda fs: -fs[1].median_abs_error)[:3]
    print("worst families (frozen rows, n >= 2): " + "; ".join(
        f"{f} {100 * st.median_abs_error:.1f}% (n {st.n}, median ratio {st.median_ratio:.2f})"
        for f, st in worst))
    return 0


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("fidelity", main))
