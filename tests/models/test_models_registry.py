"""`ascendsim.models.names()` / `get()` and the builders' argument checks."""

import pytest

import ascendsim as asim
from ascendsim.errors import ConfigError
from ascendsim.ir.graph import Graph

EXPECTED = {"net_basic_fuse", "net_composite_fuse", "matmul_bias_relu", "conv_bn_relu",
            "elementwise_chain", "resnet50", "resnet50_training_step", "bert_base",
            "bert_large", "bert_encoder_layer", "bert_large_training_step"}


def test_names_lists_every_builder_in_a_stable_order():
    names = asim.models.names()
    assert EXPECTED <= set(names)
    assert names[:2] == ["net_basic_fuse", "net_composite_fuse"]
    assert len(names) == len(set(names))
    for n in names:
        assert callable(getattr(asim.models, n))


def test_get_builds_by_name_with_kwargs():
    g = asim.models.get("matmul_bias_relu", m=8, k=16, n=32, dtype="float32")
    assert isinstance(g, Graph)
    assert g.values[g.outputs[0]].shape == (8, 32)


def test_unknown_name_lists_valid_names():
    with pytest.raises(ConfigError, match=r"unknown model 'resnet51'; valid: .*resnet50"):
        asim.models.get("resnet51")


def test_unknown_kwarg_is_a_config_error():
    with pytest.raises(ConfigError, match=r"model 'resnet50': unknown argument\(s\) depth; "
                                          r"valid: batch, image, dtype"):
        asim.models.get("resnet50", depth=50)


@pytest.mark.parametrize("name, kwargs, message", [
    ("resnet50", {"batch": 0}, r"batch=0: must be a positive integer"),
    ("resnet50", {"image": 16}, r"image=16: ResNet-50 needs at least 32x32"),
    ("resnet50", {"dtype": "int8"}, r"dtype='int8': model builders take one of float16"),
    ("resnet", {"layers": (1, 1, 1)}, r"layers=\(1, 1, 1\): give 4 block counts"),
    ("bert_large", {"seq_len": 1024}, r"seq_len=1024 exceeds max_position=512"),
    ("bert_base", {"gelu": "tanh"}, r"gelu='tanh': valid values are erf, op"),
    ("bert_base", {"layer_norm": "fused"}, r"layer_norm='fused': valid values are op, decomposed"),
    ("bert_encoder_layer", {"hidden": 100, "heads": 16},
     r"hidden=100 is not a multiple of heads=16"),
    ("bert_large_training_step", {"optimizer": "adagrad"},
     r"optimizer='adagrad': valid values are sgd, momentum, adam, adamw, lamb"),
    ("resnet50_training_step", {"optimizer": "rmsprop"},
     r"optimizer='rmsprop': valid values are sgd"),
    ("net_basic_fuse", {"shape": (4, -1)}, r"shape\[1\]=-1: must be a positive integer"),
    ("elementwise_chain", {"length": 0}, r"length=0: must be a positive integer"),
])
def test_bad_arguments_name_the_argument(name, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        asim.models.get(name, **kwargs)
