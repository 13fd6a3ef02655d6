"""The regression check of simulated figures: cycles, task records and intervals of 108 cases
(3 models x 3 chips x fused/as given x block/tile detail x sink/host/eager launch), each
reduced to a digest and held against the golden file `tests/data/regression_digests.json`.

A change that must not move any figure (a refactor, a speed-up) keeps every digest; a change
that moves figures on purpose rewrites the file (`--write`) and says in its commit which cases
moved and why. `tests/sim/test_regression_digests.py` runs the check.

    python bench/regression.py            # compare with the golden file (exit 1 on a change)
    python bench/regression.py --write    # rewrite the golden file
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import time
from pathlib import Path

import ascendsim as asim

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "data" / "regression_digests.json"

#: (case name, builder name, builder keywords): a conv net, a transformer layer, a decoder step
MODELS: tuple[tuple[str, str, dict], ...] = (
    ("resnet_b2", "resnet", {"batch": 2}),
    ("bert_layer", "bert_encoder_layer", {"batch": 8, "seq_len": 128}),
    ("decoder_decode", "decoder", {"phase": "decode", "batch": 4, "context_len": 256}),
)
CHIPS = ("ascend910", "ascend910b", "ascend310")
FUSION = (True, False)
DETAILS = ("block", "tile")
MODES = ("sink", "host", "eager")


def case_names() -> list[str]:
    return [name for name, *_ in cases()]


def cases() -> list[tuple[str, str, dict, str, bool, str, str]]:
    out = []
    for (name, builder, kw), chip, fused, detail, mode in itertools.product(
            MODELS, CHIPS, FUSION, DETAILS, MODES):
        key = f"{name}/{chip}/{'fused' if fused else 'given'}/{detail}/{mode}"
        out.append((key, builder, kw, chip, fused, detail, mode))
    return out


def digest(res: asim.Result) -> dict:
    """Cycles, task count and a SHA-1 of every task record and every interval."""
    h = hashlib.sha1()
    for t in res.trace.tasks:
        h.update(repr((t.task_id, t.stream_id, t.op_name, t.op_type, t.task_type, t.start, t.end,
                       t.launch_start, t.wait, t.block_dim, t.flops,
                       sorted(t.traffic.items()), sorted(t.pipe_cycles.items()),
                       t.roofline_cycles)).encode())
    tasks = h.hexdigest()
    h = hashlib.sha1()
    for iv in res.trace.intervals:
        h.update(repr(tuple(iv)).encode())
    return {"cycles": res.cycles, "tasks": len(res.trace.tasks), "task_digest": tasks,
            "interval_digest": h.hexdigest(), "intervals": len(res.trace.intervals)}


def run_case(builder: str, kw: dict, chip: str, fused: bool, detail: str, mode: str) -> dict:
    graph = asim.models.get(builder, **kw)
    res = asim.simulate(graph, chip=chip, fusion=fused, detail=detail, mode=mode)
    return digest(res)


def measure(only: str | None = None) -> dict[str, dict]:
    return {key: run_case(*rest) for key, *rest in cases() if only is None or only in key}


def compare(got: dict[str, dict], want: dict[str, dict]) -> list[str]:
    """One line per case whose figures differ from the golden file (or are missing there)."""
    lines = []
    for key, fig in got.items():
        ref = want.get(key)
        if ref is None:
            lines.append(f"{key}: not in the golden file")
        elif fig != ref:
            moved = [f"{k} {ref.get(k)} -> {v}" for k, v in fig.items() if ref.get(k) != v]
            lines.append(f"{key}: " + "; ".join(moved))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the golden file")
    ap.add_argument("--only", help="run only the cases whose name contains this text")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    got = measure(args.only)
    took = time.perf_counter() - t0
    if args.write:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} cases to {GOLDEN} ({took:.1f} s)")
        return 0
    diff = compare(got, json.loads(GOLDEN.read_text()))
    for line in diff:
        print(line)
    print(f"{len(got) - len(diff)} of {len(got)} cases identical ({took:.1f} s)")
    return 1 if diff else 0


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("regression", main))
