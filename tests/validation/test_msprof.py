"""load_msprof(): the CANN 7 and CANN 8 op_summary column sets, the CANN op table, and
file-level vs row-level faults. The CSVs under tests/data/msprof are hand-written in the
exact format (see their README), so only the reader's behaviour is asserted, never the
closeness of simulated to "measured"."""

from __future__ import annotations

import csv
import math
import re
import statistics
from pathlib import Path

import pytest

from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip
from ascendsim.validation.msprof import (
    CANN_OPS,
    REQUIRED_COLUMNS,
    OpCall,
    build_call,
    load_msprof,
    logical_shape,
    parse_dtypes,
    parse_shapes,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "msprof"
CANN8 = DATA / "op_summary_cann8_910b.csv"
CANN7 = DATA / "op_summary_cann7_910.csv"


@pytest.fixture(scope="module")
def cann8():
    return load_msprof(CANN8, chip="ascend910b")


@pytest.fixture(scope="module")
def cann7():
    return load_msprof(CANN7, chip="ascend910")


def test_cann8_file_every_row_reported_faulty_rows_with_reasons(cann8):
    assert len(cann8.rows) == 12
    by = {r.op_type: r for r in cann8.rows if r.status == "ok"}
    assert set(by) == {"MatMulV2", "BatchMatMulV2", "SoftmaxV2", "LayerNormV3", "Cast", "Add",
                       "Transpose", "ReduceSumD", "GatherV2", "TransData"}
    # the row's own conversion, ND [2048, 2048] -> FRACTAL_NZ, as the registry's TransData
    assert by["TransData"].registry_op == "TransData" and by["TransData"].simulated_us > 0
    bad = [r for r in cann8.rows if r.status == "error"]
    assert [r.index for r in bad] == [11, 12]
    assert "DropOutDoMask" in bad[0].reason and "CANN op table" in bad[0].reason
    assert "unparsable shape '4096,x'" in bad[1].reason
    assert bad[1].measured_us == 20.0          # the measured side is still read


def test_rows_carry_measured_and_simulated_pipe_ratios(cann8):
    mm = next(r for r in cann8.rows if r.op_type == "MatMulV2" and r.status == "ok")
    assert mm.measured_us == 458.12 and mm.registry_op == "MatMul"
    assert mm.measured_ratios["M"] == 0.9 and mm.measured_ratios["MTE2"] == 0.638
    assert 0 < mm.simulated_ratios["M"] <= 1
    assert mm.ratio == pytest.approx(mm.simulated_us / 458.12)
    soft = next(r for r in cann8.rows if r.op_type == "SoftmaxV2")
    assert soft.measured_ratios["V"] == 0.576 and "M" not in soft.measured_ratios


def test_simulated_kernel_time_follows_the_shapes(cann8):
    """A 4096^3 fp16 GEMM is at least its cube-bound time on 24 cores, and longer than a
    16x512x64x512 batched one."""
    by = {r.op_type: r for r in cann8.rows if r.status == "ok"}
    floor_us = 2 * 4096 ** 3 / 353.9e12 * 1e6
    assert by["MatMulV2"].simulated_us >= floor_us
    assert by["BatchMatMulV2"].simulated_us < by["MatMulV2"].simulated_us


def test_cann7_column_set_and_fractal_formats(cann7):
    assert all(r.status == "ok" for r in cann7.rows), [(r.index, r.reason) for r in cann7.rows]
    conv1 = cann7.rows[0]
    assert conv1.measured_ratios["M"] == 0.602 and conv1.measured_ratios["V"] == 0.038
    # conv1: NC1HWC0 (32,1,224,224,16) with a FRACTAL_Z (49,4,16,16) weight -> 7x7, 64 out
    call = conv1.call
    g, _ = build_call(call)
    conv = g.node("op")
    assert g.values[conv.inputs[1]].shape == (64, 16, 7, 7)
    assert g.values["op"].shape == (32, 64, 112, 112)


def test_summary_and_csv(cann8, tmp_path):
    ok = [r.ratio for r in cann8.rows if r.ratio is not None]
    assert len(ok) == 10         # 12 rows: two faulty on purpose
    assert cann8.median_abs_error == pytest.approx(statistics.median(abs(x - 1) for x in ok))
    out = tmp_path / "cmp.csv"
    cann8.to_csv(out)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 12 and rows[10]["status"] == "error"
    assert float(rows[0]["M_ratio_measured"]) == 0.9
    assert "median |error|" in cann8.table()


def test_parsers():
    assert parse_shapes('"4096,4096;4096,4096"') == [(4096, 4096), (4096, 4096)]
    assert parse_shapes("32,512;") == [(32, 512), ()]
    assert parse_dtypes("DT_FLOAT16;DT_INT64;FLOAT") == ["float16", "int64", "float32"]
    with pytest.raises(ValueError, match="unknown data type 'DT_COMPLEX'"):
        parse_dtypes("DT_COMPLEX")
    assert logical_shape((128, 256, 16, 16), "FRACTAL_NZ") == (4096, 2048)
    assert logical_shape((8, 4, 7, 7, 16), "NC1HWC0") == (8, 64, 7, 7)


def test_cann_op_table_covers_the_common_types():
    for t in ("MatMulV2", "MatMul", "BatchMatMul", "BatchMatMulV2", "SoftmaxV2", "LayerNorm",
              "LayerNormV3", "Conv2D", "TransData", "Cast", "Add", "Mul", "RealDiv",
              "Transpose", "TransposeD", "ConcatD", "ReduceSumD", "GatherV2"):
        assert t in CANN_OPS, t


def test_transposed_operands_and_inferred_attributes():
    mm, _ = build_call(OpCall("MatMulV2", (((64, 128), "float16", "ND"),
                                           ((256, 128), "float16", "ND")), ()))
    assert mm.values["op"].shape == (64, 256)
    tr, _ = build_call(OpCall("Transpose", (((2, 3, 4), "float16", "ND"),),
                              (((4, 2, 3), "float16", "ND"),)))
    assert tr.node("op").attrs["perm"] == [2, 0, 1]
    cat, _ = build_call(OpCall("ConcatD", (((2, 3), "float16", "ND"), ((2, 5), "float16", "ND")),
                               (((2, 8), "float16", "ND"),)))
    assert cat.values["op"].shape == (2, 8)


# ----------------------------------------------------------------------------- file faults
def test_missing_file_is_a_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="nope.csv: cannot read"):
        load_msprof(tmp_path / "nope.csv")


