"""Regenerate the confidence table (ascendsim/report/confidence_table.json) from `validate`.

    python bench/confidence_table.py            # writes the shipped package data file
    python bench/confidence_table.py --check    # exit 1 when the shipped file is stale

Run it after any change to the corpus or the model; tests/validation/test_confidence_table.py
fails while the shipped table differs from a fresh `validate()`.
"""

from __future__ import annotations

import argparse
import sys

from ascendsim.validation.confidence import (
    confidence_table,
    shipped_table_path,
    table_text,
    write_confidence_table,
)
from ascendsim.validation.validate import validate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare, do not write")
    ap.add_argument("--out", default=None, help="write here instead of the package data file")
    args = ap.parse_args(argv)
    report = validate()
    if args.check:
        fresh = table_text(confidence_table(report))
        shipped = shipped_table_path().read_text(encoding="utf-8")
        if fresh != shipped:
            print("the shipped confidence table is stale: run bench/confidence_table.py")
            return 1
        print("the shipped confidence table matches validate()")
        return 0
    table = write_confidence_table(args.out, report)
    print(f"wrote {args.out or shipped_table_path()}: {len(table['rows'])} (family, generation) "
          f"rows over {table['validation_rows']} validation rows, "
          f"{table['eager_call_rows']} eager-call rows apart")
    return 0


if __name__ == "__main__":
    sys.exit(main())
