"""bench/attribution.py: the advisor's top candidate is re-simulated against its prediction
and its values reported as compared, or as not compared with the reason (never silently)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import attribution  # noqa: E402

import ascendsim as asim  # noqa: E402
import ascendsim.advice as advice  # noqa: E402


def _bert():
    return asim.models.bert_encoder_layer(batch=2, seq_len=64, hidden=256, heads=4, ffn=1024)


def test_top_candidate_resimulated_gain_and_values_are_equal() -> None:
    g = _bert()
    text = attribution.top_candidate(g, "ascend910", asim.advise(g, "ascend910"))
    assert "advisor top candidate: composite" in text
    assert "re-simulated" in text and "; equal" in text
    assert "values vs the unfused ops: equal" in text


def test_values_over_the_limits_are_reported_as_not_checked(monkeypatch) -> None:
    """With both value limits below the candidate's size the advisor cannot compare, and the
    line says so with the reason; the script's FULL_SIZE_LIMIT covers the BERT-large layer at
    batch 32 x 512, whose top candidate's epilogue input (the attention scores) is 134M
    elements."""
    monkeypatch.setattr(advice, "VALUE_LIMIT", 100)
    monkeypatch.setattr(advice, "EPILOGUE_VALUE_LIMIT", 100)
    g = _bert()
    text = attribution.top_candidate(g, "ascend910", asim.advise(g, "ascend910"))
    assert "values vs the unfused ops: not checked" in text and "over 100 elements" in text
    assert attribution.FULL_SIZE_LIMIT > 32 * 16 * 512 * 512
