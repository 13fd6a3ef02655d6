"""Model builders take dtype="bfloat16": every value of the graph is bf16 (no stray float32
constant), the fused graph computes the unfused one's values within bf16 tolerance, and the
910B simulates them while the 910 refuses them by name."""

from __future__ import annotations

import pytest

import ascendsim as asim
from ascendsim.errors import UnsupportedOpError
from ascendsim.models import decoder
from ascendsim.models.bert import bert_encoder_layer


def _float_dtypes(g) -> set[str]:
    return {v.dtype for v in g.values.values() if "float" in v.dtype}


def test_bert_layer_in_bf16_fuses_with_equal_values() -> None:
    g = bert_encoder_layer(batch=2, seq_len=16, hidden=64, heads=4, ffn=128, dtype="bfloat16")
    assert _float_dtypes(g) == {"bfloat16"}
    cmp = asim.compare(g, chip="ascend910b")
    assert cmp.outputs_equal is True     # bf16 tolerance: two epsilons (report/compare.py)
    assert cmp.speedup > 1.0


def test_decoder_in_bf16_simulates_on_910b_and_not_on_910() -> None:
    g = decoder("tiny-gqa-1m", batch=1, seq_len=8, dtype="bfloat16")
    assert _float_dtypes(g) == {"bfloat16"}
    assert asim.simulate(g, chip="ascend910b").cycles > 0
    with pytest.raises(UnsupportedOpError, match="bfloat16.*ascend910"):
        asim.simulate(g, chip="ascend910")
