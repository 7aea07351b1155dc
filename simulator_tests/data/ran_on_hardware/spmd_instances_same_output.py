"""Every instance of an SPMD grid writes the same values to the same HBM output (a broadcast result each
instance computes)."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

SEEN = "a public SPMD kernel whose instances all store one identical result tile"
NKI = "0.1"
WARNS = {"spmd.output_overlap"}
GRID = (2,)


def inputs():
    return (np.random.default_rng(17).standard_normal((128, 64)).astype(np.float32),)


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 3.0))
    return out


def reference(x):
    return 3.0 * x
