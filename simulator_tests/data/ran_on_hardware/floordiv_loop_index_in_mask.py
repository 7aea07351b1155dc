"""One affine_range over (row tile, column half) pairs; loads and stores masked with `(t // 2) * 128 + i_p < n`."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "a CS149 2025 conv2d solution that ran on trn2: a store mask built with // of an affine_range index"
NKI = "0.1"
WARNS = {"pm.mask_loop_index_nonaffine"}
N = 200


def inputs():
    return (np.random.default_rng(15).standard_normal((N, 16)).astype(np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(8)[None, :]
    for t in nl.affine_range(2 * ((N + 127) // 128)):
        rows = (t // 2) * 128 + i_p
        cols = (t % 2) * 8 + i_f
        tile = nl.load(x[rows, cols], mask=(rows < N))
        nl.store(out[rows, cols], nl.negative(tile, mask=(rows < N)), mask=(rows < N))
    return out


def reference(x):
    return -x
