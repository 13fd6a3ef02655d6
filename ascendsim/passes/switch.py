"""CANN fusion switch files, both formats, and the on/off decision for each pass.

Format A (JSON, current CANN)::

    {"Switch": {"GraphFusion": {"ALL": "off", "SoftmaxSmallOpFusionPass": "on"},
                "UBFusion": {"ALL": "on"}}}

`ALL` sets the group default, a named pass overrides it. Format B (legacy ATC/AOE): one
`PassName:off` (or `:on`) per line; `#` starts a comment. Semantics follow CANN: "off where
allowed" (a non-disableable pass such as AABiasaddConvFusion keeps running, and the log says
so); default-off passes (SoftmaxSmallOpFusionPass) stay off unless named "on"; `ALL: on`
restores the defaults. Names CANN knows but ascendsim does not model are accepted and noted,
so a real CANN switch file loads; any other name, or a value other than on/off, is a
ConfigError naming the key and listing the valid names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import SWITCH_GROUPS

#: CANN pass names (graphubfusionref) that ascendsim accepts in a switch file but does not model
CANN_UNMODELLED = frozenset({
    "SoftmaxFusionPass", "ConvToFullyConnectionFusionPass", "SoftmaxGradFusionPass",
    "ZConfusionSoftmaxGradFusionPass", "Conv2DSqueezeBiasaddFusionPass",
    "Conv2DbpInputBiasAddFusionPass", "ConvConcatFusionPass", "PoolingFusionPass",
    "ZConcatv2dFusionPass", "TfMergeSubFusionPass", "RequantFusionPass",
    "TfTagNoConstFoldingFusionPass", "TfMergeWeightQuantFusionPass",
    "Conv2DQuantProcessFusionPass", "V200NotRequantFusionPass", "ZConcatExt2FusionPass",
    "ZSplitVDFusionPassV2", "ZSplitVDFusionPass", "SplitConvConcatFusionPass",
    "FixPipeAbilityProcessPass", "FusionVirtualOpSetSwitch",
    "TbeConvDequantVaddReluQuantFusionPass",
    "TbeEltwiseFusionPass", "TbeReduceElemwiseFusionPass", "TbeDynamicElemwiseReduceFusionPass",
    "TbeMultiOutputFusionPass", "AutomaticUbFusion", "TbeConv3dElemwisePass",
    "TbeConv2DBackpropElemwiseFusionPass", "TbeDxElemwisePass", "ATbeMatMulElemwiseFusionPass",
    "TbeFullyconnectionElemwiseDequantFusionPass", "TbeDepthwiseConvElemwiseFusionPass",
    "TbeElemwiseQuantFusionPass", "TbeConv2DReluv2Pass",
    "TbeAippConvReluMaxpoolingFusion",
    "MatmulConfusiontransposeUbFusion", "TbeEltwiseCastFusionPass",
    "TbeReadSelectEltwiseFusionPass", "TbeEltwiseWriteSelectFusionPass",
})

_VALUES = {"on": True, "off": False}


@dataclass(frozen=True)
class PassInfo:
    """What the switch logic needs to know about a registered pass."""

    name: str
    group: str
    default_on: bool
    disableable: bool


@dataclass
class FusionSwitch:
    """Parsed switch settings: per group an `ALL` value and per-pass overrides."""

    all: dict[str, bool | None] = field(default_factory=dict)      # group -> ALL (None: unset)
    overrides: dict[str, bool] = field(default_factory=dict)      # pass name -> on/off
    unmodelled: list[str] = field(default_factory=list)           # CANN names we accept/ignore
    source: str = "defaults"

    def decide(self, info: PassInfo) -> tuple[bool, str]:
        """(runs?, note) for a pass; the note explains anything a user might not expect."""
        if info.group not in SWITCH_GROUPS:
            return True, ""
        if info.name in self.overrides:
            want, why = self.overrides[info.name], f"'{info.name}' is set "
            why += "on" if want else "off"
        elif self.all.get(info.group) is False:
            want, why = False, f"{info.group} ALL is off"
        else:
            want, why = info.default_on, ""
            if not info.default_on:
                return False, f"{info.name} is off by default; switch it on by name"
        if not want and not info.disableable:
            return True, (f"{info.name} cannot be switched off; it runs although {why} "
                          f"(as in CANN)")
        return want, "" if want else f"{info.name} skipped: {why}"


def _value(raw: Any, key: str) -> bool:
    if not isinstance(raw, str) or raw.strip().lower() not in _VALUES:
        raise ConfigError(f"fusion switch key '{key}' has value {raw!r}; expected \"on\" or "
                          f"\"off\"")
    return _VALUES[raw.strip().lower()]


def _check_name(name: str, key: str, group: str | None, known: Mapping[str, PassInfo],
                sw: FusionSwitch) -> bool:
    """True when `name` is a modelled pass; False for an accepted unmodelled CANN name."""
    info = known.get(name)
    if info is not None:
        if group is not None and info.group != group:
            raise ConfigError(f"fusion switch key '{key}': pass '{name}' belongs to group "
                              f"'{info.group}', not '{group}'")
        return True
    if name in CANN_UNMODELLED:
        sw.unmodelled.append(name)
        return False
    if name == "ALL" and group is None:
        raise ConfigError(f"fusion switch key '{key}': 'ALL' sets a group's default and is valid "
                          f"only inside a group of the JSON format, e.g. "
                          f"{{\"Switch\": {{\"GraphFusion\": {{\"ALL\": \"off\"}}}}}}; "
                          f"here name passes one by one")
    valid = sorted(n for n, i in known.items() if group is None or i.group == group)
    raise ConfigError(f"fusion switch key '{key}': unknown pass '{name}'"
                      + (f" in group '{group}'" if group else "")
                      + f"; valid names: {'ALL, ' if group else ''}{', '.join(valid)}")


def _parse_json(doc: Any, known: Mapping[str, PassInfo], sw: FusionSwitch) -> None:
    if not isinstance(doc, Mapping):
        raise ConfigError("fusion switch: the JSON document must be an object with key 'Switch'")
    groups = doc.get("Switch", doc) if "Switch" in doc else doc
    if "Switch" in doc and len(doc) != 1:
        extra = sorted(k for k in doc if k != "Switch")
        raise ConfigError(f"fusion switch: unknown top-level key(s) {', '.join(extra)}; "
                          f"expected only 'Switch'")
    if not isinstance(groups, Mapping):
        raise ConfigError("fusion switch key 'Switch' must be an object of groups")
    for group, entries in groups.items():
        key = f"Switch.{group}"
        if group not in SWITCH_GROUPS:
            raise ConfigError(f"fusion switch key '{key}': unknown group '{group}'; valid "
                              f"groups: {', '.join(SWITCH_GROUPS)}")
        if not isinstance(entries, Mapping):
            raise ConfigError(f"fusion switch key '{key}' must be an object of pass: on/off")
        for name, raw in entries.items():
            k = f"{key}.{name}"
            val = _value(raw, k)
            if name == "ALL":
                sw.all[group] = val
            elif _check_name(name, k, group, known, sw):
                sw.overrides[name] = val


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    """json object_pairs_hook: a key given twice is an error (json keeps the last silently)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ConfigError(f"fusion switch: key '{k}' is given twice in one object")
        out[k] = v
    return out


