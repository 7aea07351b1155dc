"""Helpers shared by the simulator tests.

The tolerance table and the oracle comparison are the project's one copy,
:mod:`nki_kernels.tolerances` (also used by ``nki-kernels verify`` and the hardware checks);
they are re-exported here for the tests.

(A module of its own rather than conftest.py, so that `from sim_testing import ...` cannot
resolve to hw_tests/conftest.py when both folders run in one pytest session.)"""

from __future__ import annotations

import pytest

from nki_kernels.sim import set_default_options
from nki_kernels.tolerances import TOLERANCE, assert_close  # noqa: F401  (re-exported)


@pytest.fixture(autouse=True)
def strict_interpreter():
    """The project's own kernels run with SimOptions(strict=True) as the process default:
    hardware-unproven constructs (3-D SBUF->SBUF dma_transpose, slice of a slice, zero-trip
    affine_range, ...) are errors, not warnings.  Imported by the kernel test modules (an
    autouse fixture applies to the module that imports it); explicit SimOptions(...) in those
    tests pass strict=True themselves."""
    prev = set_default_options(strict=True)
    try:
        yield
    finally:
        set_default_options(prev)


def load_data_module(name: str):
    """Import simulator_tests/data/<name>.py (a file written against `neuronxcc.nki`); call
    inside ``install_neuronxcc_alias()``."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "data" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
