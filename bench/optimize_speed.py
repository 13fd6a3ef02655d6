"""CPU time of building and optimising the pipeline cases, and a digest of each optimised
graph, so two revisions can be compared in one run (the digests must be equal: a speed-up
of the passes may not change a graph).

    python bench/optimize_speed.py [CASE ...]            # one JSON line per case
    python bench/optimize_speed.py --table [CASE ...]    # a markdown table instead
    PYTHONPATH=/path/to/other/checkout python bench/optimize_speed.py ...

Each case runs in a process of its own (after a small warm-up of the same kind), `reps`
times; the figures are the least CPU time (`time.process_time`: other processes on the
machine inflate wall time) of the model builder and of `ascendsim.optimize`. The digest is a
SHA-1 over the optimised graph's nodes in order (name, op type, inputs, outputs, attributes,
fused subgraphs recursively), its values (name, shape, dtype, layout), inputs, outputs and
constant names.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import ascendsim as asim

sys.path.insert(0, str(Path(__file__).parent))
from pipeline_worker import CASES, CHIP  # noqa: E402

DEFAULT_CASES = ("bert_step", "bert_step_gk", "resnet_step", "resnet_step_ub_off")


def _canon(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, hashlib.sha1(np.ascontiguousarray(x).tobytes())
                .hexdigest())
    if isinstance(x, dict):
        return ("d", tuple((k, _canon(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_canon(v) for v in x))
    if isinstance(x, asim.Graph):
        return graph_canon(x)
    if isinstance(x, (int, float, str, bool, type(None), np.generic)):
        return repr(x)
    return (type(x).__name__, repr(x))


def graph_canon(g: asim.Graph) -> tuple:
    """The graph as nested tuples (node order kept; values sorted by name: a fused node's
    subgraph fills its value map in set order)."""
    nodes = tuple((n.name, n.op_type, n.inputs, n.outputs, _canon(n.attrs),
                   graph_canon(n.subgraph) if n.subgraph is not None else None)
                  for n in g.nodes)
    values = tuple(sorted((k, v.shape, v.dtype, v.layout) for k, v in g.values.items()))
    return (g.name, nodes, values, tuple(g.inputs), tuple(g.outputs), tuple(sorted(g.constants)))


def digest(g: asim.Graph) -> str:
    return hashlib.sha1(pickle.dumps(graph_canon(g))).hexdigest()


def measure(case: str, reps: int = 3) -> dict:
    _, build, options = CASES[case]
    asim.optimize(build(True), CHIP, **options)
    builds, opts = [], []
    for _ in range(reps):
        t0 = time.process_time()
        graph = build(False)
        t1 = time.process_time()
        opt = asim.optimize(graph, CHIP, **options)
        t2 = time.process_time()
        builds.append(t1 - t0)
        opts.append(t2 - t1)
    return {"case": case, "build_cpu_s": round(min(builds), 3),
            "optimize_cpu_s": round(min(opts), 3), "nodes_out": len(opt.graph.nodes),
            "digest": digest(opt.graph), "ascendsim": asim.__file__}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--one"]:
        print(json.dumps(measure(args[1])))
        return
    table = "--table" in args
    args = [a for a in args if a != "--table"]
    if table:
        print("| case | build CPU s | optimise CPU s | nodes out | graph digest |")
        print("|---|---:|---:|---:|---|")
    for case in args or DEFAULT_CASES:
        out = subprocess.run([sys.executable, __file__, "--one", case], check=True,
                             capture_output=True, text=True).stdout
        line = out.strip().splitlines()[-1]
        if table:
            r = json.loads(line)
            line = (f"| {r['case']} | {r['build_cpu_s']:.3f} | {r['optimize_cpu_s']:.3f} | "
                    f"{r['nodes_out']:,} | `{r['digest'][:12]}` |")
        print(line, flush=True)


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("optimize_speed", main))
