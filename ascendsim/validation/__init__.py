"""ascendsim.validation: the simulator measured against hardware.

`corpus/*.toml` holds one `[[row]]` per published measurement (op kernel times, eager calls,
GEMM TFLOPS, model throughputs), each with its chip variant, workload, timing method, value,
unit, role (validation / calibration / pending) and source.

- `load_corpus()`: the measured figures shipped with the package (`corpus/*.toml`);
- `validate()`: simulate every row the way it was measured; median |error|, bias, by family;
- `load_msprof()`: read an msprof op_summary CSV and simulate each op beside its measurement;
- `calibrate()`: fit named chip figures to rows or a profile on a seeded training split;
  `leave_one_source_out()`: each calibrated figure re-fitted without each of its sources;
- `stamp_first_sight()`: write a new row's ratio at first sight into the corpus (the rule of
  `first_sight`); `frozen`: the frozen validation set, its hashes and definitions.

Layer: above `api` (it simulates through it), below the CLI. Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CorpusRow": "corpus", "load_corpus": "corpus", "FAMILIES": "corpus",
    "validate": "validate", "validate_rows": "validate", "ValidationReport": "validate",
    "ValidationRecord": "validate", "QUICK_IDS": "validate",
    "load_msprof": "msprof", "ProfileComparison": "msprof", "CANN_OPS": "msprof",
    "calibrate": "calibrate", "CalibrationResult": "calibrate",
    "SourceStats": "validate", "leave_one_source_out": "calibrate",
    "stamp_first_sight": "first_sight",
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
