"""The one tolerance table for comparing kernel outputs with the float64 oracles, and the one
comparison (:func:`assert_close`) used by the simulator tests, ``nki-kernels verify`` and the
hardware checks (``nki_kernels.hw.device``).

An output element passes when ``|out - ref| <= atol * max|ref| + rtol * |ref|``: ``atol`` is
relative to the output's scale, so one table serves O(1) and O(1e3) outputs alike.

Why these numbers:
  float32   products accumulate in fp32 (PSUM) over K up to a few thousand terms; ~1e-6
            relative in practice, 1e-4 leaves room for long sums and the ScalarE exp
            approximation on hardware (piecewise polynomials, api/nki.api.shared.rst).
  float16   inputs rounded to 11 significant bits, outputs rounded once (2^-11 ~ 4.9e-4);
            attention also rounds p to fp16 before p @ v.
  bfloat16  8 significant bits (2^-8 ~ 3.9e-3 per rounding), same rounding points.
  float8_e4m3  kept for the interpreter's own tests (4 significant bits).
The hardware checks used to have a looser private copy (fp16 atol 1e-2, bf16 2e-2); the bf16
atol here is that looser value, the fp16 atol 5e-3 is 2.5x the old simulator value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from nki_kernels.kernels.registry import dtype_name

__all__ = ["TOLERANCE", "assert_close", "compare", "dtype_name", "tolerance"]

# dtype name -> (rtol, atol as a fraction of max |ref|)
TOLERANCE = {
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 5e-3),
    "bfloat16": (3e-2, 2e-2),
    "float8_e4m3": (1.5e-1, 6e-2),
}


def tolerance(dtype: Any) -> tuple:
    name = dtype_name(dtype)
    if name not in TOLERANCE:
        raise KeyError(f"no tolerance for dtype {name!r}; the table has {', '.join(TOLERANCE)}")
    return TOLERANCE[name]


# elements per block of :func:`compare`: its float64 temporaries stay in cache (whole-array temporaries of
# the CS149 224x224 output, 400 MB each, cost ~2 s of page faults per comparison)
_BLOCK = 1 << 18


def compare(
    out: ArrayLike, ref: ArrayLike, dtype: Any = None, *, rtol: float | None = None, atol: float | None = None
) -> dict:
    """Errors of ``out`` against ``ref`` under the table (no assertion).  Returns a dict with
    ok, reason (why not ok, or ''), max_abs_err, max_rel_err (over max|ref|), n_bad."""
    out = np.asarray(out)
    ref = np.asarray(ref, dtype=np.float64)
    r, a = tolerance(dtype if dtype is not None else out.dtype)
    r = r if rtol is None else rtol
    a = a if atol is None else atol
    res = {
        "ok": False,
        "reason": "",
        "max_abs_err": float("inf"),
        "max_rel_err": float("inf"),
        "n_bad": -1,
        "rtol": r,
        "atol": a,
    }
    if out.shape != ref.shape:
        res["reason"] = f"shape {out.shape}, expected {ref.shape} (the oracle's)"
        return res
    o, x = out.reshape(-1), ref.reshape(-1)
    blocks = [slice(i, i + _BLOCK) for i in range(0, o.size, _BLOCK)]
    nonfinite, out_nonzero, ref_nonzero, ref_max = 0, False, False, [0.0]
    for b in blocks:
        ob, xb = o[b].astype(np.float64), x[b]
        nonfinite += int(np.count_nonzero(~np.isfinite(ob)))
        out_nonzero = out_nonzero or bool(np.any(ob != 0))
        ref_nonzero = ref_nonzero or bool(np.any(xb != 0))
        ref_max.append(np.max(np.abs(xb)))
    if nonfinite:
        res["reason"] = f"{nonfinite} NaN/inf values (poison leak?)"
        return res
    if ref_nonzero and not out_nonzero:
        res["reason"] = "all zeros (the kernel wrote nothing?)"
        return res
    scale = max(float(np.max(ref_max)), 1e-30)
    n_bad, worst, at = 0, 0.0, 0
    for b in blocks:
        xb = x[b]
        err = np.abs(o[b].astype(np.float64) - xb)
        n_bad += int(np.count_nonzero(err > (a * scale + r * np.abs(xb))))
        k = int(np.argmax(err))
        if err[k] > worst:  # the first element of the largest error, as np.argmax over the whole array
            worst, at = float(err[k]), b.start + k
    res.update(max_abs_err=worst, max_rel_err=worst / scale, n_bad=n_bad)
    if n_bad:
        idx = np.unravel_index(at, out.shape)
        res["reason"] = (
            f"{n_bad}/{o.size} elements outside rtol={r}, atol={a}*max|ref| "
            f"(max|ref| {scale:.3e}, max abs err {worst:.3e}); worst at "
            f"{tuple(int(i) for i in idx)}: got {np.float64(o[at])!r}, expected {x[at]!r}"
        )
        return res
    res["ok"] = True
    return res


def assert_close(
    out: ArrayLike,
    ref: ArrayLike,
    dtype: Any = None,
    what: str = "output",
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> float:
    """Assert ``out`` is finite, not all zeros, of the oracle's shape and within the table's
    tolerance for ``dtype`` (default: out's dtype).  Returns the max abs error."""
    name = dtype_name(dtype if dtype is not None else np.asarray(out).dtype)
    res = compare(out, ref, dtype, rtol=rtol, atol=atol)
    if not res["ok"]:
        raise AssertionError(f"{what} ({name}): {res['reason']}")
    return res["max_abs_err"]
