"""Graphviz `.dot` dumps of a graph, one per pass-manager stage.

Node labels show the node name, op type (a fused node's display type) and output shapes;
graph inputs are ellipses, constants are not drawn (a model's weights would bury the ops) but
counted in the title. A fused node is drawn as a cluster holding its original ops, labelled
with its fusion kind and pattern, as MindSpore's `hwopt_d_*_graph_0.dot` dumps show composites.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from ..ir.graph import Graph, Node


def _q(text: str) -> str:
    """A quoted Graphviz ID/label: backslashes and quotes escaped, newlines as \\n."""
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + text + '"'


def _shape(graph: Graph, value: str) -> str:
    v = graph.values.get(value)
    if v is None:
        return "?"
    return f"{v.dtype}[{','.join(str(d) for d in v.shape)}]"


def _label(graph: Graph, node: Node) -> str:
    op = node.attrs.get("display_type") or node.op_type if node.subgraph is not None \
        else node.op_type
    outs = "\n".join(_shape(graph, o) for o in node.outputs if o)
    return f"{node.name}\n{op}\n{outs}"


def _body(graph: Graph, prefix: str, lines: list[str], producers: dict[str, str],
          indent: str) -> None:
    """Emit the nodes of `graph` (clusters for fused ones); fill `producers` value -> dot id."""
    for node in graph.nodes:
        nid = f"{prefix}{node.name}"
        if node.subgraph is not None:
            kind = node.attrs.get("fusion", "")
            pat = node.attrs.get("pattern", "")
            lines.append(f"{indent}subgraph {_q('cluster_' + nid)} {{")
            lines.append(f"{indent}  label={_q(f'{node.name}: {kind} {pat}'.strip())}; "
                         f"style=rounded; color=blue;")
            inner: dict[str, str] = dict(producers)
            _body(node.subgraph, f"{nid}/", lines, inner, indent + "  ")
            lines.append(f"{indent}}}")
            _edges(node.subgraph, f"{nid}/", lines, inner)
            for o in node.outputs:
                if o in inner:
                    producers[o] = inner[o]
            continue
        lines.append(f"{indent}{_q(nid)} [label={_q(_label(graph, node))}, shape=box];")
        for o in node.outputs:
            producers[o] = nid


def _edges(graph: Graph, prefix: str, lines: list[str], producers: dict[str, str]) -> None:
    for node in graph.nodes:
        if node.subgraph is not None:
            continue   # edges into a cluster are drawn to the inner ops that read them
        nid = f"{prefix}{node.name}"
        for i in dict.fromkeys(node.inputs):
            if i and i in producers:
                lines.append(f"  {_q(producers[i])} -> {_q(nid)} [label={_q(_shape(graph, i))}];")


def to_dot(graph: Graph, title: str = "") -> str:
    """The graph as Graphviz text."""
    head = (f"{title + ': ' if title else ''}{graph.name} ({len(graph.nodes)} nodes, "
            f"{len(graph.constants)} constants)")
    lines = [f"digraph {_q(graph.name)} {{", f"  label={_q(head)};",
             "  labelloc=t; rankdir=TB; node [fontname=Helvetica, fontsize=10];"]
    producers: dict[str, str] = {}
    for i in graph.inputs:
        iid = f"input:{i}"
        label = _q(i + "\n" + _shape(graph, i))
        lines.append(f"  {_q(iid)} [label={label}, shape=ellipse];")
        producers[i] = iid
    _body(graph, "", lines, producers, "  ")
    _edges(graph, "", lines, producers)
    for o in graph.outputs:
        oid = f"output:{o}"
        lines.append(f"  {_q(oid)} [label={_q(o)}, shape=ellipse, style=dashed];")
        if o in producers:
            lines.append(f"  {_q(producers[o])} -> {_q(oid)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_dot(graph: Graph, path: str | PathLike, title: str = "") -> Path:
    """Write `to_dot(graph)` to `path` (parents created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_dot(graph, title), encoding="utf-8")
    return path


__all__ = ["to_dot", "write_dot"]
