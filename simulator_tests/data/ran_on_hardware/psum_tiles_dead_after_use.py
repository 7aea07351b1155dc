"""Nine PSUM accumulators of one bank each, held in Python variables for the whole kernel but each dead after
its copy out: the compiler frees a tile after its last use, so at most one is live."""

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "GEMMs of an LLM kernel-search trace that ran on trn1: nl.zeros(..., buffer=nl.psum) tiles kept referenced"
NKI = "0.1"
WARNS = {"pm.psum_capacity"}


def inputs():
    rng = np.random.default_rng(16)
    return rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 9 * 512)).astype(np.float32)


@nki.jit
def kernel(a_t, b):
    out = nl.ndarray((128, 9 * 512), dtype=nl.float32, buffer=nl.shared_hbm)
    lhs = nl.load(a_t)
    accs = []
    for j in nl.static_range(9):
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(lhs, nl.load(b[:, j * 512 : (j + 1) * 512]))
        nl.store(out[:, j * 512 : (j + 1) * 512], nl.copy(acc))
        accs.append(acc)
    return out


def reference(a_t, b):
    return a_t.astype(np.float64).T @ b
