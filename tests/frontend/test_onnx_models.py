"""Whole models from the onnx wheel: the 9 "light" CNNs and the pytorch-converted/-operator
cases load with `load_onnx` and execute to the shipped (or onnxruntime's) outputs."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper
from onnx_light import assert_close, check_output, light_feeds

import ascendsim as asim
from ascendsim.execute import execute  # asim.execute can be shadowed by the submodule
from ascendsim.ir import has_op

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
LIGHT = sorted(glob.glob(os.path.join(DATA, "light", "light_*.onnx")))


def _ops(graph) -> set[str]:
    return {n.op_type for n in graph.node}


def _check_output(model, feeds: dict, want: np.ndarray) -> None:
    """The imported model's output against `want`, on well-conditioned quantities
    (`onnx_light.check_output`)."""
    check_output(asim.load_onnx(model), execute, model, feeds, want)


@pytest.mark.parametrize("path", LIGHT, ids=[os.path.basename(p)[6:-5] for p in LIGHT])
def test_light_model_matches_shipped_output(path: str) -> None:
    model = onnx.load(path)
    want = numpy_helper.to_array(onnx.load_tensor(path[:-5] + "_output_0.pb"))
    _check_output(model, light_feeds(model), want)


def randomize_weights(model, seed: int = 0):
    """A copy of `model` whose float weights (initializers and ConstantOfShape fills, which the
    light models use in place of weights) are seeded normals: He-scaled by fan-in for rank >= 2,
    1 + 0.1 * N(0, 1) for vectors (BN scale, mean, variance stay sensible and positive)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    rng = np.random.default_rng(seed)
    graph = m.graph
    ints = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:   # Constant nodes feeding ConstantOfShape hold its shape
        if n.op_type == "Constant":
            ints.setdefault(n.output[0], numpy_helper.to_array(n.attribute[0].t))

    def draw(shape: tuple) -> np.ndarray:
        if len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        return 1.0 + 0.1 * np.abs(rng.standard_normal(shape, np.float32))

    keep, new_inits = [], []
    for n in graph.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in ints:
            shape = tuple(int(d) for d in ints[n.input[0]])
            new_inits.append(numpy_helper.from_array(draw(shape).astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    for i, init in enumerate(graph.initializer):
        arr = numpy_helper.to_array(init)
        if arr.dtype == np.float32:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(
                draw(arr.shape).astype(np.float32), init.name))
    del graph.node[:]
    graph.node.extend(keep)
    read = {i for n in keep for i in n.input}
    live = [i for i in graph.initializer if i.name in read] + new_inits
    dropped = {i.name for i in graph.initializer} - {i.name for i in live}
    del graph.initializer[:]
    graph.initializer.extend(live)
    inputs = [vi for vi in graph.input if vi.name not in dropped]
    del graph.input[:]
    graph.input.extend(inputs)
    return m


@pytest.mark.parametrize("path", LIGHT, ids=[os.path.basename(p)[6:-5] for p in LIGHT])
def test_light_model_random_weights_match_onnxruntime(path: str) -> None:
    model = randomize_weights(onnx.load(path), seed=7)
    feeds = light_feeds(model)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    # the comparison must be informative: outputs are not a constant vector
    assert float(np.std(want)) > 1e-6 * float(np.abs(want).max())
    _check_output(model, feeds, want)


def _torch_cases() -> list[str]:
    dirs = sorted(glob.glob(os.path.join(DATA, "pytorch-converted", "*", "")) +
                  glob.glob(os.path.join(DATA, "pytorch-operator", "*", "")))
    return [d for d in dirs if all(has_op(o) for o in _ops(onnx.load(d + "model.onnx").graph))]


TORCH = _torch_cases()


@pytest.mark.parametrize("case_dir", TORCH, ids=[os.path.basename(d[:-1]) for d in TORCH])
def test_pytorch_model_matches_reference(case_dir: str) -> None:
    model = onnx.load(case_dir + "model.onnx")
    inits = {i.name for i in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    g = asim.load_onnx(model)
    sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    assert sets
    for ds in sets:
        ins = [numpy_helper.to_array(onnx.load_tensor(f))
               for f in sorted(glob.glob(os.path.join(ds, "input_*.pb")))]
        outs = [numpy_helper.to_array(onnx.load_tensor(f))
                for f in sorted(glob.glob(os.path.join(ds, "output_*.pb")))]
        got = execute(g, dict(zip(names, ins)))
        for vi, want in zip(model.graph.output, outs):
            assert_close(got[vi.name], want)


def test_most_pytorch_models_are_supported() -> None:
    """The op filter must not silently drop the corpus (117 models ship with onnx)."""
    assert len(TORCH) >= 100, len(TORCH)
