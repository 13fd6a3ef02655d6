"""Lowering: engines, formats and padding, TransData placement, fusion, tilings, flags."""

from collections import Counter

import numpy as np
import pytest

import ascendsim as asim
from ascendsim.hw import get_chip
from ascendsim.hw.names import ENGINE_AICPU
from ascendsim.ir.tensor import Value
from ascendsim.lower import Program, expand_flags, lower, padded_bytes, padded_numel
from ascendsim.lower.formats import NC1HWC0, ND, NZ

CHIP = get_chip("ascend910")


def _conv_graph(cin=17, two=False, bias=False):
    g = asim.Graph("conv")
    x = g.input("x", (2, cin, 16, 16), "float16")
    args = [x, g.weight("w", (32, cin, 3, 3), "float16")]
    if bias:
        args.append(g.weight("b", (32,), "float16"))
    y = g.relu(g.conv(*args, pads=[1, 1, 1, 1], name="c1"))
    y = g.conv(y, g.weight("w2", (32, 32, 3, 3), "float16"), pads=[1, 1, 1, 1], name="c2")
    if two:
        z = g.conv(x, g.weight("w3", (32, cin, 1, 1), "float16"), name="c3")
        y = g.add(y, z)
    g.output(y)
    return g


def test_padded_formats():
    """NC1HWC0 pads C to C0 (16; int8 32), FRACTAL_NZ the last two dims to 16."""
    v = Value("v", (2, 17, 4, 4), "float16")
    assert padded_numel(v, NC1HWC0) == 2 * 32 * 16
    assert padded_numel(Value("q", (2, 17, 4, 4), "int8"), NC1HWC0) == 2 * 32 * 16
    assert padded_numel(Value("q", (2, 33, 4, 4), "int8"), NC1HWC0) == 2 * 64 * 16
    assert padded_bytes(Value("m", (3, 17, 33), "float16"), NZ) == 3 * 32 * 48 * 2
    assert padded_numel(v, ND) == v.numel


def test_conv_implicit_gemm_pads_channels_and_keeps_5d_between_ops():
    prog = lower(_conv_graph(), CHIP)
    types = [t.op_type for t in prog.tasks]
    # one TransData in (ND input), one out (graph output); none between conv/relu/conv
    assert types == ["TransData", "Conv", "Relu", "Conv", "TransData"]
    c1 = prog.tasks[1]
    assert any("K = ceil16(Cin/group = 17)*kh*kw = 288" in n for n in c1.notes)
    assert c1.input_formats[0] == NC1HWC0 and c1.output_formats == (NC1HWC0,)
    assert prog.tasks[2].input_formats == (NC1HWC0,)


def test_transdata_once_per_value_not_per_consumer():
    prog = lower(_conv_graph(two=True), CHIP)
    trans = [t for t in prog.tasks if t.op_type == "TransData"]
    assert len(trans) == 2          # x -> 5-D once (for c1 and c3), result -> ND once
    assert {t.op_type for t in prog.tasks if t.task_id in prog.tasks[-2].deps} <= {
        "Conv", "Add"}


def test_transdata_node_runs_the_conversion_under_its_name():
    """A graph's own TransData (CANN's op, as a profiled kernel's row has it) is the task the
    lowering inserts for a conversion, named after the node; its consumer reads the converted
    value in place, and a TransData to the format a value already has runs nothing."""
    g = asim.Graph("td")
    x = g.input("x", (2, 17, 16, 16), "float16")
    y = g.conv(g.trans_data(x, dst_format=NC1HWC0, name="td"),
               g.weight("w", (32, 17, 3, 3), "float16"), pads=[1, 1, 1, 1], name="c1")
    g.output(y, g.relu(g.trans_data(x, dst_format=ND, name="same"), name="r"))
    prog = lower(g, CHIP)
    assert [t.op_name for t in prog.tasks][:3] == ["td", "c1", "r"]
    td = prog.tasks[0]
    assert td.op_type == "TransData" and td.output_formats == (NC1HWC0,)
    # 2 x 17 x 16 x 16 fp16 in ND, C padded to 32 in NC1HWC0
    assert any("ND -> NC1HWC0: 17408 B -> 32768 B" in n for n in td.notes)
    assert prog.tasks[1].input_formats[0] == NC1HWC0


