"""bfloat16 values: round-to-nearest-even on known bit patterns, the float32 storage, values of
bf16 ops against a float64 reference, fused (composite loop) = unfused bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

import ascendsim as asim
from ascendsim.errors import GraphError
from ascendsim.execute import run_graph, run_subgraph
from ascendsim.ir.graph import Graph
from ascendsim.kernels import bf16

# (float32 bit pattern, its bf16 rounding): ties go to the even neighbour, above/below a tie to
# the nearest, the largest finite bf16 + half an ulp overflows to inf, bf16 subnormals round at
# their own spacing (2**-133), NaN stays NaN
KNOWN = [
    (0x3F800000, 0x3F80),   # 1.0 exact
    (0x3F808000, 0x3F80),   # 1 + 2**-8: a tie, 0x3F80 is even -> down
    (0x3F818000, 0x3F82),   # 1 + 2**-7 + 2**-8: a tie, 0x3F81 is odd -> up
    (0x3F808001, 0x3F81),   # just above the tie -> up
    (0x3F807FFF, 0x3F80),   # just below the tie -> down
    (0xBF818000, 0xBF82),   # negative tie, odd -> away from zero (to even)
    (0x7F7F7FFF, 0x7F7F),   # below the overflow tie -> largest finite bf16
    (0x7F7F8000, 0x7F80),   # largest finite + half an ulp: a tie with odd 0x7F7F -> inf
    (0xFF800000, 0xFF80),   # -inf
    (0x00008000, 0x0000),   # subnormal tie, even -> 0
    (0x00018000, 0x0002),   # subnormal tie, odd -> up
    (0x00000001, 0x0000),   # smallest float32 subnormal -> +0
    (0x80000000, 0x8000),   # -0 keeps its sign
]


def _bits(values: np.ndarray) -> list[int]:
    return [int(b) for b in bf16.to_bits(values)]


def test_round_to_nearest_even_on_known_bit_patterns() -> None:
    src = np.array([s for s, _ in KNOWN], dtype=np.uint32).view(np.float32)
    assert _bits(src) == [r for _, r in KNOWN]
    out = bf16.round_bf16(src)
    assert out.dtype == np.float32
    assert np.all(out.view(np.uint32) & 0xFFFF == 0)   # low halves cleared: bf16 values


def test_nan_stays_nan() -> None:
    src = np.array([0x7FC00001, 0x7F800001, 0xFFC12345], dtype=np.uint32).view(np.float32)
    assert np.all(np.isnan(bf16.round_bf16(src)))


@njit
def _scalar_loop(x, out):
    for i in range(x.size):
        out[i] = bf16.round_bf16_scalar(x[i])


def test_scalar_rounding_matches_the_array_rounding() -> None:
    """The composite loops' numba rounding (Veltkamp's split) and the executor's bit rounding
    agree on every bf16 neighbourhood: all 2**16 high halves with low halves at, above and
    below the tie (and the extremes)."""
    high = np.arange(1 << 16, dtype=np.uint32) << 16
    low = np.array([0, 1, 0x4000, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF], dtype=np.uint32)
    x = (high[:, None] | low[None, :]).ravel().view(np.float32)
    x = x[np.isfinite(x)]
    got = np.empty_like(x)
    _scalar_loop(x, got)
    assert np.array_equal(got.view(np.uint32), bf16.round_bf16(x).view(np.uint32))


def test_float64_rounds_once() -> None:
    """float64 input rounds straight to bf16 (no float32 step that could round twice):
    1 + 2**-8 + 2**-30 is above the tie and must go up, though float32 would make it a tie."""
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -30, 1 + 2.0 ** -8, 3.4e38, -5e-40])
    assert _bits(x) == [0x3F81, 0x3F80, 0x7F80, 0x8005]   # -5e-40 = -5.4 x 2**-133


def test_bits_round_trip() -> None:
    bits = np.arange(0, 1 << 16, 97, dtype=np.uint16)
    finite = (bits & 0x7F80) != 0x7F80
    vals = bf16.from_bits(bits[finite])
    assert np.array_equal(bf16.to_bits(vals), bits[finite])
    with pytest.raises(TypeError, match="16-bit"):
        bf16.from_bits(np.zeros(3, np.int32))


def _matmul_graph(m: int, k: int, n: int) -> Graph:
    g = Graph("mm_bf16")
    a, b = g.input("a", (m, k), "bfloat16"), g.input("b", (k, n), "bfloat16")
    g.output(g.matmul(a, b))
    return g


def test_bf16_matmul_within_bf16_tolerance_of_float64() -> None:
    """Products of bf16 numbers are exact in fp32 and the sums accumulate in fp32 (L0C), so the
    only large error is the one rounding of the result to bf16: at most half an ulp, 2**-8
    relative. The fp32 sums add at most K * 2**-24 of sum |a_i b_i| (bound doubled)."""
    rng = np.random.default_rng(7)
    m, k, n = 48, 200, 40
    a = rng.standard_normal((m, k))
    b = rng.standard_normal((k, n))
    out = asim.execute(_matmul_graph(m, k, n), {"a": a, "b": b})
    y = next(iter(out.values()))
    assert y.dtype == np.float32 and y.shape == (m, n)
    assert np.all(y.view(np.uint32) & 0xFFFF == 0)          # stored as bf16 numbers
    a16, b16 = bf16.round_bf16(a).astype(np.float64), bf16.round_bf16(b).astype(np.float64)
    ref = a16 @ b16
    bound = 2.0 ** -8 * np.abs(ref) + k * 2.0 ** -23 * (np.abs(a16) @ np.abs(b16))
    assert np.all(np.abs(y - ref) <= bound)
    # and bf16 is really coarser than fp32: most results differ from the fp32 product
    assert np.mean(y != (a16 @ b16).astype(np.float32)) > 0.5


def test_bf16_input_must_be_float() -> None:
    with pytest.raises(GraphError, match="from_bits"):
        asim.execute(_matmul_graph(2, 2, 2), {"a": np.ones((2, 2), np.int32),
                                              "b": np.ones((2, 2), np.float32)})


def test_cast_to_and_from_bfloat16() -> None:
    g = Graph("cast")
    x = g.input("x", (4,), "float32")
    h = g.cast(x, to="bfloat16")
    back = g.cast(h, to="float16")
    g.output(h, back)
    vals = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 65504.0, 1e-3], np.float32)
    out = asim.execute(g, {"x": vals})
    assert g.values[h.name].dtype == "bfloat16"
    assert _bits(out[h.name]) == [0x3F80, 0x3F82, 0x4780, 0x3A83]
    assert out[back.name].dtype == np.float16
    with np.errstate(over="ignore"):   # 65504 rounds to bf16 65536, beyond float16: inf
        assert np.array_equal(out[back.name], out[h.name].astype(np.float16))


def test_onnx_code_16_is_bfloat16() -> None:
    g = Graph("cast16")
    x = g.input("x", (3,), "float32")
    g.output(g.cast(x, to=16))
    assert g.values[g.outputs[0]].dtype == "bfloat16"


def test_fused_bf16_chain_equals_unfused_bit_for_bit() -> None:
    """A composite loop rounds each step to bf16 as the executor rounds each op's output."""
    g = Graph("chain_bf16")
    x = g.input("x", (33, 17), "bfloat16")
    y = g.mul(x, g.const(np.float32(3.1), dtype="bfloat16"))
    y = g.add(y, g.const(np.float32(0.37), dtype="bfloat16"))
    y = g.exp(g.neg(g.relu(y)))
    g.output(y)
    x_vals = bf16.round_bf16(np.random.default_rng(3).standard_normal((33, 17)))
    per_op = asim.execute(g, {"x": x_vals})[y.name]
    fused = run_subgraph(g, [x_vals], run_graph)[0]
    assert fused.dtype == np.float32
    assert np.array_equal(fused.view(np.uint32), per_op.view(np.uint32))


def test_bf16_layer_norm_and_softmax_values() -> None:
    """Norms and softmax compute in fp32 and round once: within 2**-8 relative (+ a tiny
    absolute term for values near 0) of float64 on the same bf16 inputs."""
    g = Graph("norms_bf16")
    x = g.input("x", (8, 64), "bfloat16")
    gamma = g.const(np.ones(64, np.float32), dtype="bfloat16")
    beta = g.const(np.zeros(64, np.float32), dtype="bfloat16")
    ln = g.layer_normalization(x, gamma, beta, axis=-1, epsilon=1e-5)
    sm = g.softmax(x, axis=-1)
    g.output(ln, sm)
    xv = bf16.round_bf16(np.random.default_rng(5).standard_normal((8, 64)))
    out = asim.execute(g, {"x": xv})
    x64 = xv.astype(np.float64)
    ref_ln = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    ref_sm = e / e.sum(-1, keepdims=True)
    for got, ref in ((out[ln.name], ref_ln), (out[sm.name], ref_sm)):
        assert np.all(got.view(np.uint32) & 0xFFFF == 0)
        assert np.all(np.abs(got - ref) <= 2.0 ** -8 * np.abs(ref) + 1e-6)
