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
    o = out.astype(np.float64)
    if not np.all(np.isfinite(o)):
        res["reason"] = f"{int(np.count_nonzero(~np.isfinite(o)))} NaN/inf values (poison leak?)"
        return res
    if o.size and np.any(ref != 0) and not np.any(o != 0):
        res["reason"] = "all zeros (the kernel wrote nothing?)"
        return res
    scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30)
    err = np.abs(o - ref)
    bad = err > (a * scale + r * np.abs(ref))
    res.update(
        max_abs_err=float(err.max()) if err.size else 0.0,
        max_rel_err=(float(err.max()) / scale) if err.size else 0.0,
        n_bad=int(bad.sum()),
    )
    if bad.any():
        idx = np.unravel_index(int(np.argmax(err)), err.shape)
        res["reason"] = (
            f"{int(bad.sum())}/{bad.size} elements outside rtol={r}, atol={a}*max|ref| "
            f"(max|ref| {scale:.3e}, max abs err {err.max():.3e}); worst at "
            f"{tuple(int(i) for i in idx)}: got {o[idx]!r}, expected {ref[idx]!r}"
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
