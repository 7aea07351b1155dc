"""NumPy float64 references with the kernels' signatures (no tiling).

Used by the simulator tests, the main command (``nki-kernels verify``) and the hardware tests.
Inputs may be any float dtype (bf16 via ml_dtypes); outputs are float64.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def conv2d_maxpool_ref(X: ArrayLike, W: ArrayLike, bias: ArrayLike, pool_size: int = 1) -> np.ndarray:
    """Valid (no padding) stride-1 cross-correlation + bias, then non-overlapping max-pool.

    X (B, C_in, H, W), W (C_out, C_in, KH, KW), bias (C_out,) ->
    (B, C_out, (H-KH+1)//pool_size, (W-KW+1)//pool_size)."""
    X, W, bias = _f64(X), _f64(W), _f64(bias)
    B, C, H, Wd = X.shape
    Co, C2, KH, KW = W.shape
    assert C == C2, f"conv2d_maxpool_ref: C_in mismatch {C} vs {C2}"
    Ho, Wo = H - KH + 1, Wd - KW + 1
    out = np.empty((B, Co, Ho, Wo))
    # one GEMM per image and filter row: the KW taps of row i stacked, times the full-width input rows
    # i..i+Ho (a view: no window copy); tap j is then the columns j..j+Wo of its block
    w_rows = np.ascontiguousarray(W.transpose(2, 3, 0, 1)).reshape(KH, KW * Co, C)
    for b in range(B):
        acc = out[b]
        acc[...] = bias[:, None, None]
        for i in range(KH):
            y = (w_rows[i] @ X[b, :, i : i + Ho, :].reshape(C, Ho * Wd)).reshape(KW, Co, Ho, Wd)
            for j in range(KW):
                acc += y[j, :, :, j : j + Wo]
    p = int(pool_size)
    Hp, Wp = Ho // p, Wo // p
    out = out[:, :, : Hp * p, : Wp * p].reshape(B, Co, Hp, p, Wp, p).max(axis=(3, 5))
    return out


def matmul_ref(lhsT: ArrayLike, rhs: ArrayLike) -> np.ndarray:
    """(K, M), (K, N) -> (M, N) = lhsT.T @ rhs."""
    return _f64(lhsT).T @ _f64(rhs)


def matmul_mk_ref(lhs: ArrayLike, rhs: ArrayLike) -> np.ndarray:
    """(M, K), (K, N) -> (M, N) = lhs @ rhs."""
    return _f64(lhs) @ _f64(rhs)


def attention_ref(
    q: ArrayLike, k: ArrayLike, v: ArrayLike, causal: bool = False, softmax_scale: float | None = None
) -> np.ndarray:
    """softmax(q k^T * scale [+ causal mask]) v per (batch, head).

    q (B, H, Sq, D), k and v (B, H, Sk, D) -> (B, H, Sq, D).  Causal masks key j > query i
    (aligned at the start); a query row whose keys are all masked yields 0."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    D = q.shape[-1]
    scale = 1.0 / np.sqrt(D) if softmax_scale is None else float(softmax_scale)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        mask = np.arange(Sk)[None, :] > np.arange(Sq)[:, None]
        s = np.where(mask, -np.inf, s)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    denom = p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bhqd", p, v) / np.where(denom == 0, 1.0, denom)
    return out
