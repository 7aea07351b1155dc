"""Simulator-test setup: the interpreter backend, one BLAS thread, fixed seeds (RNG fixture,
derandomized hypothesis).
Shared helpers live in sim_testing.py; the tolerance table and assert_close in nki_kernels.tolerances."""

from __future__ import annotations

import os

os.environ.setdefault("NKI_BACKEND", "sim")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # effective only if NumPy is not imported yet (dev.py sets it)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# Property tests draw the same examples on every run (fixed seeds, reproducible CI); set
# HYPOTHESIS_PROFILE=explore to search with fresh random examples locally.
settings.register_profile("fixed", derandomize=True, deadline=None, database=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# The slowest module first: under `dev.py test`'s two workers (pytest-xdist --dist loadfile hands out
# test files in collection order) the cost model's leave-one-out fixture (~2.5 min of the suite's ~8 min
# of CPU) then runs beside the rest of the suite instead of last.  Order within a module is kept.
_SLOWEST_FIRST = ("test_perf_calibration.py",)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in _SLOWEST_FIRST)
