"""Confidence (ascendsim.report.confidence): the op type -> family mapping, chip generations,
the record `Result.confidence()` returns, its line, and the op summary CSV column."""

from __future__ import annotations

import csv

import pytest

import ascendsim as asim
from ascendsim.hw import chips
from ascendsim.ir import registered_ops
from ascendsim.report.confidence import (
    GENERATIONS,
    OP_FAMILY,
    UNVALIDATED,
    ConfidenceTable,
    EagerCallError,
    FamilyError,
    SizeBandError,
    confidence,
    family_of,
    generation,
    load_table,
    size_band,
    size_bands,
    split_fused_type,
)
from ascendsim.report.summary import CONFIDENCE_COLUMN
from ascendsim.validation.corpus import FAMILIES, load_corpus

OP_FAMILIES = set(FAMILIES) - {"launch", "model_training", "model_inference", "serving"}


def test_every_registered_op_type_maps_to_a_family_or_is_unvalidated():
    missing = sorted(set(registered_ops()) - set(OP_FAMILY))
    assert not missing, f"op types without a validation family (or UNVALIDATED): {missing}"


def test_the_mapping_names_only_op_families():
    bad = {op: f for op, f in OP_FAMILY.items() if f not in OP_FAMILIES | {UNVALIDATED}}
    assert not bad


def test_every_chip_and_every_corpus_row_has_a_generation():
    for name in chips():
        assert generation(name) in ("910", "910B", "310P", "310"), name
    for row in load_corpus():
        assert generation(row.chip) is not None, (row.id, row.chip)
    assert generation("ascend910b_gen1") == "910"     # the first-generation "Ascend910B" SoC
    assert generation(asim.get_chip("ascend910b4")) == "910B"
    assert generation("ascend310p3") == "310P" and generation("my_own_npu") is None
    assert set(GENERATIONS.values()) == {"910", "910B", "310P", "310", "950"}  # 950: pending rows


@pytest.mark.parametrize("op_type, family", [
    ("ConvRelu", "conv"), ("FusedConvBNTrainingReduce", "conv"), ("ConvBNTrainingReduce", "conv"),
    ("Conv2DBackpropFilterCast", "conv"), ("FusionOp_Add_Relu", "elementwise"),
    ("FusionOp_LayerNormalization_Add", "norm"), ("MatMulGelu", "gemm"),
    ("AddRmsNorm", "norm"), ("FlashAttentionScore", "attention"),
    ("BNTrainingUpdateAddRelu", "norm"), ("ConvTransposeAddGreaterWhere", "conv"),
    ("TransData", "copy"), ("SomethingNew", UNVALIDATED), ("MaxPoolWithArgmax", UNVALIDATED),
])
def test_family_of_fused_and_plain_types(op_type, family):
    assert family_of(op_type) == family


def test_fused_members_from_the_graph_override_the_name():
    assert family_of("FusedOp", ["Add", "LayerNormalization"]) == "norm"
    assert family_of("FusedOp", ["MatMul", "Add", "Relu"]) == "gemm"
    assert family_of("FusedOp") == UNVALIDATED
    assert split_fused_type("MatMulGelu") == ("MatMul", "Gelu")
    assert split_fused_type("FusionOp_Add_Relu") == ("Add", "Relu")


def test_batched_matmul_by_its_input_shapes():
    assert family_of("MatMul", (), ("32,16,512,64", "32,16,64,512")) == "batch_matmul"
    assert family_of("MatMul", (), ("32,512,1024", "1024,1024")) == "gemm"
    assert family_of("MatMul") == "gemm"


def _table(**entries: tuple[int, float, float]) -> ConfidenceTable:
    rows = {}
    for key, (n, err, bias) in entries.items():
        fam, gen = key.split("__")
        rows[(fam, gen)] = FamilyError(fam, gen, n, err, bias)
    return ConfidenceTable(rows, {"validation_rows": sum(v[0] for v in entries.values())})


def _graph() -> asim.Graph:
    g = asim.Graph("mm_softmax")
    x = g.input("x", (256, 1024), "float16")
    w = g.input("w", (1024, 1024), "float16")
    y = g.softmax(g.matmul(x, w))
    g.output(y)
    return g


