"""The eager op call's host cost (optional chip figure eager_op_launch_us): eager_call op rows
launch their tasks at that cost, so a torch.mm loop at 1024^3 is host-bound at ~21.5 us per
call while 4096^3 stays kernel-bound (21.5 us: the figure once fitted on gemm-910b2-0012, whose
table holds validation rows, kept here as a what-if). The 910B file gives 12.142 us, torch.add's
measured host enqueue on a 910B2 (triton-ascend issue 1675); rows whose kernel the benchmark
launches itself through AscendCL (workload host = "acl") keep host_launch_us."""

import pytest

from ascendsim.errors import ConfigError
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


def test_the_910b_gives_torch_adds_measured_call_and_the_910_none():
    chip = get_chip("ascend910b")
    assert chip.eager_op_launch_us == pytest.approx(12.142)
    assert chip.confidence("eager_op_launch_us") == "M"
    assert get_chip("ascend910b3").eager_op_launch_us == pytest.approx(12.142)   # inherited
    assert get_chip("ascend910").eager_op_launch_us is None
    # an absent optional figure is not offered to the calibrator, a present one is
    assert "eager_op_launch_us" not in fittable_params(get_chip("ascend910"))
    assert "eager_op_launch_us" in fittable_params(EAGER)


def test_an_acl_launched_call_keeps_the_ascendcl_launch():
    """A synchronised one-call row: launched by a framework it starts at eager_op_launch_us,
    launched by the benchmark's own AscendCL code (host = "acl") at host_launch_us; the rest
    of the call (dispatch, kernel, synchronize) is the same, so the two differ by exactly
    the two launch figures (within 1e-3 us)."""
    def relu(host):
        w = {"kind": "op", "op": "Relu", "inputs": [{"shape": [256], "dtype": "float16"}],
             "host": host}
        return check_row({"id": f"t-relu-{host}", "chip": "ascend910b3", "family": "elementwise",
                          "role": "validation", "workload": w, "timing": "eager_call",
                          "data": "warm", "metric": "time", "value": 30.0, "unit": "us",
                          "source": "test"}, "test row")
    chip = get_chip("ascend910b3")
    fw, acl = (r.simulated for r in validate_rows([relu("framework"), relu("acl")]).rows)
    assert fw - acl == pytest.approx(chip.eager_op_launch_us - chip.host_launch_us, abs=1e-3)


def test_a_bad_host_names_the_key():
    w = {"kind": "op", "op": "Relu", "inputs": [{"shape": [256], "dtype": "float16"}],
         "host": "cuda"}
    with pytest.raises(ConfigError, match=r"workload\.host.*'cuda'.*framework or acl"):
        check_row({"id": "t-bad", "chip": "ascend910b", "family": "elementwise",
                   "role": "validation", "workload": w, "timing": "eager_call", "data": "warm",
                   "metric": "time", "value": 30.0, "unit": "us", "source": "test"}, "test row")


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
    # 10.5 us host: kernel-bound (its ~16.6 us kernel and dispatch, 24 blocks, set the rate)
    assert rep1.rows[0].simulated > 1.25 * by["t-mm-1024"]


def test_kernel_timed_rows_ignore_it():
    msprof = _mm_row(1024, timing="msprof_kernel", metric="time", value=10.0, unit="us")
    a = validate_rows([msprof], as_chip=EAGER).rows[0].simulated
    b = validate_rows([msprof], as_chip=get_chip("ascend910b").replace(
        eager_op_launch_us=None)).rows[0].simulated
    assert a == pytest.approx(b)
