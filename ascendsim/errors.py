"""The exceptions a public call may raise: all derive from AscendSimError.

Each message names the thing that is wrong (node, op, key, buffer), so that the user can fix
the input without reading a traceback.
"""

from __future__ import annotations


class AscendSimError(Exception):
    """Base of every error ascendsim raises on bad input or a broken invariant."""


class UnsupportedOpError(AscendSimError):
    """An op type (or an attribute of it) that the registry does not support."""

    def __init__(self, op_type: str, node: str | None = None, opset: int | None = None,
                 detail: str = "") -> None:
        self.op_type, self.node, self.opset = op_type, node, opset
        where = f" (node '{node}')" if node else ""
        ver = f" at opset {opset}" if opset is not None else ""
        extra = f": {detail}" if detail else ""
        super().__init__(f"unsupported op '{op_type}'{where}{ver}{extra}")


class GraphError(AscendSimError):
    """A malformed graph: cycle, dangling input, duplicate name, shape or dtype mismatch."""


class ConfigError(AscendSimError):
    """A bad fusion switch file, chip file or option; the message names the key."""


class SimulationError(AscendSimError):
    """A simulator invariant broke; the message names the op, core, pipe or buffer."""


class CapacityError(AscendSimError):
    """A workload whose device memory (weights, caches, live activations) exceeds the chip's
    HBM; the message names the sizes (the peak, the capacity, the largest tensors live at the
    peak) and what it would need."""


def require_extra(module: str, extra: str, what: str):
    """Import an optional dependency, or an AscendSimError saying which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise AscendSimError(f"{what} needs the '{module}' package: pip install "
                             f"'ascendsim[{extra}]' (in a clone of the repository: "
                             f"pip install -e '.[{extra}]')") from exc
