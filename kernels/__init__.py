"""Numba kernels that compute real values, one module per op family (installed as
``ascendsim.kernels``).

Each family pairs private ``@njit(cache=True)`` loop kernels (``_name``) with a thin public
wrapper ``name(args, attrs) -> list[np.ndarray]`` that validates and dispatches; the op
registry points at the wrappers. fp16 inputs to the cube accumulate in fp32, as on the chip.
"""
