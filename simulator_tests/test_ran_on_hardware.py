"""The "never stricter than the compiler" regression corpus: patterns of public NKI code that ran on hardware.

Every file of ``simulator_tests/data/ran_on_hardware/`` (format: its README.md) is a kernel written here from a
pattern of public code that compiled and ran on a Trainium.  Each must run with default options under the alias
its NKI generation uses (as ``nki-kernels run`` runs third-party code), produce finite, non-zero output equal to
its NumPy reference, and warn only through the lenient rules it lists (``WARNS``, sim/core/policy.py).  A rule
that starts rejecting one of them is stricter than the compiler.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from nki_kernels.sim import SimWarning, install_neuronxcc_alias, install_nki_alias, set_default_options, simulate_kernel
from nki_kernels.sim.core.policy import LENIENT

DATA = Path(__file__).parent / "data" / "ran_on_hardware"
FILES = sorted(p for p in DATA.glob("*.py") if not p.name.startswith("_"))
_RULE = re.compile(r"^\[E\d{3} under strict\] (\S+):")


def _alias(nki: str):
    return install_nki_alias() if nki == "0.7" else install_neuronxcc_alias()


def _load(path: Path) -> ModuleType:
    text = path.read_text()
    nki = "0.7" if re.search(r"^NKI = \"0\.7\"", text, re.M) else "0.1"
    with _alias(nki):
        spec = importlib.util.spec_from_file_location(f"ran_on_hardware_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    assert mod.NKI == nki and mod.SEEN, path.name
    return mod


def _run(mod: ModuleType) -> tuple[object, list[str]]:
    grid = getattr(mod, "GRID", None)
    k = mod.kernel[grid] if grid else mod.kernel
    with _alias(mod.NKI), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = k(*mod.inputs()) if mod.NKI == "0.7" else simulate_kernel(k, *mod.inputs())
    return out, [str(w.message) for w in caught if issubclass(w.category, SimWarning)]


def test_the_corpus_is_there() -> None:
    assert len(FILES) >= 10, [p.name for p in FILES]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_public_pattern_runs_and_matches_numpy(path: Path) -> None:
    mod = _load(path)
    allowed = set(getattr(mod, "WARNS", set()))
    assert allowed <= set(LENIENT), f"WARNS names rules that are not lenient: {allowed - set(LENIENT)}"
    out, warned = _run(mod)
    got = np.asarray(out, dtype=np.float64)
    assert np.isfinite(got).all(), "non-finite output"
    assert np.abs(got).max() > 0, "all-zero output"
    want = np.asarray(mod.reference(*mod.inputs()), dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    for w in warned:
        m = _RULE.match(w)
        # block dimensions are deprecated in NKI 0.1 (warned, never an error: README divergences)
        assert (m is not None and m.group(1) in allowed) or "block dimensions" in w, f"unexpected warning: {w}"
    for rule in allowed:
        assert any(w.startswith(f"[{LENIENT[rule].code} under strict] {rule}:") for w in warned), (
            f"{rule} listed in WARNS but not warned: the pattern no longer exercises it"
        )


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_loop_programs_change_nothing(path: Path) -> None:
    """Each pattern gives the same output bits and warnings with loop programs as running every loop iteration by
    iteration (NKI 0.7 loops and NKI 0.1 static_range run as programs where their source proves them alike)."""
    mod = _load(path)
    prev = set_default_options(loop_programs=False)
    try:
        slow, slow_w = _run(mod)
    finally:
        set_default_options(prev)
    fast, fast_w = _run(mod)
    s, f = np.asarray(slow), np.asarray(fast)
    assert np.isfinite(f.astype(np.float64)).all() and np.any(f != 0)
    assert s.dtype == f.dtype and s.shape == f.shape and np.array_equal(s.view(np.uint8), f.view(np.uint8))
    assert sorted(set(slow_w)) == sorted(set(fast_w))
