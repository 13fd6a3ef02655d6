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
    """`ascendsim validate` with the same arguments."""
    return cli_main(["validate", "--no-progress",
                     *(sys.argv[1:] if argv is None else list(argv))])


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("fidelity", main))
