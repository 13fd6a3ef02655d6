"""Run every ```python block of README.md, in order, in one namespace, as a reader would after
the README's install (`pip install -e ".[test]"` holds every extra a snippet names).

A block preceded by `<!-- readme-check: skip (REASON) -->` is not run (a Dask cluster); the
files the snippets open stand for the reader's own (`op_summary.csv`: the CANN 8 msprof
sample; `model.onnx`: a small CNN classifier) and are written to a temporary folder, where
the snippets run.

    python tests/readme_snippets.py [README.md]     # exit 0: every snippet ran
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"<!--\s*readme-check:\s*skip\s*\((.*?)\)\s*-->")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def snippets(text: str) -> list[tuple[int, str, str | None]]:
    """(line, code, skip reason or None) of every ```python block."""
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[:m.start()].rstrip().rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        out.append((line, m.group(1), skip.group(1) if skip else None))
    return out


def write_model_onnx(path: Path) -> None:
    """A small CNN classifier (Conv, BatchNorm, Relu, GlobalAveragePool, Flatten, Gemm)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)

    inits = [init("w", 16, 3, 3, 3), init("scale", 16), init("bias", 16), init("mean", 16),
             numpy_helper.from_array(np.ones(16, np.float32), "var"),
             init("fc_w", 16, 10), init("fc_b", 10)]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"],
                              ["b"], name="bn"),
             helper.make_node("Relu", ["b"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc")]
    graph = helper.make_graph(
        nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 10])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def main(argv: list[str]) -> int:
    readme = Path(argv[1]) if len(argv) > 1 else ROOT / "README.md"
    blocks = snippets(readme.read_text(encoding="utf-8"))
    os.environ.setdefault("MPLBACKEND", "Agg")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ROOT / "tests" / "data" / "msprof" / "op_summary_cann8_910b.csv",
                    Path(tmp) / "op_summary.csv")
        write_model_onnx(Path(tmp) / "model.onnx")
        cwd = os.getcwd()
        os.chdir(tmp)
        namespace: dict = {"__name__": "__readme__"}
        try:
            for line, code, skip in blocks:
                where = f"{readme.name}:{line}"
                if skip:
                    print(f"skip {where} ({skip})")
                    continue
                t0 = time.perf_counter()
                try:
                    exec(compile(code, where, "exec"), namespace)  # noqa: S102
                except Exception:
                    failed += 1
                    print(f"FAIL {where}")
                    traceback.print_exc()
                    continue
                print(f"ok   {where} ({time.perf_counter() - t0:.1f} s)")
        finally:
            os.chdir(cwd)
    print(f"{len(blocks) - failed} of {len(blocks)} README snippets ran" if not failed else
          f"{failed} README snippet(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
