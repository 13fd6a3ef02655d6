"""How a cube op's operands are cut into GM->L1 loads: stepK chunks of base K blocks for a
MatMul, whole Cin1 slices of the feature map for a convolution (the search of
lower/cube_tiling.py tries the chunks `l1_chunk_candidates` gives).

Note on the model
-----------------
Feature-map windows. A convolution's output tile of m_t pixels reads the input rows its window
covers (`a_tile_bytes`: m_t/Wo output rows, their input rows at the stride plus the kh -
stride halo, of Win pixels x the padded input channels), once for all kernel positions.

Conv loads by Cin1 slice. TBE's conv schedule (te_schedule/conv_schedule.py, public copy
jizhuoran/caffe-huawei-atlas-convertor convertor/huawei/te/lang/cce/te_schedule/) loads the
feature map to L1 as input rows of whole Cin1 slices (C0 channels each): its AL1 tile's K is
`AL1_shape[0]` / (kh*kw*C0) slices (`tiling_l1_shape_get`), the schedule splits Cin1 into
`al1_factor[0]` = Cin1 / that many loads per M extent (`factor_al1_bl1`; the weights likewise,
`BL1_shape[0]` / (kh*kw*C0)), and load3d expands each slice into img2col rows L1 -> L0A on MTE1
for every kernel position. So one GM->L1 load of a tile carries the rows its output pixels
read (`a_tile_bytes`: the halo included, once for all kernel positions) for s Cin1 slices, and
covers s*kh*kw*C0 of K; the base K blocks tile it exactly, or it is the whole K
(`l1_chunk_candidates`; al1_factor[0] == 1 is the "full load" of `check_feature_map`). Each
load pays the GM->L1 latency once (`a_l1_loads`), where chunks of base K blocks would cut the
window into many small loads (nine per tile for a 3x3 convolution of 32 channels at baseK
32). When a slice of the rows does not fit L1 (two chunks of each streamed operand), the
search takes a smaller M tile, as TBE's default tiling shrinks its M tile until a
double-buffered Cin1 slice of the rows fits L1 (`get_default_tiling`). A 1x1 kernel's slice
is one K fractal (C0 channels), so a MatMul's chunks of base K blocks are already whole
slices: its chunks stay the MatMul's. The rule is the forward convolution's
(`GemmSpec.load3d`); a weight gradient read as a Conv of X by dY (whose "kernel" is the whole
dY plane) runs TBE's backprop-filter schedule and keeps the MatMul's chunks.
"""

from __future__ import annotations

import math

from .gemm_spec import GemmSpec, GemmTiling
from .tiling import cdiv

#: candidate stepK (base K blocks per GM->L1 chunk; for a convolution, Cin1 slices per load)
L1_STEPS = (1, 2, 4, 8, 16)


def a_tile_bytes(spec: GemmSpec, m_t: int) -> float:
    """GM bytes of A for one output tile over the whole K.

    MatMul: the m_t x K strip. Conv (implicit GEMM): the feature-map window the tile's m_t
    output pixels read, (m_t/Wo*stride + kh - stride) input rows of Win pixels x Cin_pad, but
    never more than the expanded m_t x K matrix (a strided 1x1 conv reads only the pixels it
    uses).
    """
    full = m_t * spec.k * spec.in_bytes
    if spec.conv_rows is None:
        return full
    wo, win, sh, kh, kw = spec.conv_rows
    cin = spec.k / (kh * kw)
    rows_in = (m_t / wo) * sh + max(kh - sh, 0)
    return min(full, rows_in * win * cin * spec.in_bytes)


def cin1_slice(spec: GemmSpec, k0: int) -> int:
    """K elements of one Cin1 slice of a convolution's img2col matrix (C0 = `k0` input
    channels at every kernel position: kh*kw*k0), the unit of its GM->L1 feature-map loads
    (module note); 0 for a MatMul, a weight gradient read as a Conv (its own schedule), a K
    that is not whole slices and a 1x1 kernel, whose slice is one K fractal: their chunks
    are whole base K blocks (each a whole number of a 1x1 kernel's slices)."""
    if spec.conv_rows is None or not spec.load3d:
        return 0
    _, _, _, kh, kw = spec.conv_rows
    if kh * kw == 1:
        return 0
    piece = kh * kw * k0
    return piece if spec.k % piece == 0 else 0


def l1_chunk_candidates(spec: GemmSpec, k0: int, k_t: int) -> list[int]:
    """The K elements one GM->L1 chunk of A and B may span (the stepK axis of the search),
    in search order. A MatMul: stepK base K blocks, stepK dividing the base K blocks. A
    convolution: a whole number of Cin1 slices dividing Cin1 (TBE conv_schedule: AL1_shape[0]
    / (kh*kw*C0) slices per load, al1_factor[0] = Cin1 / that), tiled exactly by the base K
    block, or the whole K in one load."""
    piece = cin1_slice(spec, k0)
    if not piece:
        nk = cdiv(spec.k, k_t)
        return [k_t * r for r in L1_STEPS if r <= nk and nk % r == 0]
    cin1 = spec.k // piece
    return [piece * s for s in conv_steps(cin1) if s == cin1 or (piece * s) % k_t == 0]


def conv_steps(cin1: int) -> tuple[int, ...]:
    """Cin1 slices per load a convolution's search tries: the stepK candidates that divide
    Cin1, and Cin1 itself (the whole K in L1), ascending."""
    return tuple(sorted({s for s in L1_STEPS if cin1 % s == 0} | {cin1}))


def k_span(spec: GemmSpec, k0: int, k_t: int) -> int:
    """K elements the GM->L1 chunks of one tile cover: the whole K of a convolution loaded by
    Cin1 slices, else the base K blocks (K rounded up to baseK)."""
    return spec.k if cin1_slice(spec, k0) else cdiv(spec.k, k_t) * k_t


def a_l1_loads(spec: GemmSpec, t: GemmTiling, k0: int) -> tuple[int, int]:
    """(GM->L1 loads of A per output tile, bytes of each): the tile's A over the whole K
    (`a_tile_bytes`: a convolution's input rows with their halo, once for every kernel
    position) in `k_span / k_l1` chunks; a kept A strip is spread over the tiles that
    share it."""
    loads = k_span(spec, k0, t.k_t) // t.k_l1
    return loads, math.ceil(a_tile_bytes(spec, t.m_t) / t.run_a / loads)