@pytest.mark.parametrize("column", REQUIRED_COLUMNS)
def test_missing_required_column_names_file_and_column(tmp_path, column):
    lines = CANN8.read_text().splitlines()
    header = lines[0].split(",")
    i = header.index(column)
    path = tmp_path / "cut.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        for rec in csv.reader(lines):
            w.writerow(rec[:i] + rec[i + 1:])
    with pytest.raises(ConfigError, match=rf"cut\.csv: required column '{re.escape(column)}'"):
        load_msprof(path)


def test_not_a_csv_is_a_config_error(tmp_path):
    path = tmp_path / "trace.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ConfigError, match="trace.bin: not a CSV"):
        load_msprof(path)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ConfigError, match="empty.csv: not an msprof op_summary CSV"):
        load_msprof(empty)


def test_unknown_chip_is_refused():
    with pytest.raises(ConfigError, match="unknown chip"):
        load_msprof(CANN8, chip="ascend950")


def test_median_is_nan_when_nothing_simulates(tmp_path):
    path = tmp_path / "none.csv"
    path.write_text(",".join(REQUIRED_COLUMNS) + "\nx,Foo,AI_CORE,1.0,\"4\",DT_FLOAT16\n")
    cmp = load_msprof(path)
    assert cmp.rows[0].status == "error" and math.isnan(cmp.median_abs_error)


# ------------------------------------------- issue 23 item 9: the LLM and training op types
_F16, _F32 = "float16", "float32"
_V = ((1, 4, 1, 1, 16), _F32, "NC1HWC0")          # a BN channel vector as msprof lists it
_X = ((8, 4, 14, 14, 16), _F16, "NC1HWC0")
NEW_TYPES = {
    "FlashAttentionScore": OpCall("FlashAttentionScore", (
        ((1, 8, 256, 64), _F16, "ND"), ((1, 2, 256, 64), _F16, "ND"),
        ((1, 2, 256, 64), _F16, "ND"), ((), "", "ND"), ((2048, 2048), "bool", "ND")), ()),
    "IncreFlashAttention": OpCall("IncreFlashAttention", (
        ((4, 8, 1, 64), _F16, "ND"), ((4, 2, 512, 64), _F16, "ND"),
        ((4, 2, 512, 64), _F16, "ND")), ()),
    "RmsNorm": OpCall("RmsNorm", (((8, 512), _F16, "ND"), ((512,), _F16, "ND")),
                      (((8, 512), _F16, "ND"), ((8, 1), _F32, "ND"))),
    "SwiGlu": OpCall("SwiGlu", (((8, 1024), _F16, "ND"),), (((8, 512), _F16, "ND"),)),
    "MaxPoolV3": OpCall("MaxPoolV3", (((8, 4, 112, 112, 16), _F16, "NC1HWC0"),),
                        (((8, 4, 56, 56, 16), _F16, "NC1HWC0"),)),
    "BNTrainingReduce": OpCall("BNTrainingReduce", (_X,), (_V, _V)),
    "BNTrainingUpdate": OpCall("BNTrainingUpdate", (_X, *[_V] * 6), (_X,)),
    "BNTrainingUpdateGrad": OpCall("BNTrainingUpdateGrad", (_X, _X, _V, _V), (_V, _V)),
    "BNTrainingReduceGrad": OpCall("BNTrainingReduceGrad", (_X, _X, *[_V] * 5), (_X,)),
    "ApplyAdamD": OpCall("ApplyAdamD", (*[((1000,), _F32, "ND")] * 3,
                                       *[((1,), _F32, "ND")] * 6, ((1000,), _F32, "ND")), ()),
    "ApplyAdamW": OpCall("ApplyAdamW", (*[((1000,), _F32, "ND")] * 3,
                                       *[((1,), _F32, "ND")] * 7, ((1000,), _F32, "ND")), ()),
}