def test_record_shares_and_expected_error_with_a_given_table():
    res = asim.simulate(_graph(), "ascend910b", fusion=False)
    table = _table(gemm__910B=(10, 0.10, 0.9))
    conf = confidence(res.trace, table=table)
    assert conf.generation == "910B"
    assert sum(o.share for o in conf.ops) == pytest.approx(1.0)
    assert conf.validated_share + conf.unvalidated_share == pytest.approx(1.0)
    mm = conf.family("MatMul")
    sm = conf.family("Softmax")
    assert mm.family == "gemm" and mm.n == 10 and mm.median_abs_error == 0.10 and mm.bias == 0.9
    assert sm.family == "softmax" and not sm.validated and sm.cell == UNVALIDATED
    assert conf.validated_share == pytest.approx(mm.share)
    assert conf.expected_error == pytest.approx(0.10)       # only gemm is validated
    assert "Softmax" in conf.unvalidated
    line = str(conf)
    assert line.startswith(f"{100 * mm.share:.0f}% of time in validated families, median "
                           f"error 10%")
    assert line.endswith(f"unvalidated: Softmax ({100 * sm.share:.0f}%)")
    # two validated families: the time-weighted mean of their medians
    both = confidence(res.trace, table=_table(gemm__910B=(10, 0.10, 0.9),
                                              softmax__910B=(4, 0.30, 1.2)))
    want = (mm.share * 0.10 + sm.share * 0.30) / (mm.share + sm.share)
    assert both.expected_error == pytest.approx(want) and both.unvalidated == ()
    assert "unvalidated" not in str(both)


def test_first_sight_error_is_weighed_like_the_median():
    res = asim.simulate(_graph(), "ascend910b", fusion=False)
    rows = {("gemm", "910B"): FamilyError("gemm", "910B", 10, 0.10, 0.9, 6, 0.25),
            ("softmax", "910B"): FamilyError("softmax", "910B", 4, 0.30, 1.2)}
    conf = confidence(res.trace, table=ConfidenceTable(rows, {}))
    mm, sm = conf.family("MatMul"), conf.family("Softmax")
    assert (mm.first_n, mm.first_sight_error) == (6, 0.25)
    assert (sm.first_n, sm.first_sight_error) == (0, None)
    # only gemm has rows at first sight: its figure, over its share of the time
    assert conf.first_sight_error == pytest.approx(0.25)
    assert conf.first_sight_share == pytest.approx(mm.share)
    assert f"25% at first sight (on {100 * mm.share:.0f}% of time)" in str(conf)
    assert "25.0% (6)" in conf.table()
    assert conf.as_dict()["first_sight_error"] == conf.first_sight_error
    # no family with first-sight rows: no such figure, and the line does not mention it
    plain = confidence(res.trace, table=_table(gemm__910B=(10, 0.10, 0.9)))
    assert plain.first_sight_error is None and "first sight" not in str(plain)


def test_size_band_labels():
    assert size_bands() == ("< 10 us", "10-100 us", ">= 100 us")
    assert [size_band(x) for x in (0.0, 9.99, 10.0, 99.9, 100.0, 1e6)] == [
        "< 10 us", "< 10 us", "10-100 us", "10-100 us", ">= 100 us", ">= 100 us"]


def test_time_by_kernel_size_and_the_small_kernel_warning():
    g = asim.Graph("small_and_large")
    x = g.input("x", (64, 64), "float16")
    big = g.input("b", (4096, 4096), "float16")
    g.output(g.relu(x))                                   # a kernel of a few us
    g.output(g.matmul(big, big))                          # a kernel of hundreds of us
    res = asim.simulate(g, "ascend910b", fusion=False)
    rows = {("gemm", "910B"): FamilyError("gemm", "910B", 10, 0.05, 0.95),
            ("elementwise", "910B"): FamilyError("elementwise", "910B", 10, 0.05, 0.95)}
    bands = {("910B", "< 10 us"): SizeBandError("910B", "< 10 us", 20, 0.40, 0.6)}
    conf = confidence(res.trace, table=ConfidenceTable(rows, {}, bands))
    by = {b.band: b for b in conf.bands}
    assert tuple(by) == size_bands()
    assert sum(b.share for b in conf.bands) == pytest.approx(1.0)
    assert by["< 10 us"].tasks >= 1 and by[">= 100 us"].tasks >= 1
    assert (by["< 10 us"].n, by["< 10 us"].median_abs_error) == (20, 0.40)
    assert by["10-100 us"].n == 0 and by["10-100 us"].median_abs_error is None
    small = by["< 10 us"].share
    assert 0 < small < 0.05                               # the relu is a sliver of the time
    assert "kernels under 10 us" not in str(conf)         # under the line's 5 % threshold
    assert "< 10 us:" in conf.table()
    # a run that is mostly small kernels is warned about, in the direction the rows lean
    g2 = asim.Graph("small")
    y = g2.input("y", (64, 64), "float16")
    g2.output(g2.relu(y))
    conf2 = confidence(asim.simulate(g2, "ascend910b", fusion=False).trace,
                       table=ConfidenceTable(rows, {}, bands))
    assert conf2.small_kernels.share == pytest.approx(1.0)
    assert str(conf2).endswith("100% of time in kernels under 10 us, where 910B kernel rows "
                               "are off by 40% (model fast)")
    assert conf2.as_dict()["bands"][0]["band"] == "< 10 us"


