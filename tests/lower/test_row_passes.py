"""Row-wise kernels whose reduced rows are bound to cores, and rows too long for the UB:
TBE's NORM-pattern Softmax splits cores over its not-reduced axes only (norm_tilingcase.py
"block split on A axis") and, when a row is over its UB budget (three row tensors in the
widest dtype), takes the workspace schedule: x read by the max and the exp stages, exp
written to a GM workspace in fp32 and read back by the sum and the divide (lower/seq_types.py
`NormSchedule`); CANN's Ascend C RmsNorm SPLIT_D reads x twice (ops-nn rms_norm_split_d.h)
through single-buffered queues. A softmax over an axis that is not innermost keeps the
reduced axis times 8 blocks of the inner axes in the UB or takes the same workspace schedule.
The reads after the first hit the L2 while one pass over
all the cores' rows fits the part of it the model leaves to reuse, and miss past it; the
workspace writes then go back to HBM before they are read again. bf16
kernels hold two fp32 working buffers per element in the UB."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.lower import lower, vector_seq
from ascendsim.lower import vector as vector_lowering
from ascendsim.lower.bf16 import BF16_WORK_BYTES
from ascendsim.lower.seq_types import entire_reduce_repeats
from ascendsim.lower.tiling import VecSpec, vector_work


def _softmax(shape: tuple[int, ...], dtype: str = "float16", axis: int = -1) -> asim.Graph:
    g = asim.Graph("softmax")
    x = g.input("x", shape, dtype)
    g.output(g.add_node("Softmax", [x], {"axis": axis}, name="op")[0])
    return g


def _rms(rows: int, cols: int, dtype: str) -> asim.Graph:
    g = asim.Graph("rms")
    x = g.input("x", (rows, cols), dtype)
    g.output(g.rms_norm(x, g.input("g", (cols,), dtype), name="op"))
    return g


def _task(graph: asim.Graph, chip: str):
    program = lower(graph, get_chip(chip))
    return next(t for t in program.tasks if t.op_name == "op")


def _cores(task) -> int:
    return sum(len(g.cores) for g in task.phases[0].groups)


def _gm_reads(task) -> tuple[int, int]:
    """(bytes read from GM by every core, of them the bytes read at an L2 miss fraction 0)."""
    total = hit = 0
    for group in task.phases[0].groups:
        for seg in group.segments:
            for stage in seg.stages:
                if stage.pipe != "MTE2":
                    continue
                for ins in stage.instrs:
                    if ins.src == "GM":
                        n = ins.nbytes * seg.count * len(group.cores) * stage.units
                        total += n
                        hit += n if ins.hbm == 0 else 0
    return total, hit


def test_softmax_rows_stay_on_their_cores():
    """8 rows of 4096 run on 8 of the 910B3's 40 vector cores: no row is shared."""
    assert _cores(_task(_softmax((8, 4096)), "ascend910b3")) == 8


def test_a_strided_softmax_keeps_the_byte_split():
    """A softmax over a middle axis has no contiguous rows to bind: more cores than rows."""
    assert _cores(_task(_softmax((2, 64, 512), axis=1), "ascend910b3")) > 2


@pytest.mark.parametrize("cols,workspace", [(4096, False), (65536, True)])
def test_a_row_over_the_ub_budget_takes_the_workspace_schedule(cols, workspace):
    """Rows of 4096 fp16 fit and are read once; rows of 65536 do not: x is read twice (max,
    exp) and exp, in fp32, read back twice (sum, divide), everything after the first read of
    x from the L2, and exp written once to the workspace besides the output."""
    rows = 4
    task = _task(_softmax((rows, cols)), "ascend910b3")
    total, hit = _gm_reads(task)
    x_bytes, ws_bytes = rows * cols * 2, rows * cols * 4
    reads = 2 * x_bytes + 2 * ws_bytes if workspace else x_bytes
    assert total == pytest.approx(reads, rel=0.01)
    assert hit == pytest.approx(reads - x_bytes, rel=0.01)
    assert _gm_writes(task) == pytest.approx(x_bytes + (ws_bytes if workspace else 0), rel=0.01)


