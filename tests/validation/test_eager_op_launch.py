"""The eager op call's host cost (chip figure eager_op_launch_us, 910B: calibrated on
gemm-910b2-0012): eager_call op rows launch their tasks at that cost, so a torch.mm loop at
1024^3 is host-bound at ~21.5 us per call while 4096^3 stays kernel-bound."""

import pytest

from ascendsim.hw import get_chip
from ascendsim.validation.calibrate import fittable_params
from ascendsim.validation.corpus import check_row
from ascendsim.validation.validate import validate_rows


def _mm_row(n, **changes):
    w = {"kind": "op", "op": "MatMul",
         "inputs": [{"shape": [n, n], "dtype": "float16"}, {"shape": [n, n], "dtype": "float16"}]}
    base = {"id": f"t-mm-{n}", "chip": "ascend910b", "family": "gemm", "role": "validation",
            "workload": w, "timing": "eager_call", "data": "warm", "metric": "throughput",
            "value": 100.0, "unit": "TFLOPS", "source": "test"}
    return check_row({**base, **changes}, "test row")


def test_the_910b_has_a_calibrated_eager_op_launch_and_the_910_none():
    chip = get_chip("ascend910b")
    assert chip.eager_op_launch_us == pytest.approx(21.5)
    assert chip.confidence("eager_op_launch_us") == "C"
    assert get_chip("ascend910").eager_op_launch_us is None
    # an absent optional figure is not offered to the calibrator
    assert "eager_op_launch_us" not in fittable_params(get_chip("ascend910"))
    assert "eager_op_launch_us" in fittable_params(chip)


def test_a_1024_loop_is_host_bound_and_a_4096_loop_kernel_bound():
    """TFLOPS = 2 n^3 / per-call time: at 1024 the call is the host's 21.5 us (99.9 TFLOPS,
    within 1%); at 4096 the kernel (~0.42 ms) hides the host, so the figure does not move it
    (the same TFLOPS as with the 10.5 us host_launch_us, within 0.1%)."""
    rep = validate_rows([_mm_row(1024), _mm_row(4096)])
    by = {r.id: r.simulated for r in rep.rows}
    assert by["t-mm-1024"] == pytest.approx(2 * 1024 ** 3 / 21.5e-6 / 1e12, rel=0.01)
    plain = get_chip("ascend910b").replace(eager_op_launch_us=None)
    rep0 = validate_rows([_mm_row(4096)], chip=plain)
    assert by["t-mm-4096"] == pytest.approx(rep0.rows[0].simulated, rel=1e-3)
    rep1 = validate_rows([_mm_row(1024)], chip=plain)
    assert rep1.rows[0].simulated > 1.5 * by["t-mm-1024"]      # 10.5 us host: kernel-bound


def test_kernel_timed_rows_ignore_it():
    msprof = _mm_row(1024, timing="msprof_kernel", metric="time", value=10.0, unit="us")
    a = validate_rows([msprof]).rows[0].simulated
    b = validate_rows([msprof], chip=get_chip("ascend910b").replace(
        eager_op_launch_us=None)).rows[0].simulated
    assert a == pytest.approx(b)
