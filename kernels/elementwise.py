"""Element-wise kernels: numba scalar functions, turned into broadcasting ufuncs.

The scalar functions (`scalar_add`, `scalar_sigmoid`, ...) are the single definition of each op's
arithmetic: the per-op ufuncs below are built from them, and fused composite kernels call them
inline. Ops with attributes take them as trailing scalar arguments
(`scalar_leaky_relu(x, alpha)`, `scalar_gelu(x, approx)`, `scalar_clip(x, lo, hi)`);
`ascendsim.ir.ops.elementwise.scalar_args` gives them.

Numerics: fp16 is computed in fp32 and rounded back (the vector unit rounds each fp16 result
correctly); int8/int16/uint8/uint16 in int32; uint32/uint64 in int64. Division by zero and
domain errors give IEEE results (inf, nan), never an exception: the division primitive is
compiled with numba's ``error_model="numpy"`` whatever the caller's error model is.

Ufuncs are compiled on first use (and then cached on disk, `JIT`), so importing the package
costs no compilation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numba import njit, types, vectorize
from numba.extending import overload

from . import bf16
from .config import FASTMATH, JIT

# ----------------------------------------------------------------------------- primitives
# Type-dependent arithmetic: a Python definition (used when jit is disabled) overloaded for
# numba, so the integer and float semantics live in one function each.


def _idiv(a, b):
    """Integer division truncating toward zero (C semantics, ONNX Div); x / 0 -> 0."""
    if b == 0:
        return a - a
    q = a // b                 # floors, in Python and numba alike
    if q < 0 and q * b != a:
        q += 1
    return q


def _ipow(a, b):
    """Integer power by repeated squaring; a negative exponent gives 0 unless |a| == 1."""
    if b < 0:
        if a == 1:
            return a
        if a == -1:
            return a if b % 2 else -a
        return a - a
    r = a - a + 1
    while b > 0:
        if b & 1:
            r = r * a
        a = a * a
        b >>= 1
    return r


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer))


def _div_impl(a, b):
    """ONNX Div: true division for floats, `_idiv` for integers."""
    if _is_int(a) and _is_int(b):
        return _idiv(a, b)
    with np.errstate(all="ignore"):
        return np.true_divide(a, b)


def _pow_impl(a, b):
    """ONNX Pow: `_ipow` for integers, IEEE pow for floats."""
    if _is_int(a) and _is_int(b):
        return _ipow(a, b)
    with np.errstate(all="ignore"):
        return np.power(a, b)


_NUMPY_ERRORS = {"error_model": "numpy", "fastmath": FASTMATH}
_idiv_nb = njit(**_NUMPY_ERRORS, cache=JIT["cache"])(_idiv)
_ipow_nb = njit(**_NUMPY_ERRORS, cache=JIT["cache"])(_ipow)


@overload(_div_impl, jit_options=_NUMPY_ERRORS)
def _ov_div(a, b):
    if isinstance(a, types.Integer) and isinstance(b, types.Integer):
        return lambda a, b: _idiv_nb(a, b)
    return lambda a, b: a / b


@overload(_pow_impl, jit_options=_NUMPY_ERRORS)
def _ov_pow(a, b):
    if isinstance(a, types.Integer) and isinstance(b, types.Integer):
        return lambda a, b: _ipow_nb(a, b)
    return lambda a, b: a ** b


# ----------------------------------------------------------------------------- scalar ops
_SQRT1_2 = 0.7071067811865476      # 1/sqrt(2), exact gelu
_SQRT_2_PI = 0.7978845608028654    # sqrt(2/pi), tanh-approximate gelu


@njit(inline="always", **JIT)
def scalar_add(a, b):
    return a + b


@njit(inline="always", **JIT)
def scalar_sub(a, b):
    return a - b


@njit(inline="always", **JIT)
def scalar_mul(a, b):
    return a * b


@njit(inline="always", **JIT)
def scalar_div(a, b):
    return _div_impl(a, b)


@njit(inline="always", **JIT)
def scalar_pow(a, b):
    return _pow_impl(a, b)


@njit(inline="always", **JIT)
def scalar_sqrt(a):
    return math.sqrt(a)   # nan below 0 (numba's math is IEEE, no exception)


@njit(inline="always", **JIT)
def scalar_rsqrt(a):
    return _div_impl(a - a + 1, scalar_sqrt(a))


@njit(inline="always", **JIT)
def scalar_exp(a):
    return math.exp(a)


@njit(inline="always", **JIT)
def scalar_log(a):
    return math.log(a)    # -inf at 0, nan below


@njit(inline="always", **JIT)
def scalar_neg(a):
    return -a


@njit(inline="always", **JIT)
def scalar_abs(a):
    return a if a >= 0 else -a


@njit(inline="always", **JIT)
def scalar_reciprocal(a):
    return _div_impl(a - a + 1, a)


@njit(inline="always", **JIT)
def scalar_relu(a):
    return a if a > 0 else a - a  # +0 for negatives, NaN stays NaN


@njit(inline="always", **JIT)
def scalar_leaky_relu(a, alpha):
    return a if a >= 0 else a * alpha


@njit(inline="always", **JIT)
def scalar_sigmoid(a):
    if a >= 0:
        return 1.0 / (1.0 + math.exp(-a))
    e = math.exp(a)          # stable for large negative a: no overflow of exp(-a)
    return e / (1.0 + e)


@njit(inline="always", **JIT)
def scalar_tanh(a):
    return math.tanh(a)


@njit(inline="always", **JIT)
def scalar_erf(a):
    return math.erf(a)


@njit(inline="always", **JIT)
def scalar_gelu(a, approx):
    """Gelu (opset 20): approx == 0 -> exact (erf), approx != 0 -> tanh approximation."""
    if approx != 0:
        return 0.5 * a * (1.0 + math.tanh(_SQRT_2_PI * (a + 0.044715 * a * a * a)))
    return 0.5 * a * (1.0 + math.erf(a * _SQRT1_2))


@njit(inline="always", **JIT)
def scalar_floor(a):
    return np.floor(a)


@njit(inline="always", **JIT)
def scalar_ceil(a):
    return np.ceil(a)


@njit(inline="always", **JIT)
def scalar_round(a):
    return np.rint(a)     # halves to even, as ONNX Round


@njit(inline="always", **JIT)
def scalar_sign(a):
    if a > 0:
        return a - a + 1
    if a < 0:
        return a - a - 1
    return a - a          # 0 stays 0, NaN stays NaN


@njit(inline="always", **JIT)
def scalar_sin(a):
    return math.sin(a)


@njit(inline="always", **JIT)
def scalar_cos(a):
    return math.cos(a)


@njit(inline="always", **JIT)
def scalar_softplus(a):
    """log(1 + exp(a)) without overflow for large a."""
    if a > 0:
        return a + math.log1p(math.exp(-a))
    return math.log1p(math.exp(a))


@njit(inline="always", **JIT)
def scalar_elu(a, alpha):
    return a if a >= 0 else alpha * math.expm1(a)


@njit(inline="always", **JIT)
def scalar_selu(a, alpha, gamma):
    return gamma * (a if a > 0 else alpha * math.expm1(a))


@njit(inline="always", **JIT)
def scalar_hard_sigmoid(a, alpha, beta):
    return max(0.0, min(1.0, alpha * a + beta))


@njit(inline="always", **JIT)
def scalar_hard_swish(a):
    return a * max(0.0, min(1.0, a / 6.0 + 0.5))


@njit(inline="always", **JIT)
def scalar_prelu(a, slope):
    return a if a >= 0 else slope * a


@njit(inline="always", **JIT)
def scalar_is_nan(a):
    return a != a


@njit(inline="always", **JIT)
def scalar_is_inf(a, negative, positive):
    return (positive != 0 and a == math.inf) or (negative != 0 and a == -math.inf)


@njit(inline="always", **JIT)
def scalar_clip(a, lo, hi):
    """min(max(a, lo), hi): when lo > hi every value becomes hi (ONNX); NaN stays NaN."""
    if a < lo:
        a = lo
    if a > hi:
        a = hi
    return a


@njit(inline="always", **JIT)
def scalar_identity(a):
    return a


@njit(inline="always", **JIT)
def scalar_where(c, a, b):
    return a if c else b


@njit(inline="always", **JIT)
def scalar_equal(a, b):
    return a == b


@njit(inline="always", **JIT)
def scalar_less(a, b):
    return a < b


@njit(inline="always", **JIT)
def scalar_less_equal(a, b):
    return a <= b


@njit(inline="always", **JIT)
def scalar_greater(a, b):
    return a > b


@njit(inline="always", **JIT)
def scalar_greater_equal(a, b):
    return a >= b


@njit(inline="always", **JIT)
def scalar_max(a, b):
    """NaN-propagating maximum (as np.maximum, which ONNX Max follows)."""
    if a != a or a >= b:
        return a
    return b


@njit(inline="always", **JIT)
def scalar_min(a, b):
    if a != a or a <= b:
        return a
    return b


@njit(inline="always", **JIT)
def scalar_not(a):
    return not a


@njit(inline="always", **JIT)
def scalar_and(a, b):
    return a and b


@njit(inline="always", **JIT)
def scalar_or(a, b):
    return a or b


@njit(inline="always", **JIT)
def scalar_xor(a, b):
    return a != b


# ----------------------------------------------------------------------------- ufuncs
def _sigs(template: str, dtypes: Sequence[str]) -> list[str]:
    return [template.format(t=t) for t in dtypes]


# Integer loops come first: numpy picks the first loop the inputs cast to safely, and int32
# casts safely to float64, so a float-first list would compute integers in floating point.
FLOATS = ("float32", "float64")
NUMS = ("int32", "int64") + FLOATS
ALL = ("boolean",) + NUMS


class LazyUfunc:
    """A numba ufunc compiled for `sigs` the first time it is called."""

    def __init__(self, py: Callable, sigs: list[str]) -> None:
        self.py, self.sigs = py, sigs
        self._ufunc: Callable | None = None

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        if self._ufunc is None:
            self._ufunc = vectorize(self.sigs, **JIT)(self.py)
        return self._ufunc(*args)


# One lambda per line: numba's disk cache is keyed by each function's source line.
U1, U2, U3 = "{t}({t})", "{t}({t}, {t})", "{t}({t}, {t}, {t})"
CMP = "boolean({t}, {t})"
add_ufunc = LazyUfunc(lambda a, b: scalar_add(a, b), _sigs(U2, NUMS))
sub_ufunc = LazyUfunc(lambda a, b: scalar_sub(a, b), _sigs(U2, NUMS))
mul_ufunc = LazyUfunc(lambda a, b: scalar_mul(a, b), _sigs(U2, NUMS))
div_ufunc = LazyUfunc(lambda a, b: scalar_div(a, b), _sigs(U2, NUMS))
pow_ufunc = LazyUfunc(lambda a, b: scalar_pow(a, b), _sigs(U2, NUMS))
sqrt_ufunc = LazyUfunc(lambda a: scalar_sqrt(a), _sigs(U1, FLOATS))
rsqrt_ufunc = LazyUfunc(lambda a: scalar_rsqrt(a), _sigs(U1, FLOATS))
exp_ufunc = LazyUfunc(lambda a: scalar_exp(a), _sigs(U1, FLOATS))
log_ufunc = LazyUfunc(lambda a: scalar_log(a), _sigs(U1, FLOATS))
neg_ufunc = LazyUfunc(lambda a: scalar_neg(a), _sigs(U1, NUMS))
abs_ufunc = LazyUfunc(lambda a: scalar_abs(a), _sigs(U1, NUMS))
reciprocal_ufunc = LazyUfunc(lambda a: scalar_reciprocal(a), _sigs(U1, FLOATS))
relu_ufunc = LazyUfunc(lambda a: scalar_relu(a), _sigs(U1, NUMS))
leaky_relu_ufunc = LazyUfunc(lambda a, al: scalar_leaky_relu(a, al), _sigs(U2, FLOATS))
sigmoid_ufunc = LazyUfunc(lambda a: scalar_sigmoid(a), _sigs(U1, FLOATS))
tanh_ufunc = LazyUfunc(lambda a: scalar_tanh(a), _sigs(U1, FLOATS))
erf_ufunc = LazyUfunc(lambda a: scalar_erf(a), _sigs(U1, FLOATS))
gelu_ufunc = LazyUfunc(lambda a, ap: scalar_gelu(a, ap), _sigs(U2, FLOATS))
floor_ufunc = LazyUfunc(lambda a: scalar_floor(a), _sigs(U1, FLOATS))
ceil_ufunc = LazyUfunc(lambda a: scalar_ceil(a), _sigs(U1, FLOATS))
round_ufunc = LazyUfunc(lambda a: scalar_round(a), _sigs(U1, FLOATS))
sign_ufunc = LazyUfunc(lambda a: scalar_sign(a), _sigs(U1, NUMS))
sin_ufunc = LazyUfunc(lambda a: scalar_sin(a), _sigs(U1, FLOATS))
cos_ufunc = LazyUfunc(lambda a: scalar_cos(a), _sigs(U1, FLOATS))
softplus_ufunc = LazyUfunc(lambda a: scalar_softplus(a), _sigs(U1, FLOATS))
elu_ufunc = LazyUfunc(lambda a, al: scalar_elu(a, al), _sigs(U2, FLOATS))
selu_ufunc = LazyUfunc(lambda a, al, ga: scalar_selu(a, al, ga), _sigs(U3, FLOATS))
hard_sigmoid_ufunc = LazyUfunc(lambda a, al, be: scalar_hard_sigmoid(a, al, be), _sigs(U3, FLOATS))
hard_swish_ufunc = LazyUfunc(lambda a: scalar_hard_swish(a), _sigs(U1, FLOATS))
prelu_ufunc = LazyUfunc(lambda a, s: scalar_prelu(a, s), _sigs(U2, NUMS))
is_nan_ufunc = LazyUfunc(lambda a: scalar_is_nan(a), _sigs("boolean({t})", FLOATS))
is_inf_ufunc = LazyUfunc(lambda a, n, p: scalar_is_inf(a, n, p),
                         _sigs("boolean({t}, {t}, {t})", FLOATS))
clip_ufunc = LazyUfunc(lambda a, lo, hi: scalar_clip(a, lo, hi), _sigs(U3, NUMS))
where_ufunc = LazyUfunc(lambda c, a, b: scalar_where(c, a, b), _sigs("{t}(boolean, {t}, {t})", ALL))
equal_ufunc = LazyUfunc(lambda a, b: scalar_equal(a, b), _sigs(CMP, ALL))
less_ufunc = LazyUfunc(lambda a, b: scalar_less(a, b), _sigs(CMP, NUMS))
less_equal_ufunc = LazyUfunc(lambda a, b: scalar_less_equal(a, b), _sigs(CMP, NUMS))
greater_ufunc = LazyUfunc(lambda a, b: scalar_greater(a, b), _sigs(CMP, NUMS))
greater_equal_ufunc = LazyUfunc(lambda a, b: scalar_greater_equal(a, b), _sigs(CMP, NUMS))
max_ufunc = LazyUfunc(lambda a, b: scalar_max(a, b), _sigs(U2, NUMS))
min_ufunc = LazyUfunc(lambda a, b: scalar_min(a, b), _sigs(U2, NUMS))
not_ufunc = LazyUfunc(lambda a: scalar_not(a), ["boolean(boolean)"])
and_ufunc = LazyUfunc(lambda a, b: scalar_and(a, b), ["boolean(boolean, boolean)"])
or_ufunc = LazyUfunc(lambda a, b: scalar_or(a, b), ["boolean(boolean, boolean)"])
xor_ufunc = LazyUfunc(lambda a, b: scalar_xor(a, b), ["boolean(boolean, boolean)"])


# ----------------------------------------------------------------------------- wrappers
def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a ufunc computes in: fp16 widens to fp32, small ints to int32, uint32/64 to
    int64; float32/64, int32/64 and bool stay."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype.kind in "iu":
        return np.dtype(np.int32 if dtype.itemsize < 4 else np.int64)
    return dtype


def apply_ufunc(ufunc: Callable, args: Sequence, out_dtype: object = None) -> np.ndarray:
    """Run a numba ufunc on arrays of one dtype, widening fp16/small ints and rounding back.

    The result has `out_dtype`, or the inputs' common dtype. Float errors (x/0, log(-1))
    give IEEE values silently, as on the chip.
    """
    dtype = np.result_type(*args)
    work = compute_dtype(dtype)
    with np.errstate(all="ignore"):
        out = ufunc(*[np.asarray(a, dtype=work) for a in args])
        return np.asarray(out).astype(out_dtype or dtype, copy=False)


def binary(ufunc: Callable) -> Callable:
    """The registry kernel (args, attrs) -> [out] for a broadcasting binary ufunc."""
    return lambda args, attrs: [apply_ufunc(ufunc, args[:2])]


def unary(ufunc: Callable) -> Callable:
    return lambda args, attrs: [apply_ufunc(ufunc, args[:1])]


def compare(ufunc: Callable) -> Callable:
    """A kernel for a comparison or logic op: bool output."""
    return lambda args, attrs: [apply_ufunc(ufunc, args, np.bool_)]


def variadic(ufunc: Callable) -> Callable:
    """A kernel folding a binary ufunc over n broadcasting inputs (Sum, Max, Min)."""
    def kernel(args: list, attrs: dict) -> list:
        acc = np.asarray(args[0])
        for a in args[1:]:
            acc = apply_ufunc(ufunc, [acc, a])
        if len(args) == 1:
            acc = acc.copy()
        return [acc]
    return kernel


def with_scalars(ufunc: Callable, scalars: Callable[[dict], tuple],
                 out_dtype: object = None) -> Callable:
    """A kernel for a unary op whose attributes are trailing scalar arguments of the ufunc
    (given in the input's dtype); the result has `out_dtype` or the input's dtype."""
    def kernel(args: list, attrs: dict) -> list:
        x = np.asarray(args[0])
        extra = [np.asarray(s, dtype=x.dtype) for s in scalars(attrs)]
        return [apply_ufunc(ufunc, [x, *extra], out_dtype or x.dtype)]
    return kernel


def pow_kernel(args: list, attrs: dict) -> list:
    """ONNX Pow: the result has the base's dtype; a float exponent on an int base is computed
    in float64 and truncated, an int exponent on a float base is converted to the float."""
    x, y = np.asarray(args[0]), np.asarray(args[1])
    if x.dtype.kind in "iu" and y.dtype.kind == "f":
        return [apply_ufunc(pow_ufunc, [x.astype(np.float64), y.astype(np.float64)], x.dtype)]
    if x.dtype.kind in "iu":
        return [apply_ufunc(pow_ufunc, [x.astype(np.int64), y.astype(np.int64)], x.dtype)]
    return [apply_ufunc(pow_ufunc, [x, y.astype(x.dtype)], x.dtype)]


def _type_limits(dtype: np.dtype) -> tuple:
    if dtype.kind == "f":
        return -np.inf, np.inf
    info = np.iinfo(dtype)
    return info.min, info.max


def clip_kernel(args: list, attrs: dict) -> list:
    """ONNX Clip: absent min/max mean the dtype's range."""
    x = np.asarray(args[0])
    lo, hi = _type_limits(x.dtype)
    if len(args) > 1 and args[1] is not None:
        lo = np.asarray(args[1]).reshape(())
    if len(args) > 2 and args[2] is not None:
        hi = np.asarray(args[2]).reshape(())
    return [apply_ufunc(clip_ufunc, [x, np.asarray(lo, x.dtype), np.asarray(hi, x.dtype)])]


def where_kernel(args: list, attrs: dict) -> list:
    """ONNX Where(condition, X, Y) with broadcasting of all three."""
    cond = np.asarray(args[0], dtype=np.bool_)
    dtype = np.result_type(args[1], args[2])
    work = compute_dtype(dtype)
    with np.errstate(all="ignore"):
        out = where_ufunc(cond, np.asarray(args[1], work), np.asarray(args[2], work))
    return [np.asarray(out).astype(dtype, copy=False)]


def cast_kernel(args: list, attrs: dict, to: str) -> list:
    """ONNX Cast to dtype name `to`: float -> int truncates toward zero; -> bool is x != 0."""
    x = np.asarray(args[0])
    if to == "bfloat16":   # float32 storage rounded to nearest even (kernels/bf16.py)
        return [bf16.round_bf16(x)]
    with np.errstate(all="ignore"):
        return [x.astype(np.dtype(to))]
