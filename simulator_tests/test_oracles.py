"""The oracles against independent, loop-based formulas on tiny shapes."""

import numpy as np
import pytest

from nki_kernels import oracles
from nki_kernels.oracles import attention_ref, conv2d_maxpool_ref, matmul_mk_ref, matmul_ref


@pytest.mark.parametrize("block_rows", [16, 2])  # one block per image; several, the last one partial
def test_conv2d_maxpool_ref_matches_direct_loops(rng, monkeypatch, block_rows):
    monkeypatch.setattr(oracles, "_CONV_BLOCK_ROWS", block_rows)
    X = rng.standard_normal((2, 3, 7, 8))
    W = rng.standard_normal((4, 3, 3, 2))
    b = rng.standard_normal(4)
    for pool in (1, 2, 3):
        out = conv2d_maxpool_ref(X, W, b, pool)
        assert np.isfinite(out).all() and np.any(out != 0)
        Ho, Wo = 5, 7
        conv = np.zeros((2, 4, Ho, Wo))
        for n in range(2):
            for o in range(4):
                for y in range(Ho):
                    for x in range(Wo):
                        conv[n, o, y, x] = np.sum(X[n, :, y : y + 3, x : x + 2] * W[o]) + b[o]
        ref = np.zeros((2, 4, Ho // pool, Wo // pool))
        for y in range(Ho // pool):
            for x in range(Wo // pool):
                ref[:, :, y, x] = conv[:, :, y * pool : (y + 1) * pool, x * pool : (x + 1) * pool].max(axis=(2, 3))
        np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_matmul_refs(rng):
    a = rng.standard_normal((5, 3))
    b = rng.standard_normal((5, 4))
    np.testing.assert_allclose(matmul_ref(a, b), np.einsum("km,kn->mn", a, b))
    np.testing.assert_allclose(matmul_mk_ref(a.T, b), np.einsum("km,kn->mn", a, b))


def test_attention_ref_matches_row_by_row_softmax(rng):
    q = rng.standard_normal((1, 2, 5, 4))
    k = rng.standard_normal((1, 2, 6, 4))
    v = rng.standard_normal((1, 2, 6, 4))
    for causal in (False, True):
        out = attention_ref(q, k, v, causal=causal, softmax_scale=0.7)
        for h in range(2):
            for i in range(5):
                keys = range(6) if not causal else range(min(i + 1, 6))
                s = np.array([0.7 * q[0, h, i] @ k[0, h, j] for j in keys])
                p = np.exp(s - s.max())
                p /= p.sum()
                expected = sum(pj * v[0, h, j] for pj, j in zip(p, keys, strict=True))
                np.testing.assert_allclose(out[0, h, i], expected, rtol=1e-12)
