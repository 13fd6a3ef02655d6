"""ResNet-50 v1.5: structure, MACs, laziness, small-size values, training step."""

import time

import numpy as np
import pytest
from models_helpers import count, cube_macs, feeds, lazy_weights, materialised

import ascendsim as asim
from ascendsim.ir.registry import Category, get_op


def test_resnet50_full_size_structure_is_shape_only():
    g = asim.models.resnet50(batch=32)
    g.validate()
    assert count(g, "Conv") == 53
    assert count(g, "BatchNormalization") == 53          # unfused: the passes fold them
    assert count(g, "Relu") == 49
    assert count(g, "Add") == 16                         # residual connections
    assert count(g, "MaxPool") == 1 and count(g, "GlobalAveragePool") == 1
    assert count(g, "Gemm") == 1
    assert g.values["input"].shape == (32, 3, 224, 224)
    out = g.values[g.outputs[0]]
    assert out.shape == (32, 1000) and out.dtype == "float16"
    assert len(lazy_weights(g)) >= 53 * 5 and materialised(g) == 0
    params = sum(int(np.prod(c.shape)) for c in lazy_weights(g))
    assert 25.5e6 < params < 25.7e6                       # 25.56 M incl. BN statistics


def test_resnet50_v1_5_puts_the_stride_on_the_3x3_conv():
    g = asim.models.resnet50(batch=1)
    stride2 = [(n.name, n.attrs["kernel_shape"]) for n in g.nodes
               if n.op_type == "Conv" and n.attrs["strides"] == [2, 2]]
    assert ("layer2.0.2.conv", [3, 3]) in stride2
    assert ("layer2.0.1.conv", [1, 1]) not in stride2
    assert sorted(k[0] for _, k in stride2) == [1, 1, 1, 3, 3, 3, 7]


def test_resnet50_macs_per_image_at_224():
    macs = cube_macs(asim.models.resnet50(batch=2))
    assert macs / 2 == pytest.approx(4.1e9, rel=0.05)


def test_resnet50_small_runs_to_finite_seeded_values():
    g = asim.models.resnet50(batch=1, image=32, dtype="float32")
    out = asim.execute(g, feeds(g))[g.outputs[0]]
    assert out.shape == (1, 1000) and np.isfinite(out).all()
    assert 0.1 < np.abs(out).mean() < 100
    # same seed -> same weights; another seed -> other weights
    again = asim.models.resnet50(batch=1, image=32, dtype="float32")
    other = asim.models.resnet50(batch=1, image=32, dtype="float32", seed=1)
    for name in ("stem.conv.weight", "layer3.2.2.conv.weight", "fc.weight"):
        np.testing.assert_array_equal(g.const_value(name), again.const_value(name))
        assert not np.array_equal(g.const_value(name), other.const_value(name))


def test_small_resnet_fp16_is_finite_and_repeats_bit_for_bit():
    g = asim.models.resnet(batch=2, image=32, layers=(1, 1, 1, 1), dtype="float16")
    f = feeds(g)
    a = asim.execute(g, f)[g.outputs[0]]
    b = asim.execute(asim.models.resnet(batch=2, image=32, layers=(1, 1, 1, 1)), f)
    assert a.dtype == np.float16 and np.isfinite(a).all()
    np.testing.assert_array_equal(a, b[g.outputs[0]])


