"""NumPy float64 references with the kernels' signatures (no tiling).

Used by the simulator tests, the main command (``nki-kernels verify``) and the hardware tests.
Inputs may be any float dtype (bf16 via ml_dtypes); outputs are float64.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


# output rows of one conv2d oracle block: its float64 input rows, GEMM results and sums stay a few MB
# (one (B, C, H, W) float64 copy of the input and a GEMM result per filter row took ~1 GB at CS149 224x224)
_CONV_BLOCK_ROWS = 16


def conv2d_maxpool_ref(X: ArrayLike, W: ArrayLike, bias: ArrayLike, pool_size: int = 1) -> np.ndarray:
    """Valid (no padding) stride-1 cross-correlation + bias, then non-overlapping max-pool.

    X (B, C_in, H, W), W (C_out, C_in, KH, KW), bias (C_out,) ->
    (B, C_out, (H-KH+1)//pool_size, (W-KW+1)//pool_size)."""
    X = np.asarray(X)
    W, bias = _f64(W), _f64(bias)
    B, C, H, Wd = X.shape
    Co, C2, KH, KW = W.shape
    assert C == C2, f"conv2d_maxpool_ref: C_in mismatch {C} vs {C2}"
    Ho, Wo = H - KH + 1, Wd - KW + 1
    p = int(pool_size)
    Hp, Wp = Ho // p, Wo // p
    out = np.empty((B, Co, Hp, Wp))
    # one GEMM per filter row and block of output rows: the KW taps of row i stacked, times the block's
    # full-width input rows shifted by i (a view); tap j is then the columns j..j+Wo of its result
    w_rows = np.ascontiguousarray(W.transpose(2, 3, 0, 1)).reshape(KH, KW * Co, C)
    step = p * max(1, _CONV_BLOCK_ROWS // p)  # whole pooling windows per block
    for b in range(B):
        for r0 in range(0, Hp * p, step):  # rows past the last whole window are never pooled
            n = min(step, Hp * p - r0)
            x = _f64(X[b, :, r0 : r0 + n + KH - 1, :])
            acc = out[b, :, r0 : r0 + n, :] if p == 1 else np.empty((Co, n, Wo))
            acc[...] = bias[:, None, None]
            for i in range(KH):
                y = (w_rows[i] @ x[:, i : i + n, :].reshape(C, n * Wd)).reshape(KW, Co, n, Wd)
                for j in range(KW):
                    acc += y[j, :, :, j : j + Wo]
            if p > 1:
                pooled = acc[:, :, : Wp * p].reshape(Co, n // p, p, Wp, p).max(axis=(2, 4))
                out[b, :, r0 // p : (r0 + n) // p, :] = pooled
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
    # matmuls (BLAS; einsum's own loops took 2 s at S=4096) and in-place steps on the (.., Sq, Sk) scores
    s = q @ k.swapaxes(-1, -2)
    s *= scale
    if causal:
        Sq, Sk = s.shape[-2:]
        s[..., np.arange(Sk)[None, :] > np.arange(Sq)[:, None]] = -np.inf
    m = s.max(axis=-1, keepdims=True)
    s -= np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s, out=s)
    denom = p.sum(axis=-1, keepdims=True)
    out = (p @ v) / np.where(denom == 0, 1.0, denom)
    return out