def _gm_writes(task) -> int:
    """Bytes written to GM by every core."""
    return sum(ins.nbytes * seg.count * len(group.cores) * stage.units
               for group in task.phases[0].groups for seg in group.segments
               for stage in seg.stages if stage.pipe == "MTE3"
               for ins in stage.instrs if ins.dst == "GM")


@pytest.mark.parametrize("cols,over", [(16000, False), (16008, True)])
def test_the_norm_ub_budget_is_three_fp32_rows(cols, over):
    """On the 910B's 192 KB UB a fp32 softmax row fits while 3 x 4 B x its length plus the
    4608 B of reduce scratch do: (196608 - 4608) / 3 / 4 = 16000 elements; 16008 (the next
    32-byte multiple) takes the workspace schedule, whatever the tile size."""
    total, _ = _gm_reads(_task(_softmax((2, cols), "float32"), "ascend910b3"))
    x_bytes = 2 * cols * 4
    assert total == pytest.approx(4 * x_bytes if over else x_bytes, rel=0.01)


@pytest.mark.parametrize("rows,workspace", [(125, False), (126, True)])
def test_a_strided_softmax_over_the_budget_takes_the_workspace_schedule(rows, workspace):
    """A softmax over axis 0 of [R, 512] fp16 (R A): TBE's NORM tiling keeps R x 8 blocks
    of the inner axis (8 x 16 = 128 fp16) in the UB while that fits the fp32 budget of three
    tensors, 16000 elements on the 910B (op_tiling norm.cc IsNeedWorkspace): 125 x 128 =
    16000 does, 126 rows take the workspace schedule, x read twice and exp in fp32 written
    once and read back twice, the re-reads from the L2."""
    task = _task(_softmax((rows, 512), axis=0), "ascend910b3")
    total, hit = _gm_reads(task)
    x_bytes, ws_bytes = rows * 512 * 2, rows * 512 * 4
    reads = 2 * x_bytes + 2 * ws_bytes if workspace else x_bytes
    assert total == pytest.approx(reads, rel=0.01)
    assert hit == pytest.approx(reads - x_bytes, rel=0.01)
    assert _gm_writes(task) == pytest.approx(x_bytes + (ws_bytes if workspace else 0), rel=0.01)
    assert any("not innermost" in n for n in task.notes) is workspace


def test_the_workspace_passes_cost_time(monkeypatch):
    """Rows over the UB budget take longer with their workspace traffic than a kernel that
    could keep them in UB (a budget of one row tensor), with the same reduce tree (the
    common schedule's "entire_reduce" left out)."""
    passes = asim.simulate(_softmax((32, 32768)), "ascend910b3", fusion=False).time_us
    seq = vector_seq.SEQUENCES["Softmax"]
    monkeypatch.setitem(vector_seq.SEQUENCES, "Softmax",
                        replace(seq, norm=replace(seq.norm, live=1, temp_bytes=0)))
    monkeypatch.setattr(vector_lowering, "norm_entire_reduce", lambda *args: False)
    once = asim.simulate(_softmax((32, 32768)), "ascend910b3", fusion=False).time_us
    assert passes > 1.02 * once


def test_a_binary_norm_kernel_is_single_buffered():
    """A prebuilt dynamic-shape TBE NORM kernel never double-buffers (norm_tilingcase sets
    is_enable_db for a compile-time shape only): its chunks load, compute and store in
    turn, slower than the same kernel compiled for its shape."""
    g = _softmax((16, 16384), "float32")
    chip = get_chip("ascend910b4")
    stages = next(t for t in lower(g, chip, kernel_build="binary").tasks
                  if t.op_name == "op").phases[0].groups[0].segments[0].stages
    assert next(s for s in stages if s.pipe == "MTE2").slots == 1
    binary = asim.simulate(g, chip, fusion=False, kernel_build="binary").time_us
    jit = asim.simulate(g, chip, fusion=False, kernel_build="jit").time_us
    assert binary > 1.05 * jit


