"""Count the corpus rows behind each line of docs/corpus.md's coverage table (issue 22 item 2).

The table lists the op types that take 1% or more of simulated device time in a shipped
workload. A row counts for a line when its workload's ``op`` or ``cann_op`` is one of the
line's kernel names (`LINES`: the op type itself, the CANN kernels that run it, and for a
fused line the unfused kernels named in its parentheses). Validation rows and their
independent sources (`CorpusRow.source_repo`) are counted, and pending rows apart. The rule:
at least 3 validation rows from at least 2 sources, else the op type is listed as unvalidated.

    python bench/coverage_counts.py            # a markdown table
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from ascendsim.validation.corpus import CorpusRow, load_corpus

#: table line -> the workload op / cann_op names whose rows count for it
LINES: dict[str, tuple[str, ...]] = {
    "MatMul": ("MatMul",),
    "ConvRelu": ("ConvRelu",),
    "Where": ("Where", "Select", "SelectV2"),
    "Conv2DBackpropFilterCast": ("Conv2DBackpropFilter",),
    "AddRelu": ("AddRelu",),
    "Gather": ("Gather", "GatherV2"),
    "Conv": ("Conv", "Conv2D"),
    "ApplyAdam": ("ApplyAdam", "ApplyAdamW"),
    "MatMulGelu": ("MatMulGelu",),
    "TransData": ("TransData",),
    "ConvBNTrainingReduce, BNTrainingUpdateGrad, BNTrainingReduceGrad": (
        "ConvBNTrainingReduce", "FusionOp_Conv2D_BNTrainingReduce", "BNTrainingUpdateGrad",
        "BNTrainingReduceGrad"),
    "AddLayerNormalization (LayerNormalization)": (
        "AddLayerNormalization", "AddLayerNorm", "LayerNormalization", "LayerNorm"),
    "IncreFlashAttention": ("IncreFlashAttention",),
    "FusedMulAddN": ("FusedMulAddN",),
    "Transpose": ("Transpose", "TransposeD", "ConfusionTransposeD"),
    "Softmax": ("Softmax",),
    "ApplyMomentum": ("ApplyMomentum",),
    "Cast": ("Cast",),
    "Gemm": ("Gemm",),
    "Mul": ("Mul",),
    "FlashAttentionScore": ("FlashAttentionScore",),
    "MaxPool (MaxPoolWithArgmax, MaxPoolGradWithArgmax)": (
        "MaxPool", "MaxPoolWithArgmax", "MaxPoolGradWithArgmax"),
    "SwiGlu": ("SwiGlu",),
    "ScatterND (KvCacheAppend, ScatterNdUpdate)": ("ScatterND", "ScatterNdUpdate", "KvCacheAppend"),
    "RmsNorm": ("RmsNorm",),
    "Add": ("Add",),
}


def counts(rows: Iterable[CorpusRow]) -> dict[str, tuple[int, int, int]]:
    """Per table line: (validation rows, independent sources of those rows, pending rows)."""
    out: dict[str, tuple[int, int, int]] = {}
    rows = [r for r in rows if r.workload.get("kind", "op") == "op"]
    for line, names in LINES.items():
        mine = [r for r in rows
                if r.workload.get("op") in names or r.workload.get("cann_op") in names]
        valid = [r for r in mine if r.role == "validation"]
        out[line] = (len(valid), len({r.source_repo for r in valid}),
                     sum(r.role == "pending" for r in mine))
    return out


def main() -> int:
    print("| Op type | Validation rows | Sources | Pending | Meets 3 rows / 2 sources |")
    print("|---|---|---|---|---|")
    for line, (n, sources, pending) in counts(load_corpus()).items():
        met = "yes" if n >= 3 and sources >= 2 else "no"
        print(f"| {line} | {n} | {sources} | {pending} | {met} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
