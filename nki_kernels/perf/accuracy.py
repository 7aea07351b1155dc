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


# Leave-one-out per op class, recorded from `python -m nki_kernels.perf.calibration` (the allocation/DMA-issue refit,
# 67 gated points: §3.1 + the §3.1b tutorial, attention and GEMM+bias(+GELU) measurements + the §3.1c conv):
#   dma-vector n=13 median 12.4 % p68 13.8 % worst 1.32x (#22b)
#   mixed      n=28 median  9.7 % p68 12.3 % worst 1.37x (#att.fp32.1024.u)
#   tensor     n=26 median  9.1 % p68 12.6 % worst 1.43x (#mlp.fp32.1024x2048x4096.p)
CLASS_BANDS = {
    "dma-vector": ClassBand(typical=0.14, worst=1.33, median=0.124, n=13),
    "mixed": ClassBand(typical=0.13, worst=1.38, median=0.097, n=28),
    "tensor": ClassBand(typical=0.13, worst=1.43, median=0.091, n=26),
}
# All classes together (one figure for tables that print a single band): median 9.9 %, p68 13.5 %,
# worst 1.43x.
TYPICAL_ERROR = 0.14
WORST_RATIO = 1.43
LOO_MEDIAN = 0.099

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


WIDENS = 0.02  # an alternative that moves the estimate by more than this is reported as widening the band


def widening(est: Estimate) -> list:
    """The alternatives (model.Alternative) that move the estimate by more than ``WIDENS``: the compiler
    choices the public sources cannot decide that matter for this kernel."""
    lat = est.latency_us
    return [a for a in getattr(est, "alternatives", None) or () if lat > 0 and abs(a.latency_us / lat - 1) > WIDENS]


def band_us(est: Estimate) -> tuple:
    """(low, high) of the band: the typical error around the estimate and around every alternative of
    an undecidable compiler choice (``widening``)."""
    t = typical_error(est)
    lats = [est.latency_us] + [a.latency_us for a in widening(est)]
    return min(lats) * (1 - t), max(lats) * (1 + t)


def widening_text(est: Estimate) -> str:
    """ "band widened by: copy placement (all on the engine the trace records: 910.2 us)" or ""."""
    ws = widening(est)
    if not ws:
        return ""
    return "band widened by: " + "; ".join(f"{a.choice} ({a.other}: {a.latency_us:,.1f} us)" for a in ws)


def band_text(est: Estimate) -> str:
    """ "est. 820.0 us, typical error ±12 % (tensor-bound class)" -- the wording every report uses;
    "..., typical error ±40 % (OUTSIDE the validated domain)" when it is widened, and the compiler
    choices that widened the band when there are any."""
    t = typical_error(est)
    where = "OUTSIDE the validated domain" if domain_warnings(est) else f"{op_class(est)} class"
    text = f"est. {est.latency_us:,.1f} us, typical error \u00b1{100 * t:.0f} % ({where})"
    w = widening_text(est)
    if w:
        lo, hi = band_us(est)
        text += f"; {w} -> band {lo:,.1f}..{hi:,.1f} us"
    return text


def band_note(est: Estimate) -> str:
    """The domain warnings joined (empty when the estimate is inside the validated domain)."""
    return "; ".join(domain_warnings(est))


def mfu_class(est: Estimate) -> str:
    """The sanity-gate class: "matmul" when the kernel has matmul FLOPs."""
    return "matmul" if est.matmul_flops else ""


def mfu_losses(est: Estimate) -> dict:
    """Where the latency goes beyond the TensorE peak time of the kernel's matmuls, as fractions of the
    latency (read off the timeline): "floor" (launch T0), "idle" (TensorE waiting: pipeline fill, drain,
    stalls), "overhead" (per-instruction issue cost and exposed stationary loads), "throttle" (dI/dt)."""
    lat = est.latency_us
    if lat <= 0 or not est.matmul_flops or not est.peak_flops:
        return {}
    ideal = est.matmul_flops / est.peak_flops * 1e6
    busy = est.engine_busy_us.get("PE", 0.0)
    thr = est.throttled_us
    return {
        "floor": est.floor_us / lat,
        "idle": max(0.0, est.makespan_us - busy) / lat,
        "overhead": max(0.0, busy - thr - ideal) / lat,
        "throttle": thr / lat,
    }


def sanity_warnings(est: Estimate) -> list:
    """Warnings for estimates above the best public figure of their op class, with where the rest of the
    latency goes and what the model cannot see (sustained-power throttling is documented, not quantified)."""
    out = []
    ceiling = MFU_CEILING.get(mfu_class(est))
    if ceiling is not None and est.mfu > ceiling:
        loss = mfu_losses(est)
        parts = ", ".join(f"{k} {100 * v:.1f} %" for k, v in loss.items())
        out.append(
            f"WARNING: estimated MFU {100 * est.mfu:.1f} % is above the best public trn2 measurement "
            f"for {mfu_class(est)} kernels ({100 * ceiling:.0f} %, hand-tuned bf16 2048^3); the rest of the "
            f"estimated latency: {parts}.  Not modelled: sustained-power (TDP) throttling of long dense "
            "TensorE runs (documented, not quantified by any public profile); the estimate may be optimistic"
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
        "alternatives": [
            {"choice": a.choice, "modelled": a.modelled, "other": a.other, "latency_us": a.latency_us}
            for a in getattr(est, "alternatives", None) or ()
        ],
        "band_widened_by": [a.choice for a in widening(est)],
        "warnings": warnings(est),
    }
