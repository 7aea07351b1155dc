"""Helpers shared by the simulator tests: the per-dtype tolerance table and oracle comparison.

(A module of its own rather than conftest.py, so that `from sim_testing import ...` cannot
resolve to hw_tests/conftest.py when both folders run in one pytest session.)"""
from __future__ import annotations

import ml_dtypes
import numpy as np

# Per-dtype tolerances for comparing kernel outputs with float64 oracles: (rtol, atol), relative
# to the output's scale (atol is multiplied by max|ref|).  fp32 kernels accumulate in fp32 over
# K up to a few thousand; bf16/fp16 inputs are rounded once on load and outputs on store.
TOLERANCE = {
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 2e-3),
    "bfloat16": (3e-2, 1.6e-2),
    "float8_e4m3": (1.5e-1, 6e-2),
}


def dtype_name(d) -> str:
    d = np.dtype(d)
    return "bfloat16" if d == ml_dtypes.bfloat16 else d.name


def assert_matches(out, ref, dtype=None, *, what="output", rtol=None, atol=None):
    """Assert a kernel output is finite, not all zero, of the right shape, and close to ``ref``."""
    out = np.asarray(out)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, f"{what}: shape {out.shape} != oracle {ref.shape}"
    o = out.astype(np.float64)
    assert np.all(np.isfinite(o)), f"{what}: {np.count_nonzero(~np.isfinite(o))} non-finite values (poison leak?)"
    if np.any(ref != 0):
        assert np.any(o != 0), f"{what}: all zeros"
    name = dtype_name(dtype if dtype is not None else out.dtype)
    r, a = TOLERANCE[name]
    r = rtol if rtol is not None else r
    a = atol if atol is not None else a
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    err = np.abs(o - ref)
    bad = err > (a * scale + r * np.abs(ref))
    assert not bad.any(), (f"{what}: {int(bad.sum())}/{bad.size} elements off; max abs err {err.max():.3e} "
                           f"(scale {scale:.3e}, rtol {r}, atol {a}*scale) for {name}")


def load_data_module(name: str):
    """Import simulator_tests/data/<name>.py (a file written against `neuronxcc.nki`); call
    inside ``install_neuronxcc_alias()``."""
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "data" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