def test_rms_norm_split_d_reads_x_twice_single_buffered():
    """SPLIT_D (a bf16 row of 16384, past the UB factor): x read twice, one UB slot per
    queue; a NORMAL-mode row of 4096 is read once."""
    task = _task(_rms(4, 16384, "bfloat16"), "ascend910b")
    total, hit = _gm_reads(task)
    x_bytes, g_bytes = 4 * 16384 * 2, 16384 * 2
    assert total - hit == pytest.approx(x_bytes + g_bytes, rel=0.02)
    assert hit == pytest.approx(x_bytes, rel=0.02)
    stages = task.phases[0].groups[0].segments[0].stages
    assert next(s for s in stages if s.pipe == "MTE2").slots == 1
    normal, normal_hit = _gm_reads(_task(_rms(4, 4096, "bfloat16"), "ascend910b"))
    assert normal_hit == 0


def test_bf16_tiles_hold_fp32_working_buffers():
    """A bf16 Mul's UB tile counts two fp32 buffers per element besides its bf16 queues, so
    it holds fewer elements than the fp16 one."""
    def note(dtype: str) -> str:
        g = asim.Graph("mul")
        a, b = g.input("a", (1 << 20,), dtype), g.input("b", (1 << 20,), dtype)
        g.output(g.add_node("Mul", [a, b], name="op")[0])
        return next(n for n in _task(g, "ascend910b").notes if n.startswith("vector tiling"))
    assert f"x {6 + BF16_WORK_BYTES:g} B/element" in note("bfloat16")
    assert "x 6 B/element" in note("float16")


def test_reads_apply_only_when_the_bound_row_exceeds_the_tile():
    """`row_reads` is inert for rows that fit a tile and for kernels without bound rows."""
    chip = get_chip("ascend910b3")
    base = dict(elems=4 * 65536, inputs=((2.0, 1.0),), out_bytes=2.0, out_through=1.0,
                parts=(), temp_bytes=8.0)

    def loads(**kw) -> int:
        groups, _ = vector_work(chip, VecSpec(**base, **kw), "op", 40)
        seg = groups[0].segments[0]
        return sum(len(s.instrs) for s in seg.stages if s.pipe == "MTE2")
    assert loads(row_elems=65536, row_reads=3) == 2        # the first read and the re-reads
    assert loads(row_elems=1024, row_reads=3) == 1         # the row fits a tile
    assert loads(row_reads=3) == 1                         # rows not bound


def test_rereads_miss_the_l2_when_one_pass_outgrows_it():
    """A re-read of a core's row hits the L2 while one pass over every active core's rows
    (and their workspace rows) fits `chip.l2_resident_bytes`, and misses past it: an LRU
    cache swept cyclically by more than it holds keeps none of the sweep."""
    chip = get_chip("ascend910b4")                    # 96 MiB L2, 48 MiB left to reuse
    base = dict(inputs=((4.0, 1.0),), out_bytes=4.0, out_through=1.0, parts=(),
                temp_bytes=8.0, row_reads=2)

    def reread_hbm(rows: int, row_elems: int, **kw) -> tuple[float, str]:
        groups, notes = vector_work(
            chip, VecSpec(elems=rows * row_elems, row_elems=row_elems, **base, **kw), "op", 40)
        stage = next(s for s in groups[0].segments[0].stages if s.pipe == "MTE2")
        return stage.instrs[1].hbm, " ".join(notes)
    # 16 rows of 64 K fp32 (256 KiB each): a pass is 4 MiB, the re-read hits
    hit, text = reread_hbm(16, 1 << 16)
    assert hit == 0.0 and "miss the L2" not in text
    # 16 rows of 4 M fp32 (16 MiB each): a pass is 256 MiB, the re-read misses
    miss, text = reread_hbm(16, 1 << 22)
    assert miss == 1.0 and "one pass over the rows of 16 core(s) is 256 MiB" in text
    # the workspace rows count too: 16 rows of 512 K fp32 with 4 B of workspace an element
    # sweep 64 MiB a pass (32 MiB of input alone would fit)
    assert reread_hbm(16, 1 << 19)[0] == 0.0
    assert reread_hbm(16, 1 << 19, row_ws_bytes=4.0, row_ws_reads=2, row_over=True)[0] == 1.0


