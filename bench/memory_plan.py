"""Peak live device memory of every built-in model at its default sizes (the memory plan of
`simulate`, `Result.memory`), fused as the CLI runs it, against each chip's HBM.

    python bench/memory_plan.py                   # every model, every built-in chip
    python bench/memory_plan.py --models resnet50 bert_base --chips ascend910

Only optimisation and lowering run (no engine). A row says whether the model fits the chip's
`hbm_bytes`.
"""

from __future__ import annotations

import argparse
import inspect
import time

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import lower
from ascendsim.lower.memory import memory_plan

MIB = 2**20


def defaults(name: str) -> str:
    """The builder's default size arguments, e.g. 'batch=32, seq_len=512'."""
    params = inspect.signature(asim.models.BUILDERS[name]).parameters
    sizes = [f"{k}={p.default}" for k, p in params.items()
             if isinstance(p.default, int) and not isinstance(p.default, bool) and k != "seed"]
    return ", ".join(sizes) or "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=asim.models.names())
    ap.add_argument("--chips", nargs="*", default=["ascend910", "ascend910b", "ascend310"])
    args = ap.parse_args()
    print("| model | default sizes | chip | peak MiB | weights | activations | workspace "
          "| inputs/outputs | no reuse MiB | HBM MiB | fits | wall s |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for name in args.models:
        for chip_name in args.chips:
            chip = get_chip(chip_name)
            t = time.perf_counter()
            try:
                model = asim.models.get(name)
            except asim.AscendSimError as exc:       # a builder that needs arguments
                print(f"| {name} | (needs arguments: {exc}) | {chip_name} |" + " |" * 9)
                continue
            g = asim.optimize(model, chip).graph
            plan = memory_plan(g, lower(g, chip))
            wall = time.perf_counter() - t
            c = plan.by_category
            print(f"| {name} | {defaults(name)} | {chip_name} | {plan.peak_bytes / MIB:,.1f} | "
                  f"{c['weights'] / MIB:,.1f} | {c['activations'] / MIB:,.1f} | "
                  f"{c['workspace'] / MIB:,.1f} | {c['inputs_outputs'] / MIB:,.1f} | "
                  f"{plan.no_reuse_bytes / MIB:,.1f} | {chip.hbm_bytes / MIB:,.0f} | "
                  f"{'yes' if plan.peak_bytes <= chip.hbm_bytes else 'NO'} | {wall:.0f} |",
                  flush=True)


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("memory_plan", main))
