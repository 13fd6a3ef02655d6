"""dtype_name returns a dtype name as given without asking numpy: that is what numpy says."""

import numpy as np

from ascendsim.ir.tensor import DTYPES, dtype_name


def test_a_name_is_numpys_own_name():
    for d in DTYPES:
        assert dtype_name(d) == (d if d == "bfloat16" else np.dtype(d).name)
        if d != "bfloat16":
            assert dtype_name(np.dtype(d)) == d
