"""The last ragged tile masked with `i_p < min(128, n - r * 128)`, r an affine_range index: as traced, min() is its
second operand, which is the right bound for every tile."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "CS149 2025 (asst4-trainium2) conv2d solutions that scored on trn2: masks bounded with min() of a loop index"
NKI = "0.1"
WARNS = {"pm.predicate_truth_value"}
N = 330


def inputs():
    return (np.random.default_rng(12).standard_normal((N, 24)).astype(np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(24)[None, :]
    for r in nl.affine_range((N + 127) // 128):
        valid = i_p < min(128, N - r * 128)
        t = nl.load(x[r * 128 + i_p, i_f], mask=valid)
        nl.store(out[r * 128 + i_p, i_f], nl.exp(t, mask=valid), mask=valid)
    return out


def reference(x):
    return np.exp(x)
