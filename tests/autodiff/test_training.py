"""`asim.training_step`: naming, optimizers against their formulas, mixed precision and loss
scaling, an ONNX light model end to end (executes, simulates, fused == unfused)."""

from __future__ import annotations

import glob
import os

import numpy as np
import onnx
import pytest

import ascendsim as asim
from ascendsim.autodiff import initial_state
from ascendsim.ir.tensor import Value

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _mlp(dtype="float32"):
    """x (4, 3) -> MatMul + bias -> Relu -> Gemm -> (4, 2)."""
    g = asim.Graph("mlp")
    x = g.input("x", (4, 3), dtype)
    rng = np.random.default_rng(0)
    w1 = g.const(rng.standard_normal((3, 5)).astype(dtype), name="w1")
    b1 = g.const(0.1 * rng.standard_normal(5).astype(dtype), name="b1")
    w2 = g.const(rng.standard_normal((2, 5)).astype(dtype), name="w2")
    h = g.relu(g.add(g.matmul(x, w1), b1))
    g.output(g.gemm(h, w2, transB=1))
    return g


def _run(step, seed=0):
    rng = np.random.default_rng(seed)
    feeds = initial_state(step)
    for name in step.inputs:
        if name not in feeds:
            v = step.values[name]
            feeds[name] = rng.standard_normal(v.shape).astype(v.dtype)
    return feeds, asim.execute(step, feeds)


def _grads(g, loss="mse"):
    """Gradients from an SGD step at lr = 1 (param - param_new)."""
    step = asim.training_step(g, loss, "sgd", lr=1.0, mixed_precision=False)
    feeds, out = _run(step)
    return feeds, {p: feeds[p] - out[f"{p}_new"] for p in ("w1", "b1", "w2")}


def test_step_names_inputs_and_outputs():
    step = asim.training_step(_mlp(), "mse", "adam", lr=1e-3, mixed_precision=False)
    assert step.outputs == ["loss", "w1_new", "w1_m_new", "w1_v_new", "b1_new", "b1_m_new",
                            "b1_v_new", "w2_new", "w2_m_new", "w2_v_new", "step_new"]
    assert set(step.inputs) == {"x", "labels", "w1", "w1_m", "w1_v", "b1", "b1_m", "b1_v",
                                "w2", "w2_m", "w2_v", "step"}
    assert not step.constants.keys() & {"w1", "b1", "w2"}    # parameters are inputs now
    assert initial_state(step)["step"] == 0.0


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam", "adamw", "lamb"])
def test_optimizer_updates_follow_their_formulas(optimizer):
    """First step from zero state (t = 1) against the optimizers' formulas in numpy (float64:
    the reference gradient is exact to rounding)."""
    lr, wd, (b1, b2), eps = 0.01, 0.1, (0.9, 0.999), 1e-8
    feeds, grads = _grads(_mlp("float64"))
    step = asim.training_step(_mlp("float64"), "mse", optimizer, lr=lr, weight_decay=wd,
                              mixed_precision=False)
    out = asim.execute(step, {**initial_state(step), "x": feeds["x"], "labels": feeds["labels"]})
    for p, d in grads.items():
        w = feeds[p]
        if optimizer in ("sgd", "momentum", "adam"):
            d = d + wd * w                                      # L2 in the gradient
        if optimizer in ("sgd", "momentum"):
            want = w - lr * d
        elif optimizer in ("adam", "adamw"):
            lr_t = lr * np.sqrt(1 - b2) / (1 - b1)
            m, v = (1 - b1) * d, (1 - b2) * d * d
            base = w * (1 - lr * wd) if optimizer == "adamw" else w
            want = base - lr_t * m / (np.sqrt(v) + eps)
            np.testing.assert_allclose(out[f"{p}_v_new"], v, rtol=1e-9)
        else:
            update = d / (np.abs(d) + eps) + wd * w
            want = w - lr * np.linalg.norm(w) / np.linalg.norm(update) * update
        np.testing.assert_allclose(out[f"{p}_new"], want, rtol=1e-9, atol=1e-12)
        if optimizer != "sgd":
            assert np.abs(out[f"{p}_m_new"]).max() > 0