def test_a_workspace_that_outgrows_the_l2_is_written_back():
    """The workspace rows a core writes stay in the L2 while one pass fits the part of it
    the model leaves to reuse (their re-reads hit); past it they are evicted before they are
    read again, and the L2, a write-back cache, writes them to HBM first: the write's HBM
    fraction is the re-reads' miss fraction."""
    chip = get_chip("ascend910b4")                    # 96 MiB L2, 48 MiB left to reuse
    base = dict(inputs=((4.0, 1.0),), out_bytes=4.0, out_through=0.0, parts=(),
                temp_bytes=8.0, row_reads=2, row_ws_bytes=4.0, row_ws_reads=2,
                row_over=True)

    def ws_write_hbm(rows: int, row_elems: int) -> float:
        groups, _ = vector_work(
            chip, VecSpec(elems=rows * row_elems, row_elems=row_elems, **base), "op", 40)
        stage = next(s for s in groups[0].segments[0].stages if s.pipe == "MTE3")
        return stage.instrs[1].hbm                    # the output store, then the workspace
    assert ws_write_hbm(16, 1 << 16) == 0.0           # a pass of 8 MiB: kept in the L2
    assert ws_write_hbm(16, 1 << 22) == 1.0           # a pass of 512 MiB: written back


@pytest.mark.parametrize("shape,axis,first_ws_read", [
    ((367, 373, 379), 1, 1.0),         # 8 A slices a block: its x and workspace, 396 MiB
    ((2, 3, 17, 1024, 101), 3, 0.0),   # 3 slices on 34 blocks: 80 MiB, kept in the L2
])
def test_a_strided_workspace_is_read_back_after_the_blocks_every_slice(shape, axis,
                                                                      first_ws_read):
    """A strided NORM kernel's workspace stage writes every A slice of its block before the
    result stage reads the first back (norm_schedule.py `_calc_compute_at`): that re-read
    misses, and the workspace is written back, once the block's slices outgrow the L2 the
    model leaves to reuse; the input's re-read and the workspace's second read come one slice
    pass after the first and hit."""
    task = _task(_softmax(shape, "float32", axis), "ascend910b2")
    stages = {s.pipe: s for s in task.phases[0].groups[0].segments[0].stages}
    x_read, x_reread, ws_read, ws_reread = (i.hbm for i in stages["MTE2"].instrs)
    assert (x_read, x_reread, ws_read, ws_reread) == (1.0, 0.0, first_ws_read, 0.0)
    assert stages["MTE3"].instrs[1].hbm == first_ws_read      # the workspace write


@pytest.mark.parametrize("shape,axis,width", [
    ((512, 2049), 0, 64),          # the inner axis split on 40 cores: 52 columns a block
    ((127, 257, 1023), 1, 1024),   # the outer axis split: a block keeps all 1023 columns
])
def test_a_strided_norm_row_holds_its_blocks_inner_run(shape, axis, width):
    """Each reduced row of a NORM softmax over an axis that is not innermost holds, in the
    UB, the inner elements of its block's slice, 32-byte aligned (norm.cc: the workspace UB
    split on R keeps the block's whole inner A run in every row)."""
    note = next(n for n in _task(_softmax(shape, axis=axis), "ascend910b3").notes
                if n.startswith("vector sequence"))
    assert f"one per reduced row of {width})" in note


def test_a_strided_reduction_issues_one_fold_per_reduced_row():
    """TBE's emitter for a reduction over a non-last axis (`vec_reduce_nlst_axis`) issues
    one vmax / vadd per reduced row over the row's inner elements, each waiting out the one
    before it: a [512, 2049] fp16 softmax over axis 0 (43 inner columns a block) spends far
    more V time than the same data folded as whole-tile passes."""
    parts, _, _ = vector_seq.resolve(
        "Softmax", None, [asim.Value("x", (512, 2049), "float16")],
        [asim.Value("y", (512, 2049), "float16")], {"axis": 0}, 1.0, fold_width=48)
    folds = [p for p in parts if p.shape == vector_seq.LOOP]
    assert len(folds) == 2 and all(p.row == 48 for p in folds)
    whole, _, _ = vector_seq.resolve(
        "Softmax", None, [asim.Value("x", (512, 2049), "float16")],
        [asim.Value("y", (512, 2049), "float16")], {"axis": 0}, 1.0)
    assert not any(p.shape == vector_seq.LOOP for p in whole)



