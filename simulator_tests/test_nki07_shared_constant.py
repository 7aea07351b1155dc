"""``nl.shared_constant`` (NKI 0.7): a NumPy array or the path of a ``.npy`` file (aws-neuron-sdk 81ce03ae
nki/api/nki/language/__init__.py), only the element types that docstring lists.  nki-library's rotational topk
passes file paths; they were read as a 0-d string array (E011)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nki_kernels.sim.errors import SimValueError
from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki


def copy_out(constant):
    @nki.jit
    def k(x):
        c = nl.shared_constant(constant)
        t = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=c)
        out = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return np.asarray(k(np.zeros((1, 1), np.float32)))


def _data() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((16, 8)).astype(np.float32)


@pytest.mark.parametrize("as_path", [str, Path], ids=["str", "Path"])
def test_a_npy_file_path_is_read(tmp_path: Path, as_path):
    a = _data()
    np.save(tmp_path / "c.npy", a)
    out = copy_out(as_path(tmp_path / "c.npy"))
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_array_equal(out, a)


def test_an_array_is_taken_as_is():
    a = _data()
    np.testing.assert_array_equal(copy_out(a), a)


def test_a_path_that_is_not_a_npy_file_is_named(tmp_path: Path):
    (tmp_path / "c.npy").write_text("not numpy")
    with pytest.raises(SimValueError, match=r"\[E011\].*c\.npy.*numpy\.save"):
        copy_out(str(tmp_path / "c.npy"))
    with pytest.raises(SimValueError, match=r"\[E011\].*missing\.npy"):
        copy_out(str(tmp_path / "missing.npy"))


def test_an_unsupported_element_type_is_e018_and_its_cast_runs():
    a = _data().astype(np.float64)
    with pytest.raises(SimValueError, match=r"\[E018\].*float64.*astype"):
        copy_out(a)
    np.testing.assert_array_equal(copy_out(a.astype(np.float32)), a.astype(np.float32))