def test_mixed_precision_casts_masters_and_unscales_the_gradients():
    g = _mlp()
    step = asim.training_step(g, "mse", "sgd", lr=1.0, loss_scale=128.0)
    assert step.values["x"].dtype == "float16" and step.values["w1"].dtype == "float32"
    casts = [n for n in step.nodes if n.op_type == "Cast"]
    assert {step.values[n.outputs[0]].dtype for n in casts} >= {"float16", "float32"}
    assert not any(n.op_type == "NPUGetFloatStatus" for n in step.nodes)   # static scale
    assert any(n.op_type == "MatMul" and step.values[n.outputs[0]].dtype == "float16"
               for n in step.nodes)
    feeds, want = _grads(g)
    out = asim.execute(step, {**initial_state(step), "x": feeds["x"].astype(np.float16),
                              "labels": feeds["labels"]})
    for p, d in want.items():       # fp16 compute: ~1e-3 relative of the float32 gradient
        np.testing.assert_allclose(feeds[p] - out[f"{p}_new"], d, rtol=2e-2,
                                   atol=2e-2 * np.abs(d).max())


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
def test_dynamic_loss_scale_grows_after_the_window_and_halves_on_overflow():
    step = asim.training_step(_mlp(), "mse", "momentum", lr=0.1)
    assert [n.op_type for n in step.nodes].count("NPUGetFloatStatus") == 1
    assert float(initial_state(step)["loss_scale"]) == 2.0 ** 16
    feeds, _ = _run(step)
    feeds["loss_scale"] = np.float32(256.0)
    out = asim.execute(step, feeds)
    assert float(out["good_steps_new"]) == 1.0 and float(out["loss_scale_new"]) == 256.0
    assert not np.array_equal(out["w1_new"], feeds["w1"])
    out = asim.execute(step, {**feeds, "good_steps": np.float32(999)})
    assert float(out["loss_scale_new"]) == 512.0 and float(out["good_steps_new"]) == 0.0
    huge = {**feeds, "x": np.full((4, 3), 60000, np.float16)}      # fp16 overflow
    out = asim.execute(step, huge)
    assert float(out["loss_scale_new"]) == 128.0 and float(out["good_steps_new"]) == 0.0
    np.testing.assert_array_equal(out["w1_new"], feeds["w1"])          # update skipped


def test_loss_choices_and_errors():
    g = _mlp()
    step = asim.training_step(g, "softmax_cross_entropy", "sgd", mixed_precision=False)
    assert step.values["labels"].shape == (4, 2)
    assert any(n.op_type == "SoftmaxCrossEntropyWithLogits" for n in step.nodes)
    with pytest.raises(asim.ConfigError, match="optimizer='adagrad': valid values are sgd"):
        asim.training_step(g, optimizer="adagrad")
    with pytest.raises(asim.ConfigError, match="loss='hinge'"):
        asim.training_step(g, loss="hinge")
    with pytest.raises(asim.GraphError, match="must be a one-element float value"):
        asim.training_step(g, loss=g.outputs[0])


def _squeezenet_step(size: int):
    g = asim.load_onnx(os.path.join(LIGHT, "light_squeezenet.onnx"))
    x = g.values["data_0"]
    g.values["data_0"] = Value("data_0", (1, 3, size, size), x.dtype)   # a small image
    g.infer_shapes()
    return asim.training_step(g, loss="softmax_cross_entropy", optimizer="momentum")


def _he_feeds(step, seed=0):
    """The light models' weights are constant fills: seeded He-scaled weights instead."""
    rng = np.random.default_rng(seed)
    feeds = initial_state(step)
    for name in step.inputs:
        v = step.values[name]
        if name in feeds and not name.endswith("_m") and v.rank:
            fan = int(np.prod(v.shape[1:])) if v.rank > 1 else 0
            draw = rng.standard_normal(v.shape) * (np.sqrt(2.0 / fan) if fan else 0.1)
            feeds[name] = draw.astype(v.dtype)
    feeds["data_0"] = rng.standard_normal(step.values["data_0"].shape).astype(np.float16)
    feeds["labels"] = np.eye(1000, dtype=np.float32)[[7]]
    feeds["loss_scale"] = np.float32(1024.0)
    return feeds


@pytest.mark.slow
def test_light_models_all_build_a_training_step():
    """Every op of the 9 ONNX light models has a gradient rule (shape-only build)."""
    paths = sorted(glob.glob(os.path.join(LIGHT, "light_*.onnx")))
    assert len(paths) == 9
    for path in paths:
        step = asim.training_step(asim.load_onnx(path), "softmax_cross_entropy", "momentum")
        assert step.outputs[0] == "loss" and "loss_scale_new" in step.outputs, path


