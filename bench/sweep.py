"""A 100-point design-space sweep on a local Dask cluster (target: under 5 minutes).

    python bench/sweep.py                     # 2-worker LocalCluster, writes the heat map
    python bench/sweep.py --compare-default   # also run the points on the default process
                                              # pool and check that the numbers are identical

ResNet-50 batch 32 (forward, shapes only, block detail) on the Ascend 910 over
UB size (5 values) x HBM bandwidth (10 values) x fusion on/off = 100 points. Prints the
simulated time per point as two tables (fusion on, fusion off), the wall time, and writes
`docs/img/sweep_heatmap.png`. Rows go to a CSV in a temporary folder (a fresh sweep each run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ascendsim as asim

UB_KIB = [64, 128, 192, 256, 512]
HBM_GBS = [400, 600, 800, 1000, 1200, 1400, 1600, 1800, 2000, 2200]
GRID = {"ub_bytes": [k * 1024 for k in UB_KIB],
        "hbm_bandwidth_bytes_per_s": [g * 1e9 for g in HBM_GBS]}
HEATMAP = Path(__file__).resolve().parent.parent / "docs" / "img" / "sweep_heatmap.png"


def _table(res, fusion: bool) -> str:
    cells = {(r["ub_bytes"], r["hbm_bandwidth_bytes_per_s"]): r["time_us"]
             for r in res.rows if r["fusion"] is fusion}
    lines = [f"fusion={fusion}: simulated time (us), UB (KiB) down, HBM (GB/s) across",
             "UB\\HBM " + "".join(f"{g:>8d}" for g in HBM_GBS)]
    for ub in UB_KIB:
        lines.append(f"{ub:>6d} " + "".join(f"{cells[(ub * 1024, g * 1e9)]:8.0f}"
                                             for g in HBM_GBS))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--compare-default", action="store_true",
                    help="rerun on the default executor and compare every number")
    args = ap.parse_args()
    from dask.distributed import Client, LocalCluster

    graph = asim.models.resnet50(batch=32)
    tmp = Path(tempfile.mkdtemp(prefix="asim-sweep-"))
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        t0 = time.perf_counter()
        res = asim.sweep(graph, "ascend910", grid=GRID, fusion=[True, False],
                         executor=client.get_executor(), out=tmp / "sweep.csv")
        wall = time.perf_counter() - t0
    print(_table(res, True))
    print()
    print(_table(res, False))
    print()
    print(f"{len(res)} points on a {args.workers}-worker Dask LocalCluster: {wall:.1f} s wall "
          f"({wall / len(res):.2f} s per point), {res.reused} reused an optimised graph, "
          f"{len(res.errors)} errors")
    best = min(res.rows, key=lambda r: r["time_us"])
    print(f"fastest: UB {best['ub_bytes'] // 1024} KiB, HBM "
          f"{best['hbm_bandwidth_bytes_per_s'] / 1e9:.0f} GB/s, fusion={best['fusion']}: "
          f"{best['time_us']:.0f} us")
    HEATMAP.parent.mkdir(parents=True, exist_ok=True)
    res.plot_heatmap("hbm_bandwidth_bytes_per_s", "ub_bytes", value="time_us", path=HEATMAP)
    print(f"heat map: {HEATMAP}")
    if args.compare_default:
        t0 = time.perf_counter()
        local = asim.sweep(graph, "ascend910", grid=GRID, fusion=[True, False],
                           out=tmp / "local.csv")
        same = local.rows == res.rows
        print(f"default executor: {time.perf_counter() - t0:.1f} s wall; identical numbers: "
              f"{same}")
        if not same:
            raise SystemExit("the default executor gave different numbers")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("sweep", main))
