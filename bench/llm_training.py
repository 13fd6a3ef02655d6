"""Decoder training steps on the 910B: the exported graph (primitive ops) vs its graph-fused form
(RmsNorm, RotaryMul, SwiGlu, FlashAttentionScore; backward RmsNormGrad, RotaryMulGrad,
SwiGluGrad, FlashAttentionScoreGrad, GroupedMatmul / MoE routing gradients).

Both steps are `training_step(model, "softmax_cross_entropy", "momentum")` (mixed precision,
dynamic loss scale) simulated with the default fusions (`fusion=True`, detail "block", sink);
the fused model is `optimize(model, fusion_switch=UB off).graph` (the graph-fusion passes
only, as a model written with torch_npu's fused ops). Prints the simulated step time, task
count and the wall time of building + simulating each step.

    python bench/llm_training.py            # tiny dense + MoE (batch 2, seq 8) and
                                            # qwen2-0.5b with 2 layers (batch 4, seq 512)
    python bench/llm_training.py --quick    # the tiny models only
"""

from __future__ import annotations

import argparse
import time

import ascendsim as asim

CHIP = "ascend910b"
TINY = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2}
GRAPH_FUSION_ONLY = {"Switch": {"UBFusion": {"ALL": "off"}}}


def step_time(preset: str, batch: int, seq: int, fused: bool, **overrides) -> tuple:
    t0 = time.perf_counter()
    g = asim.models.decoder(preset, batch=batch, seq_len=seq, **overrides)
    if fused:
        g = asim.optimize(g, CHIP, fusion_switch=GRAPH_FUSION_ONLY).graph
    step = asim.training_step(g, "softmax_cross_entropy", "momentum")
    res = asim.simulate(step, CHIP, detail="block", check_capacity=False)
    return res.time_us, len(res.trace.tasks), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    cases = [("tiny-gqa-1m", 2, 8, TINY), ("tiny-moe-1m", 2, 8, TINY)]
    if not args.quick:
        cases.append(("qwen2-0.5b", 4, 512, {"layers": 2}))
    print(f"{'model':<34} {'unfused us':>11} {'fused us':>10} {'speed-up':>8} "
          f"{'tasks':>11} {'wall s':>11}")
    for preset, batch, seq, over in cases:
        plain = step_time(preset, batch, seq, False, **over)
        fused = step_time(preset, batch, seq, True, **over)
        label = f"{preset} {over.get('layers', '')}L b{batch} s{seq}"
        print(f"{label:<34} {plain[0]:>11.1f} {fused[0]:>10.1f} {plain[0] / fused[0]:>7.2f}x "
              f"{plain[1]:>5}/{fused[1]:<5} {plain[2]:>5.1f}/{fused[2]:<5.1f}")


if __name__ == "__main__":
    from sections import main_or_markdown

    raise SystemExit(main_or_markdown("llm_training", main))
