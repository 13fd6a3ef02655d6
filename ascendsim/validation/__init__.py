"""Measured Ascend hardware figures and the comparison of the simulator against them.

`corpus/*.toml` holds one `[[row]]` per published measurement (op kernel times, eager calls,
GEMM TFLOPS, model throughputs), each with its chip variant, workload, timing method, value,
unit, role (validation / calibration / pending) and source.
"""