def test_whole_model_rows_are_context_only():
    res = asim.simulate(_graph(), "ascend910b", fusion=False)
    table = _table(gemm__910B=(10, 0.10, 0.9), model_inference__910B=(2, 0.4, 0.6))
    conf = confidence(res.trace, table=table)
    assert conf.models["model_inference"].n == 2
    assert conf.expected_error == pytest.approx(0.10)
    assert "whole-model rows on this generation" in conf.table()


def test_eager_call_rows_are_context_only():
    """The generation's eager-call rows (host time included) are shown beside the figures,
    never weighed into them; another generation's are not shown."""
    res = asim.simulate(_graph(), "ascend910b", fusion=False)
    rows = {("gemm", "910B"): FamilyError("gemm", "910B", 10, 0.10, 0.9)}
    eager = {"910B": EagerCallError("910B", 40, 0.55, 0.45)}
    conf = confidence(res.trace, table=ConfidenceTable(rows, {}, {}, eager))
    assert conf.eager_calls == EagerCallError("910B", 40, 0.55, 0.45)
    assert conf.expected_error == pytest.approx(0.10)
    assert ("eager calls on this generation (host time included; not weighed above): 40 "
            "rows, median |error| 55.0%, bias 0.45") in conf.table()
    assert "eager" not in str(conf)
    assert conf.as_dict()["eager_calls"]["n"] == 40
    # a run of eager calls names them in its line
    run = confidence(res.trace, table=ConfidenceTable(rows, {}, {}, eager), eager_run=True)
    assert run.expected_error == pytest.approx(0.10)
    assert "; as eager calls, where 910B rows are off by 55% (model fast)" in str(run)
    other = confidence(res.trace, table=ConfidenceTable(
        rows, {}, {}, {"910": EagerCallError("910", 5, 0.2, 0.8)}))
    assert other.eager_calls is None and "eager calls" not in other.table()


def test_other_generation_rows_do_not_count():
    res = asim.simulate(_graph(), "ascend910", fusion=False)
    conf = confidence(res.trace, table=_table(gemm__910B=(10, 0.10, 0.9)))
    assert conf.generation == "910" and conf.validated_share == 0
    assert conf.expected_error is None and conf.unvalidated_share == pytest.approx(1.0)


def test_unknown_chip_generation_is_all_unvalidated():
    chip = asim.get_chip("ascend910b").replace(name="my_npu")
    res = asim.simulate(_graph(), chip, fusion=False)
    conf = res.confidence()
    assert conf.generation is None and conf.validated_share == 0
    assert "unknown generation" in str(conf)


def test_result_confidence_uses_the_shipped_table_and_fused_members():
    res = asim.simulate(asim.models.matmul_bias_relu(), "ascend910b")
    conf = res.confidence()
    shipped = load_table().get("gemm", "910B")
    fused = [o for o in conf.ops if o.op_type not in OP_FAMILY]
    assert fused, [o.op_type for o in conf.ops]         # a fused type, resolved by members
    for o in conf.ops:
        if o.family == "gemm":
            assert (o.n, o.median_abs_error, o.bias) == (shipped.n, shipped.median_abs_error,
                                                         shipped.bias)
            assert (o.first_n, o.first_sight_error) == (shipped.first_n,
                                                        shipped.first_median_abs_error)
    assert shipped.first_n > 0 and conf.first_sight_error is not None
    assert conf.as_dict()["line"] == str(conf)
    assert "op type" in conf.table()


def test_an_eager_mode_result_names_the_eager_call_rows():
    """Result.confidence() of a run in eager mode adds the shipped table's eager-call figure to
    the line; the same graph sunk does not."""
    eager = asim.simulate(_graph(), "ascend910b", fusion=False, mode="eager").confidence()
    sink = asim.simulate(_graph(), "ascend910b", fusion=False).confidence()
    shipped = load_table().eager_calls("910B")
    assert shipped is not None and eager.eager_calls == shipped
    assert eager.eager_run and not sink.eager_run
    assert (f"as eager calls, where 910B rows are off by {100 * shipped.median_abs_error:.0f}%"
            in str(eager))
    assert "eager" not in str(sink)


def test_summary_csv_has_the_confidence_column(tmp_path):
    res = asim.simulate(_graph(), "ascend910b", fusion=False)
    path = tmp_path / "s.csv"
    res.write_summary_csv(str(path))
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cells = {r["OP Type"]: r[CONFIDENCE_COLUMN] for r in rows}
    conf = res.confidence()
    assert cells["MatMul"] == conf.family("MatMul").cell
    assert cells["Softmax"] == conf.family("Softmax").cell
    assert all(c == UNVALIDATED or c.endswith("%") for c in cells.values())