def _parse_lines(text: str, known: Mapping[str, PassInfo], sw: FusionSwitch) -> None:
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            raise ConfigError(f"fusion switch line {lineno}: '{line}' is not 'PassName:on|off'")
        name, raw = (s.strip() for s in line.split(":", 1))
        key = f"line {lineno} ({name})"
        if name in seen:
            raise ConfigError(f"fusion switch key '{key}': pass '{name}' is already set on "
                              f"line {seen[name]}")
        seen[name] = lineno
        val = _value(raw, key)
        if _check_name(name, key, None, known, sw):
            sw.overrides[name] = val


def _long_number_line(text: str) -> str:
    """" at line N" of the first number too long to convert, else ""."""
    m = re.search(r"\d{1000,}", text)
    return (f" at line {text.count(chr(10), 0, m.start()) + 1} (a number of "
            f"{len(m.group()):,} digits)") if m else ""


def _depth_hint(text: str) -> str:
    """How deep the brackets of `text` nest (roughly: brackets inside strings count too)."""
    depth = best = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return f"{best:,}"


def parse_fusion_switch(source: str | PathLike | Mapping | None,
                        known: Mapping[str, PassInfo]) -> FusionSwitch:
    """Parse a switch file (path; JSON or `Pass:on|off` lines), a dict (the JSON document, or a
    flat {pass: "on"|"off"}), or None (defaults). `known` maps the pipeline's pass names to
    PassInfo (`manager.load_fusion_switch` supplies the default pipeline's)."""
    sw = FusionSwitch()
    if source is None:
        return sw
    if isinstance(source, Mapping):
        sw.source = "dict"
        if "Switch" in source or any(k in SWITCH_GROUPS for k in source):
            _parse_json(source, known, sw)
        else:
            for name, raw in source.items():
                val = _value(raw, str(name))
                if _check_name(str(name), str(name), None, known, sw):
                    sw.overrides[str(name)] = val
        return sw
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"fusion switch file '{path}' does not exist")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"fusion switch file '{path}' is not UTF-8 text (byte "
                          f"{data[exc.start]:#04x} at offset {exc.start})") from None
    sw.source = str(path)
    try:
        if text.lstrip().startswith(("{", "[")):
            try:
                doc = json.loads(text, object_pairs_hook=_no_duplicates)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"invalid JSON at line {exc.lineno} column {exc.colno}: "
                                  f"{exc.msg}") from None
            except RecursionError:
                raise ConfigError(f"invalid JSON: brackets nested {_depth_hint(text)} deep, "
                                  f"too deep to parse (a switch file nests 3)") from None
            except ValueError as exc:   # e.g. an integer of more than 4300 digits
                raise ConfigError(f"invalid JSON{_long_number_line(text)}: "
                                  f"{str(exc).split(';')[0]}") from None
            _parse_json(doc, known, sw)
        else:
            _parse_lines(text, known, sw)
    except ConfigError as exc:
        msg = str(exc).removeprefix("fusion switch ").removeprefix(": ")
        raise ConfigError(f"fusion switch file '{path}': {msg}") from None
    return sw


__all__ = ["FusionSwitch", "PassInfo", "parse_fusion_switch", "CANN_UNMODELLED"]
