"""An element-wise op row on a FRACTAL_Z conv weight runs on the weight's storage shape
(C1 * H * W, N1, N0, C0): TBE compiles the kernel for the shape GE gives it and moves every
padded element (AlexNet's 96 x 3 x 11 x 11 weight is FracZ [121, 6, 16, 16] in the
mindinsight profile)."""

from __future__ import annotations

import math

from ascendsim.hw import get_chip
from ascendsim.ir.registry import get_op
from ascendsim.validation.corpus import check_row
from ascendsim.validation.validate import RowRunner
from ascendsim.validation.workloads import _storage_shape, build_op_graph


def cast_row(fmt: str, shape=(96, 3, 11, 11), op: str = "Cast"):
    w = {"kind": "op", "op": op, "inputs": [{"shape": list(shape), "dtype": "float32",
                                             "format": fmt}],
         "attrs": {"to": "float16", "block_dim": 32}}
    return check_row({"id": f"t-fracz-{fmt}-{op}", "chip": "ascend910", "family": "elementwise",
                      "role": "validation", "workload": w, "timing": "msprof_kernel",
                      "data": "unknown", "metric": "time", "value": 5.0, "unit": "us",
                      "source": "test", "source_table": "github.com/x/y:profile.csv"},
                     "test row")


def test_storage_shape_pads_c_to_c0_and_n_to_16():
    spec = {"shape": [96, 3, 11, 11], "dtype": "float32", "format": "FracZ"}
    assert _storage_shape(get_op("Cast"), spec) == (121, 6, 16, 16)
    spec = {"shape": [384, 384, 3, 3], "dtype": "float32", "format": "FRACTAL_Z"}
    assert _storage_shape(get_op("ApplyMomentum"), spec) == (216, 24, 16, 16)


def test_logical_shape_kept_for_nd_and_for_ops_reading_the_axes():
    spec = {"shape": [96, 3, 11, 11], "dtype": "float32", "format": "ND"}
    assert _storage_shape(get_op("Cast"), spec) == (96, 3, 11, 11)
    spec = {"shape": [96, 3, 11, 11], "dtype": "float16", "format": "FracZ"}
    assert _storage_shape(get_op("MaxPool"), spec) == (96, 3, 11, 11)


def test_the_padded_weight_cast_moves_its_storage_bytes_and_takes_longer():
    g = build_op_graph(cast_row("FracZ"))
    x = next(v for v in g.values.values() if v.name == "x0")
    assert math.prod(x.shape) == 121 * 6 * 16 * 16
    chip = get_chip("ascend910")
    padded = RowRunner().value(cast_row("FracZ"), chip)
    logical = RowRunner().value(cast_row("ND"), chip)
    # 5.3 times the bytes on 32 cores: the data part grows, the kernel start does not
    assert padded > logical * 1.05
