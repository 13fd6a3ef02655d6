"""The AIVs' exposed GM workspace reads in fused attention on split chips (lower/attention.py
module note, "AIV workspace reads"): FlashAttentionScore's AIV waits out the first row group
of a task's fp32 scores and the first chunk of its fp32 partial O (a task: up to TASK_KEYS
keys); the prompt flash attention kernel waits out every key block's partial O."""

from __future__ import annotations

import pytest
from llm_helpers import fused_attention_graph

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower.attention import (
    ACC,
    FLASH_GROUP_ELEMS,
    FLASH_RESCALE_ROWS,
    TASK_KEYS,
    aiv_exposed_reads,
)


def test_a_task_exposes_its_first_score_group_and_o_chunk():
    chip = get_chip("ascend910b4")
    d = 128
    # 128 rows over 128 keys, one AIV: one task; its first 64 score rows (8192 / 128) and
    # its first 64 rows of O
    (move,) = aiv_exposed_reads(chip, 128, 128, d, 1)
    assert move.nbytes == (FLASH_GROUP_ELEMS + FLASH_RESCALE_ROWS * d) * ACC
    assert move.pipe == "V" and move.kind == "copy_scores"
    # two AIVs run their own tiles: the pair's folded time is half of one tile's
    (pair,) = aiv_exposed_reads(chip, 128, 128, d, 2)
    assert pair.nbytes == pytest.approx(move.nbytes / 2, abs=1)
    # 4096 keys: four tasks of 1024 keys, 8 score rows each
    (long,) = aiv_exposed_reads(chip, 128, 4 * TASK_KEYS, d, 1)
    assert long.nbytes == 4 * (8 * TASK_KEYS + FLASH_RESCALE_ROWS * d) * ACC
    # a short tile: no more rows than it has
    (short,) = aiv_exposed_reads(chip, 16, 83, 64, 1)
    assert short.nbytes == (16 * 83 + 16 * 64) * ACC


def _attention(s: int, prompt: int) -> asim.Graph:
    return fused_attention_graph(32, s, s, prompt)


@pytest.mark.parametrize("prompt, kind", [(0, "copy_scores"), (1, "copy_o_part")])
def test_the_reads_are_timed_on_the_vector_pipe(prompt, kind):
    """Both kernels read the AIC's fp32 results back from GM on the (folded) AIV side."""
    trace = asim.simulate(_attention(512, prompt), "ascend910b4").trace
    kinds = {iv.kind for iv in trace.intervals if iv.pipe == "V"}
    assert kind in kinds


def test_coupled_chips_move_scores_on_chip():
    """A coupled chip's vector unit takes the scores from L0C: no GM workspace read."""
    trace = asim.simulate(_attention(512, 0), "ascend910").trace
    kinds = {iv.kind for iv in trace.intervals if iv.pipe == "V"}
    assert not kinds & {"copy_scores", "copy_o_part"}
