"""SCALE-Sim conv topologies <-> ascendsim graphs, for the side-by-side benchmark.

SCALE-Sim 3 describes conv layers in a topology CSV:

    Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter,
        Strides,                            (one line in the file)
    conv1, 229, 229, 7, 7, 3, 64, 2,

SCALE-Sim has no padding, so the padding is folded into the IFMAP size (a 7x7/2 conv with
output 112 reads a 229x229 IFMAP), and every row ends with a comma because its parser drops
the last field. This module reads and writes such files (`read_topology`, `write_topology`),
builds the ResNet-50 v1.5 conv layer list from the network's structure (`resnet50_conv_layers`:
the 53 layers of the reference topology) and turns a layer list into an ascendsim graph of
independent convs with the same shapes (`conv_graph`: batch 1, pads 0, the folded IFMAP as
input), so both simulators get exactly the same work.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import ascendsim as asim
from ascendsim.errors import ConfigError

#: The columns of a SCALE-Sim conv topology, in order (names as SCALE-Sim writes them).
COLUMNS = ("Layer name", "IFMAP Height", "IFMAP Width", "Filter Height", "Filter Width",
           "Channels", "Num Filter", "Strides")


class ConvLayer(NamedTuple):
    """One row of a SCALE-Sim conv topology (IFMAP sizes include the padding)."""

    name: str
    ifmap_h: int
    ifmap_w: int
    filter_h: int
    filter_w: int
    channels: int
    num_filters: int
    stride: int

    @property
    def out_h(self) -> int:
        return (self.ifmap_h - self.filter_h) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.ifmap_w - self.filter_w) // self.stride + 1

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the layer at batch 1."""
        return (self.out_h * self.out_w * self.num_filters * self.channels
                * self.filter_h * self.filter_w)


def _check_layer(layer: ConvLayer, where: str) -> ConvLayer:
    for field in ConvLayer._fields[1:]:
        if getattr(layer, field) < 1:
            raise ConfigError(f"{where}: layer '{layer.name}' has {field} = "
                              f"{getattr(layer, field)}; every size must be >= 1")
    if layer.filter_h > layer.ifmap_h or layer.filter_w > layer.ifmap_w:
        raise ConfigError(f"{where}: layer '{layer.name}' has a {layer.filter_h}x"
                          f"{layer.filter_w} filter larger than its {layer.ifmap_h}x"
                          f"{layer.ifmap_w} IFMAP")
    return layer


def parse_topology(text: str, source: str = "<topology>") -> list[ConvLayer]:
    """Parse the text of a SCALE-Sim conv topology CSV (header row, trailing commas allowed)."""
    rows = [r for r in csv.reader(text.splitlines()) if any(c.strip() for c in r)]
    if not rows:
        raise ConfigError(f"{source}: empty topology file")
    header = [c.strip() for c in rows[0] if c.strip()]
    if [h.lower() for h in header[:len(COLUMNS)]] != [c.lower() for c in COLUMNS]:
        raise ConfigError(f"{source}: header {header} is not a SCALE-Sim conv topology; "
                          f"expected the columns {list(COLUMNS)}")
    layers, names = [], set()
    for lineno, row in enumerate(rows[1:], start=2):
        cells = [c.strip() for c in row]
        while cells and not cells[-1]:
            cells.pop()
        where = f"{source} line {lineno}"
        if len(cells) < len(COLUMNS):
            raise ConfigError(f"{where}: {len(cells)} fields, expected {len(COLUMNS)} "
                              f"({', '.join(COLUMNS)})")
        name = cells[0]
        if not name:
            raise ConfigError(f"{where}: empty layer name")
        if name in names:
            raise ConfigError(f"{where}: duplicate layer name '{name}'")
        names.add(name)
        dims = []
        for col, cell in zip(COLUMNS[1:], cells[1:len(COLUMNS)]):
            try:
                dims.append(int(cell))
            except ValueError:
                raise ConfigError(f"{where}: layer '{name}' column '{col}' is {cell!r}, "
                                  f"not an integer") from None
        layers.append(_check_layer(ConvLayer(name, *dims), where))
    if not layers:
        raise ConfigError(f"{source}: no layers after the header")
    return layers


def read_topology(path: str | Path) -> list[ConvLayer]:
    """Read a SCALE-Sim conv topology CSV file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read topology file '{path}': {e.strerror}") from None
    return parse_topology(text, str(path))


def format_topology(layers: Iterable[ConvLayer]) -> str:
    """The SCALE-Sim CSV text of a layer list (every row ends with a comma, as SCALE-Sim needs)."""
    lines = [", ".join(COLUMNS) + ","]
    lines += [", ".join(str(v) for v in layer) + "," for layer in layers]
    return "\n".join(lines) + "\n"


def write_topology(layers: Iterable[ConvLayer], path: str | Path) -> Path:
    """Write a layer list as a SCALE-Sim conv topology CSV; returns the path."""
    path = Path(path)
    path.write_text(format_topology(layers))
    return path


def _folded(out: int, k: int, stride: int) -> int:
    """The IFMAP size that gives `out` outputs with no padding (padding folded in)."""
    return (out - 1) * stride + k


def resnet50_conv_layers(image: int = 224) -> list[ConvLayer]:
    """The 53 conv layers of ResNet-50 v1.5 (stride on the 3x3 conv of each first bottleneck),
    with each layer's padding folded into its IFMAP size, in network order."""
    def conv(name: str, out: int, k: int, cin: int, cout: int, s: int) -> ConvLayer:
        size = _folded(out, k, s)
        return ConvLayer(name, size, size, k, k, cin, cout, s)

    hw = (image + 2 * 3 - 7) // 2 + 1            # stem: 7x7/2, pad 3
    layers = [conv("conv1", hw, 7, 3, 64, 2)]
    hw = (hw + 2 - 3) // 2 + 1                   # max pool 3x3/2, pad 1
    cin = 64
    for stage, (blocks, width, first_stride) in enumerate(
            ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)), start=1):
        for b in range(blocks):
            s = first_stride if b == 0 else 1
            out = (hw - 1) // s + 1
            p = f"layer{stage}.{b}"
            layers += [conv(f"{p}.conv1", hw, 1, cin, width, 1),
                       conv(f"{p}.conv2", out, 3, width, width, s),
                       conv(f"{p}.conv3", out, 1, width, 4 * width, 1)]
            if b == 0:
                layers.append(conv(f"{p}.downsample", out, 1, cin, 4 * width, s))
            cin, hw = 4 * width, out
    return layers


def total_macs(layers: Iterable[ConvLayer]) -> int:
    return sum(layer.macs for layer in layers)


def conv_graph(layers: Sequence[ConvLayer], batch: int = 1, dtype: str = "float16",
               name: str = "scalesim_conv_layers") -> asim.Graph:
    """One graph holding every layer as an independent Conv (no padding: the IFMAP already
    includes it), named after the layer, with its own input and output."""
    if batch < 1:
        raise ConfigError(f"batch must be >= 1, got {batch}")
    g = asim.Graph(name)
    for i, layer in enumerate(layers):
        _check_layer(layer, f"conv_graph layer {i}")
        x = g.input(f"{layer.name}.ifmap", (batch, layer.channels, layer.ifmap_h,
                                            layer.ifmap_w), dtype)
        w = g.weight(f"{layer.name}.filter", (layer.num_filters, layer.channels,
                                              layer.filter_h, layer.filter_w), dtype, seed=i)
        y = g.conv(x, w, strides=[layer.stride, layer.stride], pads=[0, 0, 0, 0],
                   name=layer.name)
        g.output(y)
    return g
