"""CANN FlashAttentionScore's work split on split chips (ops-transformer flash_attention_score
tiling, SetMultiCoreParams): query blocks of 128 rows go to min(blocks, AIVs) AIV cores in
runs of ceil(blocks / AIVs), the two AIVs of an AIC sharing its cube; bmm2 reads P back from
the GM workspace. FusedInferAttentionScore with S > 1 (prompt=1) keeps its own split."""

from __future__ import annotations

import math

import pytest
from llm_helpers import fused_attention_graph

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import lower
from ascendsim.lower.attention import aic_tiles


def test_query_blocks_fill_aiv_pairs_before_further_aics():
    chip = get_chip("ascend910b2")                  # 24 AICs, 48 AIVs
    assert aic_tiles(chip, 1) == [(1, 1)]           # one block: one AIV does its vector work
    assert aic_tiles(chip, 8) == [(2, 2)] * 4       # 8 AIVs on 4 AICs, not 8 AICs
    assert aic_tiles(chip, 48) == [(2, 2)] * 24
    # one block more than AIVs: runs of 2 on 25 AIVs, the busiest AIC does 4 blocks
    assert aic_tiles(chip, 49) == [(4, 2)] * 12 + [(1, 1)]
    big = [n for n, _ in aic_tiles(chip, 2048)]     # runs of 43: 47 full AIVs and one of 27
    assert sum(big) == 2048 and max(big) == 86 and min(big) == 70 and len(big) == 24


def test_a_lone_block_runs_its_softmax_on_one_aiv():
    """S = 128, one head: one query block on one AIV, which does all its vector work; the
    even split (prompt=1) cuts it into two 64-row tiles on two AICs, each tile's softmax
    shared by both AIVs of its AIC: a quarter of the vector work per core. The barriers are
    not shared (each AIV runs its own softmax calls, a fixed count of them per row group), and
    the prompt kernel waits out every key block's partial O read from GM where the lone block
    waits out one row group and one O chunk per task of 1024 keys, so the V time is 2.5-4
    times, not 4."""
    fas, fas_v = _v_busy(_fas(128, 8192, 0))
    fia, fia_v = _v_busy(_fas(128, 8192, 1))
    assert (fas.block_dim, fia.block_dim) == (1, 2)
    assert 2.5 * fia_v < fas_v < 4 * fia_v


def _v_busy(g: asim.Graph):
    """The attention task and the V pipe's busy cycles on its busiest core."""
    trace = asim.simulate(g, "ascend910b2").trace
    task = trace.tasks[0]
    busy: dict[int, int] = {}
    for iv in trace.intervals:
        if iv.task_id == task.task_id and iv.pipe == "V":
            busy[iv.core] = busy.get(iv.core, 0) + iv.duration
    return task, max(busy.values())


def _fas(s: int, t: int, prompt: int) -> asim.Graph:
    return fused_attention_graph(1, s, t, prompt)


def test_short_sequence_runs_on_half_the_aics_and_reads_p_back():
    fas = asim.simulate(_fas(1024, 1024, 0), "ascend910b2").trace.tasks[0]
    fia = asim.simulate(_fas(1024, 1024, 1), "ascend910b2").trace.tasks[0]
    assert fas.block_dim == 4                       # 8 query blocks of 128 on 4 AICs
    assert fia.block_dim > fas.block_dim
    # two query blocks per AIC instead of one (or less): the kernel takes >= 1.6x as long
    assert fas.duration >= 1.6 * fia.duration
    p_bytes = 1024 * 1024 * 2                       # P (fp16) back to the cube through GM
    reads = fas.traffic.get(("L2", "read"), 0) + fas.traffic.get(("DDR", "read"), 0)
    assert reads >= p_bytes + 2 * 1024 * 128 * 2


@pytest.mark.parametrize("s,aics", [(4096, 16), (16384, 22), (32768, 22)])
def test_block_dim_follows_the_aiv_runs(s, aics):
    """32 blocks: 32 AIVs on 16 AICs; 128 blocks: runs of 3 on 43 AIVs, 22 AICs (two idle);
    256 blocks: runs of 6 on 43 AIVs, 22 AICs."""
    task = asim.simulate(_fas(s, s, 0), "ascend910b2").trace.tasks[0]
    assert task.block_dim == aics


def test_the_vector_side_scales_the_scores_and_waits_between_steps():
    """CANN's attention kernels multiply S by the softmax scale on the AIV (vmuls over the
    fp32 scores, before the row max), not Q before the cube: every key block's V stage has a
    vec_scale of one unary pass over its fp32 scores, ahead of the row max; and its dependent
    steps each wait out the one before (PipeBarrier<PIPE_V>). S = 128, one head: one AIV
    does the 128-row query block, 8 key blocks of 128 over the simulated units."""
    chip = get_chip("ascend910b2")
    (task,) = lower(_fas(128, 1024, 0), chip).tasks
    (group,) = task.phases[0].groups
    (v_stage,) = [st for st in group.segments[0].stages if st.pipe == "V"]
    kinds = [ins.kind for ins in v_stage.instrs]
    assert kinds.index("vec_scale") < kinds.index("vec_rowmax")
    (scale,) = [ins for ins in v_stage.instrs if ins.kind == "vec_scale"]
    scores = 128 * 1024 * 4 / v_stage.units              # fp32 bytes one unit scales
    assert scale.cycles == math.ceil(scores / chip.vector_rate("unary", "float32"))
    # the kernel's barriers (lower/attention.py module note, "Barriers"), per (query block,
    # key block) pair: 2 L0 query blocks of 64 rows x 8 key blocks of 128, 16 pairs in the
    # tile; each pair one softmax row group of 64 x 128 = 8192 scores, 20 barriers (15 on the
    # tile's first pair), and one 64-row rescale chunk of 2 (none on the first)
    (wait,) = [ins for ins in v_stage.instrs if ins.kind == "vec_dep_wait"]
    pairs = 2 * 8 / v_stage.units
    barriers = (15 + 15 * 20) / 16 + 2 * 15 / 16
    assert wait.cycles == math.ceil(chip.vector_dep_latency_cycles * barriers * pairs)
