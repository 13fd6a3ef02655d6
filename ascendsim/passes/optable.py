"""Op facts the GE passes need that the op registry does not (yet) carry, as data.

Kept here, in one table, until `OpDef` grows the matching fields (`deterministic`,
`shape_only_inputs`); no pass compares op types outside this table and its pattern data.
"""

from __future__ import annotations

#: ops whose output is random: never folded, never merged by CSE
NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                              "RandomUniformLike", "Multinomial", "Bernoulli"})

#: ops whose output depends only on the *shape* of these inputs (foldable when it is static)
SHAPE_ONLY_INPUTS: dict[str, tuple[int, ...]] = {"Shape": (0,), "Size": (0,)}
