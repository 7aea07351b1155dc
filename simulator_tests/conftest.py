"""Simulator-test setup: the interpreter backend, one BLAS thread, a fixed-seed RNG fixture.
Shared helpers (tolerance table, oracle comparison) live in sim_testing.py."""
from __future__ import annotations

import os

os.environ.setdefault("NKI_BACKEND", "sim")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # effective only if NumPy is not imported yet (dev.py sets it)

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
