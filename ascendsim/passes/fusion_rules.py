"""The one table of UB-fusion limits, as named rule sets users can switch between.

The source documents (seeds 000/001/003, "seed" rule set, the default) give four UB-fusion
categories with fixed limits. Current CANN documentation (8.x, graphubfusionref; see
`reference/graph-optimizers.md` sections 4.2/4.3) states other numbers; "cann8" collects them so
a user can compare what each set of rules does to the same graph:

=====================  =================================  ========================================
category               seed (source documents)            cann8 (CANN 8.x documentation)
=====================  =================================  ========================================
Conv + element-wise    cube head + <= 3 single-in/out     the same: no generic rule is documented;
                       element-wise ops                   per-pass whitelists allow <= 3
element-wise chain     <= 5 ops; the first may have       TbeEltwiseFusionPass: <= 6 ops
                       several inputs, the rest one
Reduce + element-wise  one reduce, <= 4 element-wise      TbeReduceElemwiseFusionPass: one reduce,
                       ops in all (before or after it)    <= 5 before and <= 5 after, single-input
Segment + element-wise like Reduce + element-wise         no documented pass: same as reduce
automatic UB fusion    none                               AutomaticUbFusion: <= 28 connected
                                                          element-wise ops not matched before
=====================  =================================  ========================================

Nothing else in the fusion passes holds a limit: they read a `UbRules` record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class UbRules:
    """Limits of the UB-fusion categories (op counts; 0 disables a category)."""

    name: str
    #: Conv + element-wise: element-wise ops after a cube head (each single-input single-output)
    conv_eltwise_max: int
    #: element-wise chain: ops in one group (the first may have several inputs)
    eltwise_max: int
    #: Reduce + element-wise: element-wise ops before the reduce, after it, and in all
    reduce_pre_max: int
    reduce_post_max: int
    reduce_total_max: int
    #: Segment + element-wise: same three numbers for a segment (pooling-like) anchor
    segment_pre_max: int
    segment_post_max: int
    segment_total_max: int
    #: AutomaticUbFusion: connected element-wise ops not taken by a named pattern (0 = off)
    automatic_max: int
    source: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type in ("int", int) and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"UB rule {f.name} of rule set '{self.name}' must be an "
                                  f"integer >= 0, got {v!r}")

    def with_(self, **changes: Any) -> UbRules:
        """A copy with some limits changed (what-if), named `<name>+custom`."""
        unknown = sorted(set(changes) - {f.name for f in fields(self)})
        if unknown:
            raise ConfigError(f"unknown UB rule(s) {', '.join(unknown)}; valid: "
                              f"{', '.join(f.name for f in fields(self))}")
        return replace(self, **{"name": f"{self.name}+custom", **changes})


RULE_SETS: dict[str, UbRules] = {
    "seed": UbRules(
        "seed", conv_eltwise_max=3, eltwise_max=5,
        reduce_pre_max=4, reduce_post_max=4, reduce_total_max=4,
        segment_pre_max=4, segment_post_max=4, segment_total_max=4,
        automatic_max=0,
        source="seeds 000/001/003 (MISSION.md, Fusion): the source documents' four categories"),
    "cann8": UbRules(
        "cann8", conv_eltwise_max=3, eltwise_max=6,
        reduce_pre_max=5, reduce_post_max=5, reduce_total_max=10,
        segment_pre_max=5, segment_post_max=5, segment_total_max=10,
        automatic_max=28,
        source="CANN 8.0 graphubfusionref: TbeEltwiseFusionPass <= 6, "
               "TbeReduceElemwiseFusionPass 5+1+5, AutomaticUbFusion <= 28"),
}

DEFAULT_RULE_SET = "seed"


def get_rules(rules: str | UbRules | None = None) -> UbRules:
    """A rule set by name ("seed", "cann8"), or the record itself; None -> the default."""
    if rules is None:
        return RULE_SETS[DEFAULT_RULE_SET]
    if isinstance(rules, UbRules):
        return rules
    try:
        return RULE_SETS[rules]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown UB fusion rule set {rules!r}; valid: "
                          f"{', '.join(RULE_SETS)}") from None


__all__ = ["UbRules", "RULE_SETS", "DEFAULT_RULE_SET", "get_rules"]
