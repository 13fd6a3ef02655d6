"""The onnx wheel's light models, their inputs as onnx's backend runner builds them, and the
check of an output against a reference on quantities that are well conditioned."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnxruntime as ort

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "light_*.onnx")))

#: a softmax moves by about exp(dz) - 1 when its logits move by dz; above this relative move
#: the logits' own float32 rounding decides the softmax, and it says nothing about the kernels
SOFTMAX_CONDITION = 0.01


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


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-3) -> None:
    """Elementwise within `rtol`, with an absolute floor of `rtol` x the largest |want|: float32
    sums of different order agree to a few units in the last place of the largest term, not of
    each element."""
    finite = np.abs(want[np.isfinite(want)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


#: ops that only reshape: the importer turns an opset < 13 Softmax over a 4-D tensor into
#: Flatten -> Softmax -> Reshape, and a value is the same numbers through any of them
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


def softmax_input(graph, known: set[str]) -> str | None:
    """The logits of the graph's first output when it is a softmax of them: the Softmax's input,
    followed back through reshapes to a tensor named in `known` (the ONNX model's tensors)."""
    producer = graph.producers()
    node = producer.get(graph.outputs[0])
    while node is not None and node.op_type in RESHAPES:
        node = producer.get(node.inputs[0])
    if node is None or node.op_type != "Softmax":
        return None
    name = node.inputs[0]
    while name not in known and producer.get(name) is not None \
            and producer[name].op_type in RESHAPES:
        name = producer[name].inputs[0]
    return name if name in known else None


def ill_conditioned(logits: np.ndarray) -> bool:
    """True when float32 rounding of the logits alone (one spacing of the largest logit,
    grown by sqrt(terms) over the sums behind them, whose order differs between BLAS builds,
    numba versions and CPUs) moves their softmax by more than SOFTMAX_CONDITION."""
    z = np.abs(logits.astype(np.float64))
    ulp = float(np.spacing(np.float32(z.max())))
    return ulp * np.sqrt(logits.shape[-1]) > SOFTMAX_CONDITION


def ort_values(model, feeds: dict, names: list[str]) -> list[np.ndarray]:
    """onnxruntime's values of the named tensors of `model` (added as outputs)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(names, feeds)


def check_output(graph, execute, model, feeds: dict, want: np.ndarray) -> None:
    """Run `graph` (imported from `model`, possibly optimised) and compare what is well
    conditioned: its output with `want`, or, when the output is a softmax over logits too large
    for float32 to decide it, the logits with onnxruntime's at a relative 1e-4."""
    logits = softmax_input(graph, {v for n in model.graph.node for v in n.output})
    if logits is not None and logits not in graph.outputs:
        graph.output(logits)
    got = execute(graph, feeds)
    if logits is not None and ill_conditioned(got[logits]):
        (ref,) = ort_values(model, feeds, [logits])
        assert_close(got[logits], ref, rtol=1e-4)
        return
    assert_close(got[graph.outputs[0]], want)
