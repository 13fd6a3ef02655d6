"""The onnx wheel's light models, and their inputs as onnx's backend runner builds them."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "light_*.onnx")))


def light_feeds(model) -> dict[str, np.ndarray]:
    """arange(n)/n, float32, unknown dims set to 1 (`Runner.generate_dummy_data(random=False)`)."""
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds
