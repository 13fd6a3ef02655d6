"""Convolution kernels: im2col (numba) + GEMM, a direct depthwise loop, and ConvTranspose
as GEMM + col2im (numba).

Why this shape: a pure numba loop cannot match BLAS on the big GEMM, so the numba kernels do
the data movement (patch gathering with padding/stride/dilation, the col2im scatter-add) and
the multiply is one BLAS sgemm per image and group (`np.matmul`; numba's own `np.dot` needs
SciPy, which the project does not depend on). Memory stays bounded: one image's patch matrix
at a time. Depthwise-like groups (one input channel per group) skip the GEMM: a direct numba
loop over the kernel taps, vectorised along the output row.

All kernels take 3 spatial axes; 1-D and 2-D convolutions are viewed with leading unit axes.
Numerics: fp16 is widened to fp32 (numba has no CPU float16), accumulated in fp32 with the
bias, and rounded to fp16 once at the end, as the cube's L0C accumulator does.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ascendsim.errors import GraphError

from .config import JIT
from .pool import Window, attr_ints, auto_pad_of, resolve_window


@njit(inline="always", **JIT)
def _valid(n_out, stride, pad, off, n_in):
    """Output positions o in [lo, hi) with 0 <= o*stride - pad + off < n_in."""
    lo = max(0, -((off - pad) // stride))
    hi = min(n_out, (n_in - 1 + pad - off) // stride + 1)
    return lo, max(lo, hi)


@njit(parallel=True, **JIT)
def _im2col(x, c0, geom, cols):
    """cols[(c, a, b, e), (i, z, y, xo)] = x[i, c0 + c, z*sd - pd + a*dd, ...] (0 in padding)."""
    kd, kh, kw = geom[0]
    sd, sh, sw = geom[1]
    dd, dh, dw = geom[2]
    pd, ph, pw = geom[3]
    nb, _, d_in, h_in, w_in = x.shape
    od, oh, ow = geom[4]
    kvol = kd * kh * kw
    for r in prange(cols.shape[0]):
        c, rem = c0 + r // kvol, r % kvol
        a, b, e = rem // (kh * kw), (rem // kw) % kh, rem % kw
        z0, z1 = _valid(od, sd, pd, a * dd, d_in)
        y0, y1 = _valid(oh, sh, ph, b * dh, h_in)
        x0, x1 = _valid(ow, sw, pw, e * dw, w_in)
        for i in range(nb):
            row = cols[r, i * od * oh * ow:(i + 1) * od * oh * ow]
            if z1 - z0 < od or y1 - y0 < oh or x1 - x0 < ow:
                row[:] = 0
            for z in range(z0, z1):
                iz = z * sd - pd + a * dd
                for y in range(y0, y1):
                    iy = y * sh - ph + b * dh
                    base = (z * oh + y) * ow
                    for xo in range(x0, x1):
                        row[base + xo] = x[i, c, iz, iy, xo * sw - pw + e * dw]


@njit(parallel=True, **JIT)
def _depthwise(x, w, geom, out):
    """Direct conv when every group has one input channel: out[n, m] += w[m, tap] * x[n, m//mg]."""
    kd, kh, kw = geom[0]
    sd, sh, sw = geom[1]
    dd, dh, dw = geom[2]
    pd, ph, pw = geom[3]
    n, _, d_in, h_in, w_in = x.shape
    _, m_out, od, oh, ow = out.shape
    mg = m_out // x.shape[1]
    for job in prange(n * m_out):
        i, m = job // m_out, job % m_out
        c = m // mg
        for a in range(kd):
            z0, z1 = _valid(od, sd, pd, a * dd, d_in)
            for b in range(kh):
                y0, y1 = _valid(oh, sh, ph, b * dh, h_in)
                for e in range(kw):
                    x0, x1 = _valid(ow, sw, pw, e * dw, w_in)
                    wt = w[m, 0, a, b, e]
                    for z in range(z0, z1):
                        iz = z * sd - pd + a * dd
                        for y in range(y0, y1):
                            iy = y * sh - ph + b * dh
                            for xo in range(x0, x1):
                                out[i, m, z, y, xo] += wt * x[i, c, iz, iy, xo * sw - pw + e * dw]


@njit(parallel=True, **JIT)
def _col2im(cols, geom, out, m0):
    """Scatter-add of ConvTranspose columns: out[m0 + m, i*s - p + k*d] += cols[(m, k), i]."""
    kd, kh, kw = geom[0]
    sd, sh, sw = geom[1]
    dd, dh, dw = geom[2]
    pd, ph, pw = geom[3]
    d_in, h_in, w_in = geom[4]
    _, od, oh, ow = out.shape
    kvol = kd * kh * kw
    for m in prange(cols.shape[0] // kvol):
        for tap in range(kvol):
            a, b, e = tap // (kh * kw), (tap // kw) % kh, tap % kw
            r = m * kvol + tap
            z0, z1 = _valid(d_in, sd, pd, a * dd, od)
            y0, y1 = _valid(h_in, sh, ph, b * dh, oh)
            x0, x1 = _valid(w_in, sw, pw, e * dw, ow)
            for z in range(z0, z1):
                oz = z * sd - pd + a * dd
                for y in range(y0, y1):
                    oy = y * sh - ph + b * dh
                    base = (z * h_in + y) * w_in
                    for xi in range(x0, x1):
                        out[m0 + m, oz, oy, xi * sw - pw + e * dw] += cols[r, base + xi]


# ----------------------------------------------------------------------------- wrappers
def work_dtype(dtype: np.dtype) -> np.dtype:
    """The accumulator dtype of the cube for an input dtype (fp16 -> fp32)."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _to5d(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    spatial = a.shape[2:]
    return np.ascontiguousarray(
        a.reshape(a.shape[:2] + (1,) * (3 - len(spatial)) + spatial), dtype=dtype)


def _geom(win: Window, sizes: tuple) -> tuple:
    lead = 3 - len(win.kernel)
    return win.padded3() + ((1,) * lead + tuple(sizes),)


def conv_window(x_shape: tuple, w_shape: tuple, attrs: dict) -> Window:
    """Window geometry of a Conv (kernel_shape defaults to W's spatial dims)."""
    kernel = attrs.get("kernel_shape") or w_shape[2:]
    return resolve_window(x_shape[2:], kernel, attrs)


#: patch-matrix budget per GEMM call: images are processed in chunks that fit it
COLS_BYTES = 32 << 20


def _conv_gemm(x: np.ndarray, w2: np.ndarray, group: int, geom: tuple, out5: np.ndarray) -> None:
    """im2col + one BLAS GEMM per chunk of images and group, written into out5 (N, M, ...)."""
    n, c = x.shape[:2]
    m, kg = w2.shape
    mg, cg = m // group, c // group
    ohw = out5[0, 0].size
    chunk = max(1, min(n, COLS_BYTES // max(1, kg * ohw * out5.itemsize)))
    cols = np.empty((kg, chunk * ohw), dtype=out5.dtype)
    res = np.empty((mg, chunk * ohw), dtype=out5.dtype)
    for i0 in range(0, n, chunk):
        nb = min(chunk, n - i0)
        xc = _to5d(x[i0:i0 + nb], out5.dtype)
        for g in range(group):
            _im2col(xc, g * cg, geom, cols[:, :nb * ohw])
            np.matmul(w2[g * mg:(g + 1) * mg], cols[:, :nb * ohw], out=res[:, :nb * ohw])
            out5[i0:i0 + nb, g * mg:(g + 1) * mg] = \
                res[:, :nb * ohw].reshape((mg, nb) + out5.shape[2:]).transpose(1, 0, 2, 3, 4)


def conv_values(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, attrs: dict) -> np.ndarray:
    """ONNX Conv (1-3 spatial axes, groups, dilations, pads, auto_pad) with fp32 accumulation."""
    win = conv_window(x.shape, w.shape, attrs)
    group = int(attrs.get("group", 1))
    acc = work_dtype(x.dtype)
    n, (m, cg) = x.shape[0], w.shape[:2]
    w5 = _to5d(w, acc)
    geom = _geom(win, win.out)
    shape5 = (n, m) + (1,) * (3 - len(win.out)) + win.out
    if cg == 1:  # depthwise-like: one input channel per group, no GEMM
        out5 = np.zeros(shape5, dtype=acc)
        _depthwise(_to5d(x, acc), w5, geom, out5)
    else:
        out5 = np.empty(shape5, dtype=acc)
        _conv_gemm(x, w5.reshape(m, -1), group, geom, out5)
    if b is not None:
        out5 += b.astype(acc).reshape((1, m, 1, 1, 1))
    return out5.reshape((n, m) + win.out).astype(x.dtype, copy=False)


def conv(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of Conv: (X, W, B?) -> [Y]."""
    return [conv_values(args[0], args[1], args[2] if len(args) > 2 else None, attrs)]


def conv_backprop_filter_view(x_shape: tuple, dy_shape: tuple, filter_shape: tuple,
                               attrs: dict) -> tuple[dict, tuple, tuple, tuple]:
    """A 2-D/3-D weight gradient dW[m, c, k] = sum_{n, p} dy[n, m, p] x[n, c, s p + d k - pad]
    seen as a Conv of x^T (C, N, *S) by dy^T (M, N, *P): that Conv's attrs (strides = the
    forward's dilations, dilations = its strides, the end pads trimmed so the output is exactly
    the kernel), and the shapes (x^T cropped where the forward left trailing rows unread,
    dy^T, dW^T). Group 1 only."""
    spatial = tuple(int(d) for d in x_shape[2:])
    kernel = tuple(int(k) for k in filter_shape[2:])
    win = resolve_window(spatial, kernel, attrs)
    s, d, pb = win.strides, win.dilations, list(win.pads_begin)
    ps = tuple(int(p) for p in dy_shape[2:])
    pe = [(k - 1) * di + si * (p - 1) + 1 - h - b
          for k, di, si, p, h, b in zip(kernel, d, s, ps, spatial, pb)]
    ends = tuple(h + min(e, 0) for h, e in zip(spatial, pe))
    view_attrs = {"kernel_shape": list(ps), "strides": list(d), "dilations": list(s),
                  "pads": pb + [max(e, 0) for e in pe], "group": 1}
    xt = (int(x_shape[1]), int(x_shape[0])) + ends
    dyt = (int(dy_shape[1]), int(dy_shape[0])) + ps
    dwt = (int(filter_shape[1]), int(filter_shape[0])) + kernel
    return view_attrs, xt, dyt, dwt


def conv_backprop_filter(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of Conv2DBackpropFilter: (X, dY) -> [dW], the Conv of x^T by dy^T of
    `conv_backprop_filter_view` (fp32 accumulation, as the forward Conv)."""
    x, dy = args[0], args[1]
    filt = tuple(int(v) for v in attrs["filter_shape"])
    view, xt_shape, _, _ = conv_backprop_filter_view(x.shape, dy.shape, filt, attrs)
    crop = (slice(None), slice(None)) + tuple(slice(0, e) for e in xt_shape[2:])
    xt = np.ascontiguousarray(np.swapaxes(x, 0, 1)[crop])
    dyt = np.ascontiguousarray(np.swapaxes(dy, 0, 1))
    dwt = conv_values(xt, dyt, None, view)
    return [np.ascontiguousarray(np.swapaxes(dwt, 0, 1))]


def conv_transpose_geometry(x_shape: tuple, w_shape: tuple, attrs: dict) -> tuple[Window, tuple]:
    """(window with resolved pads, output spatial size) of an ONNX ConvTranspose.

    output_shape, when given, wins and sets the pads (SAME_UPPER puts the smaller half of the
    total padding first, anything else the larger half, as the ONNX spec says; an output_shape
    beyond the full output is zero-filled at the end, as ONNX Runtime does); SAME_* without
    it gives input * stride; otherwise out = stride*(in-1) + output_padding + dilated kernel
    - pads.
    """
    spatial = tuple(x_shape[2:])
    n = len(spatial)
    kernel = attr_ints("kernel_shape", attrs.get("kernel_shape") or w_shape[2:], n, 1)
    s = attr_ints("strides", attrs.get("strides"), n, 1)
    d = attr_ints("dilations", attrs.get("dilations"), n, 1)
    opad = attr_ints("output_padding", attrs.get("output_padding"), n, 0)
    if any(v < 1 for v in kernel + s + d):
        raise GraphError(f"kernel_shape {list(kernel)}, strides {list(s)} and dilations "
                         f"{list(d)} must be >= 1")
    if any(not 0 <= p < max(si, di) for p, si, di in zip(opad, s, d)):
        raise GraphError(f"output_padding {list(opad)} must be >= 0 and smaller than the "
                         f"stride {list(s)} or dilation {list(d)}")
    auto_pad = auto_pad_of(attrs)
    full = tuple(si * (i - 1) + op + (k - 1) * di + 1 if isinstance(i, int) else None
                 for i, si, op, k, di in zip(spatial, s, opad, kernel, d))
    if attrs.get("output_shape"):
        out: tuple = attr_ints("output_shape", list(attrs["output_shape"])[-n:], n, 0)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(i * si if isinstance(i, int) else f"{i}*{si}" for i, si in zip(spatial, s))
    else:
        pads = attr_ints("pads", attrs.get("pads") if auto_pad == "NOTSET" else None, 2 * n, 0)
        out = tuple(f - pb - pe if f is not None else f"convT({i})"
                    for f, pb, pe, i in zip(full, pads[:n], pads[n:], spatial))
        if any(isinstance(o, int) and o < 1 for o in out):
            raise GraphError(f"pads {list(pads)} leave an empty output {list(out)}")
        return Window(kernel, s, d, pads[:n], pads[n:], out), out
    pb, pe = [], []
    for f, o in zip(full, out):
        total = f - o if f is not None and isinstance(o, int) else 0
        if total < 0:  # output_shape beyond the full output: zeros at the end (as ORT does)
            pb.append(0)
            pe.append(total)
            continue
        small, big = total // 2, total - total // 2
        pb.append(small if auto_pad == "SAME_UPPER" else big)
        pe.append(big if auto_pad == "SAME_UPPER" else small)
    return Window(kernel, s, d, tuple(pb), tuple(pe), out), out


def conv_transpose_values(x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                          attrs: dict) -> np.ndarray:
    """ONNX ConvTranspose: per image and group a GEMM W^T @ X, then a numba col2im."""
    win, out_sp = conv_transpose_geometry(x.shape, w.shape, attrs)
    group = int(attrs.get("group", 1))
    acc = work_dtype(x.dtype)
    n, c = x.shape[:2]
    cg, mg = c // group, w.shape[1]
    m = mg * group
    x5, w5 = _to5d(x, acc), _to5d(w, acc)
    kvol = int(np.prod(w5.shape[2:]))
    hw = int(np.prod(x5.shape[2:]))
    geom = _geom(win, x.shape[2:])
    out5 = np.zeros((n, m) + (1,) * (3 - len(out_sp)) + tuple(out_sp), dtype=acc)
    cols = np.empty((mg * kvol, hw), dtype=acc)
    for i in range(n):
        xi = x5[i].reshape(c, hw)
        for g in range(group):
            wg = w5[g * cg:(g + 1) * cg].reshape(cg, mg * kvol)
            np.matmul(wg.T, xi[g * cg:(g + 1) * cg], out=cols)
            _col2im(cols, geom, out5[i], g * mg)
    if b is not None:
        out5 += b.astype(acc).reshape((1, m, 1, 1, 1))
    return out5.reshape((n, m) + tuple(out_sp)).astype(x.dtype, copy=False)


def conv_transpose(args: list, attrs: dict) -> list[np.ndarray]:
    """Registry kernel of ConvTranspose: (X, W, B?) -> [Y]."""
    return [conv_transpose_values(args[0], args[1], args[2] if len(args) > 2 else None, attrs)]
