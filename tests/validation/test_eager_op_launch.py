"""The eager op call's host cost (optional chip figure eager_op_launch_us): eager_call op rows
launch their tasks at that cost, so a torch.mm loop at 1024^3 is host-bound at ~21.5 us per
call while 4096^3 stays kernel-bound. No built-in chip gives the figure: the 910B's was fitted
on gemm-910b2-0012, whose table holds validation rows, and no other source was found; the
tests set it as a what-if (21.5 us)."""

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


#: the what-if chip: the 910B with the figure it was once fitted to (21.5 us)
EAGER = get_chip("ascend910b").replace(eager_op_launch_us=21.5)


def test_no_built_in_chip_gives_it_and_a_set_figure_is_fittable():
    for name in ("ascend910b", "ascend910"):
        assert get_chip(name).eager_op_launch_us is None
        # an absent optional figure is not offered to the calibrator
        assert "eager_op_launch_us" not in fittable_params(get_chip(name))
    assert "eager_op_launch_us" in fittable_params(EAGER)


def test_a_1024_loop_is_host_bound_and_a_4096_loop_kernel_bound():
    """TFLOPS = 2 n^3 / per-call time: at 1024 the call is the host's 21.5 us (99.9 TFLOPS,
    within 1%); at 4096 the kernel (~0.42 ms) hides the host, so the figure does not move it
    (the same TFLOPS as with the 10.5 us host_launch_us, within 0.1%)."""
    rep = validate_rows([_mm_row(1024), _mm_row(4096)], as_chip=EAGER)
    by = {r.id: r.simulated for r in rep.rows}
    assert by["t-mm-1024"] == pytest.approx(2 * 1024 ** 3 / 21.5e-6 / 1e12, rel=0.01)
    plain = get_chip("ascend910b").replace(eager_op_launch_us=None)
    rep0 = validate_rows([_mm_row(4096)], as_chip=plain)
    assert by["t-mm-4096"] == pytest.approx(rep0.rows[0].simulated, rel=1e-3)
    rep1 = validate_rows([_mm_row(1024)], as_chip=plain)
    # 10.5 us host: kernel-bound (its ~15.6 us kernel and dispatch, 24 blocks, set the rate)
    assert rep1.rows[0].simulated > 1.3 * by["t-mm-1024"]


def test_kernel_timed_rows_ignore_it():
    msprof = _mm_row(1024, timing="msprof_kernel", metric="time", value=10.0, unit="us")
    a = validate_rows([msprof], as_chip=EAGER).rows[0].simulated
    b = validate_rows([msprof], as_chip=get_chip("ascend910b").replace(
        eager_op_launch_us=None)).rows[0].simulated
    assert a == pytest.approx(b)
