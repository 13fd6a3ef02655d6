"""Front ends that produce a `Graph`: the Python builder (methods on `Graph`, generated from the
op registry), ONNX import (`load_onnx`, which needs the optional `onnx` package) and PyTorch
import (`from_torch`, which needs the optional `torch` package)."""

from __future__ import annotations

from typing import Any

__all__ = ["load_onnx", "from_torch"]


def __getattr__(name: str) -> Any:
    # imported on first use, so `import ascendsim.frontend` never needs onnx or torch
    if name == "load_onnx":
        from .onnx import load_onnx
        return load_onnx
    if name == "from_torch":
        from .pytorch import from_torch
        return from_torch
    raise AttributeError(f"module 'ascendsim.frontend' has no attribute {name!r}")
