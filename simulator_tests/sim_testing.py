"""Helpers shared by the simulator tests.

The tolerance table and the oracle comparison are the project's one copy,
:mod:`nki_kernels.tolerances` (also used by ``nki-kernels verify`` and the hardware checks);
they are re-exported here for the tests.

(A module of its own rather than conftest.py, so that `from sim_testing import ...` cannot
resolve to hw_tests/conftest.py when both folders run in one pytest session.)"""

from __future__ import annotations

import warnings

import numpy as np
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


def run_loop_programs(trace, kernel, args, programs: bool, capfd):
    """``trace(kernel, *args, options=...)`` (either front end's) with loop programs on or off and explain_loops:
    (("ok", outputs, trace) or ("error", class name, message), the warnings, what explain_loops printed)."""
    from nki_kernels.sim import SimOptions
    from nki_kernels.sim.core.errors import SimError

    opts = SimOptions(loop_programs=programs, explain_loops=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out, tr = trace(kernel, *args, options=opts)
            result = ("ok", out, tr)
        except SimError as e:
            result = ("error", type(e).__name__, str(e))
    said = capfd.readouterr().err
    return result, sorted({str(w.message) for w in caught}), said


def same_with_loop_programs(trace, kernel, args, capfd):
    """Run ``kernel`` both ways (every iteration; loop programs) and assert the same outcome: the same output bits,
    the same trace event for event, the same allocations, peak SBUF and warnings, or the same error.  Returns (the
    per-iteration run, the program run, what explain_loops said)."""
    slow, slow_w, _ = run_loop_programs(trace, kernel, args, False, capfd)
    fast, fast_w, said = run_loop_programs(trace, kernel, args, True, capfd)
    assert slow[0] == fast[0], (slow, fast)
    if slow[0] == "ok":
        out_s, out_f = np.asarray(slow[1]), np.asarray(fast[1])
        assert np.isfinite(out_f.astype(np.float32)).all() and np.any(out_f != 0)
        assert out_s.dtype == out_f.dtype and np.array_equal(out_s.view(np.uint8), out_f.view(np.uint8))
        ts, tf = slow[2], fast[2]
        assert len(ts.events) == len(tf.events)
        for a, b in zip(ts.events, tf.events, strict=True):
            assert a == b
        assert ts.alloc_origins == tf.alloc_origins and ts.alloc_names == tf.alloc_names
        assert ts.peak_sbuf_bytes_per_partition == tf.peak_sbuf_bytes_per_partition
    else:
        assert slow[1:] == fast[1:]
    assert slow_w == fast_w
    return slow, fast, said
