"""The cold instruction cache (`icache_cold_block_us`, engine note "Kernel start";
`kernelstart.InstructionCaches`): a block whose core last ran another kernel pays the chip's
figure per cold block of its phase before its first instruction; the same kernel again on the
same cores does not. Measured on the A3's LongCat profile (the figure's source); these tests
check how the engine keeps the state, and that the vector kernels take the AIV cores in
turn (`Pool.rotating`, the same profile)."""

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.errors import ConfigError
from ascendsim.hw import get_chip
from ascendsim.sim.engine import KERNEL_START_KIND
from ascendsim.validation.corpus import load_corpus
from ascendsim.validation.workloads import icache_start

CHIP = get_chip("ascend910b")


def _chain(n: int = 1 << 16, ops: tuple[str, ...] = ("relu", "relu", "abs", "relu")):
    """A chain of element-wise ops on one tensor (same shape, dtype and block count)."""
    g = asim.Graph("t")
    x = g.input("x", (n,), "float16")
    for i, op in enumerate(ops):
        x = getattr(g, op)(x, name=f"op{i}")
    g.output(x)
    return g


def _starts(res, name: str) -> set[int]:
    task = res.trace.task(name)
    return {iv.duration for iv in res.trace.intervals_of(task.task_id)
            if iv.kind == KERNEL_START_KIND}


def _cores(res, name: str) -> list[int]:
    task = res.trace.task(name)
    return sorted({iv.core for iv in res.trace.intervals_of(task.task_id)
                   if iv.kind == KERNEL_START_KIND})


def test_a_core_that_last_ran_another_kernel_fetches_its_code():
    """relu, relu, abs, relu on 16 of the 910B's 48 AIVs each: the vector kernels take the AIV
    cores in turn (`Pool.rotating`), so the second relu runs on the next 16, whose caches hold
    nothing (cold), abs on the last 16 (cold), and the last relu wraps to the first relu's
    cores (warm); a cold block's start is longer by exactly blocks x icache_cold_block_us."""
    res = simulate(_chain(), CHIP, fusion=False)
    blocks = res.trace.task("op0").block_dim
    assert blocks == CHIP.aiv_cores // 3
    first = CHIP.ai_cores          # the AIV ids follow the AIC ids
    for i in range(4):
        start = first + (i % 3) * blocks
        assert _cores(res, f"op{i}") == list(range(start, start + blocks)), i
    warm = _starts(res, "op3")
    per_block = CHIP.cycles(CHIP.icache_cold_block_us * 1e-6)
    assert len(warm) == 1 and per_block > 0
    for name in ("op0", "op1", "op2"):
        assert _starts(res, name) == {next(iter(warm)) + blocks * per_block}, name


def test_the_aic_cores_are_taken_lowest_first():
    """No profile shows the AICs' dispatch order, so a cube kernel's blocks take the lowest
    free AIC ids, call after call; the AIVs rotate (LongCat: AIC-only MatMuls do not move
    the vector cores' turn)."""
    g = asim.Graph("mm")
    a = g.input("a", (256, 256), "float16")
    for i in range(3):
        a = g.matmul(a, g.input(f"w{i}", (256, 256), "float16"), name=f"mm{i}")
    g.output(a)
    res = simulate(g, CHIP, fusion=False)
    cores = [_cores(res, f"mm{i}") for i in range(3)]
    assert cores[0] == cores[1] == cores[2] and cores[0][0] == 0


def test_a_warm_run_caches_every_kernel():
    res = simulate(_chain(), CHIP, fusion=False, icache="warm")
    starts = [_starts(res, f"op{i}") for i in range(4)]
    assert starts[0] == starts[1] == starts[2] == starts[3]
    cold = simulate(_chain(), CHIP, fusion=False)
    assert cold.time_us > res.time_us


def test_replayed_tasks_keep_the_state():
    """The same chain with the engine's replay of identical tasks (one stream, sunk) and in
    host mode (no replay) gives each task the same start and the same cores: the replay key
    carries the cold blocks each task would meet, and a replayed task's rows move to the
    cores it takes. (Both runs take the same kernels: host mode's default on the A2 is the
    prebuilt binary kernels, whose split differs.)"""
    sink = simulate(_chain(ops=("relu", "relu", "abs", "relu", "relu")), CHIP, fusion=False)
    host = simulate(_chain(ops=("relu", "relu", "abs", "relu", "relu")), CHIP, fusion=False,
                    mode="host", kernel_build="jit")
    for i in range(5):
        assert _starts(sink, f"op{i}") == _starts(host, f"op{i}"), i
        assert _cores(sink, f"op{i}") == _cores(host, f"op{i}"), i
    assert _starts(sink, "op1") != _starts(sink, "op4")       # fresh cores, then wrapped


