"""The quick validation subset: its median |error| on validation rows must not regress.

The bound guards against regressions of the model: it is 1.5x the quick median |error| as
measured at the commit that set it (11.7% over the 10 validation rows of the subset: GEMM
eager loops and kernels, DMA curves, ResNet-50 on the 310), so a change that makes the
subset half again as wrong fails. Lower `QUICK_MEDIAN` when the model improves; never raise
it to let a change through without saying why in the commit."""

from ascendsim.validation.validate import validate

#: today's quick median |error| over the subset's validation rows (all of them frozen rows)
QUICK_MEDIAN = 0.117
#: the bound: 1.5x today's figure
QUICK_MEDIAN_BOUND = 1.5 * QUICK_MEDIAN


def test_quick_median_abs_error_is_within_1_5x_of_the_recorded_median():
    report = validate(quick=True)
    allv = report.all_validation
    assert allv.n == 10, "the quick subset's validation rows changed: re-measure QUICK_MEDIAN"
    assert allv.median_abs_error < QUICK_MEDIAN_BOUND, report.table()
