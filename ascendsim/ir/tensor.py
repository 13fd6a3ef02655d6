"""Values (tensor edges) and constants that are materialised only when their data is needed.

A `Value` is what flows along an edge: a name, a shape (ints, or strings for symbolic
dimensions such as "batch"), a dtype name and a layout tag. Values are immutable; a pass that
changes one makes a new one with `dataclasses.replace`.

A `LazyTensor` stands for a constant whose data is described, not stored (random weights of
a seed, a fill value, the result of a fold). Shape-only simulation of a full-size model never
touches the data, so a ResNet-50 at batch 256 costs no weight memory until values are asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from ..kernels import bf16

Dim = int | str
Shape = tuple[Dim, ...]

#: dtype names the IR accepts (numpy names); anything else is a GraphError.
DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "uint8", "int16", "uint16",
          "int32", "uint32", "int64", "uint64", "bool")

#: ONNX TensorProto data type codes -> dtype names (Cast's `to`, the importer): one table.
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
               7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
               16: "bfloat16"}


_DTYPE_SET = frozenset(DTYPES)


def dtype_name(dtype: object) -> str:
    """Normalise a numpy dtype, type or name to one of DTYPES."""
    if isinstance(dtype, str) and dtype in _DTYPE_SET:   # already a name: numpy's own
        return dtype
    try:
        name = np.dtype(dtype).name  # type: ignore[arg-type]
    except TypeError as exc:
        raise GraphError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}") from exc
    if name not in DTYPES:
        raise GraphError(f"unsupported dtype {name!r}; expected one of {', '.join(DTYPES)}")
    return name


@functools.cache
def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name (cached: the lowering asks ~10^5 times)."""
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def storage_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that holds values of a dtype name: float32 for bfloat16 (numpy has
    none; see kernels/bf16.py), the dtype itself otherwise."""
    return bf16.STORAGE if dtype == "bfloat16" else np.dtype(dtype)


def as_storage(arr: object, dtype: str) -> np.ndarray:
    """`arr` converted to the storage of a dtype name; bfloat16 rounds to nearest even."""
    if dtype == "bfloat16":
        return bf16.round_bf16(arr)  # type: ignore[arg-type]
    return np.asarray(arr).astype(dtype, copy=False)


def is_static(shape: Shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def numel(shape: Shape) -> int:
    """Number of elements of a static shape (GraphError on a symbolic one)."""
    n = 1
    for d in shape:
        if not isinstance(d, int):
            raise GraphError(f"shape {shape} has symbolic dimension {d!r}; bind it first")
        n *= d
    return n


#: the storage layouts a value can have in GM: ND (row-major), NC1HWC0 (the 5-D format of conv
#: activations, C padded to C0) and FRACTAL_NZ (16 x 16 blocks of a matrix); the lowering's
#: formats (lower/formats.py) and the TransData op take these names
LAYOUTS = ("ND", "NC1HWC0", "FRACTAL_NZ")


@dataclass(frozen=True)
class Value:
    """A tensor edge of the graph."""

    name: str
    shape: Shape
    dtype: str = "float32"
    layout: str = "ND"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @functools.cached_property
    def numel(self) -> int:
        # (cached: the value is frozen; a symbolic shape raises each time)
        return numel(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * itemsize(self.dtype)

    def __repr__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"Value({self.name}: {self.dtype}[{dims}])"


@dataclass(frozen=True, eq=False)
class LazyTensor:
    """A constant described by shape, dtype and a maker; `materialize()` builds (and caches) it."""

    shape: tuple[int, ...]
    dtype: str
    make: Callable[[], np.ndarray] = field(repr=False)
    describe: str = ""
    _cache: list = field(default_factory=list, repr=False, compare=False)

    def materialize(self) -> np.ndarray:
        if not self._cache:
            arr = np.asarray(self.make())
            if tuple(arr.shape) != tuple(self.shape):
                raise GraphError(f"lazy constant {self.describe!r} made shape {arr.shape}, "
                                 f"declared {self.shape}")
            self._cache.append(as_storage(arr, self.dtype))
        return self._cache[0]

    @property
    def nbytes(self) -> int:
        return numel(self.shape) * itemsize(self.dtype)

    @staticmethod
    def random(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 1.0) -> LazyTensor:
        """Seeded normal values times `scale` (deterministic for the same seed)."""
        make = functools.partial(random_values, tuple(shape), dtype, seed, scale)
        return LazyTensor(tuple(shape), dtype, make, f"random(seed={seed}, scale={scale})")

    @staticmethod
    def full(shape: tuple[int, ...], dtype: str, fill: float) -> LazyTensor:
        return LazyTensor(tuple(shape), dtype,
                          functools.partial(np.full, shape, fill, storage_dtype(dtype)),
                          f"full({fill})")


def random_values(shape: tuple[int, ...], dtype: str, seed: int, scale: float) -> np.ndarray:
    """The values of `LazyTensor.random` (a module-level function, so lazy constants pickle and
    graphs can be sent to other processes)."""
    rng = np.random.default_rng(seed)
    return as_storage(rng.standard_normal(shape) * scale, dtype)


ConstData = np.ndarray | LazyTensor


def materialize(data: ConstData) -> np.ndarray:
    """The array behind a constant, built now if it is lazy."""
    return data.materialize() if isinstance(data, LazyTensor) else data