@pytest.mark.parametrize("chip,cols,entire", [("ascend910b4", 4096, True),
                                              ("ascend910b4", 16384, False),
                                              ("ascend310p", 4096, False)])
def test_an_a2_norm_kernel_reduces_rows_by_entire_reduce(chip, cols, entire):
    """TBE's NORM common schedule gives a last-axis AR reduction the emitter's
    "entire_reduce" mode (norm_schedule.py `NormNormalSchedule._calc_emit_insn`) on the A2:
    whole-reduce repeats level after level, no element-wise fold, so a row's vcmax costs
    `entire_reduce_repeats` whole-reduce repeats; the workspace schedule (a row over the UB
    budget) gives no mode and keeps the fold, as does another chip's kernel."""
    notes = _task(_softmax((64, cols), "float32"), chip).notes
    note = next(n for n in notes if n.startswith("V cycles per tile"))
    tile = int(re.search(r"per tile of (\d+) elements", note).group(1))
    vcmax = int(re.search(r"vcmax (\d+)", note).group(1))
    target = get_chip(chip)
    row = vector_seq.reduce_row_cycles(target, "reduce_max", "float32", cols, 4, entire=entire)
    assert vcmax == math.ceil(tile / cols * row - 1e-9)


def test_entire_reduce_costs_a_whole_reduce_per_repeat():
    """A row of 64 fp32 repeats reduced by entire_reduce: 64 whole-reduce repeats, then the
    64 partials (one repeat; a vcmax writes (value, index) pairs: two repeats, then one), at
    the whole-reduce rate, against 63 binary folds and one whole reduce otherwise."""
    chip = get_chip("ascend910b4")
    whole = vector_seq.repeat_cycles(chip, "reduce", "float32")
    assert entire_reduce_repeats(64, 64) == 65        # fp32 sums: 64 partials, one repeat
    assert entire_reduce_repeats(64, 32) == 67        # fp32 (value, index) pairs
    assert entire_reduce_repeats(1, 32) == 1
    assert vector_seq.reduce_row_cycles(chip, "reduce", "float32", 4096, 4, entire=True) == \
        pytest.approx(65 * whole)
    fold = 63 * vector_seq.repeat_cycles(chip, "binary", "float32") + whole
    assert vector_seq.reduce_row_cycles(chip, "reduce", "float32", 4096, 4) == \
        pytest.approx(fold)


def _v_cycles(task) -> int:
    """V-pipe cycles of the task's first core group, all its tiles."""
    group = task.phases[0].groups[0]
    return sum(ins.cycles * seg.count * stage.units for seg in group.segments
               for stage in seg.stages if stage.pipe == "V" for ins in stage.instrs)


@pytest.mark.parametrize("shape,axis,workspace", [((4, 65536), -1, True), ((4, 4096), -1, False),
                                                  ((8, 4096, 256), 1, True)])
def test_a_bf16_norm_workspace_casts_x_in_both_stages_that_read_it(monkeypatch, shape, axis,
                                                                     workspace):
    """The workspace schedule cache-clones the bf16 -> fp32 cast of x into the max stage
    and the exp stage (norm_tilingcase `_judge_workspace_or_cache_clone`): one more vconv
    over x's elements than the one-pass schedule, 64 elements a repeat at one repeat a
    cycle, and a dependent step's wait per tile (`vector_dep_latency_cycles`); a row that
    stays in the UB casts once."""
    g = asim.Graph("softmax")
    x = g.input("x", shape, "bfloat16")
    g.output(g.add_node("Softmax", [x], {"axis": axis}, name="op")[0])
    cloned = _v_cycles(_task(g, "ascend910b"))
    monkeypatch.setattr(vector_lowering, "norm_casts", lambda spec, lone: spec)
    once = _v_cycles(_task(g, "ascend910b"))
    elems = math.prod(shape) / _cores(_task(g, "ascend910b"))
    if workspace:
        assert elems / 64 <= cloned - once <= 1.25 * elems / 64
    else:
        assert cloned == once
