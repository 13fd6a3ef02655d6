"""The collector pause around building, optimising and simulating: restored after every call,
also when the call fails, and a nested pause leaves it to the outermost."""

import gc

import pytest

import ascendsim as asim
from ascendsim.errors import AscendSimError
from ascendsim.gcpause import gc_paused


def test_a_pause_restores_the_collector_and_nests():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()          # the inner pause does not re-enable it
    assert gc.isenabled()


def test_a_pause_restores_the_collector_after_an_error():
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_building_optimising_and_simulating_leave_the_collector_on():
    step = asim.models.bert_training_step(batch=1, seq_len=16, layers=1, hidden=64, heads=2,
                                          vocab=100, max_position=32)
    assert gc.isenabled()
    asim.optimize(step, "ascend910")
    assert gc.isenabled()
    asim.simulate(asim.models.conv_bn_relu(), "ascend910")
    assert gc.isenabled()


def test_a_failed_lowering_leaves_the_collector_on():
    chip = asim.get_chip("ascend910").replace(ub_bytes=256)
    with pytest.raises(AscendSimError, match="UB of core 0"):
        asim.simulate(asim.models.conv_bn_relu(), chip, fusion=False)
    assert gc.isenabled()
