"""LayerNorm on the A2 / A3 runs as CANN's TBE LayerNormV3 (impl/dynamic/layer_norm_v3.py)
wherever aclnnLayerNorm does not pick V4's SingleRead template: rows bound to cores, rstd on
the per-row variance, and a row over the UB budget keeps x - mean in a GM workspace."""

import re

import ascendsim as asim


def _ln(rows: int, width: int, chip: str, dtype: str = "float32"):
    """The vector line of `explain`, the task's block count and its time, us."""
    g = asim.Graph("ln")
    x = g.input("x", shape=(rows, width), dtype=dtype)
    gamma = g.input("gamma", shape=(width,), dtype=dtype)
    beta = g.input("beta", shape=(width,), dtype=dtype)
    g.output(g.layer_normalization(x, gamma, beta, axis=-1, epsilon=1e-5))
    res = asim.simulate(g, chip=chip, fusion=False)
    task = res.trace.tasks[0]
    text = res.explain(task.op_name)
    return text, task.block_dim, res.trace.us(task.duration)


def test_a2_layer_norm_is_v3_with_rstd_per_row():
    text, blocks, _ = _ln(4096, 768, "ascend910b4")
    assert "layer_norm_v3.py" in text
    assert "vsqrt [per row]" in text and "vexp" not in text and "vln" not in text
    assert "workspace schedule" not in text        # a 3 KB row fits the UB
    assert blocks == 40


def test_rows_are_bound_to_cores():
    _, blocks, _ = _ln(16, 8192, "ascend910b4")
    assert blocks == 16                             # one row per core, never shared


def test_a_row_over_the_budget_takes_the_workspace_schedule():
    text, blocks, _ = _ln(16, 1 << 20, "ascend910b4")
    assert "workspace schedule" in text and blocks == 16
    num, unit = re.search(r"([0-9.]+) (MB|GB) moved", text).groups()
    moved = float(num) * (1e-3 if unit == "MB" else 1.0)
    # x read twice, x - mean written once and read twice (fp32), y written: 6 passes of the
    # 64 MiB tensor, where a single-read kernel moves 2 (x in, y out)
    once = 16 * (1 << 20) * 4 / 1e9
    assert 5.5 * once < moved < 6.5 * once


def test_v4_single_read_and_the_first_generation_910_are_unchanged():
    text, _, _ = _ln(64, 4096, "ascend910b4", dtype="bfloat16")
    assert "LayerNormV4 SingleRead" in text
    text, _, _ = _ln(4096, 768, "ascend910")
    assert "layer_norm_v3.py" not in text
