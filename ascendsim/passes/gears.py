"""Dynamic-shape gears (GE dynamic batch / dynamic dims): one static graph per gear.

A graph whose inputs have a symbolic dimension (e.g. "batch") is served, as on the device, by
a few static graphs, one per gear, and a selector that picks the gear at run time: CANN builds
`MapIndex` (which gear matches the actual dim) feeding a `Case` with one static branch per gear.
`build_gears(graph, dim="batch", gears=[1, 4, 8])` returns a `GearSet`: `selecting_graph()`
is the gear-selecting graph itself (Shape -> Gather -> Equal per gear feeding a chain of If
nodes, one static branch per gear: the IR's MapIndex + Case), `graphs[g]` is the
graph with the dim bound to g (shapes re-inferred), `select(n)` is the MapIndex (the gear an
actual size n runs on: the exact gear; with `pad=True`, the smallest gear >= n, the input is
then padded), `execute(inputs)` runs the selected gear, `graph_for(n)` gives the static graph to
simulate (`asim.simulate(gs.graph_for(4))`), and `selector` describes the MapIndex + Case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError, GraphError
from ..ir.graph import Graph


@dataclass
class GearSet:
    """Per-gear static graphs of one dynamic graph, and how a gear is chosen."""

    dim: str
    gears: list[int]
    graphs: dict[int, Graph]
    axes: dict[str, int]                     # input name -> axis holding the dynamic dim
    pad: bool = False
    results: dict[int, Any] = field(default_factory=dict)   # per-gear OptimizeResult
    inputs: list[str] = field(default_factory=list)          # the dynamic graph's inputs
    input_values: dict[str, Any] = field(default_factory=dict)

    @property
    def selector(self) -> str:
        where = ", ".join(f"{i}[axis {a}]" for i, a in self.axes.items())
        cmp = "smallest gear >= n (input padded)" if self.pad else "gear == n"
        return (f"MapIndex({self.dim} = n from {where}; gears {self.gears}; {cmp}) -> "
                f"Case({len(self.gears)} static branches)")

    def select(self, n: int) -> int:
        """The gear that serves an actual size `n` (GraphError when none does)."""
        for g in self.gears:
            if g == n or (self.pad and g >= n):
                return g
        raise GraphError(f"no gear serves {self.dim}={n}; gears are {self.gears}"
                         + ("" if self.pad else " (exact match needed; pad=True pads up)"))

    def graph_for(self, n: int) -> Graph:
        """The static graph that runs for an actual size `n`."""
        return self.graphs[self.select(n)]

    def dim_of(self, inputs: Mapping[str, np.ndarray]) -> int:
        sizes = {np.asarray(inputs[i]).shape[a] for i, a in self.axes.items() if i in inputs}
        if len(sizes) != 1:
            raise GraphError(f"inputs disagree on {self.dim}: sizes {sorted(sizes)}")
        return sizes.pop()

    def execute(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Select the gear from the inputs' dynamic dim, run it, and crop padded outputs."""
        from ..execute import execute

        n = self.dim_of(inputs)
        g = self.select(n)
        feeds = {}
        for name, arr in inputs.items():
            arr = np.asarray(arr)
            if name in self.axes and g != n:
                widths = [(0, 0)] * arr.ndim
                widths[self.axes[name]] = (0, g - n)
                arr = np.pad(arr, widths)
            feeds[name] = arr
        out = execute(self.graphs[g], feeds)
        if g == n:
            return out
        return {k: np.take(v, range(n), axis=0) if v.ndim and v.shape[0] == g else v
                for k, v in out.items()}

    def selecting_graph(self) -> Graph:
        """The gear-selecting graph: MapIndex + Case as a chain of If nodes.

        Inputs are the dynamic graph's inputs (symbolic dim kept); each level computes
        ``Shape(x)[axis] == gear`` and runs that gear's static graph (captured inputs: all graph
        inputs), else the next level; the last gear is the final else. The actual size must
        equal a gear (as on the device; pad the input first, or use `execute` with pad=True).
        """
        first = next(iter(self.axes))
        axis = self.axes[first]
        base = self.graphs[self.gears[0]]
        outs = list(base.outputs)

        def level(gears: list[int], top: bool) -> Graph:
            if len(gears) == 1:
                return self.graphs[gears[0]]
            sg = Graph(self.name_for(gears) if not top else self.name_for(self.gears, "select"))
            for name in self.inputs:
                v = self.input_values[name]
                sg.input(name, v.shape, v.dtype, v.layout)
            n = sg.gather(sg.shape(first), sg.const(np.array(axis, np.int64)), axis=0)
            eq = sg.equal(n, sg.const(np.array(gears[0], np.int64)))
            sg.add_node("If", [eq, *self.inputs],
                        {"then_branch": self.graphs[gears[0]], "else_branch": level(gears[1:],
                                                                                    False)},
                        name=f"case_{self.dim}_{gears[0]}",
                        outputs=outs if top else [f"{o}@{gears[0]}" for o in outs])
            sg.output(*(outs if top else [f"{o}@{gears[0]}" for o in outs]))
            return sg

        if len(self.gears) == 1:
            return self.graphs[self.gears[0]]
        return level(self.gears, True)

    def name_for(self, gears: list[int], what: str = "gears") -> str:
        return f"{what}_{self.dim}_{'_'.join(map(str, gears))}"

    def map(self, fn: Callable[[int, int, Graph], Any]) -> GearSet:
        """A GearSet whose graphs are fn(index, gear, graph).graph (optimize per gear)."""
        results = {g: fn(i, g, self.graphs[g]) for i, g in enumerate(self.gears)}
        return GearSet(self.dim, list(self.gears), {g: r.graph for g, r in results.items()},
                       dict(self.axes), self.pad, results, list(self.inputs),
                       dict(self.input_values))


def _symbolic_dims(graph: Graph) -> dict[str, dict[str, int]]:
    dims: dict[str, dict[str, int]] = {}
    for name in graph.inputs:
        for axis, d in enumerate(graph.values[name].shape):
            if isinstance(d, str):
                dims.setdefault(d, {})[name] = axis
    return dims


def build_gears(graph: Graph, dim: str | None = None, gears: Sequence[int] = (),
                pad: bool = False) -> GearSet:
    """Static graphs of `graph` with symbolic dim `dim` bound to each gear."""
    dims = _symbolic_dims(graph)
    if dim is None:
        if len(dims) != 1:
            raise ConfigError(f"gears: graph '{graph.name}' has symbolic input dims "
                              f"{sorted(dims) or 'none'}; name one with gear_dim=")
        dim = next(iter(dims))
    if dim not in dims:
        raise ConfigError(f"gears: '{dim}' is not a symbolic input dim of graph '{graph.name}'"
                          f"; symbolic dims: {', '.join(sorted(dims)) or 'none'}")
    gl = sorted({int(g) for g in gears})
    if not gl or any(g <= 0 for g in gl):
        raise ConfigError(f"gears must be positive sizes, got {list(gears)}")
    graphs = {g: graph.bind(**{dim: g}) for g in gl}
    for g, sg in graphs.items():
        sg.name = f"{graph.name}_{dim}{g}"
    return GearSet(dim, gl, graphs, dims[dim], pad, inputs=list(graph.inputs),
                   input_values={i: graph.values[i] for i in graph.inputs})


__all__ = ["GearSet", "build_gears"]