@pytest.mark.parametrize("op_type", sorted(NEW_TYPES))
def test_llm_and_training_op_types_map_and_simulate(op_type):
    from ascendsim.ir.registry import has_op
    from ascendsim.validation.msprof import simulate_call

    spec = CANN_OPS[op_type]
    assert has_op(spec.registry_op)
    g, _ = build_call(NEW_TYPES[op_type])
    assert g.node("op").op_type == spec.registry_op
    for chip in ("ascend910", "ascend910b"):
        us, _, reg = simulate_call(NEW_TYPES[op_type], get_chip(chip))
        assert us > 0 and reg == spec.registry_op


def test_attention_and_pool_attributes_from_the_shapes():
    fa, _ = build_call(NEW_TYPES["FlashAttentionScore"])
    assert fa.node("op").attrs["head_num"] == 8 and fa.node("op").attrs["causal"] == 1
    assert fa.node("op").attrs["scale_value"] == pytest.approx(1 / 8)
    ifa, _ = build_call(NEW_TYPES["IncreFlashAttention"])
    assert (ifa.node("op").attrs["num_heads"], ifa.node("op").attrs["num_key_value_heads"]) \
        == (8, 2)
    mp, _ = build_call(NEW_TYPES["MaxPoolV3"])
    assert mp.values["op"].shape == (8, 64, 56, 56)
    bsh = OpCall("FlashAttentionScore", (((1, 256, 512), _F16, "ND"),) * 3, ())
    with pytest.raises(ValueError, match="BNSD.*head count"):
        build_call(bsh)


def test_fused_kernels_are_refused_by_name_and_listed_as_unmapped(tmp_path):
    from ascendsim.validation.msprof import fused_members

    assert fused_members("FusionOp_Conv2D_Relu") == ["Conv2D", "Relu"]
    assert fused_members("Conv2D") == []
    with pytest.raises(KeyError, match="fused CANN kernel of Conv2D, Relu"):
        build_call(OpCall("FusionOp_Conv2D_Relu", (((1, 16, 8, 8), _F16, "ND"),), ()))
    rows = CANN8.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "f.csv"
    header = next(csv.reader([rows[0]]))
    cells = {"Op Name": "x", "OP Type": "FusionOp_MatMul_Add", "Task Type": "AI_CORE",
             "Task Duration(us)": "2", "Input Shapes": "16,16", "Input Data Types": "DT_FLOAT16"}
    path.write_text("\n".join([*rows, ",".join(f'"{cells.get(h, "")}"' for h in header)]))
    prof = load_msprof(path, chip="ascend910b")
    assert prof.unmapped.get("FusionOp_MatMul_Add") == 1
    assert "fused CANN kernel of MatMul, Add" in prof.rows[-1].reason


def test_warm_l2_is_an_option_and_stated(tmp_path):
    warm = load_msprof(CANN8, chip="ascend910b")
    cold = load_msprof(CANN8, chip="ascend910b", data="cold")
    assert "inputs warm in L2" in warm.table() and "inputs cold" in cold.table()
    pairs = [(w.simulated_us, c.simulated_us) for w, c in zip(warm.rows, cold.rows)
             if w.simulated_us and c.simulated_us and w.op_type != "TransData"]
    assert pairs and all(c >= w * 0.999 for w, c in pairs) and any(c > w for w, c in pairs)
    with pytest.raises(ConfigError, match="data='hot'"):
        load_msprof(CANN8, data="hot")
