"""Front ends that produce a `Graph`: the Python builder (methods on `Graph`, generated from the
op registry) and ONNX import (`load_onnx`, which needs the optional `onnx` package)."""

from __future__ import annotations

from typing import Any

__all__ = ["load_onnx"]


def __getattr__(name: str) -> Any:
    # imported on first use, so `import ascendsim.frontend` never needs onnx
    if name == "load_onnx":
        from .onnx import load_onnx
        return load_onnx
    raise AttributeError(f"module 'ascendsim.frontend' has no attribute {name!r}")
