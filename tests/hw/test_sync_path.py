"""The completion path of a synchronised eager call (chip figure host_sync_us): from the end of
the call's last task to the return of the host's aclrtSynchronizeStream. CANN's runtime
(hicann/runtime stream.cc Stream::Synchronize) takes two paths: on HWTS chips (the 910 and 310
generations) the synchronize records an event task behind the last task and sleeps on a
notifier the report thread wakes; on STARS chips (the 910B) it polls the stream's SQ head.
The HWTS figure is derived from PocketLLM's memset + synchronize round trip on a
first-generation 910 (19.6 us per call)."""

import pytest

from ascendsim.hw import get_chip
from ascendsim.validation.corpus import check_row
from ascendsim.validation.validate import validate_rows

HWTS = ("ascend910", "ascend910b_gen1", "ascend310", "ascend310p")
STARS = ("ascend910b", "ascend910b1", "ascend910b3", "ascend910b4", "ascend910c")


def test_each_chip_takes_its_runtimes_path():
    for name in HWTS:
        chip = get_chip(name)
        assert chip.host_sync_us == pytest.approx(14.4), name
        assert "event task" in chip.source("host_sync_us"), name
    for name in STARS:
        chip = get_chip(name)
        assert chip.host_sync_us == pytest.approx(2.6), name
        assert "SQ head" in chip.source("host_sync_us"), name
    # the 910's figure is measured (derived), the 310 generation's reused
    assert get_chip("ascend910b_gen1").confidence("host_sync_us") == "D"
    assert get_chip("ascend310p").confidence("host_sync_us") == "G"


def test_the_hwts_figure_closes_the_measured_memset_round_trip():
    """PocketLLM: one memset enqueued and drained 19.6 us; its runtime enqueue (an async copy's
    3.2 us) plus the device dispatch plus the completion path give it back (within 0.1 us)."""
    chip = get_chip("ascend910b_gen1")
    assert 3.2 + chip.sink_launch_us + chip.host_sync_us == pytest.approx(19.6, abs=0.1)


def _relu_call(chip: str, n: int = 256):
    w = {"kind": "op", "op": "Relu", "inputs": [{"shape": [n], "dtype": "float16"}],
         "host": "acl"}
    return check_row({"id": f"t-relu-{chip}", "chip": chip, "family": "elementwise",
                      "role": "validation", "workload": w, "timing": "eager_call",
                      "data": "warm", "metric": "time", "value": 0.03, "unit": "ms",
                      "source": "test"}, "test row")


def test_a_small_synchronised_call_pays_its_chips_completion_path():
    """A 256-element fp16 Relu launched through AscendCL and synchronised: on the 310P the
    launch (10.5) + dispatch (2.0) + a ~2 us kernel + the HWTS completion path (14.4) take
    27-33 us; on the 910B3 the SQ-head poll (2.6) leaves 15-20 us; the two differ by the two
    completion paths (11.8 us) give or take their kernels (within 2 us)."""
    rep = validate_rows([_relu_call("ascend310p"), _relu_call("ascend910b3")])
    p310, b3 = (r.simulated * 1e3 for r in rep.rows)       # ms -> us
    assert 27.0 <= p310 <= 33.0
    assert 15.0 <= b3 <= 20.0
    assert p310 - b3 == pytest.approx(14.4 - 2.6, abs=2.0)
