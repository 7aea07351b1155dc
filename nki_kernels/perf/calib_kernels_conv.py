"""A naive-but-compiled CS149 conv (trn2-hardware.md §3.1c), written for this project.

The measured solution is public, but it is described here only by its *structure* (the text of
§3.1c), not copied: ``@nki.compiler.skip_middle_end_transformations``, every loop a
``sequential_range``, the weights loaded once and transposed once per (tile, filter row, filter
column) into one SBUF tensor, **one** ``(128, W)`` input-row SBUF buffer declared before every loop
and refilled by a ``nisa.dma_copy`` of one image row for each (output row, C_out tile, C_in tile,
filter row), each followed by the filter width's accumulating ``nc_matmul`` into one fp32 PSUM tile
per output row, then a PSUM -> SBUF copy into one ``(128, pool, W_out)`` tile, a max over the pool
axes, a ``(128, 1)`` bias added and one store per pooled row.

Measured on trn2 (CS149 2025 harness, ``nki.benchmark`` p99) at B=1, 256 -> 256 channels, 3x3,
224x224: 824 us fp16 (825 with pool 2), 3,832 us fp32 (3,830).  Used by
``nki_kernels.perf.calibration`` (points ``cs149.*``) and, as a student's ``conv2d.py``, by the
CS149 forecast tests (``simulator_tests/data/cs149_like/conv2d_naive_compiled.py``).
"""

from __future__ import annotations

from nki_kernels.backend import nisa, nki, nl

P = 128  # partitions: one channel tile


@nki.compiler.skip_middle_end_transformations
@nki.jit
def conv_rowwise(X, W, bias, pool_size=1):
    """Fused conv2d (no padding, stride 1) + bias + max-pool of stride ``pool_size``, the §3.1c way."""
    B, C_in, H, Wd = X.shape
    C_out, _, KH, KW = W.shape
    Ho, Wo = H - KH + 1, Wd - KW + 1
    Hp, Wp = Ho // pool_size, Wo // pool_size
    n_ci, n_co = C_in // P, C_out // P
    out = nl.ndarray((B, C_out, Hp, Wp), dtype=X.dtype, buffer=nl.hbm)

    # weights: one raw block per (C_out tile, C_in tile), each tap transposed once (TensorE) into
    # one SBUF tensor laid out [C_in within the tile, C_out tile, C_in tile, row, column, C_out]
    w_t = nl.ndarray((P, n_co, n_ci, KH, KW, P), dtype=W.dtype, buffer=nl.sbuf)
    w_raw = nl.ndarray((P, P, KH, KW), dtype=W.dtype, buffer=nl.sbuf)
    for co in nl.sequential_range(n_co):
        for ci in nl.sequential_range(n_ci):
            nisa.dma_copy(dst=w_raw, src=W[co * P : (co + 1) * P, ci * P : (ci + 1) * P, :, :])
            for i in nl.sequential_range(KH):
                for j in nl.sequential_range(KW):
                    w_t[:, co, ci, i, j, :] = nisa.tensor_copy(nl.transpose(w_raw[:, :, i, j]))

    row = nl.ndarray((P, Wd), dtype=X.dtype, buffer=nl.sbuf)  # the one input-row buffer
    conv = nl.ndarray((P, Wp, pool_size, pool_size), dtype=nl.float32, buffer=nl.sbuf)  # [c, col, row, col in window]
    b_t = nl.ndarray((P, 1), dtype=bias.dtype, buffer=nl.sbuf)
    bias2 = bias.reshape((C_out, 1))
    for b in nl.sequential_range(B):
        for h in nl.sequential_range(Hp):
            for co in nl.sequential_range(n_co):
                for r in nl.sequential_range(pool_size):
                    acc = nl.zeros((P, Wo), dtype=nl.float32, buffer=nl.psum)
                    for ci in nl.sequential_range(n_ci):
                        for i in nl.sequential_range(KH):
                            nisa.dma_copy(dst=row, src=X[b, ci * P : (ci + 1) * P, h * pool_size + r + i, :])
                            for j in nl.sequential_range(KW):
                                acc += nisa.nc_matmul(w_t[:, co, ci, i, j, :], row[:, j : j + Wo])
                    conv[:, :, r, :] = nisa.tensor_copy(acc[:, 0 : Wp * pool_size].reshape((P, Wp, pool_size)))
                pooled = nisa.tensor_reduce(nl.max, conv, axis=(2, 3), dtype=nl.float32)
                nisa.dma_copy(dst=b_t, src=bias2[co * P : (co + 1) * P, :])
                y = nisa.tensor_tensor(pooled, b_t.broadcast_to((P, Wp)), op=nl.add, dtype=X.dtype)
                nisa.dma_copy(dst=out[b, co * P : (co + 1) * P, h, :], src=y)
    return out
