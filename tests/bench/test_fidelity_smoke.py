"""Smoke test of bench/fidelity.py: the --quick path on a few groups gives the expected rows,
finite numbers, and values inside the bounds the model itself sets (never closeness to the
published figures, which is what the benchmark reports, not what it asserts)."""

import math
import sys
from pathlib import Path

import pytest

from ascendsim.hw import get_chip

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fidelity as fb  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return fb.collect(quick=True, groups=["mmad", "l2", "host"])


def test_quick_groups_give_the_expected_rows_with_finite_numbers(rows):
    figures = [r.figure for r in rows]
    # GROUPS order: l2, mmad, host
    assert figures == ["910B GM->UB 64 KB, L2 miss / hit time"] + [
        f"{part} mmad {m}x{k}x{n}" for part, m, k, n in fb.MSKPP_MMAD] + [
        "910 aclnn element-wise add, host enqueue per op"]
    for r in rows:
        assert math.isfinite(r.simulated) and r.simulated > 0, r
        assert r.source in ("MSKPP", "POCKETLLM")
        assert r.comment
        assert r.ratio is None or math.isfinite(r.ratio)
    # published figures are copied from the reference, not from the simulator
    assert [r.published for r in rows[1:6]] == list(fb.MSKPP_MMAD.values())


def test_mmad_rows_never_exceed_the_cube_peak_of_one_core(rows):
    """One core cannot beat its cube: 2*16*16*16 FLOP per cycle on 910B fp16."""
    peak = get_chip("ascend910b").flops_per_cycle("float16")
    mmad = [r for r in rows if r.group == "mmad"]
    assert len(mmad) == 5
    for r in mmad:
        assert r.simulated < peak, r


def test_l2_miss_costs_more_than_a_hit_but_at_most_the_slowdown(rows):
    """A missing 64 KB read is slower than a hit, and never slower than latency + bytes at
    bw / l2_miss_slowdown allows (the model's own bound)."""
    l2 = next(r for r in rows if r.group == "l2")
    assert l2.at_least and l2.verdict() == ("meets" if l2.simulated > 2.0 else "misses")
    assert 1.0 < l2.simulated <= get_chip("ascend910b").l2_miss_slowdown


def test_single_transfers_through_the_engine_match_the_chip_cost_formula():
    """One move run alone through the engine costs latency + bytes/bandwidth (rounded up to a
    cycle): the fabric adds nothing when nothing else is in flight."""
    chip = fb.one_core("ascend910b")
    for (src, dst, pipe, _), _curve in list(fb.MSKPP_DMA.items())[:6]:
        for kb in (1, 64):
            n = kb * 1024
            got = fb.transfer_cycles_simulated(chip, fb._move(chip, src, dst, pipe, n))
            want = chip.transfer_cycles(src.lower(), dst.lower(), n)
            assert want <= got <= math.ceil(want) + 1, (src, dst, kb)


def test_table_prints_every_row_and_the_header(capsys):
    assert fb.main(["--quick", "--group", "l2", "--group", "host"]) == 0
    out = capsys.readouterr().out
    head = out.splitlines()[0].split()
    assert head == ["figure", "source", "published", "simulated", "sim/pub", "comment"]
    assert "910B GM->UB 64 KB, L2 miss / hit time" in out
    assert "Not reproducible by the simulator" in out


def test_unknown_group_is_refused_with_the_valid_names():
    with pytest.raises(SystemExit, match="unknown group.*groups: gemm, hbm"):
        fb.collect(quick=True, groups=["gemmm"])
