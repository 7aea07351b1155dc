"""NumPy reference for the CS149-shaped harness (the official one uses torch)."""
import numpy as np


def conv2d_maxpool_numpy(X, W, bias, pool_size=1):
    B, C, H, Wd = X.shape
    O, _, K, _ = W.shape
    Ho, Wo = H - K + 1, Wd - K + 1
    out = np.zeros((B, O, Ho, Wo), np.float64)
    for kh in range(K):
        for kw in range(K):
            out += np.einsum("oc,bchw->bohw", W[:, :, kh, kw], X[:, :, kh:kh + Ho, kw:kw + Wo])
    out += bias[None, :, None, None]
    if pool_size > 1:
        Hp, Wp = Ho // pool_size, Wo // pool_size
        out = out[:, :, :Hp * pool_size, :Wp * pool_size].reshape(B, O, Hp, pool_size, Wp, pool_size).max(axis=(3, 5))
    return out.astype(np.float32)
