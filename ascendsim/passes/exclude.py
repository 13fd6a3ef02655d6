"""Single fusion instances switched off: the `exclude` option of `optimize()`.

A switch file turns whole passes on or off. To measure (or refuse) one fusion a pass makes,
`optimize(..., exclude=["PassName:node", ...])` (through the API: `simulate(graph,
fusion={"exclude": [...]})`) keeps every pass on but makes pass `PassName` refuse any group
that holds the original node `node`; the refusal is logged ("excluded by the exclude option").
Original node names are stable (a fused node's own name is not: it depends on what else was
fused), so an instance is named by its pass and one of the original nodes it joins.

Every fusion a pass commits is recorded in its `PassResult.instances` (`Instance`: the pass,
the pattern, the fused node's name and the original nodes it joined), which is how
`ascendsim.attribution` lists the instances it re-simulates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import ConfigError
from ..ir.graph import Node
from ..ir.registry import get_op

#: the option key (`optimize(exclude=...)`, `simulate(fusion={"exclude": ...})`)
OPTION = "exclude"


@dataclass(frozen=True)
class Instance:
    """One fusion (or rewrite) a pass committed."""

    pass_name: str
    pattern: str
    node: str                    # the name of the node it made
    members: tuple[str, ...]     # the original nodes it joined, in graph order

    @property
    def key(self) -> str:
        """The `exclude` entry that switches this instance off."""
        return f"{self.pass_name}:{self.members[0]}"


def leaves(nodes: Iterable[Node]) -> tuple[str, ...]:
    """Names of the original nodes of `nodes` (a fused node's subgraph, flattened)."""
    out: list[str] = []
    for n in nodes:
        if n.subgraph is not None:
            out.extend(leaves(n.subgraph.nodes))
        else:
            out.append(n.name)
    return tuple(out)


def parse_exclude(raw: object, known: Mapping[str, object]) -> frozenset[tuple[str, str]]:
    """The (pass, node) pairs of an `exclude` option; a ConfigError names a bad entry."""
    if raw is None:
        return frozenset()
    if isinstance(raw, str) or not isinstance(raw, Sequence | frozenset | set):
        raise ConfigError(f"exclude={raw!r}: expected a list of 'PassName:node' strings")
    out = set()
    for item in raw:
        if isinstance(item, tuple) and len(item) == 2:
            name, node = item
        elif isinstance(item, str) and ":" in item:
            name, node = item.split(":", 1)
        else:
            raise ConfigError(f"exclude entry {item!r}: expected 'PassName:node' (the pass and "
                              f"one original node of the fusion to leave out)")
        if name not in known:
            raise ConfigError(f"exclude entry {item!r}: unknown pass '{name}'; valid names: "
                              f"{', '.join(sorted(known))}")
        out.add((str(name), str(node)))
    return frozenset(out)


def excluded(options: Mapping[str, object] | None, pass_name: str,
             nodes: Sequence[Node]) -> str:
    """Why a group of `pass_name` over `nodes` is left out ("" = it is not): the `exclude`
    option names one of its nodes, or one of them is pinned to its own kernel's core count
    (`block_dim` as a kernel attribute, `ir.graph.KERNEL_ATTRS`: a kernel of its own)."""
    pinned = pinned_node(nodes)
    if pinned:
        return f"node '{pinned}' has its own block_dim (a kernel of its own)"
    pairs = options.get(OPTION) if options else None
    if not pairs:
        return ""
    wanted = {node for p, node in pairs if p == pass_name}   # type: ignore[union-attr]
    if not wanted:
        return ""
    hit = wanted.intersection(leaves(nodes))
    if not hit:
        return ""
    return f"excluded by the exclude option ('{pass_name}:{sorted(hit)[0]}')"


def pinned_node(nodes: Iterable[Node]) -> str:
    """The first of `nodes` whose `block_dim` is a kernel attribute (an op that does not
    register one, so no fused kernel could follow it), or ""."""
    for n in nodes:
        if n.subgraph is None and n.attrs.get("block_dim") and \
                "block_dim" not in get_op(n.op_type, n.name).attrs:
            return n.name
    return ""


__all__ = ["Instance", "OPTION", "excluded", "leaves", "parse_exclude", "pinned_node"]
