"""Block detail inside long tiles (sim/coalesce.py, issue 15.1): the engine with and without
chunk tiles, in one process, and block vs tile detail on the ops it chunks.

    python bench/unit_block.py                       # both tables
    python bench/unit_block.py --cases resnet_step   # the engine table for some cases only
    python bench/unit_block.py --no-agreement        # the engine table only

Engine table: for each training step of `pipeline_worker.CASES` (shapes only, block detail,
ascend910), the program is lowered once and `Engine(program).run()` is timed in CPU seconds
(`time.process_time()`; the best of `--repeat`, the two forms alternating so that both meet the
same machine load) with `coalesce.ENABLED` off (the engine before this change) and on: SimPy
events, CPU seconds, simulated cycles, and the tasks whose duration moved.
Agreement table: the weight gradients (Conv2DBackpropFilter) of the distinct ResNet-50 v1.5
layers at batch 256 and GEMMs of long K with few output tiles, each alone: tile detail, block
detail without and with chunk tiles (cycles, events).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _engine_table(cases: list[str], repeat: int) -> None:
    sys.path.insert(0, str(HERE))
    from pipeline_worker import CASES, CHIP

    import ascendsim as asim
    from ascendsim.lower import lower
    from ascendsim.sim import Engine, coalesce

    print("| case | events off | events on | engine CPU s off | on | cycles off | cycles on "
          "| moved tasks (largest) |")
    print("|---|---|---|---|---|---|---|---|")
    for case in cases:
        _, build, options = CASES[case]
        graph = asim.optimize(build(False), CHIP, **options).graph
        program = lower(graph, asim.get_chip(CHIP), detail="block")
        runs: dict[bool, list] = {False: [], True: []}
        for _ in range(repeat):
            for on in (False, True):
                coalesce.ENABLED = on
                engine = Engine(program)
                c0 = time.process_time()
                trace = engine.run()
                runs[on].append((time.process_time() - c0, engine.events, trace))
        coalesce.ENABLED = True
        off, on = runs[False][0][2], runs[True][0][2]
        d_off = {t.op_name: t.duration for t in off.tasks}
        moved = sorted(((t.duration / d_off[t.op_name] - 1, t.op_name) for t in on.tasks
                        if d_off[t.op_name] and t.duration != d_off[t.op_name]),
                       key=lambda x: -abs(x[0]))
        top = ", ".join(f"{n} {100 * d:+.1f}%" for d, n in moved[:2])
        print(f"| {case} | {runs[False][0][1]} | {runs[True][0][1]} "
              f"| {min(r[0] for r in runs[False]):.2f} | {min(r[0] for r in runs[True]):.2f} "
              f"| {off.total_cycles} | {on.total_cycles} "
              f"({100 * (on.total_cycles / off.total_cycles - 1):+.3f}%) "
              f"| {len(moved)} ({top}) |", flush=True)


def _wgrad(xshape, wshape, attrs):
    import ascendsim as asim

    fwd = asim.Graph("fwd")
    y = fwd.conv(fwd.input("x", xshape, "float16"), fwd.input("w", wshape, "float16"), **attrs)
    g = asim.Graph("wgrad")
    x = g.input("x", xshape, "float16")
    dy = g.input("dy", fwd.values[y.name].shape, "float16")
    g.output(g.conv_backprop_filter(x, dy, filter_shape=list(wshape), **attrs))
    return g


def _agreement_table(batch: int) -> None:
    import ascendsim as asim
    from ascendsim.sim import coalesce

    cases = []
    seen = set()
    ref = asim.models.resnet50(batch=1)
    for n in ref.nodes:
        if n.op_type != "Conv":
            continue
        x, w = ref.value(n.inputs[0]).shape, ref.value(n.inputs[1]).shape
        attrs = {"strides": n.attrs["strides"], "pads": n.attrs["pads"]}
        key = (x[1:], w, tuple(attrs["strides"]), tuple(attrs["pads"]))
        if key not in seen:
            seen.add(key)
            cases.append((f"wgrad {n.name} b{batch}", lambda x=(batch, *x[1:]), w=w, a=attrs:
                          _wgrad(x, w, a)))
    for m, k, n in [(512, 32768, 512), (1024, 32768, 1024), (256, 65536, 512)]:
        def gemm(m=m, k=k, n=n):
            g = asim.Graph("gemm")
            g.output(g.matmul(g.input("a", (m, k), "float16"), g.input("b", (k, n), "float16")))
            return g
        cases.append((f"gemm {m}x{k}x{n}", gemm))
    print("\n| op | tile cycles | tile events | block (no chunks) | events | block (chunks) "
          "| events |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for name, build in cases:
        tile = asim.simulate(build(), detail="tile", fusion=False)
        coalesce.ENABLED = False
        old = asim.simulate(build(), detail="block", fusion=False)
        coalesce.ENABLED = True
        new = asim.simulate(build(), detail="block", fusion=False)
        e_old, e_new = (old.cycles / tile.cycles - 1, new.cycles / tile.cycles - 1)
        worst = max(worst, abs(e_new))
        print(f"| {name} | {tile.cycles} | {tile.events} | {100 * e_old:+.2f}% | {old.events} "
              f"| {100 * e_new:+.2f}% | {new.events} |", flush=True)
    print(f"\nlargest |block - tile| with chunks: {100 * worst:.2f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*",
                    default=["resnet_step", "resnet_step_ub_off", "bert_step", "bert_step_gk"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256, help="batch of the weight gradients")
    ap.add_argument("--no-agreement", action="store_true")
    args = ap.parse_args()
    _engine_table(args.cases, args.repeat)
    if not args.no_agreement:
        _agreement_table(args.batch)


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("unit_block", main))
