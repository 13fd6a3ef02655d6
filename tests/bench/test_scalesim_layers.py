"""The SCALE-Sim topology reader/writer and the conv graph the side-by-side benchmark builds."""

import sys
from pathlib import Path

import pytest

import ascendsim as asim
from ascendsim.errors import ConfigError
from ascendsim.ir.registry import Category, get_op

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scalesim_layers as sl  # noqa: E402

# the shared reference folder sits beside the repository (as in CI); a user clone may lack it
REF_CSV = (Path(__file__).resolve().parents[3] / "shared" / "reference" / "scalesim"
           / "resnet50_v1.5_conv.csv")
HEADER = ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
          "Num Filter, Strides,\n")


def test_resnet50_list_has_53_layers_with_resnet_shapes():
    layers = sl.resnet50_conv_layers()
    assert len(layers) == 53
    assert layers[0] == sl.ConvLayer("conv1", 229, 229, 7, 7, 3, 64, 2)
    assert (layers[0].out_h, layers[0].out_w) == (112, 112)
    # stride-2 3x3 of stage 2 and its 1x1/2 downsample: padding folded to give 28x28
    ds = {la.name: la for la in layers}
    assert ds["layer2.0.conv2"] == sl.ConvLayer("layer2.0.conv2", 57, 57, 3, 3, 128, 128, 2)
    assert ds["layer2.0.downsample"].ifmap_h == 55 and ds["layer2.0.downsample"].out_h == 28
    assert ds["layer4.2.conv3"] == sl.ConvLayer("layer4.2.conv3", 7, 7, 1, 1, 512, 2048, 1)
    # ResNet-50's well-known 4.09 GMACs of convolution (fc excluded) at 224x224
    assert sl.total_macs(layers) == 4_087_136_256


def test_resnet50_list_matches_ascendsim_resnet50_model():
    """Same (Cin, Cout, kernel, stride, output size) as the convs of asim.models.resnet50."""
    g = asim.models.resnet50(batch=1)
    convs = [n for n in g.nodes if get_op(n.op_type).category == Category.CUBE
             and len(g.value(n.inputs[1]).shape) == 4]
    layers = sl.resnet50_conv_layers()
    assert len(convs) == len(layers)
    for n, la in zip(convs, layers):
        w = g.value(n.inputs[1]).shape
        out = g.value(n.outputs[0]).shape
        assert (w[1], w[0], w[2], n.attrs["strides"][0], out[2]) == \
            (la.channels, la.num_filters, la.filter_h, la.stride, la.out_h), n.name


@pytest.mark.skipif(not REF_CSV.exists(), reason="reference topology not on this machine")
def test_reader_matches_reference_topology():
    assert sl.read_topology(REF_CSV) == sl.resnet50_conv_layers()


def test_write_then_read_round_trip(tmp_path):
    layers = sl.resnet50_conv_layers()
    path = sl.write_topology(layers, tmp_path / "t.csv")
    text = path.read_text()
    assert text.startswith(HEADER)
    assert all(line.endswith(",") for line in text.splitlines())   # SCALE-Sim drops the last
    assert sl.read_topology(path) == layers


def test_conv_graph_shapes_match_csv():
    layers = sl.resnet50_conv_layers()
    g = sl.conv_graph(layers)
    assert len(g.nodes) == 53 and len(g.inputs) == 53 and len(g.outputs) == 53
    for n, la in zip(g.nodes, layers):
        assert n.name == la.name
        x, w = g.value(n.inputs[0]), g.value(n.inputs[1])
        assert x.shape == (1, la.channels, la.ifmap_h, la.ifmap_w) and x.dtype == "float16"
        assert w.shape == (la.num_filters, la.channels, la.filter_h, la.filter_w)
        assert g.value(n.outputs[0]).shape == (1, la.num_filters, la.out_h, la.out_w)
        assert n.attrs["pads"] == [0, 0, 0, 0]
    assert sl.conv_graph(layers[:5], batch=2).value(g.outputs[0]).shape == (2, 64, 112, 112)


def test_conv_graph_computes_a_small_layer(rng):
    layer = sl.ConvLayer("c", 6, 6, 3, 3, 2, 4, 1)
    g = sl.conv_graph([layer], dtype="float32")
    x = rng.standard_normal((1, 2, 6, 6)).astype("float32")
    y = asim.execute(g, {"c.ifmap": x})[g.outputs[0]]
    w = g.const_value("c.filter")
    ref = sum(x[0, c, i:i + 4, j:j + 4][None] * w[:, c, i, j][:, None, None]
              for c in range(2) for i in range(3) for j in range(3))
    assert y.shape == (1, 4, 4, 4)
    assert abs(y[0] - ref).max() < 1e-4


@pytest.mark.parametrize("text, message", [
    ("", "empty topology"),
    ("Layer, M, N, K,\nq, 1, 2, 3,\n", "not a SCALE-Sim conv topology"),
    (HEADER, "no layers"),
    (HEADER + "a, 8, 8, 3, 3, 4,\n", "line 2: 6 fields, expected 8"),
    (HEADER + "a, 8, 8, 3, x3, 4, 4, 1,\n", "'Filter Width' is 'x3'"),
    (HEADER + "a, 8, 8, 3, 3, 0, 4, 1,\n", "channels = 0"),
    (HEADER + "a, 2, 2, 3, 3, 4, 4, 1,\n", "3x3 filter larger than its 2x2 IFMAP"),
    (HEADER + "a, 8, 8, 3, 3, 4, 4, 1,\na, 8, 8, 3, 3, 4, 4, 1,\n", "duplicate layer name 'a'"),
])
def test_bad_topology_errors_name_the_problem(text, message):
    with pytest.raises(ConfigError, match=message):
        sl.parse_topology(text)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read topology file"):
        sl.read_topology(tmp_path / "nope.csv")