def test_transdata_keeps_values_and_names_a_bad_format():
    g = asim.Graph("td")
    x = g.input("x", (3, 40), "float16")
    y = g.trans_data(x, dst_format=NZ)
    g.output(y)
    data = np.arange(120, dtype=np.float16).reshape(3, 40)
    np.testing.assert_array_equal(asim.execute(g, {"x": data})[y.name], data)
    with pytest.raises(asim.GraphError, match="dst_format 'NZ' is not a layout; valid: ND"):
        g.trans_data(x, dst_format="NZ")
    with pytest.raises(asim.GraphError, match="rank 2; NC1HWC0 needs rank 4"):
        g.trans_data(x, dst_format=NC1HWC0)


def test_conv_bias_accumulates_in_l0c():
    prog = lower(_conv_graph(bias=True), CHIP)
    c1 = next(t for t in prog.tasks if t.op_name == "c1")
    assert any("bias accumulated in L0C" in n for n in c1.notes)
    assert Counter(t.op_type for t in prog.tasks)["Conv"] == 2


def test_views_make_no_task_and_aicpu_ops_run_on_the_ai_cpu():
    g = asim.Graph("v")
    x = g.input("x", (64, 64), "float16")
    y = g.reshape(g.relu(x), [4096])
    g.output(g.pow(y, 2.0, name="p"))
    prog = lower(g, CHIP)
    assert [t.op_type for t in prog.tasks] == ["Relu", "Pow"]
    pow_task = prog.tasks[1]
    assert pow_task.engine == ENGINE_AICPU and pow_task.task_type == "AI_CPU"
    assert pow_task.deps == (0,)


def test_ub_fused_node_reads_only_external_inputs_and_writes_only_outputs():
    g = asim.models.get("elementwise_chain")
    opt = asim.optimize(g).graph
    fused = [n for n in opt.nodes if n.op_type == "FusedOp"]
    assert fused
    prog = lower(opt, CHIP)
    for node in fused:
        task = next(t for t in prog.tasks if t.op_name == node.name)
        assert task.fused_ops == tuple(n.name for n in node.subgraph.nodes)
        gm_read = task.traffic.get(("DDR", "read"), 0) + task.traffic.get(("L2", "read"), 0)
        gm_write = task.traffic.get(("L2", "write"), 0)
        ext_in = sum(opt.values[i].nbytes for i in dict.fromkeys(node.inputs) if i)
        ext_out = sum(opt.values[o].nbytes for o in node.outputs)
        assert gm_read <= ext_in * 1.01 + 64 and gm_write == pytest.approx(ext_out, rel=0.01)


@pytest.mark.parametrize("chip", ["ascend910", "ascend910b", "ascend310"])
def test_every_tile_fits_its_buffers_with_double_buffering(chip):
    chip = get_chip(chip)
    caps = {"L0A": chip.l0a_bytes, "L0B": chip.l0b_bytes, "L0C": chip.l0c_bytes,
            "L1": chip.l1_bytes, "UB": chip.ub_bytes}
    prog = lower(asim.models.get("resnet50", batch=2), chip)
    for t in prog.tasks:
        for ph in t.phases:
            for grp in ph.groups:
                for seg in grp.segments:
                    use = Counter()
                    for st in seg.stages:
                        for buf, nb in st.out_bufs:
                            use[buf] += 2 * nb
                    for buf, nb in use.items():
                        assert nb <= caps[buf], f"{t.op_name}: {buf} {nb} > {caps[buf]}"


