"""Data-parallel scaling: step time, communication share and scaling efficiency on 1-64 chips.

    python bench/data_parallel.py                  # ResNet-50 (batch 256) and BERT-large
                                                   # (batch 32, seq 512) steps on the 910
    python bench/data_parallel.py --chip ascend910b
    python bench/data_parallel.py --quick          # ResNet-50 batch 32, BERT-large batch 4

Shape only, block detail, fusion on. Each step is simulated once on one chip (per-chip batch as
given: weak scaling); the world sizes only add HCCL's all-reduce of the gradients (25 MiB
buckets, overlapping the backward pass) over the chip's interconnect file.
"""

from __future__ import annotations

import argparse
import time

import ascendsim as asim
from ascendsim.multichip import simulate_data_parallel

WORLDS = (1, 8, 16, 64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="ascend910")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    models = {
        "ResNet-50 train": lambda: asim.models.resnet50_training_step(
            batch=32 if args.quick else 256),
        "BERT-large train": lambda: asim.models.bert_large_training_step(
            batch=4 if args.quick else 16, seq_len=512),   # 32 does not fit a 910's HBM
    }
    print(f"{'model':<18}{'chips':>6}{'step ms':>10}{'compute ms':>12}{'comm ms':>10}"
          f"{'exposed ms':>12}{'comm share':>12}{'efficiency':>12}{'grad MiB':>10}")
    for name, build in models.items():
        t0 = time.perf_counter()
        graph = build()
        for n in WORLDS:
            try:
                r = simulate_data_parallel(graph, n, args.chip)
            except asim.AscendSimError as e:          # report it, go on with the next model
                print(f"{name:<18}{n:>6}  failed: {type(e).__name__}: {e}")
                break
            print(f"{name:<18}{n:>6}{r.step_us / 1e3:>10.2f}{r.compute_us / 1e3:>12.2f}"
                  f"{r.comm_us / 1e3:>10.2f}{r.exposed_comm_us / 1e3:>12.2f}"
                  f"{100 * r.comm_share:>11.1f}%{100 * r.scaling_efficiency:>11.1f}%"
                  f"{r.gradient_bytes / 2 ** 20:>10.1f}")
        else:
            print(f"  ({name}: {len(r.buckets)} buckets, wall {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("data_parallel", main))
