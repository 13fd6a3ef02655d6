"""RotaryMul on A2 chips as CANN's rotate-half RoPE kernel runs it (ops-transformer
posembedding/rotary_position_embedding): whole lines (tokens) bound to cores, and per UB step
a loop over the heads of those lines, each head one load, its vector sequence and one store.
Other chips keep the streaming sequence."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.ir.tensor import Value
from ascendsim.lower.vector_seq import rope_loop, sequence_for

UB = 196608     # the 910B AIV's UB


def _vals(x, r, dtype="float16"):
    return [Value("x", tuple(x), dtype), Value("c", tuple(r), dtype), Value("s", tuple(r), dtype)]


def _graph(x, r, dtype="float16") -> asim.Graph:
    g = asim.Graph("rope")
    a = g.input("x", tuple(x), dtype)
    g.output(g.rotary_mul(a, g.input("c", tuple(r), dtype), g.input("s", tuple(r), dtype),
                          name="op"))
    return g


def _us(x, r, chip="ascend910b", dtype="float16") -> float:
    # (code cached, as in a benchmark loop: the head loop, not the cold start of 48 blocks)
    res = simulate(_graph(x, r, dtype), chip, fusion=False, icache="warm")
    row = next(s for s in res.summary() if s.op_name == "op")
    return row.task_duration_us


@pytest.mark.parametrize("x,r,lines,heads", [
    ((1, 1, 32, 128), (1, 1, 1, 128), 32, 1),        # BND: every row a line
    ((4, 1, 64, 128), (4, 1, 1, 128), 4, 64),        # r BS1D: lines B*S, N heads
    ((4, 4, 64, 128), (4, 4, 1, 128), 16, 64),
    ((4, 4, 64, 128), (1, 4, 1, 128), 4, 256),       # BSND: lines S, B*N heads
    ((8, 64, 128), (8, 1, 128), 8, 64),              # TND read as [1, T, N]
    ((2, 32, 512, 128), (1, 1, 512, 128), 512, 64),  # BNSD, B*N <= 8*S
    ((1, 32, 512, 128), (1, 1, 512, 128), 512, 32),  # r B1SD of one batch
])
def test_lines_and_heads_follow_the_tiling(x, r, lines, heads):
    loop = rope_loop(_vals(x, r), UB)
    assert (loop.lines, loop.line_elems // loop.head_elems) == (lines, heads)


def test_refused_shapes_keep_the_streaming_model():
    # BNSD with B*N > 8*S (CheckBnsdBlockSkip), D past D_LENGTH_LIMIT, r B1SD over batches
    for x, r in (((16, 32, 2, 128), (1, 1, 2, 128)), ((4, 1, 8, 1024), (4, 1, 1, 1024)),
                 ((2, 8, 16, 128), (2, 1, 16, 128))):
        assert rope_loop(_vals(x, r), UB) is None
        assert sequence_for("RotaryMul", _vals(x, r), {}, "ND", "ascend910b") is None


def test_step_lines_from_the_ub_split():
    """(UB - 2 KB) / (2 x 12 parts) / (2 B x 128) = 31 fp16 lines; fp32 2 x 4 parts: 47."""
    assert rope_loop(_vals((64, 1, 8, 128), (64, 1, 1, 128)), UB).step_lines == 31
    assert rope_loop(_vals((64, 1, 8, 128), (64, 1, 1, 128), "float32"), UB).step_lines == 47


def test_only_a2_chips():
    ins = _vals((4, 1, 64, 128), (4, 1, 1, 128))
    assert sequence_for("RotaryMul", ins, {}, "ND", "ascend910b").head_loop == "rope"
    for chip in ("ascend910", "ascend910b_gen1", "ascend310p"):
        assert sequence_for("RotaryMul", ins, {}, "ND", chip) is None


def test_time_grows_with_heads_per_core_at_fixed_bytes():
    """64 heads on each of 4 cores against 4 heads on each of 48: the same 64 Ki elements,
    but 16x the per-head round trips (load, sequence, store) on the busiest core; and on 4
    cores each further head adds at least one GM load latency (214 cycles at 1.8 GHz)."""
    many = _us((4, 1, 64, 128), (4, 1, 1, 128))
    few = _us((64, 1, 4, 128), (64, 1, 1, 128))
    assert many > 2 * few
    quarter = _us((4, 1, 16, 128), (4, 1, 1, 128))
    assert many - quarter > 48 * 214 / 1.8e3


def test_head_dim_barely_matters_at_fixed_heads():
    """Latency-bound heads: 4x the bytes per head moves the time by under 30 % on cold data
    (the measured CANN times are 18.9 and 18.7 us at D = 128 and 512)."""
    d128 = _us((4, 1, 64, 128), (4, 1, 1, 128))
    d512 = _us((4, 1, 64, 512), (4, 1, 1, 512))
    assert d128 <= d512 < 1.3 * d128


def test_explain_names_the_head_loop():
    res = simulate(_graph((4, 1, 64, 128), (4, 1, 1, 128)), "ascend910b", fusion=False)
    text = res.explain("op")
    assert "head loop: 4 line(s) of 64 head(s)" in text
    assert "over 4 core(s)" in text
    other = simulate(_graph((4, 1, 64, 128), (4, 1, 1, 128)), "ascend910", fusion=False)
    assert "head loop" not in other.explain("op")


def test_bf16_runs_the_fp16_kernel_structure():
    """rotary_position_embedding runs rotate_half_bf16.h for fp16 and bf16 alike: per head one
    cast of x in and one of the result out, the tables cast once per UB step (step_parts),
    so a bf16 call takes the fp16 call's time (both cast at the same unary rate), and its
    per-head vector work lists no cast of cos or sin."""
    x, r = (4, 1, 64, 128), (4, 1, 1, 128)
    assert _us(x, r, dtype="bfloat16") == pytest.approx(_us(x, r), rel=1e-6)
    res = simulate(_graph(x, r, "bfloat16"), "ascend910b", fusion=False)
    per_head = next(n for n in res.explain("op").splitlines() if "per head tile" in n)
    assert per_head.count("vconv") == 2, per_head
