"""Pass attribution and the fusion advisor on the three models of issue 26's "must show".

    python bench/attribution.py          # ResNet-50 (910), BERT-large layer (910), 7B (910B)
    python bench/attribution.py --quick      # smaller sizes of the same three

For each model: the full pass table of `asim.attribute` (leave-one-out gain, cumulative gain in
stack order, their difference the interaction, tasks and bytes saved), then the advisor's top
candidate re-simulated against its prediction, and whether its values equal the unfused ops'.

Values at full size. A composite candidate's values are checked by `advise` on seeded inputs
of the group's own shapes; a group larger than `advice.VALUE_LIMIT` elements is checked without
its cube op on a random cube output, up to `advice.EPILOGUE_VALUE_LIMIT`. The BERT-large layer
at batch 32, sequence 512 has groups of 134M elements (its FFN output, 16384 x 4096 x 2), over
both limits, so this script raises the epilogue limit to `FULL_SIZE_LIMIT` for its runs: the
top candidate's values are then compared at full size, never skipped (the line says "equal" or
"DIFFER", and "not checked" would name the reason).
"""

from __future__ import annotations

import argparse
import sys
import time

import ascendsim as asim
import ascendsim.advice as advice

#: the epilogue value check's limit here: every group of the three full-size models (BERT-large
#: batch 32 x 512: 134M elements) is compared, not skipped
FULL_SIZE_LIMIT = 1 << 28


def models(quick: bool) -> list[tuple[str, asim.Graph, str]]:
    """(label, graph, chip) of the three models."""
    if quick:
        return [("ResNet-50 batch 1, 112x112", asim.models.resnet50(batch=1, image=112),
                 "ascend910"),
                ("BERT-large layer batch 4, seq 128", asim.models.bert_encoder_layer(
                    batch=4, seq_len=128, hidden=1024, heads=16, ffn=4096), "ascend910"),
                ("llama2-7b layer, prefill 256", asim.models.decoder(
                    "llama2-7b", layers=1, seq_len=256), "ascend910b")]
    return [("ResNet-50 batch 1", asim.models.resnet50(batch=1), "ascend910"),
            ("BERT-large layer batch 32, seq 512", asim.models.bert_encoder_layer(
                batch=32, seq_len=512, hidden=1024, heads=16, ffn=4096), "ascend910"),
            ("llama2-7b layer, prefill 1024", asim.models.decoder(
                "llama2-7b", layers=1, seq_len=1024), "ascend910b")]


def top_candidate(graph: asim.Graph, chip: str, adv) -> str:
    """The advisor's top candidate re-simulated: predicted vs re-simulated gain, values."""
    if not adv.candidates:
        return "advisor: no candidate pays"
    c = adv.candidates[0]
    if c.kind == "composite":
        again = asim.simulate(c.graph, chip, fusion=False).time_us
        call = "simulate(candidate.graph, fusion=False)"
    else:
        again = asim.simulate(graph, chip, fusion=c.fusion).time_us
        call = f"simulate(graph, fusion={c.fusion})"
    got = adv.fused_time_us - again
    values = {None: "not checked", True: "equal", False: "DIFFER"}[c.values_ok] \
        if c.kind == "composite" else "n/a (a switch: same ops)"
    how = f" ({c.detail})" if c.kind == "composite" and c.detail else ""
    return (f"advisor top candidate: {c.kind} {c.name}\n"
            f"  predicted gain {c.gain_us:.2f} us, re-simulated {got:.2f} us by {call}; "
            f"{'equal' if abs(got - c.gain_us) < 1e-6 else 'DIFFERENT'}\n"
            f"  values vs the unfused ops: {values}{how}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes of the three models")
    ap.add_argument("--instances", type=int, default=0,
                    help="also leave out up to N distinct fusion instances (0: passes only)")
    args = ap.parse_args(argv)
    advice.EPILOGUE_VALUE_LIMIT = max(advice.EPILOGUE_VALUE_LIMIT, FULL_SIZE_LIMIT)
    for label, graph, chip in models(args.quick):
        t0 = time.perf_counter()
        att = asim.attribute(graph, chip, instances=args.instances > 0,
                             max_instances=max(args.instances, 1))
        adv = asim.advise(graph, chip)
        print(f"== {label} on {chip}")
        print(att.table())
        if args.instances:
            print(att.instance_table(limit=args.instances))
        print(top_candidate(graph, chip, adv))
        print(f"({att.runs} attribution simulations, {time.perf_counter() - t0:.0f} s)\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    from sections import main_or_markdown

    sys.exit(main_or_markdown("attribution", main))
