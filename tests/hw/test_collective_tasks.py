"""HCCL's task chain on a mesh stage: what a small all-reduce on an 8-chip A2 box pays."""

from __future__ import annotations

import dataclasses
import importlib.resources

import pytest

from ascendsim.errors import ConfigError
from ascendsim.hw.collectives import (
    MESH_STAGE_TASKS,
    allreduce_phases,
    allreduce_seconds,
    collective_phases,
    mesh_stage_tasks,
)
from ascendsim.hw.interconnect import load_interconnect


@pytest.fixture(scope="module")
def a2():
    return load_interconnect("atlas800-a2")


def test_chain_lengths_follow_the_hccl_templates():
    # ReduceScatterMeshAtomic: 4 handshakes per slave stream + 8; AllGatherMeshAtomic: + 7
    assert [mesh_stage_tasks("ReduceScatter", p) for p in (2, 4, 8)] == [8, 16, 32]
    assert [mesh_stage_tasks("AllGather", p) for p in (2, 4, 8)] == [7, 15, 31]
    assert mesh_stage_tasks("AllGather", 1) == 0
    assert set(MESH_STAGE_TASKS) == {"ReduceScatter", "AllGather"}


def test_small_allreduce_on_eight_chips_pays_its_63_tasks(a2):
    phases = allreduce_phases(16384, 8, a2)
    assert [p.tasks for p in phases] == [32, 31]
    bare = dataclasses.replace(a2, stream_task_us=None)
    extra = allreduce_seconds(16384, 8, a2) - allreduce_seconds(16384, 8, bare)
    assert extra == pytest.approx(63 * a2.stream_task_us * 1e-6, rel=1e-9)
    # at 16 KB the chain, not the bytes, sets the time: more than half of it
    assert extra > 0.5 * allreduce_seconds(16384, 8, a2)


def test_chain_is_a_fixed_cost_the_bytes_add_to(a2):
    small, big = allreduce_seconds(1024, 8, a2), allreduce_seconds(64 << 20, 8, a2)
    chain = 63 * a2.stream_task_us * 1e-6
    assert small > chain
    # 64 MB: the bytes dominate, the chain is the same 63 tasks
    assert big - chain == pytest.approx(allreduce_seconds(64 << 20, 8,
                                        dataclasses.replace(a2, stream_task_us=None)))


def test_plan_collectives_price_their_stage(a2):
    rs = collective_phases("ReduceScatter", 16384, 8, a2)
    ag = collective_phases("AllGather", 16384, 8, a2)
    a2a = collective_phases("AllToAll", 16384, 8, a2)
    assert [p.tasks for p in rs + ag + a2a] == [32, 31, 0]   # the AllToAll chain is not read


def test_boxes_without_a_task_figure_pay_no_chain():
    for name in ("atlas800-a3", "ascend910"):
        ic = load_interconnect(name)
        assert ic.stream_task_us is None
        assert all(p.tasks == 0 or p.task_s == 0 for p in allreduce_phases(16384, 4, ic))


def test_bad_task_figure_is_refused(a2, tmp_path):
    # the A2 box's figures live in the 910B server's file (atlas800-a2.toml starts from it)
    text = (importlib.resources.files("ascendsim.hw") / "interconnects"
            / "ascend910b.toml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("stream_task_us = {value = 0.5", "stream_task_us = {value = -1"),
                   encoding="utf-8")
    with pytest.raises(ConfigError, match="stream_task_us"):
        load_interconnect(bad)


def test_a_tp_decode_step_pays_the_chain_at_every_all_reduce(a2):
    import ascendsim as asim
    from ascendsim.hw.box import Box
    from ascendsim.models.decoder import decoder
    from ascendsim.plan import simulate_parallel

    m = decoder("tiny-gqa-1m", batch=1, phase="decode", context_len=16,
                parallel=asim.Parallel(tp=4))
    res = simulate_parallel(m, box=Box("ascend910b", 4, "atlas800-a2"))
    ars = [c for c in res.collectives if c.kind == "AllReduce"]
    assert ars
    for c in ars:   # each all-reduce of one hidden row: its bytes are nothing, its chain is all
        assert c.time_us == pytest.approx(allreduce_seconds(c.nbytes, 4, a2) * 1e6)
        assert c.time_us > 31 * a2.stream_task_us     # 16 + 15 tasks at 4 chips


def test_a_16_mb_allreduce_on_eight_910b_is_no_faster_than_measured(a2):
    # torch_npu all_reduce on 8 x 910B peaks at 72 GB/s of algorithm bandwidth
    # (gameofdimension/limulidae README, CANN 8.0.0.beta1): a 16 MB all-reduce (one TP8
    # activation of a 70B layer at 1,024 tokens) takes at least 16.78e6 / 72e9 = 233 us;
    # the mesh over HCCL's 18.3 GiB/s links gives 2 x (16 MB / 8) / 19.65e9 plus the chain
    t = allreduce_seconds(1024 * 8192 * 2, 8, a2) * 1e6
    assert 233.0 <= t <= 320.0
    # and large messages approach 4 links' worth of algorithm bandwidth, not more
    big = 2**30
    assert big / allreduce_seconds(big, 8, a2) <= 4 * a2.hccs_bandwidth_bytes_per_s
