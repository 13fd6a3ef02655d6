"""Cube tiling as CANN's Matmul tiling (lower/cube_tiling.py): L1 operand reuse, re-read
factors, sensitivity to the cube rate, ND operands on split chips."""

import math
import random
import re

import pytest

import ascendsim as asim
from ascendsim.api import simulate
from ascendsim.hw import get_chip
from ascendsim.lower import cube_tiling as ct
from ascendsim.lower import lower
from ascendsim.lower.cube_tiling import GemmSpec, gemm_tiling
from ascendsim.lower.tiling import fix_cycles


def _gemm(m, k, n, dtype="float16"):
    g = asim.Graph("gemm")
    g.output(g.matmul(g.input("a", (m, k), dtype), g.input("b", (k, n), dtype), name="mm"))
    return g


def _mm(chip, g):
    return simulate(g, chip, fusion=False, detail="block").trace.task("mm")


def _reads(task):
    return task.traffic.get(("L2", "read"), 0) + task.traffic.get(("DDR", "read"), 0)


def _factors(chip, g):
    """(A re-read factor, B re-read factor, base M, base N) from the task's notes."""
    task = next(t for t in lower(g, chip).tasks if t.op_name == "mm")
    text = " ".join(task.notes)
    a, b = re.search(r"A read ([\d.]+)x, B read ([\d.]+)x", text).groups()
    bm, bn = re.search(r"base block m(\d+) x n(\d+)", text).groups()
    return float(a), float(b), int(bm), int(bn)


def _double_cube(chip):
    """The cube's fp16 rate doubled: twice the K fractal per cycle (peak x 2)."""
    m, k, n = chip.cube_mkn.float16
    return chip.replace(cube_mkn={"float16": (m, 2 * k, n)})


def test_doubling_the_cube_rate_speeds_a_4096_gemm_on_the_910_by_over_30_percent():
    """With CANN-sized base blocks (up to 256x256 with a one-tile L0C on the 910's 256 KB
    L0C) the 4096^3 GEMM is compute-bound: twice the cube rate makes it > 1.3x faster (1.5x;
    it was 1.04x with 128x128 tiles)."""
    chip = get_chip("ascend910")
    base, fast = _mm(chip, _gemm(4096, 4096, 4096)), _mm(_double_cube(chip),
                                                          _gemm(4096, 4096, 4096))
    speedup = base.duration / fast.duration
    assert speedup > 1.3, f"speedup {speedup:.3f}"


def test_910b_4096_gemm_is_cube_bound_and_its_2x_cube_limit_is_the_gm_path():
    """On the 910B2 the 4096^3 fp16 GEMM (ND operands, CANN's 128x256 base block) keeps the
    cube >= 85% busy (Huawei's Matmul sample measures aic_mac_ratio 0.864 on an 8192^3 fp16
    GEMM from ND data, MTE2-bound). Doubling the cube alone is capped by the per-core nd2nz
    GM->L1 rate (133 B/cycle and a 311-cycle latency a move, against the 192 B/cycle a 2x cube
    would need at 85 flops/byte): the MTE2 already paces it, so the engine's schedule may
    differ by a few hundred cycles either way; doubling the cube with the GM->L1 paths and L2
    bandwidth makes it > 1.3x faster."""
    chip = get_chip("ascend910b")
    g = _gemm(4096, 4096, 4096)
    base = _mm(chip, g)
    assert base.pipe_cycles["M"] >= 0.85 * base.duration
    pb = chip.path_bytes_per_cycle
    fast_all = _double_cube(chip).replace(
        path_bytes_per_cycle={"gm_l1": 2 * pb.gm_l1, "gm_l1_nd2nz": 2 * pb.gm_l1_nd2nz},
        l2_bandwidth_bytes_per_s=2 * chip.l2_bandwidth_bytes_per_s)
    assert base.duration / _mm(fast_all, g).duration > 1.3
    cube_only = base.duration / _mm(_double_cube(chip), g).duration
    assert 0.999 <= cube_only < 1.3, f"cube-only speedup {cube_only:.4f}"


