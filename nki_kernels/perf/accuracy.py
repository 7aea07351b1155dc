"""How far to trust an estimate: the uncertainty band and the MFU sanity gate.

The band comes from the **leave-one-out** errors of ``python -m nki_kernels.perf.calibration``:
each of the 15 gated public trn2 measurements (trn2-hardware.md §3.1) is predicted by a fit
that did not see it.  ``TYPICAL_ERROR`` is the 68th percentile of those |errors| rounded up to
a whole percent (the half-width of a "one-sigma" band); ``WORST_RATIO`` is the worst
leave-one-out point.  ``simulator_tests/test_perf_calibration.py`` fails when either no longer
covers the live leave-one-out result, so the figure printed with every estimate cannot
silently become optimistic.

The calibration set contains DMA-, VectorE- and overhead-bound kernels and one TensorE
transpose kernel, but **no public trn2 matmul, conv or attention measurement**: for kernels
whose critical engine is TensorE the band is not validated, and :func:`band_note` says so.

The sanity gate: an estimated MFU above the best public measurement for the op class is not
plausible for this model; :func:`sanity_warnings` returns a warning that every report prints.
"""
from __future__ import annotations

import math

import numpy as np

# leave-one-out, recorded from `python -m nki_kernels.perf.calibration` (2026-12-01):
# |errors| 0.1 .. 17.3 %, median 3.7 %, 68th percentile 5.2 %, worst #23c at 1.19x
TYPICAL_ERROR = 0.06
WORST_RATIO = 1.20
LOO_MEDIAN = 0.037

# Best public trn2 TensorE utilisation per op class (not used in any fit).  Source: issue 9
# ("about 89-91 % at 2048^3" for hand-tuned bf16 matmuls measured on trn2; M, third-party).
MFU_CEILING = {"matmul": 0.91}


def band_from_loo(loo_results) -> float:
    """The band half-width a leave-one-out result supports: 68th percentile of |error|."""
    errs = [abs(r.error) for r in loo_results if r.point.gated]
    return float(np.percentile(errs, 68)) if errs else math.nan


def band_us(latency_us: float) -> tuple:
    """(low, high) of the typical-error band around an estimate."""
    return latency_us * (1 - TYPICAL_ERROR), latency_us * (1 + TYPICAL_ERROR)


def band_text(latency_us: float) -> str:
    """"est. 820 us, typical error ±6 %" (the wording every report uses)."""
    return f"est. {latency_us:,.1f} us, typical error \u00b1{100 * TYPICAL_ERROR:.0f} %"


def band_note(est) -> str:
    """Extra caveat for kernels unlike the calibration set."""
    if est.hardware != "trn2":
        return (f"hardware {est.hardware}: the band is a trn2 leave-one-out figure; the trn1 cross-check "
                "(docs/cost-model.md) is off by up to 2-3x on small-DMA kernels")
    if est.critical_engine == "PE" or est.matmul_flops:
        return ("TensorE-heavy kernel: no public trn2 matmul/conv/attention latency is in the "
                "calibration set, so this band is not validated for it")
    return ""


def op_class(est) -> str:
    return "matmul" if est.matmul_flops else ""


def sanity_warnings(est) -> list:
    """Warnings for estimates above the best public figure of their op class."""
    out = []
    ceiling = MFU_CEILING.get(op_class(est))
    if ceiling is not None and est.mfu > ceiling:
        out.append(f"WARNING: estimated MFU {100 * est.mfu:.1f} % is above the best public trn2 measurement "
                   f"for {op_class(est)} kernels ({100 * ceiling:.0f} %); the estimate is probably optimistic")
    return out


def record(est) -> dict:
    """The band as JSON fields (for records and trace metadata)."""
    lo, hi = band_us(est.latency_us)
    return {"typical_error": TYPICAL_ERROR, "band_us": [lo, hi], "band_text": band_text(est.latency_us),
            "leave_one_out_median_error": LOO_MEDIAN, "leave_one_out_worst_ratio": WORST_RATIO,
            "band_note": band_note(est), "warnings": sanity_warnings(est)}
