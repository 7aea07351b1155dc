"""NKI 0.7 as shipped in SDK 2.33 (NKI 0.7.0): NkiScalar / scalar_load / scalar_store, nisa.topk, the loops
that replaced nl.dynamic_range and `while reg:`, tracing-based specialization (generators, class inheritance),
the LNC-degree check and NKI_COMPILER_FRONTEND.  Each documented error has its bad form (the coded error) and
its fixed twin (runs).  Rule ids and sources: docs/nki-0.7-spec.md."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nki_kernels.sim.nki07 import isa as nisa
from nki_kernels.sim.nki07 import language as nl
from nki_kernels.sim.nki07 import nki

RNG = np.random.default_rng(233)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check(out, ref, rtol=1e-6, atol=0.0):
    out = np.asarray(out, dtype=np.float64)
    assert out.shape == np.shape(ref)
    assert np.all(np.isfinite(out)) and np.any(out != 0)
    np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


def run(body, *args):
    @nki.jit
    def k(*a):
        body(*a)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a[0][0:1, 0:1])
        return out

    return k(*(args or (rand(4, 4),)))


def raises(exc, code, body, *args):
    with pytest.raises(exc, match=rf"\[{code}\]"):
        run(body, *args)


# ---- I20: nisa.topk ---------------------------------------------------------------------------------------------
def _snake_ref(x, n, k, descending):
    """NumPy reference: per 16-partition group, the snake of the first n elements (element s at partition
    s % 16, column s // 16), its top-k (ties: lower index first), result j at (j % 16, j // 16)."""
    P = x.shape[0]
    kc = -(-k // 16)
    vals = np.zeros((P, kc), np.float32)
    idx = np.zeros((P, kc), np.int64)
    written = np.zeros((P, kc), bool)
    for g in range(P // 16):
        snake = x[16 * g : 16 * g + 16].astype(np.float32).T.reshape(-1)[:n]
        order = np.argsort(-snake, kind="stable")[:k]
        if not descending:
            order = order[::-1]
        for j, s in enumerate(order):
            vals[16 * g + j % 16, j // 16] = snake[s]
            idx[16 * g + j % 16, j // 16] = s
            written[16 * g + j % 16, j // 16] = True
    return vals, idx, written


def _topk_kernel(n, k, sorted_):
    @nki.jit
    def tk(x):
        P, F = x.shape
        src = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        v = nl.ndarray((P, k), dtype=nl.bfloat16, buffer=nl.sbuf)
        ix = nl.ndarray((P, k), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.memset(v, -7.0)
        nisa.memset(ix, 77777)
        nisa.topk(val_dst=v, idx_dst=ix, src=src, n=n, sorted=sorted_)
        o1 = nl.ndarray((P, k), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o2 = nl.ndarray((P, k), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=v)
        nisa.dma_copy(dst=o2, src=ix)
        return o1, o2

    return tk


@pytest.mark.parametrize("n, k, F", [(42, 20, 3), (200, 64, 13), (8, 8, 1), (1000, 100, 70)])
@pytest.mark.parametrize("sorted_", [True, False], ids=["sorted", "ascending"])
def test_topk_matches_numpy_snake_reference(n, k, F, sorted_):
    """I20 (SDK 2.33.0 topk page): 8 independent problems in a 128-partition tile; results in the snake layout
    in the first ceil(k/16) columns; idx_dst holds snake indices; the rest of the outputs is untouched."""
    x = RNG.standard_normal((128, F)).astype(ml_dtypes.bfloat16)
    vals, idxs = _topk_kernel(n, k, sorted_)(x)
    rv, ri, written = _snake_ref(x, n, k, sorted_)
    kc = rv.shape[1]
    got_v = vals[:, :kc].astype(np.float32)
    got_i = idxs[:, :kc].astype(np.int64)
    assert np.all(np.isfinite(got_v)) and np.any(got_v != 0)
    np.testing.assert_array_equal(np.where(written, got_v, 0), rv)
    np.testing.assert_array_equal(np.where(written, got_i, 0), ri)
    # untouched: the slots past k in the last column, and every column past ceil(k/16)
    assert np.all(got_v[~written] == -7.0) and np.all(got_i[~written] == 77777)
    assert np.all(vals[:, kc:].astype(np.float32) == -7.0) and np.all(idxs[:, kc:] == 77777)
    if sorted_:  # rank j at result j: descending along the snake
        first = rv[:16].T.reshape(-1)[:k]
        assert np.all(np.diff(first) <= 0)


def test_topk_event_and_cost():
    """I20: one GpSimdE event per call, its elements per partition the n of the documented cost 4*n + K."""
    from nki_kernels.perf.costs import compute_cost_ns
    from nki_kernels.perf.hardware import TRN2

    x = RNG.standard_normal((32, 4)).astype(ml_dtypes.bfloat16)
    _, trace = nki.trace(_topk_kernel(50, 16, True), x)
    ev = [e for e in trace.events if e.op == "topk"]
    assert len(ev) == 1 and str(ev[0].engine) == "POOL" and ev[0].free_elems == 50
    ns, known = compute_cost_ns(ev[0], TRN2)
    assert known
    ns100, _ = compute_cost_ns(ev[0]._replace(free_elems=100, payload=ev[0].payload._replace(elems=100)), TRN2)
    assert ns100 - ns == pytest.approx(4 * 50 / TRN2.v("pool_clock_ghz"))


def _topk_body(src_dtype=nl.bfloat16, idx_dtype=nl.uint32, P=32, n=40, k=8, F=3, src_buffer=nl.sbuf):
    def body(a):
        src = nl.ndarray((P, F), dtype=src_dtype, buffer=src_buffer)
        nisa.memset(src, 1.0)
        v = nl.ndarray((P, k), dtype=nl.bfloat16, buffer=nl.sbuf)
        ix = nl.ndarray((P, k), dtype=idx_dtype, buffer=nl.sbuf)
        nisa.topk(v, ix, src, n)

    return body


@pytest.mark.parametrize(
    "bad, exc, code",
    [
        (dict(src_dtype=nl.float32), TypeError, "E009"),  # the source is BF16
        (dict(idx_dtype=nl.int32), TypeError, "E009"),  # idx_dst is uint32
        (dict(P=24), ValueError, "E011"),  # partition dim a multiple of 16
        (dict(n=7), ValueError, "E011"),  # 8 <= n < 65536
        (dict(k=41), ValueError, "E011"),  # k <= n
        (dict(F=2), ValueError, "E011"),  # src free dim >= ceil(n / 16)
        (dict(src_buffer=nl.psum), TypeError, "E007"),  # source and outputs in SBUF
    ],
    ids=["src_fp32", "idx_int32", "p24", "n7", "k_gt_n", "src_narrow", "src_psum"],
)
def test_topk_constraints(bad, exc, code):
    """I20 (0.6 docstring constraints, SDK 2.33.0 page): each violation is its coded error; the fixed twin runs."""
    raises(exc, code, _topk_body(**bad))
    run(_topk_body())
