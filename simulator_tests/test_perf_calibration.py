"""Calibration gate: the cost model against the public trn2 measurements (trn2-hardware.md §3.1, §3.1b).

Traces the calibration kernels on the interpreter (trace only, no numerics), estimates them with the
recorded constants (in-sample) and by leave-one-out (each gated point predicted by a re-fit of every
fitted constant and option without it).  Fails if the leave-one-out median |error| exceeds 15 %, a
gated point is off by more than ``GATE_MAX_RATIO``, fewer than 90 % of the pairs of variants of one
kernel are ordered as measured, a profile sub-metric is off by more than 2x, or the band printed for
an op class is narrower than that class's leave-one-out error.  The table is printed (pytest -s).
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.perf


@pytest.fixture(scope="module")
def traces():
    from nki_kernels.perf import calibration

    return calibration.collect_traces()


@pytest.fixture(scope="module")
def validated(traces):
    from nki_kernels.perf import calibration

    return calibration.validate(traces)


@pytest.fixture(scope="module")
def results(validated):
    return validated[0]


def test_leave_one_out_error_gate(validated):
    from nki_kernels.perf import calibration

    insample, loo = validated
    print("\n" + calibration.table(insample, loo))
    s = calibration.stats(loo)
    assert s["n_gated"] >= 60 and len(loo) == s["n_gated"]
    assert all(math.isfinite(r.estimate) and r.estimate > 0 for r in loo)
    assert s["median_abs_error"] <= calibration.GATE_MEDIAN, calibration.table(insample, loo)
    for r in loo:
        assert r.off <= calibration.GATE_MAX_RATIO, f"#{r.point.pid} off by {r.off:.2f}x (leave-one-out)"
    for r in insample:
        limit = calibration.GATE_MAX_RATIO if r.point.gated else calibration.SUBMETRIC_MAX_RATIO
        assert r.off <= limit, f"#{r.point.pid} off by {r.off:.2f}x (in-sample)"


def test_variants_of_one_kernel_are_ordered_as_measured(validated):
    from nki_kernels.perf import calibration

    insample, loo = validated
    for res in (insample, loo):
        rp = calibration.rank_pairs(res)
        assert rp["total"] >= 30
        assert rp["right"] >= calibration.GATE_RANK * rp["total"], rp


def test_printed_band_of_each_op_class_is_not_narrower_than_its_leave_one_out_error(validated):
    from nki_kernels.perf import accuracy

    live = accuracy.class_bands_from_loo(validated[1])
    assert set(live) == set(accuracy.CLASS_BANDS), live
    for cls, b in live.items():
        rec = accuracy.CLASS_BANDS[cls]
        assert rec.typical >= b.typical - 0.005, (cls, rec, b, "update accuracy.CLASS_BANDS and docs/cost-model.md")
        assert rec.typical <= b.typical + 0.05, (cls, rec, b, "the recorded band is much wider than the live one")
        assert rec.worst >= b.worst - 0.01, (cls, rec, b)
    assert accuracy.TYPICAL_ERROR >= accuracy.band_from_loo(validated[1]) - 0.005


def test_recorded_constants_are_the_in_sample_fit_optimum(traces):
    """No fitted constant or option moved without the record (a refit from them must not improve the loss)."""
    from nki_kernels.perf import calibration
    from nki_kernels.perf.hardware import TRN2

    f = calibration._Fitter(traces, TRN2)
    vals, floors = calibration.recorded_start(TRN2)
    _, recorded_loss = f.loss(vals, [True] * len(f.points), floors)
    _, refit_loss = f.fit(start=(vals, floors), rounds=1)
    assert refit_loss >= recorded_loss - 1e-6


def test_calibration_orderings_hold(results):
    """Relations the measurements show, independent of the fitted constants."""
    by = {r.point.pid: r.estimate for r in results}
    assert by["1"] > 50 * by["2"]  # 128 partitions per DMA: ~100x fewer DMAs
    assert by["2"] > by["3"]  # half as many DMAs per element
    assert by["3"] > 5 * by["4"]  # one big DMA instead of 100 small ones
    assert by["6"] < by["5"]  # FREE_DIM 1000 pipelines the add under the loads
    assert by["7"] > by["8"]  # HW-DGE issue (benchmark) vs --disable-dge profile
    assert by["tut1"] > 1.2 * max(by["tut2"], by["tut3"], by["tut4"])  # the tiled version is the slow one
    for dt in ("fp32", "bf16"):
        for S in (512, 1024, 2048, 4096):
            assert by[f"att.{dt}.{S}.u"] > by[f"att.{dt}.{S}.f"]  # fusion removes the HBM round trips
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


def test_tensor_calibration_kernels_compute_the_right_values():
    """The TensorE-heavy re-creations (tutorial, attention, GEMM+bias(+GELU)) against NumPy."""
    import math as m

    import numpy as np

    from nki_kernels.perf import calib_kernels_tensor as ck
    from nki_kernels.perf.model import trace_of

    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 1024)).astype(np.float32)
    for k, kw in (
        (ck.tut_tiled, {}),
        (ck.tut_hoisted, {}),
        (ck.tut_blocked, {}),
        (ck.tut_kblocked, {"bm": 2, "bn": 1, "bk": 2}),
    ):
        out, _ = trace_of(k, a, b, **kw)
        np.testing.assert_allclose(np.asarray(out), a.T @ b, rtol=1e-4, atol=1e-3)
    q, kk, v = ((rng.random((128, 1024)) - 0.5).astype(np.float32) for _ in range(3))
    s = q.T.astype(np.float64) @ kk
    p = np.exp(s - s.max(axis=1, keepdims=True))
    ref = (p / p.sum(axis=1, keepdims=True)) @ v.T
    for k in (ck.attn_fused, ck.attn_unfused):
        out, _ = trace_of(k, q, kk, v)
        np.testing.assert_allclose(np.asarray(out, dtype=np.float64), ref, atol=1e-4)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    w = (rng.standard_normal((512, 1024)) / 16).astype(np.float32)
    bias = rng.standard_normal((1, 1024)).astype(np.float32)
    y = x @ w + bias
    erf = np.vectorize(m.erf)
    gelu = 0.5 * y * (1 + erf(y / np.sqrt(2)))
    out, _ = trace_of(ck.gemm_bias, x.T.copy(), w, bias)
    np.testing.assert_allclose(np.asarray(out), y, rtol=1e-4, atol=1e-3)
    out, _ = trace_of(ck.gelu_pass, y)
    np.testing.assert_allclose(np.asarray(out), gelu, atol=2e-3)
    for k in (ck.mlp_fused_act, ck.mlp_fused_poly):
        out, _ = trace_of(k, x.T.copy(), w, bias)
        np.testing.assert_allclose(np.asarray(out), gelu, atol=2e-3)


def test_no_constant_is_fitted_to_a_single_point(traces):
    """Every tag-F constant moves at least two gated points (a floor: every point of its mode)."""
    from nki_kernels.perf import calibration
    from nki_kernels.perf.hardware import TRN2

    base = calibration.evaluate(traces, TRN2)
    for key in calibration.fitted_keys(TRN2):
        lo, hi = TRN2[key].range
        moved_to = lo if TRN2.v(key) - lo > hi - TRN2.v(key) else hi
        res = calibration.evaluate(traces, TRN2.with_values(**{key: moved_to}))
        moved = [
            a.point.pid
            for a, b in zip(base, res, strict=True)
            if a.point.gated and abs(b.estimate / a.estimate - 1) > 0.005
        ]
        assert len(moved) >= 2, f"{key} only moves {moved}"
