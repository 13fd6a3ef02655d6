"""A small plain-Python table: rows of cells with a header, rendered for a terminal or a CSV.

The reports return these (or lists of dataclass rows) so that nothing needs pandas; `to_pandas()`
converts when pandas happens to be installed.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import AscendSimError


def format_cell(value: Any) -> str:
    """One cell as text: floats with a precision that suits times and ratios, tuples joined."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.1f}"
        if abs(value) >= 1:
            return f"{value:.3f}"
        return f"{value:.4f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, (tuple, list)):
        return ";".join(format_cell(v) for v in value)
    if value is None:
        return "-"
    return str(value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                 max_width: int = 40, title: str = "") -> str:
    """Render rows as an aligned plain-text table (numbers right-aligned, text left-aligned)."""
    cells = [[format_cell(v) for v in r] for r in rows]
    cells = [[c if len(c) <= max_width else c[: max_width - 3] + "..." for c in r] for r in cells]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def is_num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    # numbers are right-aligned cell by cell; a header is right-aligned over a numeric column
    num_cells = [[is_num(v) or v is None for v in r] for r in rows]
    numeric = [sum(is_num(r[i]) for r in rows) > sum(not is_num(r[i]) and r[i] is not None
                                                     for r in rows)
               for i in range(len(headers))]

    def line(values: Sequence[str], right: Sequence[bool]) -> str:
        parts = [v.rjust(w) if r else v.ljust(w)
                 for v, w, r in zip(values, widths, right, strict=True)]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out.append(line(list(headers), numeric))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(c, [n and num for n, num in zip(nc, numeric, strict=True)])
               for c, nc in zip(cells, num_cells, strict=True))
    return "\n".join(out)


@dataclass
class Table:
    """Headed rows of plain values: prints as an aligned table, writes CSV, converts to pandas."""

    headers: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    title: str = ""
    footer: str = ""           # a line printed under the table (a verdict, a note)

    def __str__(self) -> str:
        text = render_table(self.headers, self.rows, title=self.title)
        return f"{text}\n{self.footer}" if self.footer else text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the table itself
        p.text(str(self))

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[Any]:
        """All values of the column `name`."""
        if name not in self.headers:
            raise AscendSimError(f"no column '{name}' in this table; columns: "
                                 f"{', '.join(self.headers)}")
        i = self.headers.index(name)
        return [r[i] for r in self.rows]

    def row(self, key: Any) -> list[Any]:
        """The first row whose first cell equals `key`."""
        for r in self.rows:
            if r[0] == key:
                return r
        raise AscendSimError(f"no row '{key}' in this table; rows: "
                             f"{', '.join(str(r[0]) for r in self.rows)}")

    def write_csv(self, path: str) -> None:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(self.headers)
            for r in self.rows:
                w.writerow([csv_cell(v) for v in r])

    def to_pandas(self) -> Any:
        """The table as a pandas DataFrame (needs pandas, which ascendsim does not require)."""
        pd = require_pandas()
        return pd.DataFrame(self.rows, columns=self.headers)


def csv_cell(value: Any) -> Any:
    """A cell for csv.writer: tuples as msprof writes them (quoted, ';'-separated)."""
    if isinstance(value, (tuple, list)):
        return ";".join(str(v) for v in value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def require_pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise AscendSimError("to_pandas() needs pandas, which is not installed "
                             "(pip install pandas); the rows and CSV writers work without it"
                             ) from e
    return pd
