"""``compare`` works block by block; its answers are those of the whole-array formula."""

import ml_dtypes
import numpy as np
import pytest

from nki_kernels import tolerances
from nki_kernels.tolerances import compare


def _whole_array(out, ref, rtol, atol):
    o, ref = out.astype(np.float64), ref.astype(np.float64)
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    err = np.abs(o - ref)
    bad = err > atol * scale + rtol * np.abs(ref)
    return float(err.max()), int(bad.sum()), np.unravel_index(int(np.argmax(err)), err.shape)


@pytest.mark.parametrize("block", [1 << 18, 7, 1])
def test_blocks_agree_with_the_whole_array_formula(rng, monkeypatch, block):
    monkeypatch.setattr(tolerances, "_BLOCK", block)
    ref = rng.standard_normal((3, 5, 7))
    out = (ref + 1e-7 * rng.standard_normal(ref.shape)).astype(np.float32)
    ref[0, 1, 2] = ref[2, 4, 6] = 0.5
    out[0, 1, 2] = out[2, 4, 6] = 2.5  # the largest error, twice (exact): the first one is reported
    rtol, atol = tolerances.TOLERANCE["float32"]
    worst, n_bad, idx = _whole_array(out, ref, rtol, atol)
    idx = tuple(int(i) for i in idx)
    assert n_bad == 2 and idx == (0, 1, 2)
    res = compare(out, ref, np.float32)
    assert not res["ok"] and res["n_bad"] == n_bad and res["max_abs_err"] == worst
    assert res["max_rel_err"] == worst / np.max(np.abs(ref))
    assert f"worst at {idx}" in res["reason"] and f"{n_bad}/{out.size} elements" in res["reason"]

    fixed = ref.astype(np.float32)
    res = compare(fixed, ref, np.float32)
    assert res["ok"] and res["n_bad"] == 0 and res["reason"] == ""
    assert res["max_abs_err"] == _whole_array(fixed, ref, rtol, atol)[0]


@pytest.mark.parametrize("block", [1 << 18, 4])
def test_nonfinite_and_all_zero_outputs_are_named(rng, monkeypatch, block):
    monkeypatch.setattr(tolerances, "_BLOCK", block)
    ref = rng.standard_normal((4, 6))
    out = ref.copy()
    out[0, 0], out[3, 5] = np.nan, np.inf
    assert compare(out, ref, np.float32)["reason"] == "2 NaN/inf values (poison leak?)"
    assert compare(np.zeros_like(ref), ref, np.float32)["reason"] == "all zeros (the kernel wrote nothing?)"
    assert compare(np.zeros_like(ref), np.zeros_like(ref), np.float32)["ok"]
    assert "expected (3, 2)" in compare(np.ones((2, 3)), np.ones((3, 2)), np.float32)["reason"]


def test_the_table_is_looked_up_by_dtype_name():
    assert (
        tolerances.tolerance(ml_dtypes.bfloat16) == tolerances.tolerance("bfloat16") == tolerances.TOLERANCE["bfloat16"]
    )
    assert tolerances.tolerance(np.float16) == tolerances.TOLERANCE["float16"]