def test_gm_reads_are_the_operands_times_the_reread_factors_the_tiling_implies():
    """A 4096^3 GEMM on the 910 cannot keep a whole-K strip in its 1 MB L1 (256 x 4096 x 2 B
    = 2 MB): A is read N/baseN times and B M/baseM times, and the GM reads equal exactly
    that; the output is written once."""
    chip = get_chip("ascend910")
    g = _gemm(4096, 4096, 4096)
    fa, fb, bm, bn = _factors(chip, g)
    assert (fa, fb) == (4096 / bn, 4096 / bm)
    operand = 4096 * 4096 * 2
    task = _mm(chip, g)
    assert _reads(task) == pytest.approx(operand * (fa + fb), rel=1e-3)
    assert task.traffic[("L2", "write")] == operand
    # base blocks of at least 128x256 (the 128x128 tiles before read 32 + 32 times)
    assert bm * bn >= 128 * 256 and fa + fb <= 48


def test_a_strip_that_fits_l1_is_read_once_per_core_and_a_small_l1_falls_back():
    """K = 512 on the 910B, batched (a 2-D MatMul with a block per core takes MatMulV3's basic
    tiling instead, which keeps nothing: tests/lower/test_matmul_v3_basic.py): a 512 x 256 B
    strip (256 KB) stays in the 512 KB L1 while the core walks its tiles, so B is read fewer
    times than there are M tiles; an L1 too small to hold a strip beside the streamed chunks
    falls back to re-reads, with more GM traffic."""
    chip = get_chip("ascend910b")
    g = asim.Graph("gemm")
    g.output(g.matmul(g.input("a", (2, 4096, 512), "float16"),
                      g.input("b", (2, 512, 2048), "float16"), name="mm"))
    fa, fb, bm, bn = _factors(chip, g)
    assert min(fa * bn / 2048, fb * bm / (2 * 4096)) < 1.0  # one operand is reused
    small = chip.replace(l1_bytes=96 * 1024)
    sa, sb, sbm, sbn = _factors(small, g)
    assert (sa, sb) == (2048 / sbn, 2 * 4096 / sbm)        # no reuse: every tile re-reads
    assert _reads(_mm(small, g)) > 1.2 * _reads(_mm(chip, g))


def test_l1_reuse_never_overfills_l1():
    """The tiling's L1 footprint (resident strip + two chunks of the other operand) fits the
    chip's L1 for shapes on both sides of the reuse threshold."""
    chip = get_chip("ascend910b")
    for k in (256, 1024, 4096, 16384):
        spec = GemmSpec(1, 2048, k, 2048, "float16", 2, 2, 4)
        t = gemm_tiling(chip, spec, "mm")
        a_strip, b_strip = t.m_t * k * 2, k * t.n_t * 2
        a_chunk, b_chunk = t.m_t * t.k_l1 * 2, t.k_l1 * t.n_t * 2
        need = {"A": a_strip + 2 * b_chunk, "B": b_strip + 2 * a_chunk,
                "": 2 * (a_chunk + b_chunk)}[t.reuse]
        assert need <= chip.l1_bytes, (k, t)


def _bmm_scores():
    g = asim.Graph("scores")
    q = g.input("q", (8, 12, 512, 64), "float16")
    kt = g.input("kt", (8, 12, 64, 512), "float16")
    g.output(g.matmul(q, kt, name="mm"))
    return g


def test_910b_matmul_takes_and_gives_nd_without_transdata():
    """MatMul/BatchMatMul on the 910B convert ND->NZ on the GM->L1 move and write ND through
    the FixPipe: no TransData task around them (the 910 still converts to FRACTAL_NZ)."""
    for g in (_gemm(1024, 1024, 1024), _bmm_scores()):
        tasks = lower(g, "ascend910b").tasks
        assert [t.op_type for t in tasks] == ["MatMul"], [t.op_name for t in tasks]
        assert tasks[0].output_formats == ("ND",)
        assert any("nd2nz" in n for n in tasks[0].notes)
        assert "TransData" in [t.op_type for t in lower(g, "ascend910").tasks]


def test_one_tile_l0c_waits_for_its_drain_only_without_the_unit_flag():
    """A base block that fills L0C (one tile): on the 910 (no unit flag) each tile's mmads
    wait for the previous tile's L0C->UB drain; on the 910B the FixPipe drain overlaps them."""
    from ascendsim.lower.cube_tiling import _gemm_stages

    for name, waits in (("ascend910", True), ("ascend910b", False)):
        chip = get_chip(name)
        spec = GemmSpec(1, 4096, 4096, 4096, "float16", 2, 2, 4)
        t = gemm_tiling(chip, spec, "mm")
        t1 = type(t)(**{**t.__dict__, "m_t": 128, "n_t": 256, "db_l0c": 1, "cub_n": 128})
        m_stage = next(s for s in _gemm_stages(chip, spec, t1) if s.pipe == "M")
        assert any(i.kind == "wait_l0c" for i in m_stage.head) is waits, name


