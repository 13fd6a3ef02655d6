"""The host cost of a torch_npu fused-attention call (chip figure
eager_fused_attention_launch_us, 910B: calibrated on the eight pub-ptojit-910b2-fia-* rows,
every row of their table): eager_call rows whose cann_op is FusedInferAttentionScore or
FlashAttentionScore (torch_npu's npu_fusion_attention, G) launch at that cost, so a loop of small
FIA calls is host-bound at ~72.6 us per call, a long one stays
kernel-bound, and other ops keep eager_op_launch_us where the chip gives one (the 910B's:
torch.add's measured 12.142 us) and fall back to host_launch_us where it does not."""

import pytest

from ascendsim.hw import get_chip
from ascendsim.validation.corpus import check_row, load_corpus
from ascendsim.validation.validate import EAGER_LAUNCH_FIGURES, eager_launch_us, validate_rows


def _fa_row(s0, s1, cann_op="FusedInferAttentionScore", **changes):
    def t(s):
        return {"shape": [1, 1, s, 128], "dtype": "float16", "format": "ND"}
    w = {"kind": "op", "op": "FlashAttentionScore", "cann_op": cann_op,
         "inputs": [t(s0), t(s1), t(s1)],
         "attrs": {"head_num": 1, "scale_value": 128 ** -0.5,
                   "prompt": int(cann_op == "FusedInferAttentionScore")}, "loop": True}
    base = {"id": f"t-fa-{cann_op}-{s0}x{s1}", "chip": "ascend910b2", "family": "attention",
            "role": "validation", "workload": w, "timing": "eager_call", "data": "warm",
            "metric": "time", "value": 70.0, "unit": "us", "source": "test"}
    return check_row({**base, **changes}, "test row")


def test_the_910b_figure_is_calibrated_on_calibration_rows_only():
    chip = get_chip("ascend910b2")
    assert chip.eager_fused_attention_launch_us == pytest.approx(72.58)
    assert chip.confidence("eager_fused_attention_launch_us") == "C"
    assert get_chip("ascend910").eager_fused_attention_launch_us is None
    rows = [r for r in load_corpus() if "eager_fused_attention_launch_us" in r.calibrates]
    assert len(rows) == 8 and all(r.role == "calibration" for r in rows)
    # the figure is near these rows' mean (their loops are host-bound, see the next test)
    assert sum(r.value for r in rows) / 8 == pytest.approx(72.58, rel=0.002)
    # every row of their table is a calibration row (no validation row shares it)
    tables = {r.source_table for r in rows}
    assert not [r.id for r in load_corpus() if r.role == "validation"
                and r.source_table in tables]


def test_the_figure_is_chosen_by_cann_op_and_falls_back_to_the_op_call():
    chip = get_chip("ascend910b2")
    assert EAGER_LAUNCH_FIGURES["FusedInferAttentionScore"] == "eager_fused_attention_launch_us"
    assert eager_launch_us(chip, "FusedInferAttentionScore") == pytest.approx(72.58)
    # npu_fusion_attention's call runs its tiling on the host too: the same figure (G)
    assert eager_launch_us(chip, "FlashAttentionScore") == pytest.approx(72.58)
    assert eager_launch_us(chip, "MatMulV2") == pytest.approx(12.142)   # the op call figure
    what_if = chip.replace(eager_op_launch_us=21.5)
    assert eager_launch_us(what_if, "MatMulV2") == pytest.approx(21.5)
    plain = what_if.replace(eager_fused_attention_launch_us=None)
    assert eager_launch_us(plain, "FusedInferAttentionScore") == pytest.approx(21.5)
    assert eager_launch_us(get_chip("ascend910"), "FusedInferAttentionScore") is None


def test_a_small_fia_loop_is_host_bound_and_a_long_one_kernel_bound():
    """128x2048: the kernel + dispatch (~17 us) hides under the 72.58 us host call, so the
    period is the host cost (within 0.1%); the same shape as npu_fusion_attention's call (one
    query block on one AIC and one AIV, ~47 us) takes the same host cost, and without the
    figure it is eager_op_launch_us-bound (61.5 us on the what-if chip that gives it);
    3072x16384 (~209 us of kernel) is not moved by the figure (within 0.1%)."""
    rows = [_fa_row(128, 2048), _fa_row(128, 2048, cann_op="FlashAttentionScore"),
            _fa_row(3072, 16384)]
    what_if = get_chip("ascend910b2").replace(eager_op_launch_us=61.5)
    sim = [r.simulated for r in validate_rows(rows, as_chip=what_if).rows]
    assert sim[0] == pytest.approx(72.58, rel=1e-3)
    assert sim[1] == pytest.approx(72.58, rel=1e-3)
    assert sim[2] > 150.0
    no_figure = what_if.replace(eager_fused_attention_launch_us=None)
    assert validate_rows([rows[1]], as_chip=no_figure).rows[0].simulated == pytest.approx(
        61.5, rel=1e-3)
    plain = get_chip("ascend910b2").replace(eager_fused_attention_launch_us=None)
    assert validate_rows([rows[2]], as_chip=plain).rows[0].simulated == pytest.approx(sim[2],
                                                                                    rel=1e-3)


def test_kernel_timed_fia_rows_ignore_it():
    row = _fa_row(128, 2048, timing="msprof_kernel")
    a = validate_rows([row]).rows[0].simulated
    b = validate_rows([row], as_chip=get_chip("ascend910b2").replace(
        eager_fused_attention_launch_us=None)).rows[0].simulated
    assert a == pytest.approx(b) and a < 30.0
