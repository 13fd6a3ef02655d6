"""One pipeline measurement in a process of its own (run by `sim_speed.py`, also for a baseline
revision: it uses only the public API both sides have).

    python bench/pipeline_worker.py CASE     # prints one JSON line

CASE is a key of `CASES`. The process first runs a small warm-up of the same kind (numba
compiles or loads its kernel cache there, not in the timed run), then times building the
graph, `ascendsim.optimize` and `ascendsim.simulate(..., fusion=False)` (shapes only, block
detail, ascend910, sink), and reports the process's peak resident memory (ru_maxrss).
"""

from __future__ import annotations

import json
import resource
import sys
import time

import ascendsim as asim

CHIP = "ascend910"
UB_OFF = {"fusion_switch": {"Switch": {"UBFusion": {"ALL": "off"}}}}


def _bert(small: bool):
    if small:
        return asim.models.bert_training_step(batch=2, seq_len=128, layers=1)
    # batch 32, seq 512 needs 40.4 GiB (> the 910's 32 GiB): simulated as the what-if the
    # issue's baseline used, with check_capacity=False
    return asim.models.bert_training_step(batch=32, seq_len=512, layers=24)


def _resnet(small: bool):
    return asim.models.resnet50_training_step(batch=2 if small else 256)


def _resnet_fwd(small: bool):
    return asim.models.resnet50(batch=2 if small else 32)


def _bert_fwd(small: bool):
    if small:
        return asim.models.bert_large(batch=1, seq_len=128)
    return asim.models.bert_large(batch=32, seq_len=512)


#: case -> (label, builder, optimize options)
CASES = {
    "resnet_fwd": ("ResNet-50 forward (batch 32), default fusions", _resnet_fwd, {}),
    "bert_fwd": ("BERT-large forward (24 layers, batch 32, seq 512), default fusions",
                 _bert_fwd, {}),
    "bert_step": ("BERT-large training step (24 layers, batch 32, seq 512), default fusions",
                  _bert, {}),
    "bert_step_gk": ("BERT-large training step (24 layers, batch 32, seq 512), graph kernels",
                     _bert, {"graph_kernel": True}),
    "resnet_step": ("ResNet-50 training step (batch 256), default fusions", _resnet, {}),
    "resnet_step_ub_off": ("ResNet-50 training step (batch 256), UB fusion off", _resnet,
                           UB_OFF),
}


def _run(build, options: dict, small: bool) -> dict:
    t0 = time.perf_counter()
    graph = build(small)
    t1 = time.perf_counter()
    opt = asim.optimize(graph, CHIP, **options)
    t2 = time.perf_counter()
    res = asim.simulate(opt.graph, CHIP, fusion=False, detail="block", check_capacity=False)
    t3 = time.perf_counter()
    return {"build_s": t1 - t0, "optimize_s": t2 - t1, "simulate_s": t3 - t2,
            "cycles": res.cycles, "tasks": len(res.trace.tasks), "events": res.events,
            "nodes_in": len(graph.nodes), "nodes_out": len(opt.graph.nodes)}


def main() -> None:
    case = sys.argv[1]
    _, build, options = CASES[case]
    _run(build, options, small=True)
    out = _run(build, options, small=False)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["ascendsim"] = asim.__file__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
