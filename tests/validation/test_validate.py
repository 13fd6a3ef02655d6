"""validate(): rows simulated the way they were measured, the issue-10 error definitions, and
the report's views (table, CSV, plot). Uses the quick subset or hand-made rows (fast)."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import pytest

from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip
from ascendsim.validation.corpus import check_row, load_corpus, load_corpus_file
from ascendsim.validation.validate import (
    QUICK_IDS,
    ValidationRecord,
    ValidationReport,
    copy_kernel_cycles,
    quick_rows,
    summarize,
    transfer_cycles,
    validate,
    validate_rows,
)
from ascendsim.validation.workloads import LOOP_CALLS, PREV_CALL, build_op_graph, loop_calls

ADD = {"kind": "op", "op": "Add", "inputs": [{"shape": [1024], "dtype": "float16"},
                                             {"shape": [1024], "dtype": "float16"}]}
BASE = {"id": "t-add", "chip": "ascend910", "family": "elementwise", "role": "validation",
        "workload": ADD, "timing": "msprof_kernel", "data": "warm", "metric": "time",
        "value": 2.0, "unit": "us", "source": "test"}


def row(**changes):
    return check_row({**BASE, **changes}, "test row")


@pytest.fixture(scope="module")
def quick():
    return validate(quick=True)


# ----------------------------------------------------------------------------- definitions
def test_ratio_is_slow_above_one_for_times_and_throughputs():
    t = ValidationRecord(row(value=2.0), "ascend910", 3.0, "ok")
    assert t.ratio == pytest.approx(1.5) and t.error == pytest.approx(0.5)
    q = ValidationRecord(row(metric="throughput", unit="GB/s", value=300.0), "ascend910",
                         200.0, "ok")
    assert q.ratio == pytest.approx(1.5)          # measured / simulated: the model is slow
    assert ValidationRecord(row(), "ascend910", None, "error", "boom").ratio is None


def test_summary_statistics_follow_the_definitions():
    s = summarize([0.5, 1.0, 2.0, 1.2])
    assert s.n == 4
    assert s.median_abs_error == pytest.approx((0.2 + 0.5) / 2)    # |r-1| = .5 0 1 .2
    assert s.median_ratio == pytest.approx((1.0 + 1.2) / 2)
    assert s.bias == pytest.approx((0.5 * 1.0 * 2.0 * 1.2) ** 0.25)
    assert math.isnan(summarize([]).median_abs_error)


# ----------------------------------------------------------------------------- the quick run
def test_quick_subset_is_fixed_small_and_spans_families(quick):
    assert [r.id for r in quick.rows] == [i for i in QUICK_IDS if i in
                                          {r.id for r in load_corpus()}]
    assert len(quick.rows) <= 15
    assert len({r.family for r in quick.rows}) >= 4
    assert all(r.status == "ok" for r in quick.rows), [(r.id, r.reason) for r in quick.rows]


def test_report_counts_validation_rows_only(quick):
    val = [r.ratio for r in quick.rows if r.role == "validation"]
    assert quick.median_abs_error == pytest.approx(summarize(val).median_abs_error)
    assert quick.by_family and sum(s.n for s in quick.by_family.values()) == len(val)
    assert quick.calibration.n == sum(r.role == "calibration" for r in quick.rows)


def test_calibration_rows_reproduce_the_figure_they_were_fitted_to(quick):
    """The host launch, the 910B1 mmad c0, the vadd rate and the GM->L1 fit are these very
    measurements: the model's formula must give them back within the fit's residual (20%)."""
    for r in quick.rows:
        if r.role == "calibration":
            assert abs(r.error) < 0.2, (r.id, r.ratio)


def test_table_csv_and_plot(quick, tmp_path):
    text = quick.table()
    assert "median |error| on validation rows" in text
    assert "by family" in text and "calibration rows" in text
    path = tmp_path / "rows.csv"
    quick.to_csv(path)
    lines = list(csv.DictReader(path.open()))
    assert [x["id"] for x in lines] == [r.id for r in quick.rows]
    for x, r in zip(lines, quick.rows):
        assert float(x["ratio"]) == pytest.approx(r.ratio, rel=1e-3)
    png = tmp_path / "scatter.png"
    fig = quick.plot(png)
    assert png.stat().st_size > 10_000
    assert "median |error|" in fig.axes[0].get_title()


# ----------------------------------------------------------------------------- simulation
def test_faulty_rows_are_recorded_not_raised_and_pending_rows_apart():
    bad_op = row(id="t-bad", workload={**ADD, "op": "NoSuchOp"})
    bad_unit = row(id="t-unit", metric="throughput", unit="images/s", value=5.0)
    pending = row(id="t-pend", role="pending", pending_reason="a chip the model lacks")
    rep = validate_rows([row(), bad_op, bad_unit, pending])
    by = {r.id: r for r in rep.rows}
    assert by["t-add"].status == "ok" and by["t-add"].simulated > 0
    assert by["t-bad"].status == "error" and "NoSuchOp" in by["t-bad"].reason
    assert by["t-unit"].status == "error" and "images/s" in by["t-unit"].reason
    assert by["t-pend"].status == "pending" and by["t-pend"].ratio is None
    # a hand-made row is not in the frozen set: it counts among the rows added since
    assert summarize(rep.ratios()).n + summarize(rep.ratios(new=True)).n == 1


def test_chip_argument_runs_every_row_on_that_chip():
    rows = [row(), row(id="t-b", chip="ascend910b")]
    own = validate_rows(rows)
    forced = validate_rows(rows, as_chip="ascend310")
    assert [r.sim_chip for r in own.rows] == ["ascend910", "ascend910b"]
    assert {r.sim_chip for r in forced.rows} == {"ascend310"} and forced.chip == "ascend310"
    assert forced.rows[0].simulated == forced.rows[1].simulated


def test_msprof_kernel_excludes_launch_and_eager_call_includes_it():
    """The same one-task op: a synchronised eager call costs the kernel plus the per-call
    floor (host launch, device dispatch, host synchronisation), and nothing more."""
    chip = get_chip("ascend910")
    kern = validate_rows([row()]).rows[0].simulated
    eager = validate_rows([row(timing="eager_call")]).rows[0].simulated
    floor = chip.host_launch_us + chip.sink_launch_us + chip.host_sync_us
    assert kern + floor - 0.01 <= eager <= kern + floor + 0.01     # whole-cycle rounding
    launch = validate_rows([row(timing="eager_call",
                                workload={**ADD, "measure": "launch"})]).rows[0].simulated
    assert launch == pytest.approx(chip.host_launch_us, rel=1e-3)


def test_cold_data_is_not_faster_than_warm():
    """A large copy-like op reads its input from HBM when cold, from L2 when warm."""
    big = {"kind": "op", "op": "Relu", "inputs": [{"shape": [4 * 2 ** 20], "dtype": "float16"}]}
    warm = validate_rows([row(workload=big)]).rows[0].simulated
    cold = validate_rows([row(workload=big, data="cold")]).rows[0].simulated
    assert cold > warm * 1.05


def test_looped_rows_run_the_op_back_to_back_and_measure_the_last_call():
    """msprof_kernel and looped eager rows on warm data: LOOP_CALLS calls of the op, the last
    one ("op") measured; cold and instruction-level rows run it once."""
    g = build_op_graph(row())
    assert [n.name for n in g.nodes if n.op_type == "Add"] == [
        f"{PREV_CALL}{i}" for i in range(LOOP_CALLS - 1)] + ["op"]
    assert loop_calls(row(timing="eager_call", workload={**ADD, "loop": True})) == LOOP_CALLS
    assert loop_calls(row(timing="eager_call")) == 1            # one synchronised call
    assert loop_calls(row(data="cold")) == 1                    # L2 flushed between calls
    assert loop_calls(row(workload={**ADD, "measure": "pipe:V"})) == 1


def test_steady_state_call_pays_the_previous_outputs_write_back():
    """A 32 MiB copy on the 910 (32 MiB L2): each call of the loop evicts the previous call's
    dirty output, so the measured call writes back about one output's bytes to HBM and takes
    longer than a lone call, which writes back only what of its own output its later tiles
    push out (the rest stays in L2; the end-of-graph flush is untimed)."""
    import ascendsim as asim
    big = {"kind": "op", "op": "Relu", "inputs": [{"shape": [16 * 2 ** 20], "dtype": "float16"}]}
    out_bytes = 16 * 2 ** 20 * 2
    looped = row(workload=big)
    trace = asim.simulate(build_op_graph(looped), "ascend910", fusion=False).trace
    op = next(t for t in trace.tasks if t.op_name == "op")
    assert 0.8 * out_bytes <= op.traffic[("DDR", "write")] <= 1.25 * out_bytes
    steady = validate_rows([looped]).rows[0].simulated
    assert steady == pytest.approx(trace.chip.seconds(op.duration) * 1e6, rel=1e-6)
    lone = asim.simulate(build_op_graph(row(workload=big, data="cold")), "ascend910",
                         fusion=False).trace
    lone_op = next(t for t in lone.tasks if t.op_name == "op")
    lone_wb = lone_op.traffic.get(("DDR", "write"), 0)
    assert lone_wb < 0.6 * out_bytes < op.traffic[("DDR", "write")] - 0.25 * out_bytes
    assert op.duration > 1.1 * lone_op.duration
    # a small op's loop fits in L2: nothing is evicted, the steady state is the lone call
    small = asim.simulate(build_op_graph(row()), "ascend910", fusion=False).trace
    assert next(t for t in small.tasks if t.op_name == "op").traffic.get(("DDR", "write"),
                                                                          0) == 0


def test_model_rows_extrapolate_deep_transformers_linearly():
    """BERT rows deeper than 2 layers are simulated at 1 and 2 layers; the step time is
    linear in the layer count, so 4 layers cost t1 + 3 (t2 - t1)."""
    w = {"kind": "model", "model": "bert_base", "batch": 1, "seq_len": 16,
         "precision": "fp16", "phase": "inference"}
    rows = [row(id=f"t-bert{n}", family="model_inference", timing="graph_step",
                workload={**w, "layers": n}, value=1.0, unit="ms") for n in (1, 2, 4)]
    t1, t2, t4 = (r.simulated for r in validate_rows(rows).rows)
    assert t1 < t2 and t4 == pytest.approx(t1 + 3 * (t2 - t1), rel=1e-9)


def test_single_transfers_match_the_chip_cost_formula():
    """One move run alone through the engine costs latency + bytes/bandwidth (whole cycles):
    the fabric adds nothing when nothing else is in flight (moved from bench/fidelity.py)."""
    chip = get_chip("ascend910b").replace(ai_cores=1, aiv_cores=1)
    for src, dst in (("GM", "L1"), ("GM", "UB"), ("UB", "GM"), ("L0C", "GM"), ("L1", "L0A")):
        for kb in (1, 64):
            n = kb * 1024
            want = chip.transfer_cycles(src.lower(), dst.lower(), n)
            assert want <= transfer_cycles(chip, src, dst, n) <= math.ceil(want) + 1


def test_an_l2_miss_costs_more_than_a_hit_but_at_most_the_slowdown():
    """On the first-generation 910 a miss divides one core's GM bandwidth (msKPP's model); on
    the A2 a core reads cold data at the L2-hit pace (l2_miss_slowdown 1: the chip-wide HBM
    rate, which the fabric applies, is what misses meet)."""
    chip = get_chip("ascend910").replace(ai_cores=1)
    hit = transfer_cycles(chip, "GM", "UB", 64 * 1024, 0.0)
    miss = transfer_cycles(chip, "GM", "UB", 64 * 1024, 1.0)
    assert 1.0 < miss / hit <= chip.l2_miss_slowdown
    a2 = get_chip("ascend910b").replace(ai_cores=1, aiv_cores=1)
    assert a2.l2_miss_slowdown == 1.0
    assert transfer_cycles(a2, "GM", "UB", 64 * 1024, 1.0) == pytest.approx(
        transfer_cycles(a2, "GM", "UB", 64 * 1024, 0.0), rel=0.01)


def test_a_copy_kernel_streams_no_faster_than_hbm_and_starts_like_a_kernel():
    """A copy-only kernel (the transfer kind with moves): 48 AIV blocks reading 48 MB that miss
    L2 take at least the bytes over the chip's HBM bandwidth, and at least its dispatch and
    one block start; one block's time grows linearly with its moves (the moves run back to
    back on MTE2)."""
    chip = get_chip("ascend910b1")
    nbytes, moves = 131072, 8
    total = nbytes * moves * 48
    cycles = copy_kernel_cycles(chip, "GM", "UB", nbytes, 1.0, cores=48, moves=moves)
    assert chip.seconds(cycles) >= total / chip.hbm_bandwidth_bytes_per_s
    assert chip.seconds(cycles) >= (chip.task_dispatch_us + chip.kernel_start_us) * 1e-6
    t4, t8, t12 = (copy_kernel_cycles(chip, "GM", "UB", nbytes, 1.0, cores=1, moves=m)
                   for m in (4, 8, 12))
    assert t12 - t8 == pytest.approx(t8 - t4, rel=0.02) and t8 > t4


def test_a_copy_kernel_that_cannot_run_names_what_is_wrong():
    chip = get_chip("ascend910b1")
    with pytest.raises(ConfigError, match="does not fit ascend910b1, which has 48 vector"):
        copy_kernel_cycles(chip, "GM", "UB", 1024, cores=49, moves=1)
    with pytest.raises(ConfigError, match="nd2nz applies to GM -> L1 moves, not GM -> UB"):
        copy_kernel_cycles(chip, "GM", "UB", 1024, cores=1, moves=1, nd2nz=True)
    with pytest.raises(ConfigError, match="at least one move"):
        copy_kernel_cycles(chip, "GM", "L1", 1024, cores=1, moves=0)


def test_mmad_rows_never_exceed_the_cube_peak_of_one_core(quick):
    peak = get_chip("ascend910b").flops_per_cycle("float16") * 1.8e9 / 1e12
    mmad = [r for r in quick.rows if "mmad" in r.id]
    assert mmad
    for r in mmad:
        assert 0 < r.simulated < peak


# ----------------------------------------------------------------------------- the corpus
def test_bad_rows_raise_config_error_naming_file_row_and_key(tmp_path):
    good = Path(load_corpus()[0].file).read_text()
    path = tmp_path / "bad.toml"
    path.write_text(good.replace('family = "', 'family = "gemv', 1))
    with pytest.raises(ConfigError, match=r"bad\.toml: row '.*': family: 'gemv"):
        load_corpus_file(path)
    for change, key in (({"value": -1.0}, "value"), ({"unit": "ms", "metric": "throughput"},
                                                     "unit"),
                        ({"role": "calibration"}, "calibrates"),
                        ({"workload": {**ADD, "inputs": [{"shape": [0]}]}},
                         r"workload.inputs\[0\].shape"),
                        ({"workload": {**ADD, "measure": "wall"}}, "workload.measure"),
                        ({"workload": {**ADD, "kernels": "static"}}, "workload.kernels")):
        with pytest.raises(ConfigError, match=key):
            row(**change)


def test_duplicate_ids_across_files_are_refused(tmp_path):
    text = Path(load_corpus()[0].file).read_text()
    for name in ("a.toml", "b.toml"):
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match="already used"):
        load_corpus(paths=sorted(tmp_path.glob("*.toml")))


def test_unknown_family_filter_names_the_valid_ones():
    with pytest.raises(ConfigError, match="families are gemm"):
        validate(families=["gemv"])


def test_quick_rows_keep_quick_order_and_skip_missing_ids():
    rows = load_corpus()
    picked = quick_rows(list(reversed(rows)))
    assert [r.id for r in picked] == [i for i in QUICK_IDS if i in {r.id for r in rows}]
    assert quick_rows([replace(rows[0], id="not-quick")]) == []


# ---------------------------------------------- issue 23 item 8: verdicts, chip filter, plot
def test_verdict_says_more_than_it_simulated(tmp_path):
    from ascendsim.validation.validate import OFF_BOUND, VERDICTS

    near = ValidationRecord(row(value=2.0), "ascend910", 2.0 * (1 + OFF_BOUND / 2), "ok")
    far = ValidationRecord(row(value=2.0), "ascend910", 2.0 * 0.08, "ok")   # ratio 0.08
    failed = ValidationRecord(row(), "ascend910", None, "error", "boom")
    pend = ValidationRecord(row(role="pending", pending_reason="x"), "ascend910", None,
                            "pending")
    assert [r.verdict for r in (near, far, failed, pend)] == list(VERDICTS)
    rep = ValidationReport([near, far, failed, pend])
    assert rep.verdicts() == {"ok": 1, "off": 1, "failed": 1, "pending": 1}
    text = rep.table()
    assert " off " in text and "failed: boom" in text and "1 off (|error| > 25%)" in text
    rep.to_csv(tmp_path / "v.csv")
    assert [x["verdict"] for x in csv.DictReader((tmp_path / "v.csv").open())] == \
        list(VERDICTS)


def test_chip_filters_by_generation_and_as_chip_runs_the_what_if():
    from ascendsim.report.confidence import generation
    from ascendsim.validation.validate import rows_of_chip

    rows = [row(id="t-910"), row(id="t-b2", chip="ascend910b2"),
            row(id="t-b4", chip="ascend910b4"), row(id="t-gen1", chip="ascend910b_gen1"),
            row(id="t-310p", chip="ascend310p")]
    assert [r.id for r in rows_of_chip(rows, "ascend910b")] == ["t-b2", "t-b4"]
    assert [r.id for r in rows_of_chip(rows, "ascend910")] == ["t-910", "t-gen1"]
    with pytest.raises(ConfigError, match="as_chip="):
        rows_of_chip(rows, get_chip("ascend910").replace(name="my-chip"))
    rep = validate(chip="ascend910b", quick=True)   # was: all 14 quick rows on the 910B
    assert len(rep.rows) == 12 and all(generation(r.row.chip) == "910B" for r in rep.rows)
    assert all(r.sim_chip == "ascend910b" for r in rep.rows)
    assert rep.chip is None and "rows measured on ascend910b's generation" in rep.table(False)
    what_if = validate(chip="ascend910", quick=True, as_chip="ascend910b")
    assert [r.id for r in what_if.rows] == ["pub-pocketllm-910-aclnn-add-enqueue"]
    assert what_if.chip == "ascend910b" and what_if.rows[0].sim_chip == "ascend910b"
    assert what_if.rows[0].chip_name == "ascend910"


def test_chip_column_has_one_naming_and_says_who_ran_it():
    rows = [row(id="t-b", chip="ascend910b"), row(id="t-b2", chip="ascend910b2")]
    rep = validate_rows(rows)
    assert {r.chip_name for r in rep.rows} == {"ascend910b"}       # was ascend910b2 beside it
    assert {r.sim_chip for r in rep.rows} == {"ascend910b"}
    assert "simulated on" in rep.table()


def test_plot_puts_ratios_per_family(quick, tmp_path):
    fig = quick.plot(tmp_path / "p.png")
    ax = fig.axes[0]
    assert ax.get_ylabel().startswith("ratio")
    fams = [t.get_text() for t in ax.get_xticklabels()]
    assert fams and set(fams) <= {r.family for r in quick.rows}
    ys = [y for c in ax.collections for _, y in c.get_offsets()]
    assert sorted(ys) == pytest.approx(sorted(r.ratio for r in quick.rows
                                              if r.ratio is not None))
