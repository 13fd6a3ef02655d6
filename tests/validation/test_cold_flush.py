"""Cold rows timed by a harness that flushes L2 by writing a buffer (triton's do_bench:
`cache.zero_()` of 192 MiB on the NPU) meet an L2 full of dirty lines: the graph writes the
buffer first and the measured call's fills pay the write-backs."""

from __future__ import annotations

from ascendsim.hw import get_chip
from ascendsim.validation.corpus import check_row
from ascendsim.validation.validate import RowRunner
from ascendsim.validation.workloads import (
    FLUSH_HARNESSES,
    FLUSH_NODE,
    build_op_graph,
    flush_bytes,
    icache_start,
)

TRITON = "github.com/flagos-ai/FlagGems"
AKG = "github.com/mindspore-ai/akg"


def gemv_row(source_table: str, data: str = "cold", m: int = 4096, k: int = 4096):
    w = {"kind": "op", "op": "MatMul",
         "inputs": [{"shape": [m, k], "dtype": "float32"}, {"shape": [k, 1], "dtype": "float32"}]}
    return check_row({"id": f"t-gemv-{data}-{len(source_table)}", "chip": "ascend910b",
                      "family": "gemm", "role": "validation", "workload": w,
                      "timing": "msprof_kernel", "data": data, "metric": "time",
                      "value": 100.0, "unit": "us", "source": "test",
                      "source_table": source_table}, "test row")


def test_a_flushing_harness_writes_its_buffer_first_and_keeps_it():
    row = gemv_row(f"{TRITON}:pull/1#table")
    assert flush_bytes(row) == FLUSH_HARNESSES[TRITON] == 192 * 2**20
    g = build_op_graph(row)
    assert g.nodes[0].name == FLUSH_NODE
    out = g.node(FLUSH_NODE).outputs[0]
    # the buffer is user memory (a graph output), so its dirty lines are written back
    assert out in g.outputs
    assert g.values[out].shape == (192 * 2**20 // 4,)


def test_a_harness_clearing_with_its_own_store_loop_keeps_the_kernel_code_cached():
    # AKG's profiler flushes L2 with a small Triton store loop: the L2 is dirty, but the
    # measured kernel's code stays in the instruction caches; cache.zero_() runs a CANN
    # kernel binary over every core and leaves the measured kernel to start cold
    akg = gemv_row(f"{AKG}:report.md#table")
    assert flush_bytes(akg) == 192 * 2**20
    assert icache_start(akg) == "warm"
    assert icache_start(gemv_row(f"{TRITON}:pull/1#table")) == "cold"
    assert icache_start(gemv_row(f"{AKG}:report.md#table", data="warm")) == "warm"


def test_no_flush_for_warm_rows_or_other_harnesses():
    assert flush_bytes(gemv_row(f"{TRITON}:pull/1#table", data="warm")) == 0
    row = gemv_row("github.com/someone/else:bench.md#t")
    assert flush_bytes(row) == 0
    assert FLUSH_NODE not in [n.name for n in build_op_graph(row).nodes]


def _op_us(row) -> float:
    chip = get_chip("ascend910b")
    runner = RowRunner()
    runner.value(row, chip)
    (res,) = runner.results.values()
    (op,) = [t for t in res.trace.tasks if t.op_name == "op"]
    return chip.seconds(op.duration) * 1e6


def test_the_dirty_l2_costs_one_write_back_pass_of_the_bytes_read():
    # a 4096 x 4096 float32 GEMV reads its 64 MiB matrix once: on a clean L2 HBM carries that
    # read; on an L2 full of the flush's dirty lines every fill first evicts a dirty line,
    # so HBM carries the read and as many bytes of write-back (two passes at least), and
    # never more than one extra pass beyond the clean call (5% for the flush's own partly
    # drained tail and rounding of the bandwidth shares)
    chip = get_chip("ascend910b")
    pass_us = 4096 * 4096 * 4 / chip.hbm_bandwidth_bytes_per_s * 1e6
    clean = _op_us(gemv_row("github.com/someone/else:bench.md#t"))
    dirty = _op_us(gemv_row(f"{TRITON}:pull/1#table"))
    assert clean >= pass_us
    assert dirty >= 2 * pass_us
    assert dirty <= (clean + pass_us) * 1.05