@pytest.mark.slow
def test_light_model_step_executes_simulates_and_fusion_keeps_the_update():
    step = _squeezenet_step(48)
    kinds = {n.op_type for n in step.nodes}
    assert {"DropOutGenMask", "MaxPoolWithArgmax", "SoftmaxCrossEntropyWithLogits"} <= kinds
    feeds = _he_feeds(step)
    unfused = asim.execute(step, feeds)
    assert np.isfinite(float(unfused["loss"])) and float(unfused["good_steps_new"]) == 1.0
    fused = asim.simulate(step, fusion=True, inputs=feeds)
    assert fused.time_us > 0
    news = [o for o in step.outputs if o.endswith("_new")]
    assert len(news) == 2 * 52 + 2                        # 52 params: weight + momentum
    for name in news:
        np.testing.assert_array_equal(fused.outputs[name], unfused[name], err_msg=name)
    moved = [n for n in news if n.endswith(".weight_new") or n.endswith("_w_0_new")]
    assert any(not np.array_equal(unfused[n], feeds[n[:-4]]) for n in moved)


def _ln_stats_model():
    """A float32 model that reads LayerNormalization's Mean and InvStdDev itself."""
    g = asim.Graph("ln_stats")
    x = g.input("x", (4, 8), "float32")
    rng = np.random.default_rng(0)
    w = g.const(rng.standard_normal((8, 8)).astype(np.float32) / 3, name="w")
    s = g.const(rng.uniform(0.5, 1.5, 8).astype(np.float32), name="s")
    b = g.const(0.1 * rng.standard_normal(8).astype(np.float32), name="b")
    y, mean, rstd = g.layer_normalization(g.matmul(x, w), s, b, axis=-1, num_outputs=3)
    g.output(g.add(y, g.mul(mean, rstd)))
    return g


@pytest.mark.parametrize("optimizer", ["momentum", "adamw", "lamb"])
def test_mixed_precision_with_layer_norm_statistics_read_by_the_model(optimizer):
    """Issue 23 item 17: LayerNormalization's float32 statistics met float16 operands under
    mixed precision (Add: "inputs have different dtypes"); they are Cast for the model's
    readers, and the gradient takes their share (the statistics' rule: against finite
    differences in tests/autodiff/test_rules.py)."""
    step = asim.training_step(_ln_stats_model(), "mse", optimizer)
    feeds, out = _run(step)
    assert all(np.all(np.isfinite(v)) for v in out.values())
    assert not np.array_equal(out["w_new"], feeds["w"])
    assert asim.simulate(step, "ascend910b").cycles > 0
    # float32 (no mixed precision): the same update as SGD's gradient of the float32 model
    ref = asim.training_step(_ln_stats_model(), "mse", "sgd", lr=1.0, mixed_precision=False)
    feeds, out = _run(ref)
    assert np.all(np.isfinite(out["w_new"]))


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "lamb", "momentum"])
def test_half_parameters_without_mixed_precision_update(optimizer):
    """Issue 23 item 17: ApplyAdam/ApplyAdamW/LAMB on float16 parameters failed (epsilon 1e-8
    is 0 in float16: a zero gradient divided 0 by 0). Their scalar inputs are float32; the
    kernels compute in float32; the update of a zero-gradient column is finite and equals the
    float32 model's within float16 rounding."""
    def model(dtype):
        g = asim.Graph("half")
        x = g.input("x", (4, 3), dtype)
        w = g.const(np.linspace(-1, 1, 12).reshape(3, 4).astype(dtype), name="w")
        y = g.matmul(x, w)
        g.output(g.mul(y, g.const(np.array([1, 1, 1, 0], dtype))))   # column 3: no gradient
        return g
    outs = {}
    for dtype in ("float16", "float32"):
        step = asim.training_step(model(dtype), "mse", optimizer, lr=1e-2,
                                  mixed_precision=False)
        feeds = initial_state(step)
        rng = np.random.default_rng(0)
        for name in ("x", "labels"):
            feeds[name] = rng.uniform(-1, 1, step.values[name].shape).astype(dtype)
        outs[dtype] = asim.execute(step, feeds)["w_new"]
    assert np.all(np.isfinite(outs["float16"]))
    np.testing.assert_allclose(outs["float16"].astype(np.float32), outs["float32"], atol=2e-3)
