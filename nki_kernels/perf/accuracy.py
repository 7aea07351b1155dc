"""How far to trust an estimate: the uncertainty band per op class, the validated domain, and the
MFU sanity gate.

The band comes from the **leave-one-out** errors of ``python -m nki_kernels.perf.calibration``:
every gated public trn2 measurement (trn2-hardware.md §3.1 and §3.1b) is predicted by a fit that
did not see it.  The errors are grouped by the **op class** of the estimate (:func:`op_class`:
DMA/VectorE-bound, mixed, TensorE-bound), and each class gets its own band: ``typical`` is the 68th
percentile of that class's leave-one-out |errors| rounded up to a whole percent (the half-width of
a "one-sigma" band), ``worst`` its worst leave-one-out ratio.  ``simulator_tests/test_perf_calibration.py``
fails when a recorded band no longer covers the live leave-one-out result, so the figure printed
with every estimate cannot silently become optimistic.

A kernel whose character is outside what the calibration covers (:func:`domain_warnings`: loops of
tiny instructions the compiler may vectorise, SBUF over-subscription, FP8 matmuls, another core,
ops without a cost rule) gets a printed warning and a band widened to ``OUTSIDE_FACTOR`` times its
class band, at least ``OUTSIDE_MIN``.

The sanity gate: an estimated MFU above the best public measurement for the op class is not
plausible for this model; :func:`sanity_warnings` returns a warning that every report prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .calibration import PointResult
    from .model import Estimate


@dataclass(frozen=True)
class ClassBand:
    """Leave-one-out figures of one op class."""

    typical: float  # 68th percentile of |error|, rounded up to a whole percent
    worst: float  # worst ratio (max(est/meas, meas/est))
    median: float  # median |error|
    n: int  # gated points in the class


# Leave-one-out per op class, recorded from `python -m nki_kernels.perf.calibration` (2026-12-02,
# 65 gated points: §3.1 + the §3.1b tutorial, attention and GEMM+bias(+GELU) measurements):
#   dma-vector n=13 median 10.4 % p68 12.1 % worst 1.28x (#22b)
#   mixed      n=27 median  9.6 % p68 16.3 % worst 1.47x (#mlp.bf16.2048x4096x4096.a)
#   tensor     n=25 median  9.4 % p68 12.9 % worst 1.40x (#mlp.fp32.1024x2048x4096.p)
CLASS_BANDS = {
    "dma-vector": ClassBand(typical=0.13, worst=1.29, median=0.104, n=13),
    "mixed": ClassBand(typical=0.17, worst=1.48, median=0.096, n=27),
    "tensor": ClassBand(typical=0.13, worst=1.41, median=0.094, n=25),
}
# All classes together (one figure for tables that print a single band): median 9.6 %, p68 13.8 %,
# worst 1.47x.
TYPICAL_ERROR = 0.14
WORST_RATIO = 1.48
LOO_MEDIAN = 0.096

OUTSIDE_FACTOR = 2.0  # outside the validated domain: the class band x 2 ...
OUTSIDE_MIN = 0.30  # ... and at least +-30 %

# Best public trn2 TensorE utilisation per op class (not used in any fit): "about 89-91 % at 2048^3" for
# hand-tuned bf16 matmuls measured on trn2 (M, third-party; listed in calibration.EXCLUDED and docs/cost-model.md).
MFU_CEILING = {"matmul": 0.91}


def band_from_loo(loo_results: Iterable[PointResult]) -> float:
    """The band half-width a leave-one-out result supports: 68th percentile of |error|."""
    errs = [abs(r.error) for r in loo_results if r.point.gated]
    return float(np.percentile(errs, 68)) if errs else math.nan


def class_bands_from_loo(loo_results: Sequence[PointResult]) -> dict:
    """{op class: ClassBand} from leave-one-out results (unrounded)."""
    out = {}
    for cls in CLASS_BANDS:
        rs = [r for r in loo_results if r.point.gated and r.op_class == cls]
        if rs:
            errs = [abs(r.error) for r in rs]
            p68, med = float(np.percentile(errs, 68)), float(np.median(errs))
            out[cls] = ClassBand(p68, max(r.off for r in rs), med, len(rs))
    return out


def op_class(est: Estimate) -> str:
    """ "tensor" (TensorE busy for at least 60 % of the makespan), "dma-vector" (no matmul and TensorE
    busy under 15 %: DMA-, VectorE- or overhead-bound), else "mixed"."""
    span = est.makespan_us
    pe = est.engine_busy_us.get("PE", 0.0) / span if span > 0 else 0.0
    if pe >= 0.6:
        return "tensor"
    if pe < 0.15 and not est.matmul_flops:
        return "dma-vector"
    return "mixed"


def domain_warnings(est: Estimate) -> list:
    """Why an estimate is outside what the calibration validates ([] when it is inside)."""
    out = list(getattr(est, "domain", None) or [])
    if est.hardware != "trn2":
        out.append(
            f"hardware {est.hardware}: the calibration is trn2 only (the trn1 cross-check in "
            "docs/cost-model.md is off by up to 2-3x on small-DMA kernels)"
        )
    if str(est.mm_dtype).startswith("float8"):
        out.append("FP8 matmuls: no public FP8 latency is in the calibration set")
    if est.uncosted_ops:
        out.append("ops without a cost rule (costed as generic elementwise): " + ", ".join(sorted(est.uncosted_ops)))
    return out


def class_band(est: Estimate) -> ClassBand:
    return CLASS_BANDS.get(op_class(est), CLASS_BANDS["mixed"])


def typical_error(est: Estimate) -> float:
    """The band half-width for this estimate: its class's leave-one-out figure, widened outside the
    validated domain."""
    t = class_band(est).typical
    if domain_warnings(est):
        t = max(OUTSIDE_FACTOR * t, OUTSIDE_MIN)
    return t


def band_us(est: Estimate) -> tuple:
    """(low, high) of the typical-error band around an estimate."""
    t = typical_error(est)
    return est.latency_us * (1 - t), est.latency_us * (1 + t)


def band_text(est: Estimate) -> str:
    """ "est. 820.0 us, typical error ±12 % (tensor-bound class)" -- the wording every report uses;
    "..., typical error ±40 % (OUTSIDE the validated domain)" when it is widened."""
    t = typical_error(est)
    where = "OUTSIDE the validated domain" if domain_warnings(est) else f"{op_class(est)} class"
    return f"est. {est.latency_us:,.1f} us, typical error \u00b1{100 * t:.0f} % ({where})"


def band_note(est: Estimate) -> str:
    """The domain warnings joined (empty when the estimate is inside the validated domain)."""
    return "; ".join(domain_warnings(est))


def mfu_class(est: Estimate) -> str:
    """The sanity-gate class: "matmul" when the kernel has matmul FLOPs."""
    return "matmul" if est.matmul_flops else ""


def sanity_warnings(est: Estimate) -> list:
    """Warnings for estimates above the best public figure of their op class."""
    out = []
    ceiling = MFU_CEILING.get(mfu_class(est))
    if ceiling is not None and est.mfu > ceiling:
        out.append(
            f"WARNING: estimated MFU {100 * est.mfu:.1f} % is above the best public trn2 measurement "
            f"for {mfu_class(est)} kernels ({100 * ceiling:.0f} %); the estimate is probably optimistic"
        )
    return out


def warnings(est: Estimate) -> list:
    """Every warning an estimate carries: outside the validated domain, then the sanity gate."""
    return [f"WARNING: outside the validated domain: {w}" for w in domain_warnings(est)] + sanity_warnings(est)


def record(est: Estimate) -> dict:
    """The band as JSON fields (for records and trace metadata)."""
    lo, hi = band_us(est)
    cb = class_band(est)
    return {
        "op_class": op_class(est),
        "typical_error": typical_error(est),
        "band_us": [lo, hi],
        "band_text": band_text(est),
        "leave_one_out_median_error": cb.median,
        "leave_one_out_worst_ratio": cb.worst,
        "outside_validated_domain": domain_warnings(est),
        "band_note": band_note(est),
        "warnings": warnings(est),
    }