def test_chips_without_the_figure_keep_no_state():
    for name in ("ascend910", "ascend910b_gen1", "ascend310p"):
        chip = get_chip(name)
        assert chip.icache_cold_block_us is None
        res = simulate(_chain(), chip, fusion=False)
        assert _starts(res, "op0") == _starts(res, "op1") == _starts(res, "op2")


def test_an_unknown_start_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="icache='lukewarm'"):
        simulate(_chain(), CHIP, icache="lukewarm")
    with pytest.raises(ConfigError, match="icache_cold_block_us"):
        CHIP.replace(icache_cold_block_us=-1.0)


def test_corpus_rows_start_as_their_harness_left_the_cores():
    """A looped op row runs warm; a cold row of a harness that runs a kernel of its own before
    the call (do_bench's flush, msprof op's L2 clear) and an op profiled inside a graph with
    `icache = "cold"` run cold; whole models and decoder steps run cold."""
    rows = {r.id: r for r in load_corpus()}
    assert icache_start(rows["pyasc-910b4-npu-swiglu-2x64x512-fp32"]) == "cold"   # msprof op
    assert icache_start(rows["tta8-910b4-add-1024-int32"]) == "cold"               # do_bench
    assert icache_start(rows["lc-910c-rmsnorm-4x3072-bf16"]) == "cold"             # in a graph
    assert icache_start(rows["lc-910c-add-4x1x3072-bf16"]) == "warm"               # warm there
    assert icache_start(rows["tlrope-a2-rope-prefill-bs8"]) == "warm"              # a loop
    assert icache_start(rows["infer-llama2-70b-tp8-0002"]) == "cold"               # a model


def _two_shapes(build: str, icache: str = "cold"):
    """relu on a [2^20] tensor, then relu on a [2^19] one: the same op type and dtype, each on
    all 48 AIVs (so the second on the first's cores), another shape."""
    g = asim.Graph("t")
    x = g.relu(g.input("x", (1 << 20,), "float16"), name="op0")
    y = g.relu(g.input("y", (1 << 19,), "float16"), name="op1")
    g.output(x)
    g.output(y)
    return simulate(g, CHIP, fusion=False, kernel_build=build, icache=icache)


def test_a_shape_compiled_kernel_is_one_binary_per_shape():
    """A kernel compiled for its shapes (kernel_build "jit": a graph's static kernels) is its
    own binary, so the same op on another shape starts cold; a prebuilt dynamic-shape kernel
    ("binary") serves every shape of its dtypes, so the second call finds its code cached."""
    per_block = CHIP.cycles(CHIP.icache_cold_block_us * 1e-6)
    static = _two_shapes("jit")
    blocks = static.trace.task("op1").block_dim
    assert static.trace.task("op0").block_dim >= blocks > 1
    assert _starts(static, "op1") == {s + blocks * per_block
                                      for s in _starts(_two_shapes("jit", "warm"), "op1")}
    dynamic = _two_shapes("binary")
    assert dynamic.trace.task("op0").block_dim >= dynamic.trace.task("op1").block_dim
    assert _starts(dynamic, "op1") == _starts(_two_shapes("binary", "warm"), "op1")


def test_a_rotating_pool_starts_after_the_last_lease_and_wraps():
    """`Pool.peek` / `advance`: a rotating pool's next lease starts after the previous one's
    last core and wraps past the end; a plain pool takes the lowest free ids."""
    import simpy

    from ascendsim.sim.cores import Pool
    env = simpy.Environment()
    aiv = Pool(env, "AIV", 48, 24, rotating=True)
    assert aiv.peek(16) == list(range(24, 40))
    aiv.advance(aiv.peek(16))
    assert aiv.peek(40) == [*range(40, 72), *range(24, 32)]
    aiv.advance(aiv.peek(40))
    assert aiv.next == 32
    aic = Pool(env, "AI Core", 24)
    aic.advance(aic.peek(16))
    assert aic.peek(4) == [0, 1, 2, 3]