def _estimate_one(chip, spec: GemmSpec, m_t: int, n_t: int, k_t: int, k_l1: int, reuse: str,
              db_l0c: int, cub: int) -> ct.GemmTiling:
    """One candidate's estimate as first written (the reference `_estimates` must equal,
    float for float): the slowest pipe's period over the tiles of one core, plus the
    pipeline's fill (the first L1 chunk) and drain (the last output)."""
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    c0 = chip.cube_mmad_overhead_cycles
    l2_bw = chip.l2_bandwidth_bytes_per_s / chip.clock_hz
    hbm_bw = chip.hbm_bandwidth_bytes_per_s / chip.clock_hz
    tm, tn, tiles, block = ct._grid(chip, spec, m_t, n_t)
    per_core = ct.cdiv(tiles, block)
    run_a = min(per_core, tn) if reuse == "A" else 1
    run_b = min(per_core, tm) if reuse == "B" else 1
    nk = ct.cdiv(spec.k, k_t)
    mmad = ct.cdiv(m_t, m0) * (k_t // k0) * ct.cdiv(n_t, n0) + c0
    t_m = nk * mmad
    pb = chip.path_bytes_per_cycle
    t_mte1 = nk * (m_t * k_t * spec.in_bytes / pb.l1_l0a + k_t * n_t * spec.in_bytes / pb.l1_l0b)
    a_b = ct.a_tile_bytes(spec, m_t) / run_a
    b_b = spec.k * n_t * spec.in_bytes / run_b
    miss = (spec.miss_a + spec.miss_b) / 2
    t_mte2 = 0.0
    for nbytes, nd, m_x in ((a_b, spec.nd2nz_a, spec.miss_a), (b_b, spec.nd2nz_b, spec.miss_b)):
        bw = ct._gm_l1_bw(chip, nd)
        core_bw = bw * (1 - m_x) + m_x * bw / chip.l2_miss_slowdown
        t_mte2 += nbytes / min(core_bw, l2_bw / block, hbm_bw / (block * max(miss, 1e-9)))
    span = _k_span(spec, k0, k_t)
    t_mte2 += (span // k_l1) * (ct.l1_read_latency(chip, spec.nd2nz_a)
                                + ct.l1_read_latency(chip, spec.nd2nz_b))
    out = m_t * n_t
    if chip.coupled:
        t_out = out * spec.acc_bytes / pb.l0c_ub
        t_st = out * spec.out_bytes / pb.ub_gm
    else:
        t_out = fix_cycles(chip, m_t, n_t, spec.acc_bytes)
        t_st = 0.0
    period = max(t_m, t_mte1, t_mte2, t_out, t_st)
    if chip.cube_tile_scalar_cycles_per_instr:   # the scalar unit's work per base block
        period = max(period, chip.cube_tile_scalar_cycles_per_instr
                     * (2 * (span // k_l1) + 3 * nk))
    if db_l0c == 1 and not ct.unit_flag(chip):   # one tile in L0C: the cube waits for its drain
        period = max(period, t_m + t_out)
    est = per_core * period + (t_mte2 * k_l1 / span) + t_out + t_st
    return ct.GemmTiling(m_t, n_t, k_t, k_l1, tiles, block, est, tm, tn, reuse, run_a, run_b,
                      db_l0c, cub)


def _slice(spec: GemmSpec, k0: int) -> int:
    """A forward convolution's Cin1 slice of K (kh*kw*k0) when K is whole slices and the
    kernel is not 1x1, else 0."""
    if spec.conv_rows is None or not spec.load3d \
            or spec.k % (spec.conv_rows[3] * spec.conv_rows[4] * k0) \
            or spec.conv_rows[3] * spec.conv_rows[4] == 1:
        return 0
    return spec.conv_rows[3] * spec.conv_rows[4] * k0


def _k_span(spec: GemmSpec, k0: int, k_t: int) -> int:
    """K the L1 chunks of a tile cover: a convolution's whole K, else K rounded up to k_t."""
    return spec.k if _slice(spec, k0) else -(-spec.k // k_t) * k_t


def _chunks(spec: GemmSpec, k0: int, k_t: int) -> list[int]:
    """The K of one GM->L1 chunk the search tries, in order: k_t x stepK with stepK dividing
    the K blocks; a convolution's Cin1 slices x s, s dividing Cin1, tiled by k_t, or all."""
    piece = _slice(spec, k0)
    if piece:
        cin1 = spec.k // piece
        steps = sorted({s for s in ct._L1_STEPS if cin1 % s == 0} | {cin1})
        return [piece * s for s in steps if s == cin1 or piece * s % k_t == 0]
    nk = -(-spec.k // k_t)
    return [k_t * r for r in ct._L1_STEPS if r <= nk and nk % r == 0]


def _slow_search(chip, spec):
    """The tiling search as first written: `_estimate_one` per candidate, GemmTiling objects."""
    cands = []
    for m_t in ct._MN_EDGES:
        for n_t in ct._MN_EDGES:
            for ks in ct._K_STEPS:
                k0 = chip.cube_shape(spec.in_dtype)[1]
                k_t = ks * k0
                for k_l1 in _chunks(spec, k0, k_t):
                    for reuse in ct.REUSE_MODES:
                        for db_l0c in (1, 2):
                            cands.append(((m_t, n_t, k_t, k_l1, reuse, db_l0c, n_t),
                                          _estimate_one(chip, spec, m_t, n_t, k_t, k_l1,
                                                       reuse, db_l0c, n_t)))
    return cands


@pytest.mark.parametrize("name", ["ascend910", "ascend910b", "ascend310"])
def test_batched_estimates_equal_the_one_candidate_estimate(name):
    """`_estimates` (what the search runs) gives the very floats `_estimate_one` gives, for every
    candidate: GEMMs and convs, L2 misses, ND operands, a bias."""
    chip = get_chip(name)
    specs = [GemmSpec(1, 2048, 1024, 4096, "float16", 2, 2, 4),
             GemmSpec(8, 196, 1152, 130, "float16", 2, 2, 4, miss_a=0.3, miss_b=0.0,
                      bias=True, nd2nz_a=True),
             GemmSpec(32, 3136, 576, 64, "float16", 2, 2, 4, miss_a=1.0, miss_b=0.55,
                      conv_rows=(56, 58, 1, 3, 3), nd2nz_b=True, load3d=True)]
    for spec in specs:
        for (m_t, n_t, k_t, k_l1, reuse, db_l0c, cub), want in _slow_search(chip, spec):
            (row,) = ct._estimates(chip, spec, m_t, n_t, k_t, [(k_l1, reuse)], db_l0c, cub)
            assert ct.GemmTiling(*row) == want


def test_tiling_ignores_what_the_search_never_reads():
    """GEMMs that differ only in their epilogue, write-through share or shared strips share a
    search: the same tiling as each spec searched on its own."""
    chip = get_chip("ascend910")
    plain = GemmSpec(1, 1024, 1024, 1024, "float16", 2, 2, 4, miss_a=0.5)
    other = GemmSpec(1, 1024, 1024, 1024, "float16", 2, 2, 4, miss_a=0.5, out_through=0.25,
                     shared_a=True)
    assert ct.tiling_key(other) == plain
    assert gemm_tiling(chip, other, "mm") == ct._gemm_tiling.__wrapped__(chip, other)



def _scalar_search(chip, spec: GemmSpec, out: list | None = None) -> ct.GemmTiling:
    """The search one candidate block at a time (`ct._estimates`), as first written: the
    reference the array search must equal."""
    m0, k0, n0 = chip.cube_shape(spec.in_dtype)
    mp, np_ = ct.ceil_to(spec.m, m0), ct.ceil_to(spec.n, n0)
    tbe = ct.tbe_matmul(chip, spec)
    best: ct.GemmTiling | None = None
    cands: list[ct.GemmTiling] = []
    smallest = None
    for m_t in ct._MN_EDGES:
        if m_t > max(mp, m0) * 2 and m_t > m0:
            continue
        for n_t in ct._MN_EDGES:
            if n_t > max(np_, n0) * 2 and n_t > n0:
                continue
            tile_acc = m_t * n_t * spec.acc_bytes
            db_l0c = 2 if 2 * tile_acc <= chip.l0c_bytes else 1
            a_strip = ct.a_tile_bytes(spec, m_t)
            b_strip = spec.k * n_t * spec.in_bytes
            modes = ct.REUSE_MODES
            if tbe:
                modes = (ct.tbe_reuse(chip, m_t, n_t, a_strip, b_strip),)
                if modes[0]:
                    db_l0c = 1
            # a bias on split chips is read from the BiasTable (MatMulV3 CheckBTSize)
            if spec.bias and chip.bt_bytes and n_t * spec.acc_bytes > chip.bt_bytes:
                continue
            cub = ct._cub_columns(chip, spec, m_t, n_t) if chip.coupled else n_t
            bias = n_t * spec.acc_bytes if spec.bias else 0
            for ks in ct._K_STEPS:
                k_t = ks * k0
                if k_t > ct.ceil_to(spec.k, k0) and ks > 1:
                    continue
                l0a, l0b = 2 * m_t * k_t * spec.in_bytes, 2 * k_t * n_t * spec.in_bytes
                need = (l0a, l0b, tile_acc)
                if smallest is None or sum(need) < sum(smallest[1]):
                    smallest = ((m_t, n_t, k_t), need)
                if (l0a > chip.l0a_bytes or l0b > chip.l0b_bytes
                        or tile_acc > chip.l0c_bytes or not cub):
                    continue
                variants = []
                for k_l1 in _chunks(spec, k0, k_t):
                    a_chunk = math.ceil(a_strip * k_l1 / spec.k)
                    b_chunk = k_l1 * n_t * spec.in_bytes
                    l1_need = {"": 2 * (a_chunk + b_chunk) + bias,
                               "A": a_strip + 2 * b_chunk + bias,
                               "B": b_strip + 2 * a_chunk + bias}
                    for reuse in modes:
                        if l1_need[reuse] > chip.l1_bytes:
                            continue
                        variants.append((k_l1, reuse))
                if variants:
                    cands += ct._estimates(chip, spec, m_t, n_t, k_t, variants, db_l0c, cub)
    if out is not None:
        out.extend(cands)
    if cands:
        # CANN picks the base block with the least GM load (MatMulV3 CalcBase minLoadSize):
        # among the candidates within ct.EST_TOLERANCE of the fastest, the least traffic wins
        fastest = min(t[6] for t in cands)
        near = [ct.GemmTiling(*t) for t in cands if t[6] <= fastest * (1 + ct.EST_TOLERANCE)]
        # with a scalar cost per cube instruction, fewer K steps break the tie
        deep = bool(chip.cube_tile_scalar_cycles_per_instr)
        best = min(near, key=lambda t: (sum(ct.operand_read_bytes(spec, t)),
                                        ct.cdiv(spec.k, t.k_t) if deep else 0, t.est))
    if best is None:
        (m_t, n_t, k_t), (a, b, c) = smallest
        bufs = [("L0A", a, chip.l0a_bytes), ("L0B", b, chip.l0b_bytes),
                ("L0C", c, chip.l0c_bytes)]
        name, req, cap = next(((n, r, c) for n, r, c in bufs if r > c),
                              ("L1", 2 * (m_t + n_t) * k_t * spec.in_bytes, chip.l1_bytes))
        if name == "L1" and chip.coupled and not ct._cub_columns(chip, spec, m_t, n_t):
            name, req, cap = "UB", 2 * m_t * 16 * spec.out_bytes, chip.ub_bytes
        raise ct._NoFit(f"{name} of core 0 ({cap} B) cannot hold the minimum cube tile "
                     f"{m_t}x{k_t}x{n_t} with double buffering ({req} B)")
    return best



def _specs(rng: random.Random) -> list[GemmSpec]:
    """GEMMs and convs of assorted shapes, misses, formats, biases and fixed block dims."""
    out = []
    for _ in range(40):
        m, n = rng.choice([1, 7, 64, 196, 1000, 3136, 12544]), rng.choice([1, 16, 64, 130, 1024])
        k = 16 * rng.choice([1, 3, 8, 36, 72, 256])
        conv = rng.random() < 0.4
        out.append(GemmSpec(
            rng.choice([1, 2, 8, 32]), m, k, n, rng.choice(["float16", "float16", "int8"]),
            2, rng.choice([1, 2, 4]), 4, miss_a=rng.choice([0.0, 0.3, 1.0, rng.random()]),
            miss_b=rng.choice([0.0, 0.55, 1.0, rng.random()]), bias=rng.random() < 0.3,
            conv_rows=(56, 58, 1, 3, 3) if conv else None, nd2nz_a=rng.random() < 0.3,
            nd2nz_b=rng.random() < 0.3, blocks=rng.choice([0, 0, 0, 8, 64]),
            batched_b=rng.random() < 0.3, load3d=conv and rng.random() < 0.8))
    # operands too wide for any tile: no candidate fits L0A/L0B
    out += [GemmSpec(1, 64, 64, 64, "float16", 200, 2, 4),
            GemmSpec(4, 640, 512, 64, "float16", 2, 2, 4096)]
    return out


@pytest.mark.parametrize("name", ["ascend910", "ascend910b", "ascend310"])
def test_array_search_picks_what_the_one_block_search_picks(name):
    """The search on `_candidates`' arrays gives exactly the tiling (the same estimate, float
    for float) the search one block at a time gives, or the same error."""
    chip = get_chip(name)
    for spec in _specs(random.Random(15)):
        if ct.matvec_block(chip, spec):
            # MatMulV3's own matrix-vector block narrows the candidates after the search
            # (tests/lower/test_matmul_v3_basic.py); the reference here has no such filter
            continue
        try:
            want = _scalar_search(chip, spec)
        except ct._NoFit as exc:
            with pytest.raises(ct._NoFit, match=re.escape(str(exc))):
                ct._gemm_tiling.__wrapped__(chip, spec)
            continue
        assert ct._gemm_tiling.__wrapped__(chip, spec) == want
        # every candidate, in search order, with its estimate
        every: list = []
        _scalar_search(chip, spec, every)
        c, est = ct._search_estimates(chip, spec)
        assert [c.tiling(i, float(e)) for i, e in enumerate(est)] == \
            [ct.GemmTiling(*row) for row in every]


def test_matmulv3_basic_block_when_every_core_gets_one():
    # MatMulV3's basic tiling (SetBaseBlockTiling): 128 x 256 on the 910B (L0C 128 KB) once
    # the output holds at least one such block per cube core; 1024^2 gives 8 x 4 = 32 blocks
    # on 24 cores, so 8 cores take two blocks (two rounds of mmads where a balanced split of
    # smaller blocks takes 64/24 -> 3 blocks of a quarter... the cube time goes up)
    chip = get_chip("ascend910b")
    assert ct.basic_block(chip, GemmSpec(1, 1024, 1024, 1024, "float16", 2, 2, 4)) == (128, 256)
    # fewer blocks than cores (512 x 512: 4 x 2), N below the block, a batch: the search
    assert ct.basic_block(chip, GemmSpec(1, 512, 1024, 512, "float16", 2, 2, 4)) is None
    assert ct.basic_block(chip, GemmSpec(1, 4096, 4096, 16, "float16", 2, 2, 4)) is None
    assert ct.basic_block(chip, GemmSpec(8, 1024, 1024, 1024, "float16", 2, 2, 4)) is None
    # coupled chips (910) run TBE's schedule, not MatMulV3
    assert ct.basic_block(get_chip("ascend910"),
                          GemmSpec(1, 1024, 1024, 1024, "float16", 2, 2, 4)) is None
    _, _, bm, bn = _factors(chip, _gemm(1024, 1024, 1024))
    assert (bm, bn) == (128, 256)


def test_basic_block_round_imbalance_costs_what_two_rounds_cost():
    # 1024 x 1024 output: 32 blocks of 128 x 256 on 24 cores, the busiest core runs two;
    # 1536 x 1024: 48 blocks, every core runs two. Same busiest-core work, so the same time
    # (within 10%: the 1536 case shares L2/HBM among 24 busy cores in its second round, the
    # 1024 one among 8), where a balanced split would make the larger one ~1.5x slower
    chip = get_chip("ascend910b")
    small = _mm(chip, _gemm(1024, 1024, 1024, "float32")).duration
    large = _mm(chip, _gemm(1536, 1024, 1024, "float32")).duration
    assert large <= 1.1 * small


def test_fixpipe_moves_l0c_bytes_row_by_row():
    """A FixPipe write to GM is paced by the L0C bytes it reads (4 per fp32 accumulator: the
    unit msKPP's L0C -> GM curve, and so `l0c_gm`, is in), whole cycles per row of 16-column
    groups (pypto's A2/A3 CalcFixL0cOut), not by the fp16 bytes it writes."""
    from ascendsim.lower.tiling import fix_row_cycles

    chip = get_chip("ascend910b")
    rate = chip.path_bytes_per_cycle.l0c_gm
    assert fix_row_cycles(chip, 32, 4) == math.ceil(32 * 4 / rate)
    assert fix_row_cycles(chip, 17, 4) == fix_row_cycles(chip, 32, 4)   # 16-column groups
    # a 128 x 256 fp16 tile: twice the time its 2-byte output would take at the same rate
    assert fix_cycles(chip, 128, 256, 4) == 128 * math.ceil(256 * 4 / rate)
    assert fix_cycles(chip, 128, 256, 4) >= 2 * 128 * 256 * 2 / rate
