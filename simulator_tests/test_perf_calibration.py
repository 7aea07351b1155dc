"""Calibration gate: the cost model against the public trn2 measurements (trn2-hardware.md §3.1).

Traces the calibration kernels on the interpreter (trace only, no numerics), estimates them
and fails if the median |error| of the gated points exceeds 20 % or any point (gated or a
profile sub-metric) is off by more than 2x.  The table is printed (pytest -s shows it).
"""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.perf


@pytest.fixture(scope="module")
def results():
    from nki_kernels.perf import calibration
    return calibration.run()


def test_calibration_median_error_and_worst_point(results):
    from nki_kernels.perf import calibration
    print("\n" + calibration.table(results))
    s = calibration.stats(results)
    assert s["n_gated"] >= 10
    assert s["median_abs_error"] <= calibration.GATE_MEDIAN, calibration.table(results)
    for r in results:
        off = max(r.ratio, 1 / r.ratio)
        assert off <= calibration.GATE_MAX_RATIO, f"#{r.point.pid} off by {off:.2f}x"


def test_calibration_orderings_hold(results):
    """Relations the measurements show, independent of the fitted constants."""
    by = {r.point.pid: r.estimate for r in results}
    assert by["1"] > 50 * by["2"]          # 128 partitions per DMA: ~100x fewer DMAs
    assert by["2"] > by["3"]               # half as many DMAs per element
    assert by["3"] > 5 * by["4"]           # one big DMA instead of 100 small ones
    assert by["6"] < by["5"]               # FREE_DIM 1000 pipelines the add under the loads
    assert by["7"] > by["8"]               # HW-DGE issue (benchmark) vs --disable-dge profile
    assert all(math.isfinite(v) and v > 0 for v in by.values())


def test_calibration_kernels_compute_the_right_values():
    """The calibration kernels are real kernels: check their numerics on small shapes."""
    import numpy as np

    from nki_kernels.perf import calib_kernels as ck
    from nki_kernels.sim import simulate_kernel
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(2048).astype(np.float32), rng.standard_normal(2048).astype(np.float32)
    np.testing.assert_allclose(np.asarray(simulate_kernel(ck.vector_add_tiled, a, b, row_chunk=128)).reshape(-1), a + b)
    np.testing.assert_allclose(np.asarray(simulate_kernel(ck.vector_add_stream, a, b, free_dim=4)).reshape(-1), a + b)
    m = rng.standard_normal((256, 384)).astype(np.float32)
    np.testing.assert_array_equal(simulate_kernel(ck.transpose_2d, m), m.T)
    x = rng.standard_normal((1, 1024)).astype(np.float32)
    assert float(np.asarray(simulate_kernel(ck.row_max, x)).reshape(-1)[0]) == pytest.approx(float(x.max()))
    x[0, ::3] = 0
    vals, cnt = simulate_kernel(ck.nonzero_count, x)
    assert float(np.asarray(cnt).reshape(-1)[0]) == np.count_nonzero(x)
    np.testing.assert_allclose(vals, x)
