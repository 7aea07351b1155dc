"""A wrong part2 solution (2024 style) for part2_harness.py: a plausible student bug, the bias is
never added (right without bias, wrong with it)."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    B, C, H, Wd = X.shape
    O, _, K, _ = W.shape
    Ho, Wo = H - K + 1, Wd - K + 1
    Hp, Wp = Ho // pool_size, Wo // pool_size
    X_out = nl.ndarray((B, O, Hp, Wp), dtype=X.dtype, buffer=nl.hbm)
    P = nl.tile_size.pmax
    for o in nl.affine_range(O // P):
        for b in nl.affine_range(B):
            for h in nl.sequential_range(Hp):
                rows = nl.ndarray((P, pool_size, Wo), dtype=nl.float32, buffer=nl.sbuf)
                for r in nl.sequential_range(pool_size):
                    acc = nl.zeros((P, Wo), dtype=nl.float32, buffer=nl.psum)
                    for c in nl.affine_range(C // P):
                        x = nl.load(X[b, c * P:(c + 1) * P, h * pool_size + r:h * pool_size + r + K, :])
                        for kh in nl.affine_range(K):
                            for kw in nl.affine_range(K):
                                w = nl.load_transpose2d(W[o * P:(o + 1) * P, c * P:(c + 1) * P, kh, kw])
                                acc += nl.matmul(w, x[:, kh, kw:kw + Wo], transpose_x=True)
                    rows[:, r, :] = nl.copy(acc)
                if pool_size == 1:
                    nl.store(X_out[b, o * P:(o + 1) * P, h, :], value=rows[:, 0, :])
                else:
                    window = nl.copy(rows[:, :, 0:Wp * pool_size]).reshape((P, pool_size, Wp, pool_size))
                    nl.store(X_out[b, o * P:(o + 1) * P, h, :], value=nl.max(window, axis=(1, 3)))
    return X_out