def test_flags_balance_and_lowering_is_deterministic():
    g = asim.models.get("matmul_bias_relu")
    a, b = lower(g, CHIP), lower(g, CHIP)
    assert isinstance(a, Program)
    assert [(t.op_name, t.phases, t.traffic, t.notes) for t in a.tasks] == \
        [(t.op_name, t.phases, t.traffic, t.notes) for t in b.tasks]
    for t in a.tasks:
        for ph in t.phases:
            for grp in ph.groups:
                queues = expand_flags(grp.segments)
                sets, waits = Counter(), Counter()
                for q in queues.values():
                    for _ins, w, s, _al, _fr, _tile in q:
                        waits.update(w)
                        sets.update(s)
                for key, n in waits.items():
                    assert sets[key] >= n, f"{t.op_name}: flag {key} waited {n}x, set " \
                                           f"{sets[key]}x"
                assert all(ev in (0, 1) for _s, _d, ev in sets)


def test_streams_and_cross_stream_deps():
    g = asim.Graph("branches")
    x = g.input("x", (16, 512), "float16")      # 16 KB: each branch takes 16 of 32 cores
    a = g.relu(x, name="a")
    b = g.abs(x, name="b") if hasattr(g, "abs") else g.relu(x, name="b")
    g.output(g.add(a, b, name="join"))
    prog = lower(g, CHIP, streams=2)
    by = {t.op_name: t for t in prog.tasks}
    assert by["a"].stream_id != by["b"].stream_id
    assert set(by["join"].deps) == {by["a"].task_id, by["b"].task_id}
    res = asim.simulate(g, CHIP, streams=2, fusion=False)
    ta, tb = res.trace.task("a"), res.trace.task("b")
    assert ta.block_dim + tb.block_dim <= CHIP.ai_cores
    assert tb.start < ta.end        # the branches overlap on the two streams
    one = asim.simulate(g, CHIP, streams=1, fusion=False)
    assert one.trace.task("b").start >= one.trace.task("a").end
    assert res.cycles < one.cycles
    assert res.trace.task("join").start >= max(ta.end, tb.end)


@pytest.mark.parametrize("n", [1 << 20, 32 << 20])
def test_lowering_states_cold_l2_traffic(n):
    """Residency is the simulated L2's business (tests/sim/test_l2cache.py): the lowered
    traffic of a task is the same whatever ran before it, its reads cold misses and its
    writes landing in L2 (nothing written through)."""
    g = asim.Graph("chain")
    x = g.input("x", (n,), "float16")
    g.output(g.relu(g.relu(x, name="r1"), name="r2"))
    first, second = lower(g, CHIP).tasks
    for task in (first, second):
        assert task.traffic[("DDR", "read")] == 2 * n
        assert task.traffic.get(("L2", "read"), 0) == 0
        assert task.traffic[("L2", "write")] == 2 * n
        assert task.traffic.get(("DDR", "write"), 0) == 0


def test_matrix_vector_product_keeps_the_matrix_rows():
    """A (M, K) x (K,) MatMul is a GEMM of M rows (it used to be lowered as M 1, moving one
    row of A instead of the whole matrix); x (K,) x (K, N) has M 1."""
    from ascendsim.lower.cube import gemm_geometry

    g = asim.Graph("mv")
    a, x = g.input("a", (512, 256), "float16"), g.input("x", (256,), "float16")
    b = g.input("b", (256, 64), "float16")
    mv, vm = g.matmul(a, x), g.matmul(x, b)
    g.output(mv, vm)
    geo = gemm_geometry({}, g.values["a"], g.values["x"], mv, 16, None)
    assert (geo.batch, geo.m, geo.k, geo.n) == (1, 512, 256, 1)
    geo = gemm_geometry({}, g.values["x"], g.values["b"], vm, 16, None)
    assert (geo.batch, geo.m, geo.k, geo.n) == (1, 1, 256, 64)
    res = asim.simulate(g, "ascend910b", fusion=False)
    task = next(t for t in res.trace.tasks if t.op_name == mv.name)
    assert sum(b for (lvl, d), b in task.traffic.items() if lvl in ("L2", "DDR") and d == "read") \
        >= 512 * 256 * 2                                   # the whole matrix is read