def test_resnet50_training_step_full_size_shapes_and_cost():
    t0 = time.process_time()
    g = asim.models.resnet50_training_step(batch=256)
    g.validate()
    elapsed = time.process_time() - t0
    assert materialised(g) == 0
    assert g.values["loss"].shape == () and g.outputs[0] == "loss"
    assert g.values["labels"].shape == (256, 1000)
    assert count(g, "ConvTranspose") == 52                # every conv but the stem's
    assert count(g, "Conv") == 53                         # forward
    assert count(g, "Conv2DBackpropFilter") == 53         # weight gradients, one kernel each
    assert count(g, "Transpose") == 0                     # none around the weight gradients
    # CANN's training kernels, no BN built from primitives
    assert count(g, "BNTrainingReduce") == count(g, "BNTrainingUpdate") == 53
    assert count(g, "BNTrainingUpdateGrad") == count(g, "BNTrainingReduceGrad") == 53
    assert count(g, "MaxPoolWithArgmax") == count(g, "MaxPoolGradWithArgmax") == 1
    assert count(g, "ReduceMean") == 1 and count(g, "BatchNormalization") == 0   # loss mean
    assert count(g, "ApplyMomentum") == 161 and count(g, "NPUGetFloatStatus") == 1
    # 161 parameters, each updated with momentum: weight + momentum buffer out; 53 BNs'
    # running mean and variance; the dynamic loss scale and its good-step counter
    assert len(g.outputs) == 1 + 2 * 161 + 2 * 53 + 2
    assert g.outputs[-2:] == ["layer4.2.3.bn.running_mean_new", "layer4.2.3.bn.running_var_new"]
    w = g.values["layer3.1.2.conv.weight_new"]
    assert w.shape == (256, 256, 3, 3) and w.dtype == "float32"    # fp32 master weights
    assert g.values["layer3.1.2.conv.weight"].dtype == "float32"
    # forward + data gradients + weight gradients: ~3x the forward MACs (no stem data grad)
    fwd = cube_macs(asim.models.resnet50(batch=256))
    assert 2.9 * fwd < cube_macs(g) < 3.0 * fwd
    print(f"resnet50_training_step(batch=256): {len(g.nodes)} nodes, built in {elapsed:.2f} s")


def test_small_resnet_training_step_runs_in_mixed_precision_and_updates():
    g = asim.models.resnet_training_step(batch=2, image=64, layers=(1, 1, 1, 1), lr=0.1)
    g.validate()
    assert g.values["input"].dtype == "float16"
    assert g.values["fc.weight"].dtype == "float32"               # master copy
    cubes = [n for n in g.nodes if get_op(n.op_type).category == Category.CUBE]
    assert {g.values[n.outputs[0]].dtype for n in cubes} == {"float16"}
    f = {**feeds(g), "loss_scale": np.float32(256.0)}     # a scale these gradients fit
    out = asim.execute(g, f)
    assert all(np.isfinite(v).all() for v in out.values())
    assert float(out["loss"]) == pytest.approx(np.log(1000), rel=0.5)
    assert float(out["loss_scale_new"]) == 256.0 and float(out["good_steps_new"]) == 1.0
    for name in ("stem.conv.weight", "layer4.0.3.conv.weight", "fc.bias", "stem.bn.weight"):
        new, old = out[f"{name}_new"], f[name]
        assert new.dtype == np.float32 and new.shape == old.shape
        # momentum from zero: m' = dw + wd * w, w' = w - lr * m'
        np.testing.assert_allclose(new, old - 0.1 * out[f"{name}_m_new"], rtol=1e-5,
                                   atol=1e-6)
        assert np.abs(out[f"{name}_m_new"]).max() > 0
    # BN running statistics move towards the batch statistics (momentum 0.9)
    assert not np.allclose(out["stem.bn.running_mean_new"], f["stem.bn.running_mean"])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
def test_small_resnet_training_step_skips_the_update_on_overflow():
    """Dynamic loss scaling: a scale that overflows float16 gradients keeps every parameter
    and halves the scale (NPUGetFloatStatus, as the Ascend frameworks do)."""
    g = asim.models.resnet_training_step(batch=2, image=32, layers=(1, 1, 1, 1))
    f = {**feeds(g), "loss_scale": np.float32(2.0 ** 24)}
    out = asim.execute(g, f)
    assert float(out["loss_scale_new"]) == 2.0 ** 23 and float(out["good_steps_new"]) == 0.0
    np.testing.assert_array_equal(out["fc.weight_new"], f["fc.weight"])
    np.testing.assert_array_equal(out["stem.conv.weight_m_new"], f["stem.conv.weight_m"])
