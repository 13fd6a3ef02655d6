"""Numba flags shared by every kernel, in one place (fastmath stays off unless asked for)."""

import os

#: ASCENDSIM_FASTMATH=1 lets numba reorder float arithmetic (results then differ in the last bits).
FASTMATH = os.environ.get("ASCENDSIM_FASTMATH", "0") == "1"
#: Cache compiled kernels on disk next to their source, so a second run starts fast.
CACHE = os.environ.get("ASCENDSIM_NUMBA_CACHE", "1") == "1"
JIT = {"cache": CACHE, "fastmath": FASTMATH}
